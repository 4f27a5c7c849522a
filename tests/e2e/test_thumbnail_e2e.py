"""Thumbnails end to end: the real bot, the real yt-dlp and the X upload fallback against
media served on 127.0.0.1, the Bot API stand-in recording each uploaded part.

A video that is uploaded carries the site's still when it is one Telegram takes; a video
sent by URL or file_id never carries one; a still that fails or breaks the rule costs
nothing but itself.
"""

from __future__ import annotations

import hashlib
import html
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from standins.botapi import Call
from standins.harness import Harness, mp4_with_header
from standins.media_server import tiny_jpeg

CHAT = 611


@pytest.fixture
async def h(start_harness: Callable[..., Awaitable[Harness]]) -> Harness:
    return await start_harness(ytdlp_sites="all")


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def videos(h: Harness, chat: int) -> list[Call]:
    return [c for c in h.api.calls_for("sendVideo", chat) if c.status == 200]


def thumbnail_part(call: Call) -> tuple[str, int, str] | None:
    ref = call.params.get("thumbnail")
    if ref is None:
        return None
    assert str(ref).startswith("attach://"), ref
    return call.files[str(ref).removeprefix("attach://")]


def temp_entries(h: Harness) -> list[Path]:
    folder = h.settings.data_dir / "tmp"
    return list(folder.iterdir()) if folder.exists() else []


def page_with_thumbnail(h: Harness, name: str, video_url: str, thumbnail_url: str) -> str:
    """A page whose JSON-LD names the video and its still, as video sites' pages do."""
    ld: dict[str, Any] = {
        "@context": "https://schema.org",
        "@type": "VideoObject",
        "name": f"Clip {name}",
        "contentUrl": video_url,
        "thumbnailUrl": thumbnail_url,
    }
    head = f"<title>{html.escape(name)}</title>"
    head += f'<script type="application/ld+json">{json.dumps(ld)}</script>'
    page = f"<!doctype html><html><head>{head}</head><body><p>a video</p></body></html>"
    return h.media.add(f"/pages/{name}.html", page.encode(), "text/html")


async def settle(h: Harness, chat: int, text: str) -> None:
    before = len(h.sent(chat))
    h.api.user_message(chat, text)
    await h.api.wait_for(lambda: len(h.sent(chat)) > before, 15)
    await h.wait_idle(15)


# -- other sites (yt-dlp) ---------------------------------------------------------------


async def test_a_sites_still_goes_with_the_uploaded_video(h: Harness) -> None:
    still = tiny_jpeg(320, 180)
    thumb = h.media.add("/img/still.jpg", still, "image/jpeg")
    clip = h.media.add("/media/withstill.mp4", mp4_with_header(120_000), "video/mp4")
    await settle(h, CHAT, page_with_thumbnail(h, "withstill", clip, thumb))
    (call,) = videos(h, CHAT)
    assert "video" in call.files
    assert thumbnail_part(call) == ("thumb.jpg", len(still), sha(still))
    assert temp_entries(h) == [], "the still goes with the job's temp folder"


async def test_the_same_video_again_goes_by_file_id_without_a_still(h: Harness) -> None:
    thumb = h.media.add("/img/again.jpg", tiny_jpeg(160, 90), "image/jpeg")
    clip = h.media.add("/media/againstill.mp4", mp4_with_header(100_000), "video/mp4")
    page = page_with_thumbnail(h, "againstill", clip, thumb)
    await settle(h, CHAT, page)
    await settle(h, CHAT + 1, page)
    (second,) = videos(h, CHAT + 1)
    assert second.files == {}
    assert "thumbnail" not in second.params
    assert h.media.hits["/img/again.jpg"] == 1


@pytest.mark.parametrize(
    ("route", "why"),
    [
        ({"data": tiny_jpeg(640, 480), "content_type": "image/jpeg"}, "over 320"),
        ({"data": b"\x89PNG\r\n\x1a\n" + bytes(64), "content_type": "image/png"}, "not a JPEG"),
        (
            {"data": tiny_jpeg(90, 90) + bytes(250_000), "content_type": "image/jpeg"},
            "over 200 kB",
        ),
        ({"data": b"gone", "status": 404}, "gone"),
    ],
    ids=["640x480", "png", "too-large", "404"],
)
async def test_a_still_that_fails_costs_nothing_but_itself(
    h: Harness, route: dict[str, Any], why: str
) -> None:
    # (A still behind a refused address: tests/test_thumbnail.py, through the real guard.)
    thumb = h.media.add("/img/bad.jpg", **route)
    clip = h.media.add("/media/badstill.mp4", mp4_with_header(100_000), "video/mp4")
    await settle(h, CHAT, page_with_thumbnail(h, "badstill", clip, thumb))
    (call,) = videos(h, CHAT)
    assert "thumbnail" not in call.params, why
    assert list(call.files) == ["video"], why
    assert h.media.hits["/img/bad.jpg"] == 1, "asked once, then the video went without"
    assert temp_entries(h) == []


# -- X posts ----------------------------------------------------------------------------


async def test_an_x_video_uploaded_by_the_fallback_carries_its_still(
    harness_no_url_fetch: Harness,
) -> None:
    h = harness_no_url_fetch
    still = tiny_jpeg(180, 320)
    thumb = h.media.add("/img/xstill.jpg", still, "image/jpeg")
    clip = h.video("xclip", 90_000)
    h.fx.add_post("9001", text="a video", videos=[{"url": clip, "thumbnail_url": thumb}])
    await settle(h, CHAT, "https://x.com/a/status/9001")
    calls = h.api.calls_for("sendVideo", CHAT)
    assert [c.status for c in calls] == [400, 200], "by URL first, then uploaded"
    assert "thumbnail" not in calls[0].params, "never beside a URL"
    assert "video" in calls[1].files
    assert thumbnail_part(calls[1]) == ("thumb.jpg", len(still), sha(still))


async def test_an_x_album_uploaded_by_the_fallback_carries_a_still_per_video(
    harness_no_url_fetch: Harness,
) -> None:
    h = harness_no_url_fetch
    a, b = tiny_jpeg(100, 100), tiny_jpeg(200, 100)
    ta = h.media.add("/img/xa.jpg", a, "image/jpeg")
    tb = h.media.add("/img/xb.jpg", b, "image/jpeg")
    h.fx.add_post(
        "9002",
        text="two videos",
        videos=[
            {"url": h.video("xa", 50_000), "thumbnail_url": ta},
            {"url": h.video("xb", 50_000), "thumbnail_url": tb},
        ],
    )
    await settle(h, CHAT, "https://x.com/a/status/9002")
    (call,) = [c for c in h.api.calls_for("sendMediaGroup", CHAT) if c.status == 200]
    parts = [
        call.files[str(m["thumbnail"]).removeprefix("attach://")] for m in call.params["media"]
    ]
    assert parts == [("thumb.jpg", len(a), sha(a)), ("thumb.jpg", len(b), sha(b))]


async def test_an_x_video_telegram_fetches_itself_goes_without_a_still(h: Harness) -> None:
    thumb = h.media.add("/img/byurl.jpg", tiny_jpeg(100, 100), "image/jpeg")
    clip = h.video("byurl", 60_000)
    h.fx.add_post("9003", text="by url", videos=[{"url": clip, "thumbnail_url": thumb}])
    await settle(h, CHAT, "https://x.com/a/status/9003")
    (call,) = videos(h, CHAT)
    assert call.params["video"] == clip
    assert "thumbnail" not in call.params
    assert call.files == {}
    assert h.media.hits["/img/byurl.jpg"] == 0, "not even fetched: nothing would carry it"
