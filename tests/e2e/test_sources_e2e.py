"""A dead X source is a non-event: the real PTB client against the Bot API stand-in, the real
queue, and three X source stand-ins (fxtwitter, vxtwitter, syndication) that fail on command."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from conftest import WallClock as Shifted

from standins.harness import Harness
from xbot.sources.x import DELETED, DOWN, SourceChain, token

CHAT = 701
OPERATOR = 702


@pytest.fixture
async def h(start_harness: Callable[..., Awaitable[Harness]]) -> Harness:
    harness = await start_harness(x_sources=True, start_bot=False, admin_ids=frozenset({OPERATOR}))
    harness.clock = Shifted()  # the queue's and breakers' clock, moved forward by the test
    await harness.start_bot()
    return harness


def chain(h: Harness) -> SourceChain:
    x_api = h.services.sources.by_kind["x"]
    assert isinstance(x_api, SourceChain)
    return x_api


def photos_sent(h: Harness) -> list[dict[str, Any]]:
    return [m for m in h.sent(CHAT) if "photo" in m]


def texts(h: Harness) -> list[str]:
    return [m["text"] for m in h.sent(CHAT) if "text" in m]


def fx_hits(h: Harness) -> int:
    return sum(n for path, n in h.fx.hits.items() if "/status/" in path)


async def send(h: Harness, post_id: str) -> None:
    before = len(h.sent(CHAT))
    h.api.user_message(CHAT, f"https://x.com/alice/status/{post_id}")
    await h.api.wait_for(lambda: len(h.sent(CHAT)) > before, 15)
    await h.wait_idle(15)


async def test_fx_down_from_the_start_every_link_comes_through_vxtwitter(h: Harness) -> None:
    chain(h).deadline = 0.3  # fxtwitter hangs: each wait until the breaker opens is this long
    h.fx.set_fault("hang")
    for n in range(8):
        h.add_post(200 + n, author=("Alice", "alice"), text=f"post {n}", photos=[h.photo(f"a{n}")])
    for n in range(8):
        await send(h, str(200 + n))
    assert len(photos_sent(h)) == 8
    assert texts(h) == []
    # Three links waited for fxtwitter (the breaker's threshold); the other five not at all.
    assert fx_hits(h) == chain(h).policy.threshold
    fx_health = chain(h).health["fxtwitter"]
    assert fx_health.counts(h.clock()) == (0, 3)
    assert fx_health.last_error == "no answer within 0.3s"
    assert chain(h).answered == {"vxtwitter": 8}
    assert h.syn is not None
    assert sum(h.syn.hits.values()) == 0


async def test_fx_flapping_every_link_delivered_and_the_breaker_stays_closed(h: Harness) -> None:
    for n in range(6):
        h.add_post(300 + n, text=f"flap {n}", photos=[h.photo(f"f{n}")])
    for n in range(6):
        if n % 2 == 0:
            h.fx.set_fault("503", count=1)  # fxtwitter's UPSTREAM_UNAVAILABLE envelope, once
        await send(h, str(300 + n))
    assert len(photos_sent(h)) == 6
    assert chain(h).answered == {"fxtwitter": 3, "vxtwitter": 3}
    assert not chain(h).health["fxtwitter"].state.is_open
    assert fx_hits(h) == 6


async def test_everything_down_then_back_one_sentence_then_the_media(h: Harness) -> None:
    clock = h.clock
    assert isinstance(clock, Shifted)
    assert h.vx is not None
    assert h.syn is not None
    h.add_post(400, text="patience", photos=[h.photo("p")])
    h.fx.set_fault("503")
    h.vx.set_outage("html")  # BetterTwitFix's error page, status 200
    await h.syn.refuse()  # nothing listens: connections refused
    h.api.user_message(CHAT, "https://x.com/alice/status/400")

    async def waiting() -> None:
        """Until the task is back in the queue, waiting out its backoff."""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            counts = (await h.services.queue.stats(h.clock())).counts_by_state
            if counts.get("running", 0) == 0 and counts.get("pending", 0) == 1:
                return
            await asyncio.sleep(0.02)
        raise TimeoutError("the task did not go back to the queue")

    async def retried(times: int) -> None:
        # The task sits out its backoff; move the clock past it instead of sleeping.
        for _ in range(times):
            await waiting()
            seen = h.vx.outage_hits
            clock.offset += 400
            h.services.workers.wake()
            await h.api.wait_for(lambda s=seen: h.vx.outage_hits > s, 10)

    await h.api.wait_for(lambda: h.vx.outage_hits >= 1, 10)
    await retried(3)  # the first tries were a blip; then the chat is told, once
    await h.api.wait_for(lambda: texts(h) == [DOWN], 10)
    await retried(2)
    await waiting()
    assert texts(h) == [DOWN]
    assert photos_sent(h) == []
    # Nothing dead-lettered: an outage retry counts no attempt.
    stats = await h.services.queue.stats(h.clock())
    assert stats.dead == 0

    h.fx.set_fault(None)
    h.vx.set_outage(None)
    await h.syn.accept()
    await waiting()
    clock.offset += 400  # past every cool-down: the next try probes and gets the post
    h.services.workers.wake()
    await h.api.wait_for(lambda: len(photos_sent(h)) == 1, 15)
    await h.wait_idle(15)
    assert texts(h) == [DOWN]


async def test_a_definite_not_found_is_not_asked_elsewhere(h: Harness) -> None:
    assert h.vx is not None
    assert h.syn is not None
    h.add_post(500, text="gone", deleted=True)
    await send(h, "500")
    assert texts(h) == [DELETED]
    assert sum(h.vx.hits.values()) == 0
    assert sum(h.syn.hits.values()) == 0


async def test_the_syndication_endpoint_answers_when_both_apis_are_down(h: Harness) -> None:
    assert h.vx is not None
    assert h.syn is not None
    h.add_post(600, text="third time", videos=[h.video("v")])
    h.fx.set_fault("html")
    h.vx.set_outage("503")
    await send(h, "600")
    assert [m for m in h.sent(CHAT) if "video" in m]
    assert chain(h).last_answer == "syndication"
    ((post_id, sent_token),) = h.syn.tokens
    assert (post_id, sent_token) == ("600", token("600"))


async def test_stats_shows_each_source(h: Harness) -> None:
    h.fx.set_fault("503")
    for n in range(4):
        h.add_post(800 + n, text="s", photos=[h.photo(f"s{n}")])
        await send(h, str(800 + n))
    h.api.user_message(OPERATOR, "/stats")
    await h.api.wait_for(
        lambda: any("X sources:" in m.get("text", "") for m in h.sent(OPERATOR)), 10
    )
    (text,) = [m["text"] for m in h.sent(OPERATOR) if "X sources:" in m.get("text", "")]
    lines = text.split("X sources:\n", 1)[1].splitlines()
    assert lines[0].startswith("  fxtwitter: skipped until ")
    assert (
        "UTC, 0 ok / 3 failed in the last hour; last error: X is not answering right now"
        in lines[0]
    )
    assert lines[1] == "  vxtwitter: healthy, 4 ok / 0 failed in the last hour"
    assert lines[2] == "  syndication: healthy, 0 ok / 0 failed in the last hour"


async def test_the_outage_sentence_survives_a_hold_on_the_chat(h: Harness) -> None:
    """docs/reliability.md finding 12: sent inline, best effort, the sentence met the
    chat's 429 hold and was dropped for good (told_down was already written)."""
    clock = h.clock
    assert isinstance(clock, Shifted)
    assert h.vx is not None
    assert h.syn is not None
    h.add_post(450, text="held", photos=[h.photo("held")])
    h.fx.set_fault("503")
    h.vx.set_outage("html")
    await h.syn.refuse()
    # Every sentence to the chat meets a 429 with a long retry_after (the soak's storm).
    h.api.set_rate_limit_storm(1.0, retry_after_range=(5, 5), methods=["sendMessage"])
    h.api.user_message(CHAT, "https://x.com/alice/status/450")

    # Past the blip: the link has waited long enough that the next look tells the chat.
    # Each step is one more try: of the link (the X chain asked again) until the
    # sentence is queued, then of the sentence, which is its chat's head from then on
    # (a 429 keeps a task in its place) and meets the storm again.
    def tries() -> int:
        assert h.vx is not None
        return h.vx.outage_hits + len(h.api.calls_for("sendMessage", CHAT))

    for _ in range(4):
        seen = tries()
        await h.api.wait_for(lambda s=seen: tries() > s, 10)
        await asyncio.sleep(0.2)
        clock.offset += 400
        h.services.workers.wake()
    assert [c.status for c in h.api.calls_for("sendMessage", CHAT)][:1] == [429], "no hold met"
    h.api.set_rate_limit_storm(0.0)
    h.fx.set_fault(None)
    h.vx.set_outage(None)
    await h.syn.accept()
    clock.offset += 400
    h.services.workers.wake()
    await h.api.wait_for(lambda: len(photos_sent(h)) == 1, 30)  # after the 5 s hold
    await h.wait_idle(15)
    assert texts(h) == [DOWN], "told once that X is not answering, before the media"
