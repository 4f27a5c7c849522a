"""Long polling that confirms an update only after its handlers ran.

PTB's `Updater` asks for the next batch (which confirms the offset to
Telegram) as soon as it has one, while the handlers still run. A process
killed in between loses those updates: Telegram will not send them again.
The soak lost links that way while the database was locked and handlers
waited in it. Here the next ``getUpdates`` carries the new offset only after
every handler of the batch returned, so a kill means the batch comes again,
and the handler's dedup key (message and link) absorbs the redelivery.

Errors of the Bot API are PTB's own (`telegram.error`), handled here once:
network trouble and 5xx are retried with a capped backoff; a 409 (another
instance polls the same token) and a refused token are logged and retried
slowly, never fatal to the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import Any

from telegram import Update
from telegram.error import Conflict, InvalidToken, RetryAfter, TelegramError
from telegram.ext import Application

from xbot.bot_errors import retry_after_seconds
from xbot.logs import kv

log = logging.getLogger(__name__)

BACKOFF_CAP = 30.0


class DurablePoller:
    """Polls `getUpdates` and hands each batch to the application before confirming it."""

    def __init__(
        self,
        application: Application[Any, Any, Any, Any, Any, Any],
        *,
        timeout: int = 30,
        allowed_updates: Sequence[str] = Update.ALL_TYPES,
    ) -> None:
        self.application = application
        self.timeout = timeout
        self.allowed_updates = list(allowed_updates)
        self.offset = 0
        self._task: asyncio.Task[None] | None = None
        self._handling = False
        self._stopping = False

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def start(self) -> None:
        await self.application.bot.delete_webhook(drop_pending_updates=False)
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
                    read_timeout=self.timeout + 10,
                )
            except TelegramError as exc:
                failures += 1
                await self._pause(exc, failures)
                continue
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
        if isinstance(exc, RetryAfter):
            delay = retry_after_seconds(exc)
        elif isinstance(exc, Conflict | InvalidToken):
            delay = BACKOFF_CAP
        else:
            delay = min(BACKOFF_CAP, 0.5 * 2 ** min(failures, 8))
        level = logging.ERROR if isinstance(exc, Conflict | InvalidToken) else logging.WARNING
        log.log(level, "getUpdates failed %s", kv(error=type(exc).__name__, retry_in=delay))
        await asyncio.sleep(delay)
