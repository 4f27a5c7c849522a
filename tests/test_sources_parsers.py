"""The three X parsers read the same post into the same `Post`; each source's own shapes.

Fixtures: ``tests/data/fx_*.json`` (fxtwitter), ``tests/data/vx/`` (BetterTwitFix's
vxApi shape) and ``tests/data/syndication/`` (X's tweet-result); the READMEs there say
where each shape comes from.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import httpx
import pytest

from xbot.errors import FetchError, PostUnavailable, TransientFetch
from xbot.links import Link
from xbot.media.models import Post
from xbot.sources.x import (
    DELETED,
    UNAVAILABLE,
    Syndication,
    VxApi,
    choose_variant,
    js_radix36,
    orig_photo,
    parse_status,
    parse_syndication,
    parse_vx,
    token,
)

DATA = Path(__file__).parent / "data"
URL_LIMIT = 20 * 1024 * 1024


def _json(name: str) -> Any:
    return json.loads((DATA / name).read_text())


def _fx(name: str, post_id: str) -> Post:
    return parse_status(_json(name), post_id=post_id)


def _vx(name: str, post_id: str) -> Post:
    return parse_vx(_json(f"vx/{name}"), post_id=post_id)


def _syn(name: str, post_id: str) -> Post:
    return parse_syndication(_json(f"syndication/{name}"), post_id=post_id)


def _seen(post: Post) -> tuple[object, ...]:
    """What a user gets from a post: caption parts, and per item what would be sent."""
    items = tuple(
        (
            m.kind,
            m.url if m.kind == "photo" else (choose_variant(m, URL_LIMIT) or m).url,
            m.width,
            m.height,
            None if m.duration is None else round(m.duration, 2),
        )
        for m in post.media
    )
    caption = (post.key, post.url, post.author_name, post.author_handle, post.text, post.sensitive)
    return (*caption, items)


# One post, three sources: (fxtwitter fixture, vx fixture, syndication fixture, post id).
SAME_POST = [
    ("fx_photo.json", "photo.json", "photo.json", "1790001234567890123"),
    ("fx_multi_photo.json", "multi_photo.json", "multi_photo.json", "1812233445566778899"),
    ("fx_video_formats.json", "video.json", "video.json", "1801122334455667788"),
]


@pytest.mark.parametrize(("fx", "vx", "syn", "post_id"), SAME_POST, ids=["photo", "album", "video"])
def test_the_three_parsers_read_one_post_alike(fx: str, vx: str, syn: str, post_id: str) -> None:
    want = _seen(_fx(fx, post_id))
    assert _seen(_syn(syn, post_id)) == want
    got_vx = _seen(_vx(vx, post_id))
    if "video" in fx:
        # BetterTwitFix hands out one encoding, its highest-bitrate mp4 without `?tag=`,
        # and no sizes: the only difference a user could see (a 1080p file, not 720p).
        assert got_vx[:6] == want[:6]
        ((kind, url, *rest),) = got_vx[6]
        assert (kind, rest) == (want[6][0][0], list(want[6][0][2:]))
        assert url.endswith("/1920x1080/Hi8.mp4")
    else:
        assert got_vx == want


def test_vx_reads_a_gif_and_a_sensitive_flag() -> None:
    post = _vx("quote_gif.json", "1819654321098765432")
    assert post.sensitive is True
    gif = post.media[0]  # the quoted post's photo may follow (issue 12's quote rule)
    assert (gif.kind, gif.width, gif.height, gif.duration) == ("gif", 498, 280, None)
    assert gif.thumbnail_url == "https://pbs.twimg.com/tweet_video_thumb/GUaGiFxXAAA1.jpg"


def test_syndication_cuts_the_media_link_expands_links_and_unescapes() -> None:
    post = _syn("gif_quote_escaped.json", "1819654321098765432")
    assert post.text == "this & that <3 https://example.org/a?b=1"
    gif = post.media[0]
    assert (gif.kind, gif.url) == ("gif", "https://video.twimg.com/tweet_video/GUaGiFxXAAA1.mp4")
    assert post.sensitive is True


def test_vx_and_syndication_read_a_quote_alike() -> None:
    post_id = "1819654321098765432"
    vx, syn = _vx("quote_gif.json", post_id), _syn("gif_quote_escaped.json", post_id)
    assert [(m.kind, m.width, m.height) for m in vx.media] == [
        (m.kind, m.width, m.height) for m in syn.media
    ]
    # None on both sides until `Post.quote` lands (issue 12), the same post after.
    assert getattr(vx, "quote", None) == getattr(syn, "quote", None)


def test_syndication_estimates_sizes_so_the_720p_file_is_chosen_by_url() -> None:
    (video,) = _syn("video.json", "1801122334455667788").media
    sizes = {v.url.rsplit("/", 1)[-1]: v.size for v in video.variants}
    assert sizes["mAsTeR.m3u8?tag=16"] is None
    assert sizes["Qw3rTy.mp4?tag=16"] == int(2176000 * 44877 / 8000 * 1.1)
    assert [v.codec for v in video.variants].count("hevc") == 1


@pytest.mark.parametrize(
    ("body", "error", "reason"),
    [
        ({"error": "User not found"}, PostUnavailable, DELETED),
        ({"error": "Failed to get tweet"}, TransientFetch, None),
        ({"tweetID": "not a number"}, FetchError, None),
        ([], FetchError, None),
        ("text", FetchError, None),
    ],
    ids=["error-not-found", "error-upstream", "bad-id", "list", "string"],
)
def test_vx_error_shapes(body: object, error: type[Exception], reason: str | None) -> None:
    with pytest.raises(error) as raised:
        parse_vx(body, post_id="1")
    assert type(raised.value) is error
    if reason is not None:
        assert raised.value.reason == reason  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (_json("syndication/tombstone.json"), PostUnavailable),
        ({}, FetchError),
        ({"__typename": "Tweet", "id_str": ""}, FetchError),
        (None, FetchError),
    ],
    ids=["tombstone", "empty-object", "no-id", "null"],
)
def test_syndication_error_shapes(body: object, error: type[Exception]) -> None:
    with pytest.raises(error) as raised:
        parse_syndication(body, post_id="1")
    assert type(raised.value) is error
    if error is PostUnavailable:
        assert raised.value.reason == UNAVAILABLE  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("url", "want"),
    [
        ("https://pbs.twimg.com/media/A.jpg", "https://pbs.twimg.com/media/A.jpg?name=orig"),
        ("https://pbs.twimg.com/media/A.jpg?name=small", "https://pbs.twimg.com/media/A.jpg?name=small"),
        ("http://127.0.0.1:9/media/a.jpg", "http://127.0.0.1:9/media/a.jpg"),
    ],
    ids=["bare", "sized", "elsewhere"],
)  # fmt: skip
def test_orig_photo(url: str, want: str) -> None:
    assert orig_photo(url) == want


# Computed with node: ((Number(id) / 1e15) * Math.PI).toString(36).replace(/(0+|\.)/g, "")
@pytest.mark.parametrize(
    ("post_id", "want"),
    [
        ("20", "6dq1a2xwd93"),
        ("100", "vwm6eephu8"),
        ("1234567890", "6iio5bzbwyw"),
        ("1683920951807971329", "42y6zv7ufp"),
        ("1707234985613447357", "44zfq7hcbzn"),
        ("1800000000000000000", "4d2v7cbm2xj"),
        ("9999999999999999999", "o8nxcsgioad"),
    ],
)
def test_the_syndication_token_is_the_embed_codes(post_id: str, want: str) -> None:
    assert token(post_id) == want


@pytest.mark.parametrize(
    ("value", "want"),
    [
        (0.0, "0"),
        (1.0, "1"),
        (36.0, "10"),
        (0.5, "0.i"),
        (35.5, "z.i"),
        (math.pi, "3.53i5ab8p5f"),
    ],
    ids=["zero", "one", "radix", "half", "carry-free", "pi"],  # values from node
)
def test_js_radix36(value: float, want: str) -> None:
    assert js_radix36(value) == want


# -- the HTTP shells, through httpx's MockTransport -----------------------------------------


def _link(post_id: str, handle: str | None = "alice") -> Link:
    return Link(f"https://x.com/{handle}/status/{post_id}", f"x:{post_id}", "x", post_id, handle)


async def _vx_answer(response: httpx.Response) -> Post:
    async with httpx.AsyncClient(transport=httpx.MockTransport(lambda _: response)) as client:
        return await VxApi(client, "https://vx.example").fetch(_link("1790001234567890123"))


HTML = (DATA / "vx" / "failed_to_scan.html").read_bytes()


@pytest.mark.parametrize(
    ("response", "error"),
    [
        (httpx.Response(200, content=HTML), TransientFetch),
        (httpx.Response(503, json={"error": "x"}), TransientFetch),
        (httpx.Response(429), TransientFetch),
        (httpx.Response(403, content=b"blocked"), TransientFetch),
        (httpx.Response(404, content=b"<html>no route</html>"), TransientFetch),
        (httpx.Response(404, json={"error": "Tweet not found"}), PostUnavailable),
        (httpx.Response(418), FetchError),
    ],
    ids=["html-200", "503", "429", "403", "bare-404", "json-404", "teapot"],
)
async def test_vx_http_answers(response: httpx.Response, error: type[Exception]) -> None:
    with pytest.raises(error) as raised:
        await _vx_answer(response)
    assert type(raised.value) is error


async def test_vx_asks_the_handle_path_and_reads_a_post() -> None:
    seen: list[str] = []

    def route(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return httpx.Response(200, json=_json("vx/photo.json"))

    async with httpx.AsyncClient(transport=httpx.MockTransport(route)) as client:
        post = await VxApi(client, "https://vx.example/").fetch(_link("1790001234567890123"))
    assert seen == ["https://vx.example/alice/status/1790001234567890123"]
    assert post.author_handle == "alice"


async def test_syndication_sends_the_token_and_reads_404_as_not_found() -> None:
    seen: list[httpx.URL] = []

    def route(request: httpx.Request) -> httpx.Response:
        seen.append(request.url)
        if request.url.params["id"] == "20":
            return httpx.Response(404)
        return httpx.Response(200, json=_json("syndication/photo.json"))

    async with httpx.AsyncClient(transport=httpx.MockTransport(route)) as client:
        source = Syndication(client, "https://syn.example")
        post = await source.fetch(_link("1790001234567890123"))
        with pytest.raises(PostUnavailable) as gone:
            await source.fetch(_link("20", "jack"))
    assert post.text == "First light on the harbour 🌅"
    assert gone.value.reason == DELETED
    assert seen[0].path == "/tweet-result"
    assert seen[0].params["token"] == token("1790001234567890123")
