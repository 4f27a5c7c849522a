"""Start-up steps tried again until they go through."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from xbot.errors import StoreBusy
from xbot.logs import kv

log = logging.getLogger("xbot.runtime")


T = TypeVar("T")
STORE_WAIT = 60.0  # how long a start waits out a locked database or a full disk


async def patiently(step: Callable[[], Awaitable[T]], within: float = STORE_WAIT) -> T:
    """Run a start-up step, waiting out `StoreBusy` (a lock, a full disk) for a while.

    Exiting at once would have systemd restart us every 5 s against its start
    limit, and leave the unit failed after a full disk longer than ~25 s.
    """
    deadline = time.monotonic() + within
    pause = 1.0
    while True:
        try:
            return await step()
        except StoreBusy as exc:
            if time.monotonic() + pause > deadline:
                raise
            log.warning("start waits for the database %s", kv(error=exc, retry_in=pause))
            await asyncio.sleep(pause)
            pause = min(pause * 2, 10.0)
