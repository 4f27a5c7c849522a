"""The fxtwitter-compatible API stand-in: shapes checked against hand-written samples, faults."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from standins.fxapi import FxApiServer, build_status
from xbot.errors import PostUnavailable
from xbot.sources.x import choose_variant, parse_status

DATA = Path(__file__).parent.parent / "data"
UA = {"User-Agent": "xbot-tests/1"}


def sample(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / name).read_text())
    return data


@pytest.fixture
async def fx() -> AsyncIterator[FxApiServer]:
    async with FxApiServer() as server:
        yield server


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(headers=UA, timeout=5) as c:
        yield c


# -- the shape matches the documented samples -----------------------------------


def missing_keys(documented: Any, built: Any, path: str = "") -> list[str]:
    """Keys the sample has that the stand-in's object lacks (lists: compared item by item)."""
    if built is None:
        return []  # nullable: a null stands for any documented value
    if isinstance(documented, dict):
        if not isinstance(built, dict):
            return [path or "."]
        out = []
        for key, value in documented.items():
            if key not in built:
                out.append(f"{path}.{key}")
            else:
                out += missing_keys(value, built[key], f"{path}.{key}")
        return out
    if isinstance(documented, list) and documented and isinstance(built, list) and built:
        return missing_keys(documented[0], built[0], f"{path}[0]")
    return []


SHAPES = [
    ("fx_photo.json", {"media": [("photo", "https://pbs.twimg.com/media/a.jpg?name=orig")]}),
    (
        "fx_video_formats.json",
        {"media": [("video", {"url": "https://video.twimg.com/v.mp4", "size": 14220311})]},
    ),
    (
        "fx_multi_photo.json",
        {"media": [("photo", f"https://pbs.twimg.com/media/{i}.jpg") for i in range(3)]},
    ),
    (
        "fx_video_variants_legacy.json",
        {
            "media": [("video", "https://video.twimg.com/v.mp4"), ("gif", "https://g.mp4")],
            "variants_legacy": True,
        },
    ),
]


@pytest.mark.parametrize(("name", "kwargs"), SHAPES, ids=[s[0] for s in SHAPES])
def test_built_status_has_every_documented_field(name: str, kwargs: dict[str, Any]) -> None:
    documented = sample(name)["tweet"]
    built = build_status(documented["id"], text="x", **kwargs)
    assert missing_keys(documented, built) == []
    assert type(built["created_timestamp"]) is int


@pytest.mark.parametrize("name", [s[0] for s in SHAPES])
def test_created_at_comes_from_the_snowflake(name: str) -> None:
    documented = sample(name)["tweet"]
    built = build_status(documented["id"])
    assert built["created_timestamp"] == documented["created_timestamp"]
    assert built["created_at"] == documented["created_at"]


def test_display_range_counts_utf16() -> None:
    built = build_status("1", text="sunrise 🌅")
    assert built["raw_text"]["display_text_range"] == [0, 10]


# -- the real client reads what the stand-in serves ----------------------------------


@pytest.mark.parametrize(
    ("kwargs", "kinds"),
    [
        ({"photos": ["http://m/a.jpg", "http://m/b.jpg"]}, ["photo", "photo"]),
        # A GIF among other items is read as a video: albums take no animations.
        ({"videos": ["http://m/v.mp4"], "gifs": ["http://m/g.mp4"]}, ["video", "video"]),
        (
            {"media": [("gif", "http://m/g.mp4"), ("photo", "http://m/p.jpg")]},
            ["video", "photo"],
        ),
        ({"gifs": ["http://m/g.mp4"]}, ["gif"]),
        ({"videos": ["http://m/v.mp4"], "variants_legacy": True}, ["video"]),
        ({"text": "no media"}, []),
    ],
    ids=["photos", "video-then-gif", "post-order", "gif-alone", "legacy-variants", "text-only"],
)
async def test_client_parses_served_posts(
    fx: FxApiServer, client: httpx.AsyncClient, kwargs: dict[str, Any], kinds: list[str]
) -> None:
    fx.add_post("77", author=("Alice A", "alice"), **kwargs)
    response = await client.get(f"{fx.url}/alice/status/77")
    assert response.status_code == 200
    post = parse_status(response.json(), post_id="77")
    assert [m.kind for m in post.media] == kinds
    assert post.author_handle == "alice"
    for item in post.media:
        if item.kind != "photo":
            chosen = choose_variant(item, 20 * 2**20)
            assert chosen is not None
            assert chosen.url.endswith(".mp4")  # never the HLS playlist


async def test_hevc_format_is_passed_through_for_the_client_to_drop(
    fx: FxApiServer, client: httpx.AsyncClient
) -> None:
    formats = sample("fx_video_formats.json")["tweet"]["media"]["videos"][0]["formats"]
    fx.add_post("78", videos=[{"url": formats[2]["url"], "formats": formats}])
    body = (await client.get(f"{fx.url}/status/78")).json()
    (item,) = parse_status(body, post_id="78").media
    chosen = choose_variant(item, 20 * 2**20)
    assert chosen is not None
    assert chosen.codec == "h264"
    assert chosen.bitrate == 2176000


@pytest.mark.parametrize(
    ("kwargs", "status", "message"),
    [
        ({"private": True}, 401, "PRIVATE_TWEET"),
        ({"deleted": True}, 404, "NOT_FOUND"),
        ({"fault": "500"}, 500, "API_FAIL"),
        ({"fault": "503"}, 503, "UPSTREAM_UNAVAILABLE"),
    ],
    ids=["private", "deleted", "api-fail", "upstream-unavailable"],
)
async def test_error_bodies(
    fx: FxApiServer, client: httpx.AsyncClient, kwargs: dict[str, Any], status: int, message: str
) -> None:
    fx.add_post("5", text="t", **kwargs)
    response = await client.get(f"{fx.url}/status/5")
    assert response.status_code == status
    assert response.json() == {"code": status, "message": message, "tweet": None}


async def test_private_post_reads_as_unavailable(
    fx: FxApiServer, client: httpx.AsyncClient
) -> None:
    fx.add_post("6", private=True)
    with pytest.raises(PostUnavailable):
        parse_status((await client.get(f"{fx.url}/status/6")).json(), post_id="6")


async def test_unknown_post_and_path(fx: FxApiServer, client: httpx.AsyncClient) -> None:
    for path in ("/status/404404", "/nope", "/alice/likes"):
        response = await client.get(fx.url + path)
        assert response.status_code == 404
        assert response.json()["tweet"] is None
    assert fx.hits["/status/404404"] == 1


async def test_user_agent_is_required(fx: FxApiServer) -> None:
    fx.add_post("7", text="t")
    async with httpx.AsyncClient() as bare:
        bare.headers.pop("user-agent")
        response = await bare.get(f"{fx.url}/status/7")
    assert response.status_code == 401
    assert response.json()["tweet"] is None


async def test_raw_bodies_are_served_as_given(fx: FxApiServer, client: httpx.AsyncClient) -> None:
    fx.add_raw("1790001234567890123", sample("fx_photo.json"))
    response = await client.get(f"{fx.url}/alice/status/1790001234567890123")
    assert response.json() == sample("fx_photo.json")
    fx.add_raw("9", b"\x00not json", code=200)
    assert (await client.get(f"{fx.url}/status/9")).content == b"\x00not json"


# -- faults -------------------------------------------------------------------------


async def test_garbage_html_and_429(fx: FxApiServer, client: httpx.AsyncClient) -> None:
    fx.add_post("8", text="t", fault="garbage", fault_count=1)
    with pytest.raises(ValueError):
        (await client.get(f"{fx.url}/status/8")).json()
    assert (await client.get(f"{fx.url}/status/8")).json()["code"] == 200  # the count ran out
    fx.set_fault("html", count=1)
    page = await client.get(f"{fx.url}/status/8")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    fx.set_fault("429")
    limited = await client.get(f"{fx.url}/status/8")
    assert limited.status_code == 429
    assert limited.headers["retry-after"] == "1"
    fx.set_fault(None)
    assert fx.hits["/status/8"] == 4


async def test_truncated_body_is_a_transport_error(
    fx: FxApiServer, client: httpx.AsyncClient
) -> None:
    fx.add_post("10", text="t", fault="truncated")
    with pytest.raises(httpx.RemoteProtocolError):
        await client.get(f"{fx.url}/status/10")


async def test_huge_body_is_streamed(fx: FxApiServer, client: httpx.AsyncClient) -> None:
    fx.add_post("11", text="t", fault="huge")
    total = 0
    async with client.stream("GET", f"{fx.url}/status/11") as response:
        assert "content-length" not in response.headers
        async for chunk in response.aiter_bytes():
            total += len(chunk)
    assert total > 20 * 2**20


async def test_hang_is_bounded_by_the_client_and_by_stop(client: httpx.AsyncClient) -> None:
    fx = await FxApiServer().start()
    fx.add_post("12", text="t", fault="hang")
    with pytest.raises(httpx.ReadTimeout):
        await client.get(f"{fx.url}/status/12", timeout=0.3)
    started = time.monotonic()
    await fx.stop()
    assert time.monotonic() - started < 2


async def test_delay(fx: FxApiServer, client: httpx.AsyncClient) -> None:
    fx.add_post("13", text="t", delay=0.2)
    started = time.monotonic()
    await client.get(f"{fx.url}/status/13")
    assert time.monotonic() - started >= 0.2


def test_unknown_fault_is_refused() -> None:
    fx = FxApiServer()
    with pytest.raises(ValueError):
        fx.add_post("1", fault="explode")
    with pytest.raises(ValueError):
        fx.set_fault("explode")


def test_samples_are_well_formed() -> None:
    for path in sorted(DATA.glob("fx_*.json")):
        body = json.loads(path.read_text())
        assert body["code"] in (200, 401, 404, 500, 503), path.name
        if "tweet" in body:
            assert (body["tweet"] is None) == (body["code"] != 200), path.name
