"""Steps of the wall clock through the real queue and worker, with an injected clock pair.

While running, every stored time and every ``now`` is on the time line (the wall
clock at start plus monotonic seconds): a step moves nothing. Across a restart,
`xbot.storage.time_line.resume` rebases what is stored onto the wall clock (exactly
within one boot; by the rules of `resume_line` across a reboot) and clamps it.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from pathlib import Path

import apsw
import attrs
import pytest

from xbot.clock import ManualClocks, Reading, TimeLine
from xbot.errors import OutageRetry, RateLimited, RetryLater
from xbot.storage.chat_state import caption_edit_record
from xbot.storage.db import DbPool, open_store
from xbot.storage.link_cache import CachedPost, LinkCache
from xbot.storage.queue import Task, TaskQueue
from xbot.storage.state import ChatStore
from xbot.storage.time_line import (
    LONGEST_DELAY,
    Anchor,
    Resumed,
    clamp_due,
    resume,
    resume_line,
)
from xbot.tasks.worker import TaskContext, Workers

HOUR = 3600.0


# --- the pure rules ------------------------------------------------------------------------

A = Anchor(boot_id="b1", mono=10.0, line=1000.0, seen=1100.0, offset=0.0)

# (anchor, boot id now, reading now, latest stored) -> where the stored line is now
RESUMES = [
    pytest.param(None, "b1", Reading(5000.0, 1.0), None, 5000.0, id="first-start"),
    pytest.param(None, "b1", Reading(5000.0, 1.0), 4000.0, 5000.0, id="no-anchor-stored-older"),
    pytest.param(None, "b1", Reading(5000.0, 1.0), 9000.0, 9000.0, id="no-anchor-clock-went-back"),
    pytest.param(A, "b1", Reading(99.0, 210.0), None, 1200.0, id="same-boot-is-exact"),
    pytest.param(A, "b1", Reading(1200.0 - 3 * HOUR, 210.0), None, 1200.0, id="same-boot-back"),
    pytest.param(A, "b1", Reading(1200.0 + 3 * HOUR, 210.0), None, 1200.0, id="same-boot-fwd"),
    pytest.param(A, "b1", Reading(5000.0, 5.0), None, 5000.0, id="mono-went-back-is-another-boot"),
    pytest.param(A, "b2", Reading(5000.0, 210.0), None, 5000.0, id="another-boot-wall-ahead"),
    pytest.param(A, "b2", Reading(500.0, 210.0), None, 1100.0, id="another-boot-clock-went-back"),
    pytest.param(A, "b2", Reading(500.0, 210.0), 1150.0, 1150.0, id="another-boot-latest-write"),
    pytest.param(
        attrs.evolve(A, offset=-3 * HOUR),
        "b2",
        Reading(5000.0 + 3 * HOUR, 210.0),
        None,
        5000.0,
        id="another-boot-line-was-behind",
    ),
    pytest.param(
        attrs.evolve(A, offset=2 * HOUR, seen=0.0),
        "b2",
        Reading(5000.0, 210.0),
        None,
        5000.0 + 2 * HOUR,
        id="another-boot-line-was-ahead",
    ),
    pytest.param(
        attrs.evolve(A, boot_id=""), "", Reading(5000.0, 210.0), None, 5000.0, id="no-boot-id"
    ),
    pytest.param(None, "b1", Reading(5000.0, 1.0), math.nan, 5000.0, id="nan-latest-ignored"),
]


@pytest.mark.parametrize(("anchor", "boot", "now", "latest", "line"), RESUMES)
def test_resume_line(
    anchor: Anchor | None, boot: str, now: Reading, latest: float | None, line: float
) -> None:
    assert resume_line(anchor, boot, now, latest) == pytest.approx(line)


CLAMPS = [
    pytest.param(1030.0, 1000.0, 1030.0, id="near-stays"),
    pytest.param(1000.0 + LONGEST_DELAY, 1000.0, 1000.0 + LONGEST_DELAY, id="at-the-bound"),
    pytest.param(1000.0 + 3 * HOUR, 1000.0, 1000.0 + LONGEST_DELAY, id="far-is-clamped"),
    pytest.param(math.inf, 1000.0, 1000.0 + LONGEST_DELAY, id="infinite"),
    pytest.param(500.0, 1000.0, 500.0, id="overdue-stays"),
]


@pytest.mark.parametrize(("due", "now", "clamped"), CLAMPS)
def test_clamp_due(due: float, now: float, clamped: float) -> None:
    assert clamp_due(due, now) == clamped


# --- the real queue and worker -------------------------------------------------------------


@attrs.define
class Bot:
    """The parts of a running bot that keep time: the store, the queue, the workers."""

    pool: DbPool
    queue: TaskQueue
    resumed: Resumed
    workers: Workers

    @property
    def line(self) -> TimeLine:
        return self.resumed.line

    def now(self) -> float:
        return self.line.now()

    async def lease(self) -> Task | None:
        return await self.queue.lease_next(self.now())

    async def run_next(self) -> Task:
        task = await self.lease()
        assert task is not None, "nothing runnable"
        following = await self.workers._execute(task)
        if following is not None:  # leased in passing with the done mark: given back
            await self.queue.reschedule(following.lease, self.now(), 0.0, "", count_attempt=False)
        row = await self.queue.get(task.id)
        assert row is not None
        return row


@attrs.define
class Outcomes:
    """What each kind of task does on each run: raise the next outcome, or succeed."""

    plan: dict[str, list[Exception]] = attrs.field(factory=dict)
    runs: list[tuple[str, float]] = attrs.field(factory=list)

    def handler(self, clocks: ManualClocks):  # type: ignore[no-untyped-def]
        async def run(ctx: TaskContext) -> None:
            self.runs.append((ctx.task.kind, clocks.mono()))
            pending = self.plan.get(ctx.task.kind, [])
            if pending:
                raise pending.pop(0)

        return run


async def start(path: Path, clocks: ManualClocks, outcomes: Outcomes) -> Bot:
    pool = await open_store(path)
    resumed = await resume(pool, clocks)
    queue = TaskQueue(pool)
    kinds = ("retry", "limited", "long", "outage", "other")
    handler = outcomes.handler(clocks)
    workers = Workers(queue, dict.fromkeys(kinds, handler), count=1, clock=resumed.line.now)
    return Bot(pool, queue, resumed, workers)


@pytest.fixture
def clocks() -> ManualClocks:
    return ManualClocks(wall_at=1_750_000_000.0, mono_at=1000.0)


@pytest.fixture
def outcomes() -> Outcomes:
    return Outcomes(
        {
            "retry": [RetryLater("flaky host", delay=30.0)],
            "limited": [RateLimited(20.0)],
            "outage": [OutageRetry("every X source is down", budget=600.0)] * 3,
        }
    )


@pytest.fixture
async def bot(tmp_path: Path, clocks: ManualClocks, outcomes: Outcomes) -> AsyncIterator[Bot]:
    b = await start(tmp_path / "xbot.sqlite3", clocks, outcomes)
    yield b
    await b.pool.close()


async def _pending_three(bot: Bot) -> tuple[Task, Task, Task]:
    """A retry due in 30 s (chat 1), a chat held for 20 s (chat 2), a live lease (chat 3)."""
    now = bot.now()
    retry = await bot.queue.enqueue("retry", "{}", 1, now=now)
    limited = await bot.queue.enqueue("limited", "{}", 2, now=now)
    await bot.queue.enqueue("long", "{}", 3, now=now)
    assert (await bot.run_next()).id == retry.id
    assert (await bot.run_next()).id == limited.id
    long_ = await bot.lease()  # another worker's task, its lease live
    assert long_ is not None
    assert long_.kind == "long"
    row = await bot.queue.get(retry.id)
    assert row is not None
    assert row.run_after == pytest.approx(now + 30.0)
    return retry, limited, long_


async def _runnable_at(
    bot: Bot, clocks: ManualClocks, since: float, *offsets: float
) -> list[str | None]:
    """Which kind is leased at each of these seconds after the monotonic reading ``since``
    (each lease given back at once)."""
    seen: list[str | None] = []
    for offset in offsets:
        clocks.advance(since + offset - clocks.mono())
        task = await bot.lease()
        seen.append(None if task is None else task.kind)
        if task is not None:
            await bot.queue.reschedule(task.lease, bot.now(), 0.0, "peek", count_attempt=False)
    return seen


async def test_a_step_back_of_hours_while_running_holds_nothing_longer_than_its_delay(
    bot: Bot, clocks: ManualClocks
) -> None:
    t0 = clocks.mono()
    _, _, long_ = await _pending_three(bot)
    clocks.step(-3 * HOUR)  # NTP fixes a clock that ran three hours ahead
    assert await _runnable_at(bot, clocks, t0, 19.9) == [None]
    # The hold of chat 2 ends at its 20 s, the retry of chat 1 at its 30 s; neither waits 3 h.
    assert await _runnable_at(bot, clocks, t0, 20.1, 29.9) == ["limited", "limited"]
    assert await _runnable_at(bot, clocks, t0, 30.1) == ["limited"]  # the older head of two
    ran = [await bot.run_next(), await bot.run_next()]
    assert sorted((t.kind, t.state) for t in ran) == [("limited", "done"), ("retry", "done")]
    # The other worker's lease is still its own: its heartbeat lands, nothing repaired it.
    await bot.queue.heartbeat(long_.lease, bot.now())
    row = await bot.queue.get(long_.id)
    assert row is not None
    assert (row.state, row.lease_token) == ("running", long_.lease_token)


async def test_a_step_forward_while_running_takes_no_lease_and_kills_no_task_for_age(
    bot: Bot, clocks: ManualClocks
) -> None:
    now = bot.now()
    waiting = await bot.queue.enqueue("outage", "{}", 4, now=now)
    assert (await bot.run_next()).state == "pending"  # an outage look, 600 s budget
    await bot.queue.enqueue("long", "{}", 3, now=now)
    long_ = await bot.lease()
    assert long_ is not None
    assert long_.kind == "long"
    clocks.step(3 * HOUR)  # NTP fixes a clock that ran three hours behind
    clocks.advance(60.0)
    # A lease taken 60 s ago for 90 s is live: the repair before every claim leaves it.
    assert await bot.queue.repair_expired(bot.now()) == 0
    assert (await bot.run_next()).id == waiting.id
    row = await bot.queue.get(waiting.id)
    assert row is not None
    assert row.state == "pending", "60 s old is not past a 600 s budget"
    await bot.queue.heartbeat(long_.lease, bot.now())


async def _crash_and_restart(bot: Bot, path: Path, clocks: ManualClocks, outcomes: Outcomes) -> Bot:
    """The process dies (no clean stop, nothing marked) and a new one starts."""
    await bot.pool.close()
    return await start(path, clocks, outcomes)


async def test_a_step_back_then_a_restart_in_the_same_boot_keeps_every_delay(
    bot: Bot, clocks: ManualClocks, outcomes: Outcomes, tmp_path: Path
) -> None:
    t0 = clocks.mono()
    await _pending_three(bot)
    clocks.advance(5.0)
    clocks.step(-3 * HOUR)
    bot = await _crash_and_restart(bot, tmp_path / "xbot.sqlite3", clocks, outcomes)
    try:
        assert bot.resumed.shift == pytest.approx(-3 * HOUR)
        assert bot.now() == clocks.wall(), "the new line starts at the wall clock"
        assert await bot.queue.reclaim_orphans(bot.now()) == 1  # the dead process's lease
        # 5 s went by before the restart: the hold still ends at its 20 s, the retry at 30 s.
        assert await _runnable_at(bot, clocks, t0, 5.0) == ["long"]
        done = await bot.run_next()
        assert done.kind == "long"
        assert await _runnable_at(bot, clocks, t0, 19.9, 20.1) == [None, "limited"]
        assert (await bot.run_next()).kind == "limited"
        assert await _runnable_at(bot, clocks, t0, 29.9, 30.1) == [None, "retry"]
    finally:
        await bot.pool.close()


async def test_a_step_forward_then_a_restart_in_the_same_boot_ages_no_task(
    bot: Bot, clocks: ManualClocks, outcomes: Outcomes, tmp_path: Path
) -> None:
    waiting = await bot.queue.enqueue("outage", "{}", 4, now=bot.now())
    assert (await bot.run_next()).state == "pending"
    clocks.advance(100.0)
    clocks.step(3 * HOUR)
    bot = await _crash_and_restart(bot, tmp_path / "xbot.sqlite3", clocks, outcomes)
    try:
        assert bot.resumed.shift == pytest.approx(3 * HOUR)
        row = await bot.queue.get(waiting.id)
        assert row is not None
        assert bot.now() - row.created_at == pytest.approx(100.0), "its age, not 3 h more"
        assert (await bot.run_next()).state == "pending", "within its 600 s budget"
    finally:
        await bot.pool.close()


async def test_a_reboot_with_a_clock_that_went_back_holds_nothing_longer_than_its_delay(
    bot: Bot, clocks: ManualClocks, outcomes: Outcomes, tmp_path: Path
) -> None:
    """Another boot: the time passed is unknown; the line never goes back, so the
    latest write is now (no downtime assumed) and each task waits its own delay."""
    await _pending_three(bot)
    await bot.pool.close()
    clocks.reboot(down_for=60.0, wall_step=-3 * HOUR)
    t0 = clocks.mono()
    bot = await start(tmp_path / "xbot.sqlite3", clocks, outcomes)
    try:
        assert bot.resumed.shift == pytest.approx(-3 * HOUR + 60.0, abs=1.0)
        await bot.queue.reclaim_orphans(bot.now())
        assert (await bot.run_next()).kind == "long"
        assert await _runnable_at(bot, clocks, t0, 19.9, 20.1) == [None, "limited"]
        assert (await bot.run_next()).kind == "limited"
        assert await _runnable_at(bot, clocks, t0, 29.9, 30.1) == [None, "retry"]
    finally:
        await bot.pool.close()


def _insert_far(path: Path, now: float) -> None:
    """Rows as an older version (or a clock that ran far ahead) left them."""
    conn = apsw.Connection(str(path))
    try:
        conn.execute(
            "INSERT INTO tasks (kind, chat_id, payload, state, attempts, max_attempts, run_after,"
            " created_at, updated_at) VALUES ('other', 9, '{}', 'pending', 0, 5, ?, ?, ?)",
            (now + 10 * HOUR, now - 60.0, now - 60.0),
        )
        hold = (now + 5 * HOUR,)
        conn.execute("INSERT INTO chat_holds (chat_id, not_before) VALUES (8, ?)", hold)
        conn.execute("DELETE FROM time_line")
    finally:
        conn.close()


async def test_the_start_up_clamp_bounds_what_any_stored_row_can_hold(
    bot: Bot, clocks: ManualClocks, outcomes: Outcomes, tmp_path: Path
) -> None:
    path = tmp_path / "xbot.sqlite3"
    await bot.pool.close()
    _insert_far(path, clocks.wall())
    bot = await start(path, clocks, outcomes)
    try:
        assert (bot.resumed.shift, bot.resumed.clamped) == (0.0, 2)
        far = bot.now() + LONGEST_DELAY
        rows = await bot.queue.list(state="pending")
        assert [r.run_after for r in rows] == [pytest.approx(far)]
        held = await bot.pool.read(
            lambda c: c.execute("SELECT not_before FROM chat_holds").fetchall()
        )
        assert held == [(pytest.approx(far),)]
    finally:
        await bot.pool.close()


async def test_no_write_puts_a_due_time_or_a_hold_past_the_longest_delay(bot: Bot) -> None:
    now = bot.now()
    task = await bot.queue.enqueue("other", "{}", 5, now=now, run_after=now + 10 * HOUR)
    assert task.run_after == now + LONGEST_DELAY
    leased = await bot.queue.enqueue("other", "{}", 6, now=now)
    got = await bot.lease()
    assert got is not None
    assert got.id == leased.id
    back = await bot.queue.rate_limited(got.lease, now, now + 5 * HOUR, "429")
    assert back.run_after == leased.run_after  # in its place: the chat's hold waits
    assert await bot.queue.lease_next(now + LONGEST_DELAY - 1) is None
    assert (await bot.queue.stats(now + LONGEST_DELAY)).held_chats == 0
    got = await bot.queue.lease_next(now + LONGEST_DELAY)
    assert got is not None
    back = await bot.queue.reschedule(got.lease, now, 5 * HOUR, "slow")
    assert back.run_after == now + LONGEST_DELAY


async def test_the_rebase_moves_every_stored_time_in_one_transaction(
    bot: Bot, clocks: ManualClocks, outcomes: Outcomes, tmp_path: Path
) -> None:
    now = bot.now()
    chats, cache = ChatStore(bot.pool), LinkCache(bot.pool)
    record = caption_edit_record(42, prompt_message_id=7, source="x", expires_at=now + 600.0)
    await chats.put_record(11, record, now)
    entry = CachedPost(
        key="x:1", url="https://x.com/a/status/1", caption_parts={}, items=(), created_at=now
    )
    await cache.put(entry)
    await bot.queue.hold_chat(12, now + 20.0)
    clocks.step(-2 * HOUR)
    bot = await _crash_and_restart(bot, tmp_path / "xbot.sqlite3", clocks, outcomes)
    try:
        new_now = bot.now()
        assert new_now == pytest.approx(now - 2 * HOUR)
        state = await ChatStore(bot.pool).get(11, new_now)
        (kept,) = state.records.values()
        assert kept.expires_at == pytest.approx(new_now + 600.0)
        assert await LinkCache(bot.pool).get("x:1", new_now) is not None
        rows = await bot.pool.read(
            lambda c: c.execute("SELECT created_at FROM link_cache").fetchall()
        )
        assert rows == [(pytest.approx(new_now),)]
        held = await bot.pool.read(
            lambda c: c.execute("SELECT not_before FROM chat_holds").fetchall()
        )
        assert held == [(pytest.approx(new_now + 20.0),)]
    finally:
        await bot.pool.close()


@pytest.mark.parametrize("step", [-3 * HOUR, 3 * HOUR], ids=["back", "forward"])
async def test_after_a_rebase_each_chat_is_claimed_at_its_head_in_order(
    bot: Bot, clocks: ManualClocks, outcomes: Outcomes, tmp_path: Path, step: float
) -> None:
    """The lanes (one head per chat, kept by triggers row by row) are rebuilt after the
    rebase rewrote every due time at once."""
    now, t0 = bot.now(), clocks.mono()
    for chat, delays in ((1, (10.0, 20.0, 30.0)), (2, (15.0,)), (3, (25.0, 5.0))):
        for delay in delays:
            await bot.queue.enqueue("other", "{}", chat, now=now, run_after=now + delay)
    clocks.step(step)
    bot = await _crash_and_restart(bot, tmp_path / "xbot.sqlite3", clocks, outcomes)
    try:
        order = []
        for at in (5.0, 10.0, 15.0, 20.0, 25.0, 30.0):
            clocks.advance(t0 + at + 0.01 - clocks.mono())
            task = await bot.lease()
            assert task is not None, f"nothing runnable at {at} s"
            order.append(task.chat_id)
            await bot.queue.mark_done(task.lease, bot.now())
        assert order == [3, 1, 2, 1, 3, 1]
    finally:
        await bot.pool.close()
