"""The worker's outage branch: every X source down is retried by the task's age, not its
attempts, and the chat's one sentence goes out only once the retry is written."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from conftest import notices_to

from xbot.errors import OutageRetry
from xbot.storage.db import DbPool, open_store
from xbot.storage.queue import Task, TaskQueue
from xbot.tasks.worker import TaskContext, Workers

NOW = 1_000_000.0


@pytest.fixture
async def queue(tmp_path: Path) -> AsyncIterator[TaskQueue]:
    pool: DbPool = await open_store(tmp_path / "q.sqlite3")
    yield TaskQueue(pool)
    await pool.close()


async def _run(
    queue: TaskQueue, outcome: OutageRetry, *, age: float = 0.0, tries: int = 1
) -> tuple[Task, list[tuple[str, int, str]]]:
    """Enqueue a task `age` seconds ago with one attempt left, run it `tries` times; the
    row after, and the notices queued to its chat (kind, chat, reason)."""
    clock = {"now": NOW}

    async def down(ctx: TaskContext) -> None:
        raise outcome

    workers = Workers(queue, {"t": down}, count=1, clock=lambda: clock["now"])
    task = await queue.enqueue("t", "{}", 7, now=NOW - age, max_attempts=1)
    for _ in range(tries):
        leased = await queue.lease_next(clock["now"])
        assert leased is not None
        await workers._execute(leased)
        clock["now"] += 400  # past any backoff
    row = await queue.get(task.id)
    assert row is not None
    return row, await notices_to(queue, 7)


async def test_an_outage_counts_no_attempt_however_often(queue: TaskQueue) -> None:
    row, notices = await _run(queue, OutageRetry("every X source is down"), tries=5)
    assert (row.state, row.attempts) == ("pending", 0)  # max_attempts=1, and still alive
    assert row.last_error == "every X source is down"
    assert notices == []


async def test_the_sentence_as_a_notice_is_queued_with_the_retry(
    queue: TaskQueue,
) -> None:
    """The notice rides on the retry's transaction (finding 12: sent inline, a chat's hold
    dropped it); its dedup key makes it one per task."""
    row, _ = await _run(queue, OutageRetry("down", notice='{"text": "wait"}'))
    assert (row.state, row.attempts) == ("pending", 0)
    notices = [t for t in await queue.list(state="pending") if t.kind == "notice"]
    assert [(t.chat_id, t.payload, t.dedup_key) for t in notices] == [
        (7, '{"text": "wait"}', f"told:{row.id}")
    ]
    assert notices[0].run_after < row.run_after, "said before the retry looks again"


async def test_past_its_budget_the_task_is_dead_lettered_once(queue: TaskQueue) -> None:
    row, notices = await _run(queue, OutageRetry("down", budget=3600.0), age=3600.0)
    assert row.state == "dead"
    assert notices == [("notice", 7, "X did not answer for too long")]


async def test_the_next_probe_is_a_floor_for_the_delay(queue: TaskQueue) -> None:
    row, _ = await _run(queue, OutageRetry("down", delay=120.0))
    assert row.run_after == pytest.approx(NOW + 120.0)
