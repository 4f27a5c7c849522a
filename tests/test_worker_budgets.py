"""Slow work never starves quick work, and no run lasts for ever.

Real queue on a temp file, real Workers. A slow task is one whose handler waits on
an event the test never sets (as a dripping download waits on the network); the
quick ones record that they ran. Every wait is on an event, with a bound.
"""

from __future__ import annotations

import asyncio

from conftest import ManualClock as Clock
from conftest import notices_to

from xbot.storage.db import DbPool
from xbot.storage.queue import TaskQueue
from xbot.tasks.worker import TaskContext, Workers


async def _wait_for(event: asyncio.Event, what: str, within: float = 10.0) -> None:
    try:
        await asyncio.wait_for(event.wait(), within)
    except TimeoutError:
        raise AssertionError(f"{what} did not happen within {within} s") from None


def _workers(queue: TaskQueue, clock: Clock, **kw: object) -> tuple[Workers, asyncio.Event]:
    """Workers with a ``slow`` kind that never ends and a ``quick`` kind that sets the event."""
    quick_ran = asyncio.Event()
    forever = asyncio.Event()

    async def slow(ctx: TaskContext) -> None:
        await forever.wait()

    async def quick(ctx: TaskContext) -> None:
        quick_ran.set()

    args: dict[str, object] = {"count": 2, "clock": clock, "idle_poll": 0.01}
    args.update(kw)
    workers = Workers(queue, {"slow": slow, "quick": quick}, **args)  # type: ignore[arg-type]
    return workers, quick_ran


async def test_more_slow_tasks_than_workers_do_not_hold_back_a_quick_one(pool: DbPool) -> None:
    queue, clock = TaskQueue(pool), Clock()
    workers, quick_ran = _workers(queue, clock, detach_after=0.05)
    for chat in range(6):  # six chats, each with one task that never ends
        await queue.enqueue("slow", "{}", 100 + chat, now=clock())
    workers.start()
    try:
        for _ in range(500):
            if workers.detached == 6:
                break
            await asyncio.sleep(0.01)
        assert workers.detached == 6, "each slow task went on detached"
        await queue.enqueue("quick", "{}", 7, now=clock())
        workers.wake()
        await _wait_for(quick_ran, "the quick task")
        running = [t for t in await queue.list(state="running") if t.kind == "slow"]
        assert len(running) == 6, "the slow ones still run, their leases held"
    finally:
        await workers.stop(0.2)
    rows = await queue.list(limit=100)
    slow_rows = [t for t in rows if t.kind == "slow"]
    assert [t.state for t in slow_rows] == ["pending"] * 6, "handed back when stopping"
    assert all(t.attempts == 0 for t in slow_rows)


async def test_a_full_pool_keeps_a_slow_task_on_its_worker(pool: DbPool) -> None:
    queue, clock = TaskQueue(pool), Clock()
    workers, _ = _workers(queue, clock, count=1, detach_after=0.05, long_running=1)
    for chat in range(2):
        await queue.enqueue("slow", "{}", 100 + chat, now=clock())
    workers.start()
    try:
        for _ in range(500):
            if workers.in_flight == 2:
                break
            await asyncio.sleep(0.01)
        # One went on detached; the second keeps the one worker (the pool is full).
        assert (workers.in_flight, workers.detached) == (2, 1)
    finally:
        await workers.stop(0.2)


async def test_a_detached_task_that_ends_lets_its_chat_go_on(pool: DbPool) -> None:
    queue, clock = TaskQueue(pool), Clock()
    release = asyncio.Event()
    second_ran = asyncio.Event()

    async def slow(ctx: TaskContext) -> None:
        await release.wait()

    async def quick(ctx: TaskContext) -> None:
        second_ran.set()

    workers = Workers(queue, {"slow": slow, "quick": quick}, count=1, clock=clock,
                      idle_poll=3600.0, detach_after=0.05)  # fmt: skip
    first = await queue.enqueue("slow", "{}", 5, now=clock())
    await queue.enqueue("quick", "{}", 5, now=clock())  # the same chat: after the first
    workers.start()
    try:
        for _ in range(500):
            if workers.detached:
                break
            await asyncio.sleep(0.01)
        assert workers.detached == 1
        assert not second_ran.is_set(), "one chat runs one task at a time"
        release.set()
        # No nap to wait out (idle_poll is an hour): the detached run's end wakes a worker.
        await _wait_for(second_ran, "the chat's next task")
    finally:
        await workers.stop(0.5)
    row = await queue.get(first.id)
    assert row is not None
    assert row.state == "done"


async def test_a_run_past_its_budget_is_given_up_with_one_sentence(pool: DbPool) -> None:
    queue, clock = TaskQueue(pool), Clock()
    workers, _ = _workers(queue, clock, count=1, task_budget=0.2, detach_after=0.05)
    task = await queue.enqueue("slow", "{}", 42, now=clock())
    workers.start()
    try:
        for _ in range(1000):
            row = await queue.get(task.id)
            assert row is not None
            if row.state == "dead":
                break
            await asyncio.sleep(0.01)
    finally:
        await workers.stop(0.5)
    assert row.state == "dead"
    assert await notices_to(queue, 42) == [
        ("notice", 42, "It took too long (over 1 min), so I gave up.")
    ]
