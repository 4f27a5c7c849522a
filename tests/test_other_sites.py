"""Links to other sites, end to end: the real bot, the real yt-dlp (generic extractor,
``XBOT_YTDLP_SITES=all``) against pages and videos served on 127.0.0.1, the Bot API stand-in."""

from __future__ import annotations

import asyncio
import itertools
import logging
import shutil
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import eventually

from standins.harness import Harness, mp4_with_header
from standins.media_server import big, fake_mp4
from standins.streams import LIMIT_MB, Streams, serve_hls
from xbot.errors import BlockedAddress, PostUnavailable, TooLarge, UnsupportedLink
from xbot.i18n import translator
from xbot.links import classify
from xbot.media import netguard, tempfiles
from xbot.media.mp4info import Mp4Info
from xbot.media.tempfiles import DISK_MARGIN
from xbot.sending.destination import Destination
from xbot.sources import ytdlp
from xbot.sources.ytdlp import VideoInfo
from xbot.tasks.other_sites import (
    X_ONLY,
    OtherSites,
    fill_from_header,
    sentence_for,
    too_large_sentence,
)
from xbot.tasks.payloads import DELIVER as KIND
from xbot.tasks.payloads import DeliverPayload

CHAT = 601
GROUP = -100601


@pytest.fixture
async def h(start_harness: Callable[..., Awaitable[Harness]]) -> Harness:
    return await start_harness(ytdlp_sites="all")


def sites(h: Harness) -> OtherSites:
    other = h.services.delivery.other_sites
    assert isinstance(other, OtherSites)
    return other


def videos(h: Harness, chat: int) -> list[Any]:
    return [c for c in h.api.calls_for("sendVideo", chat) if c.status == 200]


def texts(h: Harness, chat: int) -> list[str]:
    return [m["text"] for m in h.sent(chat) if "text" in m]


def temp_entries(h: Harness) -> list[Path]:
    folder = h.settings.data_dir / "tmp"
    return list(folder.iterdir()) if folder.exists() else []


async def settle(h: Harness, chat: int, text: str, **kw: Any) -> None:
    before = len(h.sent(chat))
    h.api.user_message(chat, text, **kw)
    await h.api.wait_for(lambda: len(h.sent(chat)) > before, 15)
    await h.wait_idle(15)


async def test_a_direct_video_link_becomes_a_video_with_its_metadata(h: Harness) -> None:
    url = h.media.add(
        "/media/clip.mp4",
        mp4_with_header(300_000, width=1280, height=720, duration=7.0, moov_last=True),
        "video/mp4",
    )
    update = h.api.user_message(CHAT, f"look {url}")
    await h.api.wait_for(lambda: videos(h, CHAT), 15)
    await h.wait_idle(10)
    (call,) = videos(h, CHAT)
    assert "video" in call.files, "uploaded, not handed to Telegram as a URL"
    assert (call.params["width"], call.params["height"], call.params["duration"]) == (1280, 720, 7)
    assert call.params["supports_streaming"] is True
    assert f'href="{url}"' in call.params["caption"]
    assert call.params["reply_parameters"]["message_id"] == update["message"]["message_id"]
    assert temp_entries(h) == [], "the temp folder goes with the job"


async def test_a_page_with_an_embedded_video_becomes_that_video(h: Harness) -> None:
    clip = h.media.add(
        "/media/upright.mp4",
        mp4_with_header(200_000, width=720, height=1280, duration=3.0, rotated=True),
        "video/mp4",
    )
    page = h.video_page("upright", clip, title="Filmed upright")
    await settle(h, CHAT, page)
    (call,) = videos(h, CHAT)
    # A phone stores it sideways with a rotation; Telegram needs the size as shown.
    assert (call.params["width"], call.params["height"], call.params["duration"]) == (720, 1280, 3)
    assert "Filmed upright" in call.params["caption"]
    assert f'href="{page}"' in call.params["caption"]
    assert h.media.hits["/media/upright.mp4"] >= 1


async def test_the_sites_own_metadata_title_and_uploader_reach_the_player_and_caption(
    h: Harness,
) -> None:
    clip = h.media.add("/media/plain.mp4", fake_mp4(100_000), "video/mp4")
    page = h.video_page(
        "described",
        clip,
        json_ld={
            "@context": "https://schema.org",
            "@type": "VideoObject",
            "name": "Cats <3 boxes",
            "contentUrl": clip,
            "duration": "PT1M5S",
            "width": 640,
            "height": 360,
            "author": {"@type": "Person", "name": "Bob & Co"},
        },
    )
    await settle(h, CHAT, page)
    (call,) = videos(h, CHAT)
    assert (call.params["width"], call.params["height"], call.params["duration"]) == (640, 360, 65)
    caption = call.params["caption"]
    assert caption.startswith("<b>Bob &amp; Co</b>")
    assert "Cats &lt;3 boxes" in caption


async def test_the_same_video_again_is_sent_by_file_id_without_a_download(h: Harness) -> None:
    url = h.media.add("/media/again.mp4", mp4_with_header(150_000), "video/mp4")
    await settle(h, CHAT, url)
    hits = h.media.hits["/media/again.mp4"]
    await settle(h, CHAT + 1, url)
    (second,) = videos(h, CHAT + 1)
    assert second.files == {}, "no upload: the file_id of the first send"
    assert second.params["video"] == h.sent(CHAT)[-1]["video"]["file_id"]
    assert h.media.hits["/media/again.mp4"] == hits, "the same link: not even the site is asked"
    # Another spelling of the same video (a redirect to it): one look, no download.
    alias = h.media.add("/go/again", b"", redirect_to="/media/again.mp4")
    await settle(h, CHAT + 2, alias)
    (third,) = videos(h, CHAT + 2)
    assert third.files == {}


async def test_over_the_limit_without_content_length_stops_and_says_so(tmp_path: Path) -> None:
    h = await Harness.start(tmp_path / "data", ytdlp_sites="all", upload_limit_mb=1)
    try:
        # 200 MB without a Content-Length: only counting the bytes can stop it.
        url = h.media.add("/media/huge.mp4", big(200 * 2**20), "video/mp4", chunked=True)
        await settle(h, CHAT, url)
        # Counted in bytes, not seconds: the cap plus what sockets buffer, not 200 MB.
        assert h.media.served["/media/huge.mp4"] < 32 * 2**20, "the download stopped at the cap"
        assert videos(h, CHAT) == []
        (sentence,) = texts(h, CHAT)
        assert "1 MB upload limit" in sentence
        assert url in sentence, "the link, so they can open it themselves"
        assert temp_entries(h) == [], "no .part file left behind"
        stats = await h.services.queue.stats(h.clock())
        assert stats.counts_by_state.get("dead", 0) == 0
    finally:
        await h.stop()


async def test_a_video_over_the_clouds_50_mb_goes_to_a_local_bot_api_server(
    tmp_path: Path,
) -> None:
    # XBOT_UPLOAD_LIMIT_MB=80 with the stand-in playing a local Bot API server.
    h = await Harness.start(tmp_path / "data", ytdlp_sites="all", upload_limit_mb=80)
    try:
        size = 60 * 2**20
        url = h.media.add("/media/large.mp4", big(size, prefix=mp4_with_header(4096)), "video/mp4")
        await settle(h, CHAT, url)
        (call,) = videos(h, CHAT)
        assert call.files["video"][1] == size, "uploaded whole"
        assert temp_entries(h) == []
    finally:
        await h.stop()


async def test_a_slow_failure_turns_the_status_message_into_the_sentence(
    tmp_path: Path,
) -> None:
    h = await Harness.start(tmp_path / "data", ytdlp_sites="all", upload_limit_mb=1)
    try:
        other = sites(h)
        other.progress_first, other.progress_every = 0.3, 1.0
        other.source.overrides = {"ratelimit": 1_000_000}  # the cap is reached after ~1 s
        url = h.media.add("/media/slowbig.mp4", big(20 * 2**20), "video/mp4", chunked=True)
        await settle(h, CHAT, url)
        (status,) = [c for c in h.api.calls_for("sendMessage", CHAT) if c.status == 200]
        assert status.params["text"] != texts(h, CHAT)[0], "it said something else first"
        assert texts(h, CHAT) == [too_large_sentence(1, url)], "one message: the status became it"
        assert h.api.calls_for("deleteMessage", CHAT) == []
        assert temp_entries(h) == []
    finally:
        await h.stop()


async def test_the_status_message_and_its_sentence_speak_the_users_language(
    tmp_path: Path,
) -> None:
    """The status line is rendered in the language the task carries, and so is the
    sentence it turns into."""
    h = await Harness.start(tmp_path / "data", ytdlp_sites="all", upload_limit_mb=1)
    try:
        other = sites(h)
        other.progress_first, other.progress_every = 0.3, 1.0
        other.source.overrides = {"ratelimit": 1_000_000}  # the cap is reached after ~1 s
        url = h.media.add("/media/slowru.mp4", big(20 * 2**20), "video/mp4", chunked=True)
        await settle(h, CHAT, url, language_code="ru")
        (status,) = [c for c in h.api.calls_for("sendMessage", CHAT) if c.status == 200]
        ru = translator("ru").gettext
        assert status.params["text"].startswith((ru("Looking at the link…"), ru("Downloading…")))
        assert texts(h, CHAT) == [too_large_sentence(1, url, "ru")]
        assert texts(h, CHAT)[0].startswith("Это видео не укладывается в лимит загрузки 1 МБ")
    finally:
        await h.stop()


async def test_cancelling_a_running_download_at_shutdown_leaves_no_temp_files(h: Harness) -> None:
    sites(h).source.overrides = {"ratelimit": 100_000}  # ~20 s for 2 MB: still running
    url = h.media.add("/media/slow.mp4", fake_mp4(2_000_000), "video/mp4", chunked=True)
    h.api.user_message(CHAT, url)

    def downloading() -> bool:
        return any(p.name.endswith(".part") for e in temp_entries(h) for p in e.iterdir())

    deadline = time.monotonic() + 10
    while not downloading():
        assert time.monotonic() < deadline, "the download never started"
        await asyncio.sleep(0.02)
    started = time.monotonic()
    await h.services.workers.stop(grace=0.0)
    assert time.monotonic() - started < 3, "the thread noticed the cancellation"
    assert temp_entries(h) == []
    (task,) = await h.services.queue.list(chat_id=CHAT)
    assert task.state == "pending", "handed back for the next start, not lost"
    assert videos(h, CHAT) == []


async def test_the_status_message_is_edited_no_more_often_than_the_throttle(h: Harness) -> None:
    other = sites(h)
    other.progress_first, other.progress_every = 0.5, 1.0
    other.source.overrides = {"ratelimit": 400_000}  # ~4 s for 1.6 MB
    url = h.media.add("/media/watched.mp4", mp4_with_header(1_600_000), "video/mp4")
    update = h.api.user_message(CHAT, url)
    await h.api.wait_for(lambda: videos(h, CHAT), 20)
    await h.wait_idle(10)
    (status,) = [c for c in h.api.calls_for("sendMessage", CHAT) if c.status == 200]
    assert status.params["reply_parameters"]["message_id"] == update["message"]["message_id"]
    edits = [c for c in h.api.calls_for("editMessageText", CHAT) if c.status == 200]
    assert len(edits) >= 2, "a download of seconds shows its progress"
    moments = [status.at] + [e.at for e in edits]
    gaps = [b - a for a, b in itertools.pairwise(moments)]
    # Arrival times, not send times: on a loaded machine one request can be
    # delayed and the next not, so allow half the interval. Without a
    # throttle the edits come milliseconds apart (one per progress hook).
    assert min(gaps) >= 0.5, f"edited faster than the throttle: {gaps}"
    shown = [status.params["text"]] + [e.params["text"] for e in edits]
    assert any(t.startswith("Downloading… ") and "% of 1.5 MB" in t for t in shown), shown
    # Deleted once the video went out: only the video remains in the chat.
    assert [c.status for c in h.api.calls_for("deleteMessage", CHAT)] == [200]
    assert ["video" in m for m in h.sent(CHAT)] == [True]


@pytest.mark.parametrize(
    ("route", "expected"),
    [
        ({"status": 404}, ytdlp.GONE),
        ({"status": 403}, ytdlp.REFUSED),
    ],
    ids=["not-found", "forbidden"],
)
async def test_a_site_that_says_no_gets_one_sentence(
    h: Harness, route: dict[str, Any], expected: str
) -> None:
    url = h.media.add("/media/no.mp4", b"no", "video/mp4", **route)
    await settle(h, CHAT, url)
    assert texts(h, CHAT) == [expected]
    stats = await h.services.queue.stats(h.clock())
    assert stats.counts_by_state.get("dead", 0) == 0


async def test_a_failing_site_is_retried_with_its_status_message_gone(h: Harness) -> None:
    url = h.media.add("/media/down.mp4", b"oops", "video/mp4", status=503)
    h.api.user_message(CHAT, url)

    async def retried() -> bool:
        tasks = await h.services.queue.list(chat_id=CHAT)
        return [(t.state, t.attempts) for t in tasks] == [("pending", 1)]

    deadline = time.monotonic() + 15
    while not await retried():
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)
    (task,) = await h.services.queue.list(chat_id=CHAT)
    assert "the site did not answer properly" in (task.last_error or "")
    assert texts(h, CHAT) == [], "nothing said yet: the dead-letter notice comes after the retries"


async def test_links_to_other_sites_are_off_by_default_in_groups(h: Harness) -> None:
    url = h.media.add("/media/group.mp4", fake_mp4(50_000), "video/mp4")
    h.api.user_message(GROUP, url, chat_type="group")
    h.fx.add_post("601", text="x still works", photos=[h.photo("g")])
    await settle(h, GROUP, "https://x.com/a/status/601", chat_type="group")
    assert await h.services.queue.list(chat_id=GROUP, state="done") != []
    assert len(await h.services.queue.list(chat_id=GROUP)) == 1, "only the X link was queued"
    assert h.media.hits["/media/group.mp4"] == 0
    assert texts(h, GROUP) == []


async def test_a_group_that_turned_them_on_gets_videos_and_no_noise(h: Harness) -> None:
    await h.services.chats.set_settings(GROUP, h.clock(), ytdlp=True)
    url = h.media.add("/media/on.mp4", fake_mp4(50_000), "video/mp4")
    await settle(h, GROUP, url, chat_type="group")
    assert len(videos(h, GROUP)) == 1
    page = h.media.add("/pages/none.html", b"<html><body>no video</body></html>", "text/html")
    h.api.user_message(GROUP, page, chat_type="group")

    async def both_done() -> bool:
        return len(await h.services.queue.list(chat_id=GROUP, state="done")) == 2

    deadline = time.monotonic() + 15
    while not await both_done():
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)
    assert h.media.hits["/pages/none.html"] >= 1, "yt-dlp did look at it"
    assert texts(h, GROUP) == [], "an unsupported link is ignored in a group"


@pytest.mark.parametrize(
    ("chat", "chat_type", "said"),
    [(CHAT, "private", [X_ONLY]), (GROUP, "group", [])],
    ids=["private-told", "group-quiet"],
)
async def test_the_chats_choice_holds_when_the_task_runs(
    h: Harness, chat: int, chat_type: str, said: list[str]
) -> None:
    """Turned off after the link was queued (or reached through t.co): not fetched."""
    if chat_type == "private":
        await h.services.chats.set_settings(chat, h.clock(), ytdlp=False)
    else:
        h.api.add_chat(chat, chat_type)
    url = h.media.add("/media/late.mp4", fake_mp4(50_000), "video/mp4")
    link = classify(url, allow_private=True)
    assert link is not None
    payload = DeliverPayload.for_link(link, Destination(chat, chat_type))
    await h.services.queue.enqueue(KIND, payload.to_json(), chat, now=h.clock())
    h.services.workers.wake()
    deadline = time.monotonic() + 10
    while not await h.services.queue.list(chat_id=chat, state="done"):
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)
    assert texts(h, chat) == said
    assert h.media.hits["/media/late.mp4"] == 0


async def test_an_unsupported_link_gets_one_sentence_in_private(h: Harness) -> None:
    page = h.media.add("/pages/plain.html", b"<html><body>words</body></html>", "text/html")
    await settle(h, CHAT, page)
    assert texts(h, CHAT) == [ytdlp.UNSUPPORTED]


async def test_a_name_that_resolves_to_a_private_address_is_refused_before_yt_dlp(
    tmp_path: Path,
) -> None:
    h = await Harness.start(tmp_path / "data", ytdlp_sites="all", allow_private_networks=False)
    try:

        async def resolver(host: str, port: int) -> list[str]:
            return ["127.0.0.1"]  # a public-looking name pointing at us

        sites(h).source.resolver = resolver
        await settle(h, CHAT, f"http://videos.example.com:{h.media.port}/media/secret.mp4")
        assert texts(h, CHAT) == [netguard.BLOCKED_REASON]
        assert h.media.hits["/media/secret.mp4"] == 0
    finally:
        await h.stop()


# --- pure pieces ---------------------------------------------------------------------------


LINK = "https://v.example/1"


@pytest.mark.parametrize(
    ("error", "group", "expected"),
    [
        (TooLarge(ytdlp.OVER_LIMIT), False,
         f"That video does not fit the 50 MB upload limit, so I cannot send it: {LINK}"),
        (TooLarge(ytdlp.NO_FORMAT_FITS), True,
         f"That video does not fit the 50 MB upload limit, so I cannot send it: {LINK}"),
        (PostUnavailable(ytdlp.LOGIN_REQUIRED), True, ytdlp.LOGIN_REQUIRED),
        (PostUnavailable(ytdlp.GEO_BLOCKED), False, ytdlp.GEO_BLOCKED),
        (PostUnavailable(ytdlp.GONE), False, ytdlp.GONE),
        (UnsupportedLink(ytdlp.UNSUPPORTED), False, ytdlp.UNSUPPORTED),
        (UnsupportedLink(ytdlp.UNSUPPORTED), True, None),
        (BlockedAddress(netguard.BLOCKED_REASON), False, netguard.BLOCKED_REASON),
        (BlockedAddress(netguard.BLOCKED_REASON), True, None),
    ],
    ids=["too-large", "too-large-group", "login-group", "geo", "gone", "unsupported-private",
         "unsupported-group-quiet", "blocked-private", "blocked-group-quiet"],
)  # fmt: skip
def test_sentence_for(error: Any, group: bool, expected: str | None) -> None:
    assert sentence_for(error, url=LINK, limit_mb=50, group=group) == expected


@pytest.mark.parametrize(
    ("site", "header", "expected"),
    [
        ((None, None, None), Mp4Info(7.0, 1280, 720), (1280, 720, 7.0)),
        # The file sent (a merged rendition, a step down) is what the player shows.
        ((640, 360, 65.0), Mp4Info(7.0, 1280, 720), (1280, 720, 7.0)),
        ((640, None, None), Mp4Info(None, 1280, 720), (1280, 720, None)),
        ((640, 360, 3.0), Mp4Info(None, 1280, None), (640, 360, 3.0)),
        ((640, None, 3.0), Mp4Info(), (640, None, 3.0)),
    ],
    ids=[
        "header-fills-all",
        "the-file-wins",
        "size-as-a-pair",
        "a-half-size-is-no-size",
        "header-knows-nothing",
    ],
)
def test_fill_from_header(
    site: tuple[int | None, int | None, float | None],
    header: Mp4Info,
    expected: tuple[int | None, int | None, float | None],
) -> None:
    info = VideoInfo(key="k", url=LINK, width=site[0], height=site[1], duration=site[2])
    filled = fill_from_header(info, header)
    assert (filled.width, filled.height, filled.duration) == expected


@pytest.fixture
async def h2mb(start_harness: Callable[..., Awaitable[Harness]]) -> Harness:
    return await start_harness(ytdlp_sites="all", upload_limit_mb=LIMIT_MB)


def _shape(call: Any) -> tuple[int, int, int]:
    return call.params["width"], call.params["height"], call.params["duration"]


async def test_an_hls_link_is_720p_with_its_sound_not_a_false_does_not_fit(
    streams: Streams, h2mb: Harness
) -> None:
    url = serve_hls(h2mb.media, streams)
    await settle(h2mb, CHAT, url)
    (call,) = videos(h2mb, CHAT)
    assert _shape(call) == (1280, 720, 6), "the merged file's own size and length"
    _, size, _ = call.files["video"]
    assert size > streams.videos[720].stat().st_size, "the picture and its sound"
    assert texts(h2mb, CHAT) == [], "no 'does not fit'"
    assert temp_entries(h2mb) == [], "parts and result gone with the job"


async def test_a_chats_quality_has_its_own_cache_entry(streams: Streams, h2mb: Harness) -> None:
    saver = CHAT + 10
    await h2mb.services.chats.set_settings(saver, h2mb.clock(), video_quality="480")
    url = serve_hls(h2mb.media, streams)
    await settle(h2mb, saver, url)
    (small,) = videos(h2mb, saver)
    assert _shape(small) == (854, 480, 6)
    # A chat that wants the best is never sent the 480p copy from the cache ...
    await settle(h2mb, CHAT, url)
    (best,) = videos(h2mb, CHAT)
    assert _shape(best) == (1280, 720, 6)
    assert "video" in best.files, "uploaded: not the 480p file_id"
    # ... and each quality is a cache hit for the next chat that asks for it.
    sent = {q: h2mb.sent(c)[-1]["video"]["file_id"] for q, c in (("480", saver), ("best", CHAT))}
    assert sent["480"] != sent["best"]
    for chat, quality in ((CHAT + 11, "best"), (CHAT + 12, "480")):
        await h2mb.services.chats.set_settings(chat, h2mb.clock(), video_quality=quality)
        await settle(h2mb, chat, url)
        (again,) = videos(h2mb, chat)
        assert again.files == {}, "by file_id, no download"
        assert again.params["video"] == sent[quality]


async def test_a_merge_needs_room_for_its_parts_and_the_result(
    streams: Streams,
    h2mb: Harness,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Room for one file of the upload limit past the margin, not for two.
    limit = h2mb.settings.upload_limit
    free = DISK_MARGIN + limit + limit // 2
    usage = shutil.disk_usage(h2mb.settings.data_dir)
    monkeypatch.setattr(tempfiles.shutil, "disk_usage", lambda _: type(usage)(100 * 2**30, 0, free))
    url = serve_hls(h2mb.media, streams)
    with caplog.at_level(logging.WARNING, logger="xbot.media.tempfiles"):
        h2mb.api.user_message(CHAT, url)
        await eventually(lambda: "disk nearly full" in caplog.text, 15, "the refusal")
    assert videos(h2mb, CHAT) == []
    assert fetched_parts(h2mb) == 0, "put off before a byte was fetched"


def fetched_parts(h: Harness) -> int:
    return sum(n for path, n in h.media.hits.items() if path.endswith(".ts"))
