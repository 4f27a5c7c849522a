"""The sources' one JSON GET: statuses, caps and httpx's errors become ours once."""

from __future__ import annotations

import gzip
import json
import tracemalloc
import zlib
from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from standins.media_server import MediaServer, bomb
from xbot.errors import FetchError, TransientFetch
from xbot.media.decoding import ACCEPT_JSON
from xbot.sources.jsonget import count, get_json, web_url


def client(handler: httpx.MockTransport) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=handler)


def answering(status: int, body: bytes) -> httpx.MockTransport:
    return httpx.MockTransport(lambda request: httpx.Response(status, content=body))


async def test_json_and_not_json() -> None:
    ok = await get_json(client(answering(200, b'{"a": 1}')), "https://s.test/", who="S")
    assert (ok.status, ok.body) == (200, {"a": 1})
    html = await get_json(client(answering(404, b"<html>")), "https://s.test/", who="S")
    assert (html.status, html.body) == (404, None)


@pytest.mark.parametrize("status", [429, 500, 502, 503, 408], ids=str)
async def test_busy_or_broken_is_transient(status: int) -> None:
    with pytest.raises(TransientFetch, match="S is having trouble"):
        await get_json(client(answering(status, b"{}")), "https://s.test/", who="S")


async def test_an_oversized_answer_is_junk() -> None:
    with pytest.raises(FetchError) as info:
        await get_json(client(answering(200, b"[" * 5000)), "https://s.test/", who="S",
                       max_body=1000)  # fmt: skip
    assert type(info.value) is FetchError


async def test_connection_errors_are_translated() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    with pytest.raises(TransientFetch, match="Could not connect to S"):
        await get_json(client(httpx.MockTransport(refuse)), "https://s.test/", who="S")


@pytest.mark.parametrize(
    ("value", "expected"),
    [(3, 3), (3.0, 3), (True, None), (-1, None), ("3", None), (float("nan"), None), (2**70, None)],
    ids=["int", "float", "bool", "negative", "string", "nan", "huge"],
)
def test_count(value: object, expected: int | None) -> None:
    assert count(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [("https://a.b/c", "https://a.b/c"), ("javascript:alert(1)", ""), ("file:///etc", ""), (3, "")],
    ids=["https", "javascript", "file", "number"],
)
def test_web_url(value: object, expected: str) -> None:
    assert web_url(value) == expected


# -- encoded answers from a real server on 127.0.0.1 (issue 30) ---------------------

MB = 1024 * 1024


@pytest.fixture
async def media() -> AsyncIterator[MediaServer]:
    server = await MediaServer().start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.mark.parametrize(
    ("encoding", "wire"),
    [("gzip", gzip.compress), ("deflate", zlib.compress), (None, lambda b: b)],
    ids=["gzip", "deflate", "identity"],
)
async def test_a_compressed_answer_still_reads(
    media: MediaServer, encoding: str | None, wire: Callable[[bytes], bytes]
) -> None:
    body = json.dumps({"posts": [{"text": "x" * 100, "n": n} for n in range(2000)]}).encode()
    headers = {"content-encoding": encoding} if encoding else None
    url = media.add("/api.json", wire(body), "application/json", chunked=True, headers=headers)
    async with httpx.AsyncClient() as c:
        answer = await get_json(c, url, who="S")
    assert answer.status == 200
    assert answer.body == json.loads(body)


@pytest.mark.parametrize("encoding", ["gzip", "gzip, gzip"])
async def test_a_json_bomb_is_refused_at_the_cap_in_bounded_memory(
    media: MediaServer, encoding: str
) -> None:
    """An answer that inflates to GiBs: refused past `max_body` (the sources' own small
    cap), having held little more than that."""
    size = 64 * MB if encoding == "gzip" else 3 * 1024 * MB
    url = media.add("/api.json", bomb(size, encoding), "application/json",
                    headers={"content-encoding": encoding})  # fmt: skip
    async with httpx.AsyncClient() as c:
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            with pytest.raises(FetchError, match="S sent an answer I could not read"):
                await get_json(c, url, who="S", max_body=MB)
            peak = tracemalloc.get_traced_memory()[1] - base
        finally:
            tracemalloc.stop()
    assert peak < 8 * MB, f"held {peak / MB:.0f} MB at once"


async def test_sources_ask_only_for_what_is_decoded() -> None:
    asked: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        asked.append(request.headers.get("Accept-Encoding"))
        return httpx.Response(200, content=b"{}")

    await get_json(client(httpx.MockTransport(handler)), "https://s.test/", who="S",
                   headers={"Accept-Encoding": "br"})  # fmt: skip
    assert asked == [ACCEPT_JSON]
