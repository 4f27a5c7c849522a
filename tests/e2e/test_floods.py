"""One user's flood of links never opens an X source's breaker for everyone (issue 30).

The fxtwitter stand-in is overloaded as a real API is: past two requests in flight
it answers 429, which the breaker counts as the source failing. A flood of inline
queries, or of links in many chats, from one account must stay within what the
source takes (the caps: `InlineFetches`' per user, the queue's `USER_LEASES`), so
the breaker stays closed and another user's link is answered from the source.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from standins.harness import Harness
from xbot.sources.x import SourceChain

CAPACITY = 2  # what the source takes at once; one user's caps are each this
FLOOD = 20


def _breaker_open(h: Harness) -> bool:
    chain = h.services.sources.by_kind["x"]
    assert isinstance(chain, SourceChain)
    return chain.health["fxtwitter"].state.is_open


def _photos(h: Harness, chat: int) -> list[Any]:
    return [c for c in h.api.calls if c.chat_id == chat and c.method == "sendPhoto"]


async def _overloadable(start_harness: Callable[..., Awaitable[Harness]]) -> Harness:
    h = await start_harness()
    for n in range(FLOOD + 1):
        h.fx.add_post(str(1000 + n), text=f"post {n}", photos=[h.photo(f"p{n}")])
    # Every answer takes a while, so the flood's requests overlap.
    h.fx.set_delay(0.3)
    h.fx.set_capacity(CAPACITY)
    return h


async def _another_user_is_served(h: Harness) -> None:
    assert not _breaker_open(h), "one user's flood opened the source's breaker"
    h.api.user_message(900, f"https://x.com/b/status/{1000 + FLOOD}", user_id=900)
    await h.api.wait_for(lambda: _photos(h, 900), 15)


async def test_an_inline_flood_from_one_user_stays_within_the_source(
    start_harness: Callable[..., Awaitable[Harness]],
) -> None:
    h = await _overloadable(start_harness)
    h.api.set_inline_mode(True)
    ids = [
        h.api.inline_query(55, f"https://x.com/a/status/{1000 + n}")["inline_query"]["id"]
        for n in range(FLOOD)
    ]
    await h.api.wait_for(lambda: all(h.api.inline_answer(i) for i in ids), 30)
    # The fetches past the cap were never started; those started end by themselves.
    await h.api.wait_for(lambda: not h.services.inline.in_flight, 15)
    assert h.fx.overloaded == 0, f"{h.fx.overloaded} requests were refused for overload"
    await _another_user_is_served(h)


async def test_a_flood_of_links_in_many_chats_from_one_user_stays_within_the_source(
    start_harness: Callable[..., Awaitable[Harness]],
) -> None:
    h = await _overloadable(start_harness)
    groups = [-2000 - n for n in range(12)]
    for n, group in enumerate(groups):
        link = f"https://x.com/a/status/{1000 + n}"
        h.api.user_message(group, link, user_id=56, chat_type="supergroup")
    await h.api.wait_for(lambda: all(_photos(h, g) for g in groups), 30)
    assert h.fx.overloaded == 0, f"{h.fx.overloaded} requests were refused for overload"
    assert h.fx.max_in_flight <= CAPACITY
    await _another_user_is_served(h)
