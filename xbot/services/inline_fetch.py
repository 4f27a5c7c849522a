"""Looking a post up for an inline query, inside Telegram's answer window.

An inline query must be answered within about 10 s, so the lookup gets a
budget. It first lets a chat delivery of the same link that is in flight
finish (the outbox's single flight per key: that delivery fills the link
cache, so the query is answered by ``file_id`` and nothing is fetched twice),
then reads the link cache, then fetches through the same sources as a chat
link. A fetch that runs over the budget is not cancelled but kept — one in
flight per post, shared by every query that names it — and its post
remembered for a short while, so the user's next keystroke, or the next
person typing the same link, is answered at once.

Fetches in flight are capped, per user (`PER_USER`) and in all (`AT_ONCE`): a
query over a cap starts nothing and is answered as one not in time (a query
joining a fetch already in flight costs nothing and is always let through).
Every keystroke can be a new link, and a script can type thousands: uncapped,
one user's flood became as many requests to the X sources at once, which
refused or timed out under it, and their breakers opened for every chat. The
caps stop the flood here, before the sources, rather than teaching the
breakers to tell our own overload from an outage (a source that refuses us
for our volume is down for us either way): one user's inline fetches and chat
tasks (`xbot.storage.queue.USER_LEASES`) together are a handful of requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Hashable
from typing import Any

import attrs

from xbot.links import Link
from xbot.media.models import Post
from xbot.storage.link_cache import CachedPost

Fetch = Callable[[Link], Coroutine[Any, Any, Post]]
Resolve = Callable[[Link], Awaitable[Link]]
Hold = Callable[[Hashable], contextlib.AbstractAsyncContextManager[None]]
# Telegram waits about 10 s for an answer from the moment the user typed; the lookup
# gets half of that, leaving room for the network both ways and the answer itself.
BUDGET = 5.0
REMEMBER = 120.0  # seconds a fetched post answers inline queries again
MAX_REMEMBERED = 256
PER_USER = 2  # fetches in flight started by one user's queries
AT_ONCE = 16  # fetches in flight in all


@contextlib.asynccontextmanager
async def _no_flight(key: Hashable) -> AsyncIterator[None]:
    yield


async def _as_is(link: Link) -> Link:
    return link


@attrs.define
class InlineFetches:
    """In-flight and recently finished fetches by link key.

    Attributes:
        fetch: the sources' ``fetch(link) -> Post``; raises `FetchError` and kin.
        hold: the outbox's single flight per cache key (a chat delivery holds it).
        resolve: the router's ``resolve(link) -> link`` under its final cache key (a
            Bluesky handle becomes its DID, so a post delivered in a chat is found).
        budget: seconds a query waits for its lookup.
        clock: monotonic seconds (injected in tests).
        per_user, at_once: the most fetches in flight started by one user, and in all.
    """

    fetch: Fetch
    hold: Hold = _no_flight
    resolve: Resolve = _as_is
    budget: float = BUDGET
    clock: Callable[[], float] = time.monotonic
    per_user: int = PER_USER
    at_once: int = AT_ONCE
    _flights: dict[str, asyncio.Task[Post]] = attrs.field(factory=dict, init=False)
    _starters: dict[str, int | None] = attrs.field(factory=dict, init=False)
    _done: OrderedDict[str, tuple[float, Post]] = attrs.field(factory=OrderedDict, init=False)

    async def look_up(
        self,
        link: Link,
        read_cache: Callable[[Link], Awaitable[CachedPost | None]],
        user: int | None = None,
    ) -> CachedPost | Post | None:
        """The cache entry (with media) for `link` resolved, else the post, else None when
        neither came in time, or a fetch was needed and `user` (or everyone) is at the cap.

        Raises:
            FetchError: resolving or the fetch failed (`PostUnavailable`, ...).
        """
        deadline = self.clock() + self.budget
        try:
            async with asyncio.timeout(self.budget):
                link = await self.resolve(link)
                async with self.hold(link.key):
                    cached = await read_cache(link)
        except TimeoutError:
            return None
        if cached is not None and cached.items:
            return cached
        return await self._post(link, max(0.0, deadline - self.clock()), user)

    @property
    def in_flight(self) -> int:
        """Fetches running now (kept past their query's budget included)."""
        return len(self._flights)

    def capped(self, user: int | None) -> bool:
        """Whether a new fetch for `user` would pass a cap (`per_user`, `at_once`)."""
        if len(self._flights) >= self.at_once:
            return True
        mine = sum(1 for starter in self._starters.values() if starter == user)
        return user is not None and mine >= self.per_user

    async def _post(self, link: Link, budget: float, user: int | None) -> Post | None:
        remembered = self._done.get(link.key)
        if remembered is not None and self.clock() - remembered[0] < REMEMBER:
            return remembered[1]
        task = self._flights.get(link.key)
        if task is None:
            if self.capped(user):
                return None
            task = asyncio.create_task(self.fetch(link), name=f"inline-fetch-{link.key}")
            self._flights[link.key] = task
            self._starters[link.key] = user
            task.add_done_callback(lambda t: self._finished(link.key, t))
        try:
            return await asyncio.wait_for(asyncio.shield(task), budget)
        except TimeoutError:
            return None

    def _finished(self, key: str, task: asyncio.Task[Post]) -> None:
        self._flights.pop(key, None)
        self._starters.pop(key, None)
        if task.cancelled():
            return
        # Retrieved here, so a failure nobody waited for is not logged as unretrieved;
        # a failure is not remembered: the next query tries again.
        if task.exception() is None:
            self._done[key] = (self.clock(), task.result())
            while len(self._done) > MAX_REMEMBERED:
                self._done.popitem(last=False)

    async def aclose(self) -> None:
        for task in list(self._flights.values()):
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
