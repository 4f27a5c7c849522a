"""The sources' one JSON GET: statuses, caps and httpx's errors become ours once."""

from __future__ import annotations

import httpx
import pytest

from xbot.errors import FetchError, TransientFetch
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
