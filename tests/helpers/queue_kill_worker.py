"""A worker process for the kill -9 test: the bot's way (asyncio pool, workers).

``queue_kill_worker.py DB NOW INCARNATION``: two asyncio workers lease, do
the "work" (record an effect row, as a delivery would, in its own
transaction) and mark the task done, until nothing is left; then exit 0.
The test kills it at random moments and starts it again with a later
``now``, so the leases of a killed incarnation have expired.
"""

from __future__ import annotations

import asyncio
import sys

import apsw

from xbot.storage.db import open_store
from xbot.storage.queue import TaskQueue

LEASE_FOR = 100.0


async def main(path: str, now: float, incarnation: int) -> None:
    pool = await open_store(path, size=2)
    queue = TaskQueue(pool)
    print("ready", flush=True)

    async def worker() -> None:
        while True:
            task = await queue.lease_next(now, LEASE_FOR)
            if task is None:
                stats = await queue.stats(now)
                if stats.counts_by_state["pending"] + stats.counts_by_state["running"] == 0:
                    return
                await asyncio.sleep(0.001)  # the other worker holds the last chat
                continue

            def effect(conn: apsw.Connection, task_id: int = task.id) -> None:
                conn.execute("INSERT INTO effects VALUES (?, ?)", (task_id, incarnation))

            await pool.write(effect)
            await queue.replace_payload(task.lease, {"phase": "sent"}, now)
            await queue.mark_done(task.lease, now)

    await asyncio.gather(worker(), worker())
    await pool.close()
    print("finished", flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], float(sys.argv[2]), int(sys.argv[3])))
