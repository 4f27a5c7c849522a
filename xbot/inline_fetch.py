"""Fetching a post for an inline query, inside Telegram's answer window.

An inline query must be answered within about 10 s, so the fetch gets a
budget; one that runs over is not cancelled but kept (one in flight per post,
shared by every query that names it) and its post remembered for a short
while, so the user's next keystroke — or the next person typing the same
link — is answered at once. The fetch itself is the chat links' fetcher
(`fetch`, the X source chain), so the sources' rules hold here too.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine
from typing import Any

import attrs

from xbot.media.models import Post

Fetch = Callable[[str, str | None], Coroutine[Any, Any, Post]]
# Telegram waits about 10 s for an answer from the moment the user typed; the fetch
# gets half of that, leaving room for the network both ways and the answer itself.
BUDGET = 5.0
REMEMBER = 120.0  # seconds a fetched post answers inline queries again
MAX_REMEMBERED = 256


@attrs.define
class InlineFetches:
    """In-flight and recently finished fetches by post id.

    Attributes:
        fetch: ``fetch(post_id, handle) -> Post``; raises `FetchError` and kin.
        budget: seconds a query waits for its fetch.
        clock: monotonic seconds (injected in tests).
    """

    fetch: Fetch
    budget: float = BUDGET
    clock: Callable[[], float] = time.monotonic
    _flights: dict[str, asyncio.Task[Post]] = attrs.field(factory=dict, init=False)
    _done: OrderedDict[str, tuple[float, Post]] = attrs.field(factory=OrderedDict, init=False)

    async def get(self, post_id: str, handle: str | None) -> Post | None:
        """The post, or None when it did not arrive within `budget` seconds.

        Raises:
            FetchError: the fetch failed (`PostUnavailable`, `TransientFetch`, ...).
        """
        remembered = self._done.get(post_id)
        if remembered is not None and self.clock() - remembered[0] < REMEMBER:
            return remembered[1]
        task = self._flights.get(post_id)
        if task is None:
            task = asyncio.create_task(self.fetch(post_id, handle), name=f"inline-fetch-{post_id}")
            self._flights[post_id] = task
            task.add_done_callback(lambda t: self._finished(post_id, t))
        try:
            return await asyncio.wait_for(asyncio.shield(task), self.budget)
        except TimeoutError:
            return None

    def _finished(self, post_id: str, task: asyncio.Task[Post]) -> None:
        self._flights.pop(post_id, None)
        if task.cancelled():
            return
        # Retrieved here, so a failure nobody waited for is not logged as unretrieved;
        # a failure is not remembered: the next query tries again.
        if task.exception() is None:
            self._done[post_id] = (self.clock(), task.result())
            while len(self._done) > MAX_REMEMBERED:
                self._done.popitem(last=False)

    async def aclose(self) -> None:
        for task in list(self._flights.values()):
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
