"""The Bluesky and pixiv stand-ins: their answers have the fixtures' shapes (which
follow the real APIs, see tests/data/*/README.md), and pixiv's Referer rule holds."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from standins.bskyapi import BskyApiServer, did_for
from standins.pixivapi import REFERER, PixivServer
from xbot.sources.bsky import parse_thread, pds_endpoint
from xbot.sources.jsonget import JsonAnswer
from xbot.sources.pixiv import parse_pages, parse_work

DATA = Path(__file__).parent.parent / "data"


def sample(name: str) -> Any:
    return json.loads((DATA / name).read_text())


def shape(value: Any) -> Any:
    """The keys of every object, recursively (lists by their first element)."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return type(value).__name__


def keys_within(small: Any, big: Any, path: str = "") -> list[str]:
    """The key paths of `small` missing from `big` (both `shape` trees)."""
    missing: list[str] = []
    if isinstance(small, dict) and isinstance(big, dict):
        for k, v in small.items():
            if k not in big:
                missing.append(f"{path}.{k}")
            else:
                missing += keys_within(v, big[k], f"{path}.{k}")
    elif isinstance(small, list) and isinstance(big, list) and small and big:
        missing += keys_within(small[0], big[0], path + "[]")
    return missing


@pytest.fixture
async def bsky() -> AsyncIterator[BskyApiServer]:
    async with BskyApiServer() as server:
        yield server


@pytest.fixture
async def pixiv() -> AsyncIterator[PixivServer]:
    async with PixivServer() as server:
        yield server


async def get(url: str, **kw: Any) -> httpx.Response:
    async with httpx.AsyncClient(timeout=5) as client:
        return await client.get(url, **kw)


async def thread(bsky: BskyApiServer, actor: str, rkey: str) -> httpx.Response:
    return await get(f"{bsky.url}/xrpc/app.bsky.feed.getPostThread",
                     params={"uri": f"at://{actor}/app.bsky.feed.post/{rkey}"})  # fmt: skip


@pytest.mark.parametrize(
    ("fixture", "fields"),
    [
        ("thread_images.json", {"images": ["https://cdn.example/a.jpg", "https://cdn.example/b.jpg"]}),
        ("thread_video.json", {"video": b"\0\0\0\x18ftypmp42" + bytes(100)}),
        ("thread_external.json", {"external": "https://bsky.social/about/blog/11-20-2024"}),
    ],
    ids=["images", "video", "external"],
)  # fmt: skip
async def test_bluesky_threads_have_the_fixtures_shape(
    bsky: BskyApiServer, fixture: str, fields: dict[str, Any]
) -> None:
    bsky.add_post("alice.bsky.social", "3lbshape12345", text="hi", **fields)
    answer = await thread(bsky, "alice.bsky.social", "3lbshape12345")
    assert answer.status_code == 200
    real, ours = shape(sample(f"bsky/{fixture}")), shape(answer.json())
    # Every key the real answer has, the stand-in's has (facets aside: this post has none).
    missing = [k for k in keys_within(real, ours) if "facets" not in k]
    assert missing == []
    parse_thread(answer.json(), rkey="3lbshape12345")


async def test_bluesky_quote_shapes(bsky: BskyApiServer) -> None:
    quoted = bsky.build_post("bob.bsky.social", "3lbquoted1234", images=["https://c.example/q"])
    bsky.add_post("alice.bsky.social", "3lbquoting123", images=["https://c.example/o"],
                  quote=quoted)  # fmt: skip
    bsky.add_post("alice.bsky.social", "3lbquoteonly1", quote=quoted)
    for rkey, fixture in [("3lbquoting123", "thread_record_with_media.json"),
                          ("3lbquoteonly1", "thread_quote.json")]:  # fmt: skip
        answer = (await thread(bsky, "alice.bsky.social", rkey)).json()
        assert keys_within(shape(sample(f"bsky/{fixture}")), shape(answer)) == []


async def test_bluesky_errors_and_identity(bsky: BskyApiServer) -> None:
    bsky.add_deleted("alice.bsky.social", "3lbgone123456")
    gone = await thread(bsky, "alice.bsky.social", "3lbgone123456")
    assert (gone.status_code, shape(gone.json())) == (
        400,
        shape(sample("bsky/error_not_found.json")),
    )
    nobody = await get(f"{bsky.url}/xrpc/com.atproto.identity.resolveHandle",
                       params={"handle": "nobody.example"})  # fmt: skip
    assert nobody.status_code == 400
    assert nobody.json() == sample("bsky/resolve_handle_error.json")
    did = did_for("alice.bsky.social")
    resolved = await get(f"{bsky.url}/xrpc/com.atproto.identity.resolveHandle",
                         params={"handle": "alice.bsky.social"})  # fmt: skip
    assert resolved.json() == {"did": did}
    doc = (await get(f"{bsky.plc_url}/{did}")).json()
    assert keys_within(shape(sample("bsky/did_plc.json")), shape(doc)) == []
    assert pds_endpoint(doc) == f"{bsky.url}/pds"


async def test_pixiv_work_and_pages_have_the_fixtures_shape(pixiv: PixivServer) -> None:
    pixiv.add_work("120000001", pages=3, tags=[("オリジナル", "original"), "blue sky"])
    work = await get(f"{pixiv.url}/ajax/illust/120000001")
    pages = await get(f"{pixiv.url}/ajax/illust/120000001/pages")
    # What the stand-in leaves out is clutter pixiv sends and nothing here reads.
    clutter = {
        "romaji", "storableTags", "userIllusts", "likeData", "responseCount", "bookStyle",
        "isHowto", "imageResponseOutData", "imageResponseData", "imageResponseCount", "pollData",
        "seriesNavData", "descriptionBoothId", "descriptionYoutubeId", "comicPromotion",
        "fanboxPromotion", "contestBanners", "isBookmarkable", "bookmarkData", "contestData",
        "zoneConfig", "extraData", "titleCaptionTranslation", "isUnlisted", "request",
        "commentOff", "reuploadDate", "locationMask",
    }  # fmt: skip
    missing = keys_within(shape(sample("pixiv/illust_multi.json")), shape(work.json()))
    assert {m.rsplit(".", 1)[1] for m in missing} <= clutter
    assert keys_within(shape(sample("pixiv/pages_multi.json")), shape(pages.json())) == []
    parsed = parse_work(JsonAnswer(work.status_code, work.json()), work_id="120000001")
    assert parsed.page_count == 3
    assert len(parse_pages(JsonAnswer(pages.status_code, pages.json()))) == 3
    missing = await get(f"{pixiv.url}/ajax/illust/999")
    assert (missing.status_code, missing.json()) == (404, sample("pixiv/illust_not_found.json"))


async def test_pixiv_restricted_works_come_with_null_urls(pixiv: PixivServer) -> None:
    pixiv.add_work("120000004", x_restrict=1)
    body = (await get(f"{pixiv.url}/ajax/illust/120000004")).json()["body"]
    assert body["urls"] == sample("pixiv/illust_r18.json")["body"]["urls"]


async def test_pixiv_images_need_the_referer(pixiv: PixivServer) -> None:
    body = pixiv.add_work("120000005")
    original = body["urls"]["original"]
    assert (await get(original)).status_code == 403
    assert (await get(original, headers={"Referer": "https://evil.example/"})).status_code == 403
    ok = await get(original, headers={"Referer": REFERER})
    assert (ok.status_code, ok.headers["content-type"]) == (200, "image/jpeg")
    assert pixiv.refused == 2
