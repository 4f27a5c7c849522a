"""The periodic loop: a step every few seconds, a failing step a log line and never the end.

The waits are injected (`Waits`): each one returns at once until the test's
number of them is used up; the next one blocks and says so. So a run is a
known number of steps, and nothing sleeps.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from xbot.errors import StoreError
from xbot.periodic import Periodic

EVERY = 30.0


class Waits:
    """An injected sleep: the first `free` waits return at once, the next one blocks."""

    def __init__(self, free: int) -> None:
        self.free = free
        self.asked: list[float] = []
        self.blocked = asyncio.Event()

    async def sleep(self, seconds: float) -> None:
        self.asked.append(seconds)
        if len(self.asked) > self.free:
            self.blocked.set()
            await asyncio.Event().wait()  # until cancelled
        await asyncio.sleep(0)


class Steps:
    """A step that raises `fails[i]` on its i-th call (None: it succeeds)."""

    def __init__(self, fails: list[Exception | None]) -> None:
        self.fails = fails
        self.calls = 0

    async def __call__(self) -> None:
        self.calls += 1
        if self.calls <= len(self.fails) and (exc := self.fails[self.calls - 1]) is not None:
            raise exc


async def run_until_blocked(loop: Periodic, waits: Waits) -> None:
    """Run the loop until its waits are used up; fails if the loop ended before."""
    runner = asyncio.create_task(loop.run())
    blocked = asyncio.create_task(waits.blocked.wait())
    try:
        await asyncio.wait({runner, blocked}, timeout=5, return_when=asyncio.FIRST_COMPLETED)
        assert blocked.done(), "the waits were never used up"
        assert not runner.done(), f"the loop ended: {runner.exception()!r}"
    finally:
        runner.cancel()
        blocked.cancel()
        await asyncio.gather(runner, blocked, return_exceptions=True)


@pytest.mark.parametrize(
    ("fails", "traced"),
    [
        ([], None),
        ([StoreError("database is locked")], False),
        ([KeyError("a bug")], True),
        ([None, RuntimeError("a bug, later")], True),
        ([StoreError("the disk is full")] * 3, False),
    ],
    ids=["fine", "store-error-once", "bug-once", "bug-on-the-second", "store-error-always"],
)
async def test_a_failing_step_is_one_warning_and_the_loop_goes_on(
    fails: list[Exception | None], traced: bool | None, caplog: pytest.LogCaptureFixture
) -> None:
    owner = logging.getLogger("xbot.test_owner")
    steps, waits = Steps(fails), Waits(free=3)
    loop = Periodic("probe", steps, EVERY, logger=owner, sleep=waits.sleep)
    with caplog.at_level(logging.WARNING):
        await run_until_blocked(loop, waits)
    assert steps.calls == 3, "a step after each wait, failed or not"
    assert waits.asked == [EVERY] * 4
    lines = [r for r in caplog.records if r.levelno >= logging.WARNING]
    failed = [e for e in fails if e is not None]
    assert len(lines) == len(failed), "one line per failed step"
    for line, exc in zip(lines, failed, strict=True):
        assert line.name == "xbot.test_owner", "the owner's line"
        assert line.levelno == logging.WARNING
        assert line.getMessage().startswith("probe failed error=")
        assert bool(line.exc_info) is traced, "a traceback for a bug, none for the database"
        if not traced:
            assert str(exc) in line.getMessage()


@pytest.mark.parametrize(
    ("at_once", "steps_before_first_wait"), [(False, 0), (True, 1)], ids=["waits-first", "at-once"]
)
async def test_the_first_step_comes_after_one_wait_or_at_once(
    at_once: bool, steps_before_first_wait: int
) -> None:
    steps, waits = Steps([]), Waits(free=0)
    loop = Periodic("probe", steps, EVERY, at_once=at_once, sleep=waits.sleep)
    await run_until_blocked(loop, waits)
    assert (steps.calls, waits.asked) == (steps_before_first_wait, [EVERY])


async def test_stop_cancels_a_step_in_progress_and_is_safe_twice() -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def slow() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    loop = Periodic("slow", slow, EVERY, at_once=True)
    await loop.stop()  # never started: nothing to do
    loop.start()
    assert loop.running
    await asyncio.wait_for(started.wait(), 5)
    await asyncio.wait_for(loop.stop(), 5)
    assert cancelled.is_set()
    assert not loop.running
    await loop.stop()
