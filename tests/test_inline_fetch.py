"""`InlineFetches`: one fetch per post however many queries name it, kept past the
budget, remembered for the next keystroke; a chat delivery in flight is waited for."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Hashable

import pytest

from xbot.errors import PostUnavailable
from xbot.links import Link, classify
from xbot.media.models import Post
from xbot.services.inline_fetch import REMEMBER, InlineFetches
from xbot.storage.link_cache import CachedItem, CachedPost


def link(post_id: str = "1") -> Link:
    found = classify(f"https://x.com/a/status/{post_id}")
    assert found is not None
    return found


class Source:
    """A fetch that waits for `release` and counts its calls."""

    def __init__(self) -> None:
        self.calls = 0
        self.release = asyncio.Event()
        self.error: Exception | None = None

    async def fetch(self, found: Link) -> Post:
        self.calls += 1
        await self.release.wait()
        if self.error is not None:
            raise self.error
        return Post(found.key, found.url, "Ann", "ann", "hi")


async def nothing_cached(found: Link) -> CachedPost | None:
    return None


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_one_fetch_for_every_query_and_it_outlives_the_budget() -> None:
    source = Source()
    fetches = InlineFetches(source.fetch, budget=0.01)
    first = await fetches.look_up(link(), nothing_cached)
    assert first is None, "not in time: the handler answers what is known"
    source.release.set()
    for _ in range(200):  # the fetch goes on; a later query gets its post
        post = await fetches.look_up(link(), nothing_cached)
        if post is not None:
            break
        await asyncio.sleep(0.005)
    assert isinstance(post, Post)
    assert source.calls == 1


async def test_a_post_is_remembered_for_a_while_then_fetched_again() -> None:
    source = Source()
    source.release.set()
    clock = Clock()
    fetches = InlineFetches(source.fetch, clock=clock)
    await fetches.look_up(link(), nothing_cached)
    await fetches.look_up(link(), nothing_cached)
    assert source.calls == 1
    clock.now += REMEMBER + 1
    await fetches.look_up(link(), nothing_cached)
    assert source.calls == 2


async def test_a_failure_is_raised_and_not_remembered() -> None:
    source = Source()
    source.error = PostUnavailable("This post was deleted or does not exist.")
    source.release.set()
    fetches = InlineFetches(source.fetch)
    for _ in range(2):
        with pytest.raises(PostUnavailable):
            await fetches.look_up(link(), nothing_cached)
    assert source.calls == 2


async def test_a_cache_entry_with_media_answers_without_a_fetch() -> None:
    source = Source()
    entry = CachedPost("x:1", "https://x.com/a/status/1", {}, (CachedItem("photo", "F"),), 0.0)

    async def cached(found: Link) -> CachedPost | None:
        return entry

    assert await InlineFetches(source.fetch).look_up(link(), cached) is entry
    assert source.calls == 0


async def test_a_chat_delivery_in_flight_is_waited_for_within_the_budget() -> None:
    lock = asyncio.Lock()

    @contextlib.asynccontextmanager
    async def hold(key: Hashable) -> AsyncIterator[None]:
        async with lock:
            yield

    source = Source()
    source.release.set()
    fetches = InlineFetches(source.fetch, hold, budget=0.05)
    async with lock:  # a delivery of the link holds its flight the whole time
        assert await fetches.look_up(link(), nothing_cached) is None
    assert source.calls == 0, "no second fetch beside the delivery's"
    assert isinstance(await fetches.look_up(link(), nothing_cached), Post)


async def test_close_cancels_what_is_in_flight() -> None:
    source = Source()
    fetches = InlineFetches(source.fetch, budget=0.01)
    assert await fetches.look_up(link(), nothing_cached) is None
    await fetches.aclose()
    assert source.calls == 1


async def test_the_link_is_resolved_before_the_cache_and_the_flight() -> None:
    source = Source()
    held: list[Hashable] = []
    asked: list[str] = []

    @contextlib.asynccontextmanager
    async def hold(key: Hashable) -> AsyncIterator[None]:
        held.append(key)
        yield

    async def resolve(found: Link) -> Link:
        return Link(found.url, "x:final", found.kind, found.post_id)

    entry = CachedPost("x:final", "u", {}, (CachedItem("photo", "F"),), 0.0)

    async def cached(found: Link) -> CachedPost | None:
        asked.append(found.key)
        return entry

    fetches = InlineFetches(source.fetch, hold, resolve=resolve)
    assert await fetches.look_up(link(), cached) is entry
    assert (held, asked) == (["x:final"], ["x:final"])


async def test_fetches_in_flight_are_capped_per_user_and_in_all() -> None:
    source = Source()
    fetches = InlineFetches(source.fetch, budget=0.01, per_user=2, at_once=3)
    for n in range(5):  # a flood of distinct links from one user
        assert await fetches.look_up(link(str(10 + n)), nothing_cached, user=7) is None
    assert source.calls == 2, "one user starts at most per_user fetches"
    # A query naming a link already in flight joins it: no new fetch, no cap.
    assert await fetches.look_up(link("10"), nothing_cached, user=8) is None
    assert source.calls == 2
    assert await fetches.look_up(link("20"), nothing_cached, user=8) is None
    assert source.calls == 3, "another user still gets a fetch"
    assert await fetches.look_up(link("21"), nothing_cached, user=9) is None
    assert source.calls == 3, "at_once fetches in flight in all"
    source.release.set()
    for _ in range(200):  # once they end, the user may start again
        if not fetches.capped(7):
            break
        await asyncio.sleep(0.01)
    post = None
    for _ in range(200):
        post = await fetches.look_up(link("12"), nothing_cached, user=7)
        if post is not None:
            break
        await asyncio.sleep(0.01)
    assert post is not None
    assert source.calls == 4
    await fetches.aclose()
