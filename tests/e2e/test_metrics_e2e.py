"""The operator's listener on a real bot: the real PTB client against the Bot API stand-in,
the X source stand-ins, /metrics scraped over HTTP and read with prometheus_client's parser."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from standins.harness import Harness

CHAT = 901


@pytest.fixture
async def h(start_harness: Callable[..., Awaitable[Harness]]) -> Harness:
    return await start_harness(x_sources=True, metrics_addr=("127.0.0.1", 0))


def base(h: Harness) -> str:
    assert h.bot is not None
    assert h.bot.listener is not None
    return f"http://127.0.0.1:{h.bot.listener.port}"


async def get(h: Harness, path: str) -> httpx.Response:
    async with httpx.AsyncClient(trust_env=False, timeout=5.0) as client:
        return await client.get(base(h) + path)


async def scrape(h: Harness) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of /metrics: (name, sorted labels) -> value."""
    response = await get(h, "/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=")
    samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str,
          **labels: str) -> float:  # fmt: skip
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


async def deliver(h: Harness, post_id: int) -> None:
    before = len(h.sent(CHAT))
    h.api.user_message(CHAT, f"https://x.com/alice/status/{post_id}")
    await h.api.wait_for(lambda: len(h.sent(CHAT)) > before, 15)
    await h.wait_idle(15)


async def wait_until(check: Callable[[], Awaitable[bool]], within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while not await check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"not within {within}s")
        await asyncio.sleep(0.05)


async def test_counters_move_with_deliveries_a_429_and_a_source_outage(h: Harness) -> None:
    for n in range(3):
        h.add_post(300 + n, author=("Alice", "alice"), photos=[h.photo(f"m{n}")])
    await deliver(h, 300)
    await deliver(h, 300)  # the same link again: from the link cache, by file_id
    # One 429 for the next photo: held for retry_after, then delivered.
    h.api.fail_next("sendPhoto", 429, "Too Many Requests: retry after 1", retry_after=1)
    await deliver(h, 301)
    # fxtwitter goes down: vxtwitter answers, and fxtwitter's failures are counted.
    h.fx.set_outage("503")
    await deliver(h, 302)

    s = await scrape(h)
    assert value(s, "xbot_deliveries_total", site="x") == 4
    assert value(s, "xbot_media_sent_total", by="file_id") == 1
    assert value(s, "xbot_media_sent_total", by="url") == 3
    assert value(s, "xbot_delivery_latency_seconds_count", site="x") == 4
    assert value(s, "xbot_bot_api_requests_total", method="sendPhoto", result="ok") == 4
    assert value(s, "xbot_bot_api_requests_total", method="sendPhoto", result="429") == 1
    assert value(s, "xbot_bot_api_retry_after_seconds_total") == 1
    assert value(s, "xbot_tasks_finished_total", kind="deliver", outcome="rate_limited") == 1
    assert value(s, "xbot_tasks_finished_total", kind="deliver", outcome="done") == 4
    assert value(s, "xbot_source_failures_total", source="fxtwitter") >= 1
    assert value(s, "xbot_source_posts_total", source="vxtwitter") == 1
    # 300, and 301 twice (its retry after the 429 fetches again: nothing was sent to cache).
    assert value(s, "xbot_source_posts_total", source="fxtwitter") == 3
    assert value(s, "xbot_link_cache_lookups_total", result="hit") == 1
    assert value(s, "xbot_telegram_reachable") == 1
    assert value(s, "xbot_tasks", kind="deliver", state="pending") == 0
    assert value(s, "xbot_database_size_bytes") > 0
    assert value(s, "xbot_disk_free_bytes") > 0
    assert ("xbot_ytdlp_age_seconds", ()) in s
    # No chat id and no URL ever becomes a label value.
    for name, labels in s:
        for _key, label in labels:
            assert str(CHAT) not in label, (name, labels)
            assert "://" not in label, (name, labels)


@pytest.mark.parametrize("mode", ["502", "refuse"], ids=["nginx-502", "port-refused"])
async def test_readyz_is_503_while_the_bot_api_is_down_and_200_after(h: Harness, mode: str) -> None:
    live = await get(h, "/livez")
    assert live.status_code == 200
    assert live.text.startswith("ok")
    ready = await get(h, "/readyz")
    assert ready.status_code == 200, ready.text

    h.api.set_outage(mode, methods="all")  # getUpdates too: no send is needed to notice

    async def not_ready() -> bool:
        return (await get(h, "/readyz")).status_code == 503

    await wait_until(not_ready)
    down = await get(h, "/readyz")
    assert "Telegram" in down.text
    assert down.text.count("\n") == 1
    assert value(await scrape(h), "xbot_telegram_reachable") == 0

    h.api.set_outage(None)

    async def ready_again() -> bool:
        return (await get(h, "/readyz")).status_code == 200

    await wait_until(ready_again, within=15)
    failed = "5xx" if mode == "502" else "network"
    assert value(await scrape(h), "xbot_bot_api_requests_total", method="getUpdates",
                 result=failed) >= 1  # fmt: skip


async def test_unknown_paths_and_methods_get_plain_answers(h: Harness) -> None:
    assert (await get(h, "/nope")).status_code == 404
    async with httpx.AsyncClient(trust_env=False, timeout=5.0) as client:
        assert (await client.post(base(h) + "/metrics")).status_code == 405
        head = await client.head(base(h) + "/livez")
    assert head.status_code == 200
    assert head.content == b""
