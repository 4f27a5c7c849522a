"""Long polling that confirms an update only after its handlers ran.

PTB's `Updater` asks for the next batch (which confirms the offset to
Telegram) as soon as it has one, while the handlers still run. A process
killed in between loses those updates: Telegram will not send them again.
The soak lost links that way while the database was locked and handlers
waited in it. Here the next ``getUpdates`` carries the new offset only after
every handler of the batch returned, so a kill means the batch comes again,
and the handler's dedup key (message and link) absorbs the redelivery.

Errors of the Bot API are PTB's own (`telegram.error`), handled here once:
network trouble and 5xx (PTB's `NetworkError`, `TimedOut`, also for nginx's
HTML 502 page) are retried with a capped backoff (`compute_reconnect_delay`);
a 409 (another instance polls the same token) and a refused token are logged
and retried slowly, never fatal to the process. However long Telegram stays
unreachable, the poller's task lives on (`running` stays true: the watchdog
vouches for the process, not for Telegram) and polling resumes by itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Sequence
from typing import Any

from telegram import Update
from telegram.error import Conflict, InvalidToken, RetryAfter, TelegramError
from telegram.ext import Application

from xbot.logs import kv
from xbot.sending.bot_errors import retry_after_seconds
from xbot.tasks.backoff import RECONNECT_CAP, RECONNECT_FIRST, compute_reconnect_delay

log = logging.getLogger(__name__)

_PARSE_FAILED = ". Parsing the server response"
_DETAIL_MAX = 120


def error_detail(exc: BaseException) -> str:
    """One short line for a log: PTB's text for a non-JSON answer quotes the whole page
    ("Bad Gateway (502). Parsing the server response b'<html>...' failed"): keep the
    status part."""
    text = " ".join(str(exc).split(_PARSE_FAILED, 1)[0].split())
    return text[:_DETAIL_MAX] or type(exc).__name__


def reconnect_delay(
    exc: TelegramError, failures: int, *, scale: float = 1.0, jitter: float | None = None
) -> float:
    """How long to wait after the `failures`-th failed call in a row to the Bot API."""
    if isinstance(exc, RetryAfter):
        return retry_after_seconds(exc)  # Telegram's own number; never scaled down
    drawn = random.random() if jitter is None else jitter
    if isinstance(exc, Conflict | InvalidToken):
        failures = 64  # at the cap at once: nothing a quick retry can fix
    return compute_reconnect_delay(
        failures, jitter=drawn, first=RECONNECT_FIRST * scale, cap=RECONNECT_CAP * scale
    )


class DurablePoller:
    """Polls `getUpdates` and hands each batch to the application before confirming it."""

    def __init__(
        self,
        application: Application[Any, Any, Any, Any, Any, Any],
        *,
        timeout: int = 30,
        allowed_updates: Sequence[str] = Update.ALL_TYPES,
        time_scale: float = 1.0,
    ) -> None:
        self.application = application
        self.timeout = timeout
        self.time_scale = time_scale
        self.allowed_updates = list(allowed_updates)
        self.offset = 0
        self._task: asyncio.Task[None] | None = None
        self._handling = False
        self._stopping = False

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def start(self) -> None:
        """Start polling (the caller has removed any webhook: getUpdates fails while one is set)."""
        self._stopping = False
        self._task = asyncio.create_task(self._run(), name="xbot-poller")

    async def stop(self) -> None:
        """Stop asking; let a batch being handled finish; confirm what was handled."""
        self._stopping = True
        task = self._task
        if task is not None:
            if not self._handling:
                task.cancel()  # waiting on a long poll or a pause: nothing half done
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                await asyncio.wait_for(task, 15.0)
        if self.offset:
            # Tell Telegram what we handled, so a restart does not see it again.
            with contextlib.suppress(TelegramError):
                await self.application.bot.get_updates(offset=self.offset, timeout=0, limit=1)

    async def _run(self) -> None:
        failures = 0
        while not self._stopping:
            try:
                updates = await self.application.bot.get_updates(
                    offset=self.offset,
                    timeout=self.timeout,
                    allowed_updates=self.allowed_updates,
                    # The long poll's own wait, and a margin for the network (scaled in
                    # tests, where a hung poll should cost a second, not ten).
                    read_timeout=self.timeout + max(1.0, 10 * self.time_scale),
                )
            except TelegramError as exc:
                failures += 1
                await self._pause(exc, failures)
                continue
            if failures:
                log.info("getUpdates answers again %s", kv(failed_tries=failures))
            failures = 0
            if not updates:
                continue
            # Handlers only parse and enqueue; a batch waits for all of them
            # (errors go to the application's error handler, never up here).
            # Shielded: a stop lets the batch finish rather than cut it in half.
            self._handling = True
            try:
                await asyncio.shield(
                    asyncio.gather(*(self.application.process_update(u) for u in updates))
                )
            finally:
                self._handling = False
            self.offset = updates[-1].update_id + 1

    async def _pause(self, exc: TelegramError, failures: int) -> None:
        delay = reconnect_delay(exc, failures, scale=self.time_scale)
        level = logging.ERROR if isinstance(exc, Conflict | InvalidToken) else logging.WARNING
        log.log(
            level,
            "getUpdates failed %s",
            kv(
                error=type(exc).__name__,
                detail=error_detail(exc),
                tries=failures,
                retry_in=round(delay, 3),
            ),
        )
        await asyncio.sleep(delay)
