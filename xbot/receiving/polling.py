"""Long polling that confirms an update only after its handlers ran.

PTB's `Updater` asks for the next batch (which confirms the offset to
Telegram) as soon as it has one, while the handlers still run. A process
killed in between loses those updates: Telegram will not send them again.
The soak lost links that way while the database was locked and handlers
waited in it. Here the next ``getUpdates`` carries the new offset only after
every handler of the batch returned, so a kill means the batch comes again,
and the handler's dedup key (message and link) absorbs the redelivery.

An update whose work could not be stored (the database locked or the disk full:
`StoreError`, see `xbot.receiving.intake`) is handled the way a webhook's 500 is:
its offset is not confirmed, so the next ``getUpdates`` brings it again after a
pause, and nobody in the chat is told to send it again. Updates of the batch
after it that were handled are remembered and not handled twice. Only an update
that failed `STORE_TRIES` times in a row is handled once more the polite way
(the user is asked to send it again) and confirmed, so one poison update cannot
hold every chat's updates behind it for ever.

Errors of the Bot API arrive translated (`xbot.sending.bot_errors.translated`):
network trouble and 5xx (`TelegramUnreachable`, also for nginx's HTML 502 page)
are retried with a capped backoff (`xbot.tasks.backoff.reconnect_delay`);
a 409 (another instance polls the same token) and a refused token are logged
and retried slowly, never fatal to the process. However long Telegram stays
unreachable, the poller's task lives on (`running` stays true: the watchdog
vouches for the process, not for Telegram) and polling resumes by itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import Any

from telegram import Update
from telegram.ext import Application

from xbot.errors import PollConflict, TokenRefused, XbotError
from xbot.logs import kv
from xbot.receiving.intake import redeliverable
from xbot.sending.bot_errors import error_detail, library_name, translated
from xbot.tasks.backoff import reconnect_backoff, reconnect_delay

log = logging.getLogger(__name__)

# Tries of an update whose work could not be stored before it is handled the polite
# way: with the reconnect backoff (1 s doubling to 30 s, jittered) about one to two
# minutes of a locked or full database, on top of the database's own busy timeout.
STORE_TRIES = 8


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
        # Updates at or past `offset` that were handled while an earlier one of their
        # batch was not stored: asked for again with it, not handled again.
        self._done: set[int] = set()
        self._store_failures: dict[int, int] = {}  # update id: tries that were not stored
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
            with contextlib.suppress(XbotError):
                await translated(
                    self.application.bot.get_updates(offset=self.offset, timeout=0, limit=1)
                )

    async def _run(self) -> None:
        failures = 0
        while not self._stopping:
            try:
                updates = await translated(
                    self.application.bot.get_updates(
                        offset=self.offset,
                        timeout=self.timeout,
                        allowed_updates=self.allowed_updates,
                        # The long poll's own wait, and a margin for the network (scaled in
                        # tests, where a hung poll should cost a second, not ten).
                        read_timeout=self.timeout + max(1.0, 10 * self.time_scale),
                    )
                )
            except XbotError as exc:  # Telegram's answer, or none (bot_errors.classify)
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
                fresh = [u for u in updates if u.update_id not in self._done]
                stored = await asyncio.shield(asyncio.gather(*(self._handle(u) for u in fresh)))
            finally:
                self._handling = False
            unstored = [u.update_id for u, ok in zip(fresh, stored, strict=True) if not ok]
            if not unstored:
                self.offset = updates[-1].update_id + 1
                self._done.clear()
                continue
            self.offset = min(unstored)
            self._done = {u.update_id for u in updates if u.update_id > self.offset} - set(unstored)
            tries = max(self._store_failures[i] for i in unstored)
            delay = reconnect_backoff(tries, scale=self.time_scale)
            log.warning(
                "updates not stored, asking for them again %s",
                kv(updates=len(unstored), first=self.offset, tries=tries, retry_in=round(delay, 3)),
            )
            await asyncio.sleep(delay)

    async def _handle(self, update: Update) -> bool:
        """Run `update`'s handlers; False when its work could not be stored and it is to
        come again (its `STORE_TRIES`-th try is the polite one, which always counts)."""
        tries = self._store_failures.get(update.update_id, 0)
        if tries + 1 >= STORE_TRIES:
            await self.application.process_update(update)  # "please send it again"
            self._store_failures.pop(update.update_id, None)
            return True
        with redeliverable() as intake:
            await self.application.process_update(update)
        if intake.failure is None:
            self._store_failures.pop(update.update_id, None)
            return True
        self._store_failures[update.update_id] = tries + 1
        return False

    async def _pause(self, exc: XbotError, failures: int) -> None:
        delay = reconnect_delay(exc, failures, scale=self.time_scale)
        level = logging.ERROR if isinstance(exc, PollConflict | TokenRefused) else logging.WARNING
        log.log(
            level,
            "getUpdates failed %s",
            kv(
                error=library_name(exc),
                detail=error_detail(exc.__cause__ or exc),
                tries=failures,
                retry_in=round(delay, 3),
            ),
        )
        await asyncio.sleep(delay)
