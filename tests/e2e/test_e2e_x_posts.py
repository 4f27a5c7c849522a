"""Real posts as X serves them (issue 12), through the real PTB client against the
stand-ins: long videos choose the version that fits, quotes, tombstones with reasons,
polls, mixed media."""

from __future__ import annotations

from typing import Any

import pytest

from standins.fxapi import x_formats
from standins.harness import Harness
from xbot.errors import TransientFetch
from xbot.links import classify
from xbot.sources.x import BLOCKED, DELETED, PRIVATE, SUSPENDED, WITHHELD

CHAT = 601
MB = 1024 * 1024
MEDIA_METHODS = ("sendPhoto", "sendVideo", "sendAnimation", "sendDocument", "sendMediaGroup")


def ok_media(h: Harness, chat: int = CHAT) -> list[Any]:
    return [
        c
        for c in h.api.calls
        if c.method in MEDIA_METHODS and c.chat_id == chat and c.status == 200
    ]


def texts(h: Harness, chat: int = CHAT) -> list[str]:
    return [m["text"] for m in h.sent(chat) if "text" in m]


async def send_and_settle(h: Harness, text: str, chat: int = CHAT, **kw: Any) -> None:
    before = len(h.sent(chat))
    h.api.user_message(chat, text, **kw)
    await h.api.wait_for(lambda: len(h.sent(chat)) > before, 15)
    await h.wait_idle(15)


def ladder(h: Harness, name: str, **lies: int) -> list[str]:
    """Four rungs of one video on the media server; `lies` maps a rung to the
    Content-Length its server announces (the bytes stay 64 KiB)."""
    urls = []
    for rung in ("270", "360", "720", "1080"):
        urls.append(h.video(f"{name}-{rung}", lie_length=lies.get(f"p{rung}")))
    return urls


async def test_a_long_1080p_video_is_sent_as_its_720p_version(harness: Harness) -> None:
    h = harness
    urls = ladder(h, "long")
    fmt = x_formats(urls, hls=h.media.url_for("/media/long.m3u8"))
    h.fx.add_post("1201", text="45 s", videos=[{"url": urls[-1], "duration": 45.2, "formats": fmt}])
    await send_and_settle(h, "https://x.com/a/status/1201")
    (call,) = ok_media(h)
    assert call.method == "sendVideo"
    assert call.params["video"] == urls[2]  # 720p by URL: ~14 MB fits Telegram's 20 MB fetch
    assert not any("over the" in t for t in texts(h))


async def test_a_download_larger_than_announced_steps_down(
    harness_no_url_fetch: Harness,
) -> None:
    h = harness_no_url_fetch
    # 20 s: 1080p is estimated ~30 MB (an upload), but its server announces 60 MB.
    urls = ladder(h, "mid", p1080=60 * MB)
    fmt = x_formats(urls)
    h.fx.add_post("1202", text="20 s", videos=[{"url": urls[-1], "duration": 20.0, "formats": fmt}])
    await send_and_settle(h, "https://x.com/a/status/1202")
    (call,) = ok_media(h)
    assert call.method == "sendVideo"
    assert "video" in call.files  # uploaded
    assert h.media.hits["/media/mid-1080.mp4"] == 1
    assert h.media.hits["/media/mid-720.mp4"] == 1
    assert not any("over the" in t for t in texts(h))


async def test_only_when_no_version_fits_does_the_chat_hear_too_large(
    harness_no_url_fetch: Harness,
) -> None:
    h = harness_no_url_fetch
    lies = {f"p{r}": 90 * MB for r in ("270", "360", "720", "1080")}
    urls = ladder(h, "huge", **lies)
    h.fx.add_post("1203", videos=[{"url": urls[-1], "duration": 20.0, "formats": x_formats(urls)}])
    await send_and_settle(h, "https://x.com/a/status/1203")
    assert ok_media(h) == []
    (sentence,) = [t for t in texts(h) if "upload limit" in t]
    assert "https://x.com/i/status/1203" in sentence or "/status/1203" in sentence
    assert all(h.media.hits[f"/media/huge-{r}.mp4"] == 1 for r in ("270", "360", "720", "1080"))


def quoted_status(h: Harness) -> dict[str, Any]:
    status = h.fx.add_post("1290", author=("Bob B", "bob"), text="the original",
                           photos=[h.photo("q1")])  # fmt: skip
    assert status is not None
    return status


async def test_a_post_without_media_quoting_one_with_media_sends_the_quoted_media(
    harness: Harness,
) -> None:
    h = harness
    h.fx.add_post("1204", author=("Alice A", "alice"), text="look", quote=quoted_status(h))
    await send_and_settle(h, "https://x.com/alice/status/1204")
    (call,) = ok_media(h)
    assert call.method == "sendPhoto"
    assert call.params["photo"] == h.media.url_for("/media/q1.jpg")
    caption = call.params["caption"]
    assert "<b>Alice A</b> (@alice)" in caption
    assert "↪ quoting <b>Bob B</b> (@bob)" in caption
    assert 'href="https://x.com/bob/status/1290"' in caption
    assert 'href="https://x.com/alice/status/1204"' in caption


async def test_own_media_first_then_the_quoted_media_in_one_album(harness: Harness) -> None:
    h = harness
    h.fx.add_post("1205", text="mine", photos=[h.photo("own")], quote=quoted_status(h))
    await send_and_settle(h, "https://x.com/a/status/1205")
    (call,) = ok_media(h)
    assert call.method == "sendMediaGroup"
    assert [m["media"] for m in call.params["media"]] == [
        h.media.url_for("/media/own.jpg"),
        h.media.url_for("/media/q1.jpg"),
    ]


async def test_a_cached_quote_post_keeps_both_authors(harness: Harness) -> None:
    h = harness
    h.fx.add_post("1206", author=("Alice A", "alice"), text="look", quote=quoted_status(h))
    await send_and_settle(h, "https://x.com/alice/status/1206")
    await send_and_settle(h, "https://fxtwitter.com/alice/status/1206", chat=CHAT + 1)
    (again,) = ok_media(h, CHAT + 1)
    assert not again.params["photo"].startswith("http")  # a file_id: from the cache
    assert "↪ quoting <b>Bob B</b> (@bob)" in again.params["caption"]


async def test_tombstones_say_why(harness: Harness) -> None:
    h = harness
    h.fx.add_post("1207", tombstone="suspended")
    h.fx.add_post("1208", tombstone="blocked")
    h.fx.add_post("1209", private=True)
    h.fx.add_post("1210", deleted=True)
    h.fx.add_post("1211", tombstone="suspended",
                  tombstone_message="This post is withheld in your country.")  # fmt: skip
    for post_id in ("1207", "1208", "1209", "1210", "1211"):
        await send_and_settle(h, f"https://x.com/a/status/{post_id}")
    assert texts(h) == [SUSPENDED, BLOCKED, PRIVATE, DELETED,
                        WITHHELD]  # fmt: skip


async def test_upstream_unavailable_from_the_stand_in_is_x_not_answering(
    harness: Harness,
) -> None:
    h = harness
    h.fx.add_post("1212", fault="503")
    link = classify("https://x.com/a/status/1212")
    assert link is not None
    with pytest.raises(TransientFetch) as info:
        await h.services.delivery.source.fetch(link)
    # Through the chain of sources: X's own sentence, whichever source said it.
    assert info.value.reason.startswith("X is not answering right now")


async def test_a_poll_is_answered_in_text(harness: Harness) -> None:
    h = harness
    poll = {"choices": [{"label": "Cats", "count": 3, "percentage": 75},
                        {"label": "Dogs", "count": 1, "percentage": 25}],
            "total_votes": 4, "ends_at": "2024-01-01T00:00:00Z",
            "time_left_en": "Final results"}  # fmt: skip
    h.fx.add_post("1213", text="which?", extra={"poll": poll})
    await send_and_settle(h, "https://x.com/a/status/1213")
    (answer,) = texts(h)
    assert "which?" in answer
    assert "📊 Poll, final result (4 votes):\n• Cats: 75%\n• Dogs: 25%" in answer


async def test_photo_gif_video_keep_post_order_in_one_album(harness: Harness) -> None:
    h = harness
    media = [("photo", h.photo("m1")), ("gif", h.video("m2")), ("video", h.video("m3"))]
    h.fx.add_post("1214", text="mixed", media=media)
    await send_and_settle(h, "https://x.com/a/status/1214")
    (call,) = ok_media(h)
    assert call.method == "sendMediaGroup"
    assert [(m["type"], m["media"]) for m in call.params["media"]] == [
        ("photo", media[0][1]),
        ("video", media[1][1]),  # the GIF: albums take no animations
        ("video", media[2][1]),
    ]


async def test_a_gif_alone_is_an_animation(harness: Harness) -> None:
    h = harness
    h.fx.add_post("1215", gifs=[h.video("g1")])
    await send_and_settle(h, "https://x.com/a/status/1215")
    assert [c.method for c in ok_media(h)] == ["sendAnimation"]


async def test_a_url_telegram_refuses_is_uploaded_as_the_best_that_fits(
    harness_no_url_fetch: Harness,
) -> None:
    h = harness_no_url_fetch
    urls = ladder(h, "refused")
    h.fx.add_post("1216", videos=[{"url": urls[-1], "duration": 45.0, "formats": x_formats(urls)}])
    await send_and_settle(h, "https://x.com/a/status/1216")
    calls = [c for c in h.api.calls if c.method == "sendVideo"]
    assert (calls[0].status, calls[0].params.get("video")) == (400, urls[2])
    assert calls[-1].status == 200
    assert "video" in calls[-1].files  # 720p uploaded: 1080p (~64 MB) is over 50 MB
    assert h.media.hits["/media/refused-1080.mp4"] == 0


async def test_too_big_to_upload_but_within_the_url_limit_goes_by_url(tmp_path: Any) -> None:
    h = await Harness.start(tmp_path / "data", upload_limit_mb=10)
    try:
        urls = ladder(h, "small")
        fmt = x_formats(urls)
        h.fx.add_post("1217", videos=[{"url": urls[-1], "duration": 45.0, "formats": fmt}])
        await send_and_settle(h, "https://x.com/a/status/1217")
        (call,) = ok_media(h)
        assert call.params["video"] == urls[2]  # ~13 MB: over 10 MB to upload, fine by URL
    finally:
        await h.stop()


async def test_alt_text_is_kept_in_the_link_cache_record(harness: Harness) -> None:
    h = harness
    h.fx.add_post("1218", photos=[{"url": h.photo("alt"), "altText": "a heron at dawn"}])
    await send_and_settle(h, "https://x.com/a/status/1218")
    entry = await h.services.cache.get("x:1218", h.clock())
    assert entry is not None
    assert entry.caption_parts["alt"] == '["a heron at dawn"]'


async def test_a_card_to_another_site_goes_to_the_other_sites_path(harness: Harness) -> None:
    h = harness
    offered: list[str] = []

    async def other_sites(ctx: Any, payload: Any, settings: Any, *, last: bool = True) -> bool:
        offered.append(payload.url)  # yt-dlp itself would need the network
        return True  # delivered: YouTube goes to yt-dlp first, gallery-dl is not asked

    h.services.delivery.other_sites = other_sites
    card = {"media": {"external": {"type": "video", "url": "https://www.youtube.com/embed/abc"}}}
    h.fx.add_post("1219", text="my new video", extra=card)
    await send_and_settle(h, "https://x.com/a/status/1219")  # private chat: other sites on
    await h.wait_idle(15)
    assert "my new video" in texts(h)[0]  # the post's text first
    assert offered == ["https://www.youtube.com/embed/abc"]
    group = -100777  # other sites are off in groups by default: the card is not offered
    await send_and_settle(h, "https://x.com/a/status/1219", chat=group, chat_type="supergroup")
    assert offered == ["https://www.youtube.com/embed/abc"]
