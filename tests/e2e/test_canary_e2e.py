"""The canary, end to end: the real bot asks every X source stand-in for a known post;
one starts answering JSON of another shape: "broken" in the metrics and /stats, one alert."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from standins.harness import Harness
from xbot.sources.canary import Canary

ADMIN = 921
POST = 440322224407314432
BROKEN = "The canary finds fxtwitter answering in a shape xbot does not know"


@pytest.fixture
async def h(start_harness: Callable[..., Awaitable[Harness]]) -> Harness:
    harness = await start_harness(
        x_sources=True, start_bot=False, admin_ids=frozenset({ADMIN}), alert_after=0.5,
        canary_interval=0.1, canary_posts=(f"https://x.com/TheEllenShow/status/{POST}",),
        metrics_addr=("127.0.0.1", 0),
    )  # fmt: skip
    harness.add_post(POST, author=("Ellen", "TheEllenShow"), photos=[harness.photo("selfie")])
    await harness.start_bot()
    return harness


def canary(h: Harness) -> Canary:
    assert h.services.canary is not None
    return h.services.canary


async def rounds(h: Harness, n: int) -> None:
    target = canary(h).rounds + n
    await h.api.wait_for(lambda: canary(h).rounds >= target, 10)


async def broken_gauge(h: Harness) -> dict[str, float]:
    assert h.bot is not None
    assert h.bot.listener is not None
    async with httpx.AsyncClient(trust_env=False, timeout=5.0) as client:
        text = (await client.get(f"http://127.0.0.1:{h.bot.listener.port}/metrics")).text
    return {
        s.labels["source"]: s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == "xbot_source_broken"
    }


def alerts(h: Harness) -> list[str]:
    return [m["text"] for m in h.sent(ADMIN) if "text" in m]


async def test_a_changed_shape_is_broken_not_down_and_alerts_once(h: Harness) -> None:
    await rounds(h, 1)
    verdicts = {name: r[0] for name, r in canary(h).results.items()}
    assert verdicts == {"fxtwitter": "ok", "vxtwitter": "ok", "syndication": "ok"}
    assert set((await broken_gauge(h)).values()) == {0.0}

    # fxtwitter renames its fields: a 200 with JSON, but no status xbot can read.
    h.fx.add_raw(POST, {"code": 200, "message": "OK", "post": {"id": str(POST), "body": "hi"}})
    await rounds(h, 2)
    assert canary(h).results["fxtwitter"][0] == "broken"
    assert canary(h).results["vxtwitter"][0] == "ok"
    assert (await broken_gauge(h))["fxtwitter"] == 1.0
    await h.api.wait_for(lambda: any(BROKEN in t for t in alerts(h)), 10)
    alerts_watch = h.services.alerts
    assert alerts_watch is not None
    target = alerts_watch.checks + 5
    await h.api.wait_for(lambda: alerts_watch.checks >= target, 10)
    assert sum(BROKEN in t for t in alerts(h)) == 1

    # A source that is down is not broken.
    assert h.vx is not None
    h.vx.set_outage("503")
    await rounds(h, 2)
    assert canary(h).results["vxtwitter"][0] == "down"
    assert (await broken_gauge(h))["vxtwitter"] == 0.0


async def test_stats_shows_the_canary(h: Harness) -> None:
    await rounds(h, 1)
    before = len(h.sent(ADMIN))
    h.api.user_message(ADMIN, "/stats")
    await h.api.wait_for(lambda: len(h.sent(ADMIN)) > before, 10)
    text = h.sent(ADMIN)[-1]["text"]
    assert "Canary" in text
    assert "fxtwitter: ok" in text
