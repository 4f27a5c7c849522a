"""A queue in another process, driven line by line over stdin (JSON in, JSON out).

Used by tests/process/test_queue_processes.py: the test passes ``now`` in every
command, so what happens depends on the commands alone, not on the clock.

    {"op": "lease", "now": 10.0, "lease_for": 10.0}   -> {"task": {...}} or {"task": null}
    {"op": "heartbeat" | "done" | "reschedule" | "dead_letter",
     "task_id": 1, "token": "...", "now": 12.0}       -> {"ok": true} or {"lost": "mark_done"}
"""

from __future__ import annotations

import json
import sys
from typing import Any

import attrs

from standins.queue_sync import SyncQueue
from xbot.errors import LeaseLost
from xbot.storage.db import connect
from xbot.storage.queue import Lease


def handle(q: SyncQueue, cmd: dict[str, Any]) -> dict[str, Any]:
    op, now = cmd["op"], float(cmd["now"])
    if op == "lease":
        task = q.lease_next(now, float(cmd["lease_for"]))
        return {"task": attrs.asdict(task) if task else None}
    lease = Lease(int(cmd["task_id"]), str(cmd["token"]))
    calls = {
        "heartbeat": lambda: q.heartbeat(lease, now, 10.0),
        "done": lambda: q.mark_done(lease, now),
        "reschedule": lambda: q.reschedule(lease, now, 1.0, "retry"),
        "dead_letter": lambda: q.dead_letter(lease, now, "dead"),
    }
    try:
        calls[op]()
    except LeaseLost as exc:
        return {"lost": exc.op}
    return {"ok": True}


def main() -> None:
    q = SyncQueue(connect(sys.argv[1]))
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        print(json.dumps(handle(q, json.loads(line))), flush=True)


if __name__ == "__main__":
    main()
