"""The worker's one ladder: each way a task can end becomes the right write-back.

Real queue on a temp file, real Workers; the task handlers are small
functions that raise the outcome under test, and the chat's notice is read
back from the database, as `xbot.tasks.notices` will read it to send it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from conftest import ManualClock as Clock
from conftest import notices_to

from xbot.errors import (
    LeaseLost,
    Permanent,
    RateLimited,
    RetryLater,
    StoreError,
    TelegramUnreachable,
)
from xbot.storage.db import DbPool
from xbot.storage.queue import Task, TaskQueue
from xbot.tasks.notices import notice_text, read_notice
from xbot.tasks.worker import TaskContext, Workers

Handler = Callable[[TaskContext], Coroutine[Any, Any, None]]


async def run_one(
    pool: DbPool, handler: Handler, *, payload: str = '{"url": "https://x.com/a/status/1"}',
    max_attempts: int = 3, attempts_before: int = 0, queue: TaskQueue | None = None,
    chat_id: int = 42,
) -> tuple[Task, list[tuple[str, int, str]], Clock]:  # fmt: skip
    """Enqueue one task, run it once through the ladder; the row after, and the notices
    queued to its chat (kind, chat, reason)."""
    clock = Clock()
    queue = queue or TaskQueue(pool)
    workers = Workers(queue, {"t": handler}, count=1, clock=clock)
    task = await queue.enqueue("t", payload, chat_id, now=clock(), max_attempts=max_attempts)
    for _ in range(attempts_before):
        leased = await queue.lease_next(clock())
        assert leased is not None
        await queue.reschedule(leased.lease, clock(), 0.0, "earlier")
    for _ in range(5):  # an earlier run's dead-letter notice is not this test's task
        leased = await queue.lease_next(clock())
        assert leased is not None
        if leased.id == task.id:
            break
        await queue.reschedule(leased.lease, clock(), 3600.0, "later", count_attempt=False)
    assert leased.id == task.id
    await workers._execute(leased)
    after = await queue.get(task.id)
    assert after is not None
    return after, await notices_to(queue, chat_id), clock


async def test_success_marks_done(pool: DbPool) -> None:
    async def ok(ctx: TaskContext) -> None:
        await ctx.save_payload({"url": "https://x.com/a/status/1", "progress": 1})

    row, notices, _ = await run_one(pool, ok)
    assert row.state == "done"
    assert json.loads(row.payload)["progress"] == 1
    assert notices == []


async def test_retry_later_backs_off_and_counts_the_attempt(pool: DbPool) -> None:
    async def flaky(ctx: TaskContext) -> None:
        raise RetryLater("the host timed out")

    row, notices, clock = await run_one(pool, flaky)
    assert row.state == "pending"
    assert row.attempts == 1
    assert row.run_after > clock()
    assert row.last_error == "the host timed out"
    assert notices == []


async def test_last_attempt_dead_letters_with_one_notice(pool: DbPool) -> None:
    async def flaky(ctx: TaskContext) -> None:
        raise RetryLater("the host timed out")

    row, notices, _ = await run_one(pool, flaky, max_attempts=2, attempts_before=1)
    assert row.state == "dead"
    assert notices == [("notice", 42, "the host timed out")]
    queued = await TaskQueue(pool).list(state="pending", chat_id=42)
    said = read_notice(queued[0])[2]
    assert said == "Sorry, I could not deliver https://x.com/a/status/1: the host timed out."
    assert [(t.kind, t.dedup_key) for t in queued] == [("notice", f"notice:{row.id}")], (
        "the notice is queued with the dead mark, not after it"
    )


async def test_rate_limited_holds_the_chat_without_an_attempt(pool: DbPool) -> None:
    async def limited(ctx: TaskContext) -> None:
        raise RateLimited(7.0)

    row, notices, clock = await run_one(pool, limited)
    assert row.state == "pending"
    assert row.attempts == 0, "a 429 is Telegram's pace, not a failure"
    assert row.run_after <= clock(), "in its place: the chat's hold does the waiting"
    queue = TaskQueue(pool)
    other = await queue.enqueue("t", "{}", 43, now=clock())
    await queue.enqueue("t", "{}", 42, now=clock())
    leased = await queue.lease_next(clock() + 1)
    assert leased is not None
    assert leased.id == other.id, "other chats go on while chat 42 is held"
    assert await queue.lease_next(clock() + 1) is None, "chat 42 waits for retry_after"
    assert await queue.lease_next(clock() + 6.9) is None
    again = await queue.lease_next(clock() + 7.0)
    assert again is not None
    assert again.id == row.id, "the held task is still first of its chat"
    assert notices == []


async def test_permanent_dead_letters_and_notifies_unless_told_not_to(pool: DbPool) -> None:
    async def hopeless(ctx: TaskContext) -> None:
        raise Permanent("The API sent an answer I could not read.")

    row, notices, _ = await run_one(pool, hopeless)
    assert row.state == "dead"
    assert notices == [("notice", 42, "The API sent an answer I could not read.")]

    async def quiet(ctx: TaskContext) -> None:
        raise Permanent("already told the user", notify=False)

    row, notices, _ = await run_one(pool, quiet, chat_id=43)
    assert row.state == "dead"
    assert notices == []
    assert await TaskQueue(pool).list(state="pending", chat_id=43) == []


async def test_unknown_kind_and_junk_payload_never_crash_the_worker(pool: DbPool) -> None:
    queue = TaskQueue(pool)
    clock = Clock()
    workers = Workers(queue, {}, count=1, clock=clock)
    task = await queue.enqueue("from-the-future", '{"url": "https://x.com/a/status/9", ', 42,
                               now=clock())  # fmt: skip
    leased = await queue.lease_next(clock())
    assert leased is not None
    await workers._execute(leased)
    row = await queue.get(task.id)
    assert row is not None
    assert row.state == "dead"
    assert await notices_to(queue, 42) == [("notice", 42, "the task could not be read")]


async def test_unexpected_exception_is_logged_and_retried(
    pool: DbPool, caplog: pytest.LogCaptureFixture
) -> None:
    async def buggy(ctx: TaskContext) -> None:
        raise KeyError("a bug")

    row, notices, _ = await run_one(pool, buggy)
    assert row.state == "pending"
    assert row.last_error == "internal error (KeyError)"
    assert any(r.levelname == "ERROR" and r.exc_info for r in caplog.records)
    assert notices == []


async def test_lease_lost_writes_nothing(pool: DbPool) -> None:
    async def stale(ctx: TaskContext) -> None:
        raise LeaseLost(ctx.task.id, "test")

    row, notices, _ = await run_one(pool, stale)
    assert row.state == "running", "the worker that lost its lease must not touch the row"
    assert notices == []


async def test_stop_hands_a_running_task_back_without_an_attempt(pool: DbPool) -> None:
    queue = TaskQueue(pool)
    clock = Clock()
    started = asyncio.Event()

    async def slow(ctx: TaskContext) -> None:
        started.set()
        await asyncio.sleep(60)

    workers = Workers(queue, {"t": slow}, count=1, clock=clock, idle_poll=0.01)
    task = await queue.enqueue("t", "{}", 42, now=clock())
    workers.start()
    await asyncio.wait_for(started.wait(), 5)
    await workers.stop(grace=0.1)
    row = await queue.get(task.id)
    assert row is not None
    assert row.state == "pending"
    assert row.attempts == 0
    assert await notices_to(queue, 42) == [], "no notice on shutdown"


@pytest.mark.parametrize(
    ("payload", "named"),
    [
        (
            json.dumps(
                {
                    "v": 1,
                    "url": "https://x.com/a/status/5",
                    "key": "x:5",
                    "kind": "x",
                    "reply_to": 9,
                }
            ),
            "https://x.com/a/status/5",
        ),
        ('{"v": 99, "url": "https://x.com/a/status/6"}', "https://x.com/a/status/6"),
        ('{"url": "https://x.com/a/status/7", trailing junk', "https://x.com/a/status/7"),
        ("\x00\x01 not json at all", "your link"),
    ],
    ids=["readable", "newer-shape", "corrupt-json", "garbage"],
)
def test_dead_letter_notice_names_the_post_even_from_a_broken_payload(
    payload: str, named: str
) -> None:
    task = Task(id=1, kind="deliver", chat_id=42, payload=payload, state="dead", attempts=5,
                max_attempts=5, run_after=0, dedup_key=None, lease_token=None,
                lease_expires=None, last_error=None, created_at=0, updated_at=0)  # fmt: skip
    text, _ = notice_text(task, "the host kept failing")
    assert named in text
    assert "the host kept failing" in text


async def test_a_store_error_inside_the_task_writes_nothing_and_traces_nothing(
    pool: DbPool, caplog: pytest.LogCaptureFixture
) -> None:
    async def disk_full(ctx: TaskContext) -> None:
        raise StoreError("the disk holding the database is full")

    row, notices, _ = await run_one(pool, disk_full)
    assert row.state == "running", "left for its lease to run out and the sweep to hand back"
    assert not any(r.exc_info for r in caplog.records)
    assert notices == []


class CountingQueue(TaskQueue):
    """The real queue, counting the calls the worker makes (not replacing any)."""

    def __init__(self, pool: DbPool) -> None:
        super().__init__(pool)
        self.calls: dict[str, int] = {}

    def _count(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    async def lease_next(self, now: float, lease_for: float = 90.0) -> Task | None:
        self._count("lease_next")
        return await super().lease_next(now, lease_for)

    async def save_progress(self, *args: Any, **kwargs: Any) -> None:
        self._count("save_progress")
        await super().save_progress(*args, **kwargs)


async def test_a_staged_record_rides_on_the_done_mark(pool: DbPool) -> None:
    queue = CountingQueue(pool)

    async def stage(ctx: TaskContext) -> None:
        ctx.stage_payload({"url": "https://x.com/a/status/1", "progress": 2})

    row, notices, _ = await run_one(pool, stage, payload="{}", queue=queue)
    assert notices == []
    assert row.state == "done"
    assert json.loads(row.payload)["progress"] == 2
    assert "save_progress" not in queue.calls, "the record must not cost a write of its own"


async def test_a_staged_record_is_written_before_a_retry(pool: DbPool) -> None:
    async def stage_then_fail(ctx: TaskContext) -> None:
        ctx.stage_payload({"url": "https://x.com/a/status/1", "sent": [0]})
        raise RetryLater("the prompt could not be sent")

    row, _, _ = await run_one(pool, stage_then_fail)
    assert row.state == "pending"
    assert json.loads(row.payload)["sent"] == [0], "a retry must know album 0 went out"


async def test_the_next_task_is_leased_with_the_done_mark(pool: DbPool) -> None:
    queue = CountingQueue(pool)
    clock = Clock()
    leases_seen: list[int] = []
    ran: list[int] = []

    async def record(ctx: TaskContext) -> None:
        leases_seen.append(queue.calls.get("lease_next", 0))
        ran.append(ctx.task.chat_id)

    workers = Workers(queue, {"t": record}, count=1, clock=clock, idle_poll=0.01)
    for chat in (1, 2, 3):
        await queue.enqueue("t", "{}", chat, now=clock())
    workers.start()
    try:
        for _ in range(500):
            if len(ran) == 3:
                break
            await asyncio.sleep(0.01)
    finally:
        await workers.stop(grace=1.0)
    assert ran == [1, 2, 3]
    assert leases_seen == [1, 1, 1], "tasks 2 and 3 came with the done mark of the one before"
    assert workers.done_count == 3
    await no_notices(queue, 1, 2, 3)


async def test_a_task_leased_in_passing_while_stopping_is_handed_back(pool: DbPool) -> None:
    clock = Clock()
    workers: Workers

    class StopMidCall(TaskQueue):
        async def mark_done_and_lease_next(self, *args: Any, **kwargs: Any) -> Task | None:
            workers._stopping = True  # stop() arrives while the done mark is in the database
            return await super().mark_done_and_lease_next(*args, **kwargs)

    queue = StopMidCall(pool)

    async def ok(ctx: TaskContext) -> None:
        return None

    workers = Workers(queue, {"t": ok}, count=1, clock=clock, idle_poll=0.01)
    first = await queue.enqueue("t", "{}", 1, now=clock())
    second = await queue.enqueue("t", "{}", 2, now=clock())
    workers.start()
    for _ in range(500):
        if not workers._loops or all(loop.done() for loop in workers._loops):
            break
        await asyncio.sleep(0.01)
    await workers.stop(grace=1.0)
    done = await queue.get(first.id)
    back = await queue.get(second.id)
    assert done is not None
    assert back is not None
    assert done.state == "done"
    assert back.state == "pending", "leased in passing, it must go back, not wait out its lease"
    assert back.attempts == 0
    await no_notices(queue, 1, 2)


async def no_notices(queue: TaskQueue, *chats: int) -> None:
    for chat in chats:
        assert await notices_to(queue, chat) == [], f"no notice expected in chat {chat}"


async def test_a_lease_lost_mid_task_cancels_it_and_the_worker_goes_on(pool: DbPool) -> None:
    queue = TaskQueue(pool)
    clock = Clock()
    started = asyncio.Event()
    cancelled: list[int] = []
    ran: list[int] = []

    async def handler(ctx: TaskContext) -> None:
        ran.append(ctx.task.chat_id)
        if ctx.task.chat_id == 1:
            started.set()
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled.append(ctx.task.id)
                raise

    workers = Workers(
        queue, {"t": handler}, count=1, clock=clock, heartbeat_every=0.05, idle_poll=0.01,
    )  # fmt: skip
    first = await queue.enqueue("t", "{}", 1, now=clock())
    second = await queue.enqueue("t", "{}", 2, now=clock())
    workers.start()
    try:
        await asyncio.wait_for(started.wait(), 5)
        # Someone else holds the task now (its lease expired and was re-leased).
        await pool.write(
            lambda c: c.execute("UPDATE tasks SET lease_token = 'other' WHERE id = ?", (first.id,))
        )
        for _ in range(500):
            if len(ran) == 2 and workers.done_count == 1:
                break
            await asyncio.sleep(0.01)
    finally:
        await workers.stop(grace=1.0)
    assert cancelled == [first.id], "the heartbeat must stop a task whose lease is gone"
    assert ran == [1, 2], "the worker must go on with the next task"
    taken = await queue.get(first.id)
    assert taken is not None
    assert (taken.state, taken.lease_token) == ("running", "other"), "the new holder's row"
    done = await queue.get(second.id)
    assert done is not None
    assert done.state == "done"
    await no_notices(queue, 1, 2)


async def test_a_settling_write_that_fails_is_not_logged_as_done(
    pool: DbPool, caplog: pytest.LogCaptureFixture
) -> None:
    class DiskFull(TaskQueue):
        async def reschedule(self, *args: Any, **kwargs: Any) -> Task:
            raise StoreError("the disk holding the database is full")

    queue = DiskFull(pool)
    clock = Clock()

    async def flaky(ctx: TaskContext) -> None:
        raise RetryLater("the host timed out")

    workers = Workers(queue, {"t": flaky}, count=1, clock=clock)
    await queue.enqueue("t", "{}", 42, now=clock())
    leased = await queue.lease_next(clock())
    assert leased is not None
    caplog.set_level("INFO", logger="xbot.tasks.worker")
    await workers._execute(leased)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("task ")]
    assert len(lines) == 1
    assert "outcome=write_back_failed" in lines[0], lines[0]
    await no_notices(queue, 42)


@pytest.mark.parametrize(("ambiguous", "counted"), [(False, 0), (True, 1)], ids=["502", "timeout"])
async def test_telegram_unreachable_puts_the_task_back_in_its_place(
    pool: DbPool, ambiguous: bool, counted: int
) -> None:
    async def down(ctx: TaskContext) -> None:
        raise TelegramUnreachable("Telegram did not answer (NetworkError)", ambiguous=ambiguous)

    queue = TaskQueue(pool)
    row, notices, clock = await run_one(pool, down, queue=queue, attempts_before=2)
    assert row.state == "pending"
    assert row.attempts == 2, "no attempt counted for Telegram's outage"
    assert row.run_after == clock(), "its place kept: first of its chat when Telegram is back"
    assert row.ambiguous_sends == counted
    assert notices == []


async def test_telegram_unreachable_past_the_budget_dead_letters_with_one_notice(
    pool: DbPool,
) -> None:
    clock = Clock()
    queue = TaskQueue(pool)

    async def down(ctx: TaskContext) -> None:
        raise TelegramUnreachable("Telegram did not answer (TimedOut)", held=True)

    workers = Workers(queue, {"t": down}, count=1, clock=clock, telegram_budget=3600.0)
    task = await queue.enqueue("t", '{"url": "https://x.com/a/status/9"}', 42, now=clock())
    for _ in range(3):  # younger than the budget: back each time, never dead
        leased = await queue.lease_next(clock())
        assert leased is not None
        await workers._execute(leased)
        clock.now += 1000
    leased = await queue.lease_next(clock())  # 3000 s old: still waits
    assert leased is not None
    await workers._execute(leased)
    assert (await queue.get(task.id)).state == "pending"  # type: ignore[union-attr]
    assert await notices_to(queue, 42) == [], "no notice while it still waits"
    clock.now += 600
    leased = await queue.lease_next(clock())
    assert leased is not None
    await workers._execute(leased)
    row = await queue.get(task.id)
    assert row is not None
    assert row.state == "dead"
    assert "Telegram did not answer for 1 h" in (row.last_error or "")
    assert await notices_to(queue, 42) == [("notice", 42, "Telegram did not answer for too long")]


async def test_workers_lease_nothing_while_telegram_is_held(pool: DbPool) -> None:
    clock = Clock()
    queue = TaskQueue(pool)
    ran: list[int] = []
    wait = [3600.0]
    looked = [0]

    def telegram_wait() -> float:
        looked[0] += 1
        return wait[0]

    async def note(ctx: TaskContext) -> None:
        ran.append(ctx.task.id)

    workers = Workers(queue, {"t": note}, count=2, clock=clock,
                      telegram_wait=telegram_wait, idle_poll=0.01)  # fmt: skip
    task = await queue.enqueue("t", "{}", 42, now=clock())
    workers.start()
    try:
        for _ in range(3):  # woken (an enqueue), each looks at the hold, not at the queue
            before = looked[0]
            workers.wake()
            for _ in range(500):
                if looked[0] > before:
                    break
                await asyncio.sleep(0.001)
            assert looked[0] > before
        row = await queue.get(task.id)
        assert row is not None
        assert (row.state, row.attempts, ran) == ("pending", 0, [])
        wait[0] = 0.0  # the hold ends; the app's listener wakes them
        workers.wake()
        for _ in range(500):
            if ran:
                break
            await asyncio.sleep(0.01)
        assert ran == [task.id]
    finally:
        await workers.stop(1.0)
