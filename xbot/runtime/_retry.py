"""The one retry of the start-up: a step tried again, with a pause, while what it
waits for (Telegram, the database) is not there yet."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from xbot.errors import Outcome, SendError, StoreBusy, TokenRefused
from xbot.logs import kv

log = logging.getLogger("xbot.runtime")

T = TypeVar("T")
STORE_WAIT = 60.0  # how long a start waits out a locked database or a full disk


async def retrying(
    step: Callable[[], Awaitable[T]],
    *,
    transient: Callable[[Exception], bool],
    pause: Callable[[Exception, int], float | None],
    on_wait: Callable[[Exception, int, float], None],
    on_answer: Callable[[int], None] | None = None,
) -> T:
    """Run `step` until it goes through; an error that is not `transient`, or one after
    which `pause` (given the error and the failures so far) says None, is raised.

    `on_wait` hears each failed try (the error, the failures, the pause) before the
    pause; `on_answer` hears how many tries failed before the one that went through.
    """
    failures = 0
    while True:
        try:
            result = await step()
        except Exception as exc:
            if not transient(exc):
                raise
            failures += 1
            delay = pause(exc, failures)
            if delay is None:
                raise
            on_wait(exc, failures, delay)
            await asyncio.sleep(delay)
            continue
        if on_answer is not None:
            on_answer(failures)
        return result


def telegram_did_not_answer(exc: BaseException) -> bool:
    """A start-up call to try again: whatever Telegram answered or did not (a 5xx, a
    refused connection, a timeout, a 429, a 409...), but a refused token."""
    return isinstance(exc, SendError | Outcome) and not isinstance(exc, TokenRefused)


async def patiently(step: Callable[[], Awaitable[T]], within: float = STORE_WAIT) -> T:
    """Run a start-up step, waiting out `StoreBusy` (a lock, a full disk) for a while.

    Exiting at once would have systemd restart us every 5 s against its start
    limit, and leave the unit failed after a full disk longer than ~25 s.
    """
    deadline = time.monotonic() + within

    def pause(_: Exception, failures: int) -> float | None:
        delay = min(2.0 ** (failures - 1), 10.0)
        return None if time.monotonic() + delay > deadline else delay

    def on_wait(exc: Exception, _: int, delay: float) -> None:
        log.warning("start waits for the database %s", kv(error=exc, retry_in=delay))

    return await retrying(
        step, transient=lambda exc: isinstance(exc, StoreBusy), pause=pause, on_wait=on_wait
    )
