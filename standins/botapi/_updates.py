"""The update feed of the Bot API stand-in: getUpdates (long polls), webhooks.

Telegram's rules kept here: a second getUpdates ends the one before with 409;
getUpdates while a webhook is set is a 409 too; ``offset`` confirms (a negative
one keeps the last ``-offset``); ``allowed_updates`` filters and is remembered.

`UpdateFeed` owns the queue of updates; it takes the state's lock, never across an
await.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from standins.botapi._state import BotApiState, api_method
from standins.botapi._wire import JSON, ApiError, Upload, as_int, as_json

_MAX_LONG_POLL = 50.0
_CONFLICT = (
    "Conflict: terminated by other getUpdates request; "
    "make sure that only one bot instance is running"
)


class UpdateFeed:
    """Updates queued by tests and delivered to getUpdates.

    `call_soon` runs a function on the loop that serves requests (a long poll waits there);
    `on_confirm` is told each ``offset`` a getUpdates confirms, before its answer goes out.
    """

    def __init__(
        self,
        state: BotApiState,
        call_soon: Callable[[Callable[[], None]], None],
        on_confirm: Callable[[int], None],
    ) -> None:
        self._lock = state.lock
        self._call_soon = call_soon
        self._on_confirm = on_confirm
        self._updates: list[JSON] = []
        self._next_update_id = 100_000_001
        self._allowed_updates: list[str] = []
        self._poll_generation = 0
        self._poll_waiters: set[asyncio.Event] = set()
        self._webhook_url = ""

    @property
    def held_polls(self) -> int:
        """getUpdates requests being held open right now."""
        with self._lock:
            return len(self._poll_waiters)

    @property
    def pending_updates(self) -> int:
        """Updates not confirmed yet: a getUpdates with a higher ``offset`` drops them."""
        with self._lock:
            return len(self._updates)

    def inject_update(self, update: JSON) -> JSON:
        """Queue an update for getUpdates; an `update_id` is assigned if missing."""
        with self._lock:
            if "update_id" not in update:
                update = {"update_id": self._next_update_id, **update}
            self._next_update_id = max(self._next_update_id, update["update_id"] + 1)
            self._updates.append(update)
            self._wake_pollers()
        return update

    def _wake_pollers(self) -> None:
        for event in list(self._poll_waiters):
            self._call_soon(event.set)

    @api_method("getUpdates")
    async def get_updates(self, params: JSON, files: dict[str, Upload]) -> Any:
        offset = as_int(params.get("offset", 0), "offset")
        limit = min(100, max(1, as_int(params.get("limit", 100), "limit")))
        timeout = min(_MAX_LONG_POLL, max(0.0, float(params.get("timeout", 0) or 0)))
        deadline = time.monotonic() + timeout
        with self._lock:
            if self._webhook_url:
                raise ApiError(
                    409,
                    "Conflict: can't use getUpdates method while webhook is active; "
                    "use deleteWebhook to delete the webhook first",
                )
            if "allowed_updates" in params:
                allowed = as_json(params["allowed_updates"], "allowed_updates")
                self._allowed_updates = list(allowed or [])
            self._poll_generation += 1
            generation = self._poll_generation
            self._wake_pollers()  # an older long poll ends with 409, as on Telegram
        while True:
            event = asyncio.Event()
            with self._lock:
                if generation != self._poll_generation:
                    raise ApiError(409, _CONFLICT)
                if offset:
                    self._confirm(offset)
                    self._on_confirm(offset)
                batch = self._deliverable(offset, limit)
                remaining = deadline - time.monotonic()
                if batch or remaining <= 0:
                    return batch
                self._poll_waiters.add(event)
            try:
                await asyncio.wait_for(event.wait(), remaining)
            except TimeoutError:
                pass
            finally:
                with self._lock:
                    self._poll_waiters.discard(event)

    def _confirm(self, offset: int) -> None:
        if offset > 0:
            self._updates = [u for u in self._updates if u["update_id"] >= offset]
        else:  # negative: keep the last -offset updates
            self._updates = self._updates[offset:]

    def _deliverable(self, offset: int, limit: int) -> list[JSON]:
        allowed = set(self._allowed_updates)
        out = [
            u
            for u in self._updates
            if u["update_id"] >= offset
            and (not allowed or any(k in allowed for k in u if k != "update_id"))
        ]
        return out[:limit]

    @api_method("deleteWebhook")
    async def delete_webhook(self, params: JSON, files: dict[str, Upload]) -> Any:
        with self._lock:
            self._webhook_url = ""
            if params.get("drop_pending_updates"):
                self._updates.clear()
        return True

    @api_method("setWebhook")
    async def set_webhook(self, params: JSON, files: dict[str, Upload]) -> Any:
        url = str(params.get("url", ""))
        with self._lock:
            self._webhook_url = url
            if params.get("drop_pending_updates"):
                self._updates.clear()
        return True

    @api_method("getWebhookInfo")
    async def get_webhook_info(self, params: JSON, files: dict[str, Upload]) -> Any:
        with self._lock:
            return {
                "url": self._webhook_url,
                "has_custom_certificate": False,
                "pending_update_count": len(self._updates),
            }
