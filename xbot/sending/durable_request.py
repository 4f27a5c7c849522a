"""Nothing reaches Telegram before what the bot has committed is on the disk.

`DurableRequest` wraps PTB's request object (the seam `CountingRequest` uses
too) and, before every Bot API call, waits for ``durable()``: in the app, the
pool's `DbPool.sync`, one fsync of the -wal shared by every call waiting at
once, nothing when no commit was made since the last. That one place covers
every confirmation the bot gives Telegram: the offset of the next getUpdates
(the updates before it are stored), and each message sent (the record of the
message before it is stored), so a power cut resends at most the message in
flight. A webhook's 200 is the other confirmation; `AnsweredUpdates.mark`
syncs before it.

Outermost, outside `CountingRequest`: a disk that cannot sync is no answer
from Telegram. It raises `StoreError`, as any other database failure does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from telegram.request import BaseRequest, RequestData

__all__ = ["DurableRequest"]


class DurableRequest(BaseRequest):
    """A `BaseRequest` that waits for ``durable()`` before handing each call to ``inner``."""

    def __init__(self, inner: BaseRequest, durable: Callable[[], Awaitable[None]]) -> None:
        self._inner = inner
        self._durable = durable

    @property
    def read_timeout(self) -> float | None:
        return self._inner.read_timeout

    async def initialize(self) -> None:
        await self._inner.initialize()

    async def shutdown(self) -> None:
        await self._inner.shutdown()

    async def do_request(
        self,
        url: str,
        method: str,
        request_data: RequestData | None = None,
        *args: Any,
        **kwargs: Any,
    ) -> tuple[int, bytes]:
        await self._durable()
        return await self._inner.do_request(url, method, request_data, *args, **kwargs)
