"""Image posts of other sites through gallery-dl, REALLY run as a process: the real PTB
client against the Bot API stand-in, gallery-dl against local stand-ins of a Mastodon
instance and a Danbooru instance (set as extra instances by the operator's gallery-dl
config, ``XBOT_GALLERYDL_CONFIG``), the files downloaded by the bot through the guard."""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from standins.gallery_sites import BooruServer, MastodonServer, gallerydl_config
from standins.harness import Harness
from xbot.i18n import translate_reason
from xbot.sources.gallerydl import CRASHED, GONE, JUNK, LOGIN, TOO_SLOW, GalleryDlSource

CHAT = 701
GROUP = -100701
STATUS = "113467211109934826"
FILES = "/system/media_attachments/"


@pytest.fixture
async def sites() -> AsyncIterator[tuple[MastodonServer, BooruServer]]:
    async with MastodonServer() as masto, BooruServer() as booru:
        yield masto, booru


@pytest.fixture
async def h(
    start_harness: Callable[..., Awaitable[Harness]],
    sites: tuple[MastodonServer, BooruServer],
    tmp_path: Path,
) -> Harness:
    config = tmp_path / "gallery-dl.json"
    config.write_text(json.dumps(gallerydl_config(*sites)))
    return await start_harness(gallerydl_config=config)


def gallery(h: Harness) -> GalleryDlSource:
    source = h.services.sources.by_kind["gallery"]
    assert isinstance(source, GalleryDlSource)
    return source


def media_calls(h: Harness, chat: int) -> list[Any]:
    methods = ("sendPhoto", "sendVideo", "sendAnimation", "sendDocument", "sendMediaGroup")
    return [c for c in h.api.calls if c.method in methods and c.chat_id == chat and c.status == 200]


def texts(h: Harness, chat: int) -> list[str]:
    return [m.get("text", "") for m in h.sent(chat) if "text" in m]


async def settle(h: Harness, chat: int, text: str, **message: Any) -> None:
    before = len(h.sent(chat))
    h.api.user_message(chat, text, **message)
    await h.api.wait_for(lambda: len(h.sent(chat)) > before, 30)
    await h.wait_idle(30)


async def test_three_pictures_are_one_album_in_order_with_the_author(
    h: Harness, sites: tuple[MastodonServer, BooruServer]
) -> None:
    masto, _ = sites
    status = masto.add_status(
        STATUS, photos=3, name="Alice A", content="<p>Three <b>pictures</b></p>"
    )
    update = h.api.user_message(CHAT, f"look {masto.status_url(STATUS)}")
    await h.api.wait_for(lambda: media_calls(h, CHAT), 30)
    await h.wait_idle(30)
    (call,) = media_calls(h, CHAT)
    assert call.method == "sendMediaGroup"
    media = call.params["media"]
    assert [m["type"] for m in media] == ["photo", "photo", "photo"]
    # Uploaded (the bot fetched them itself), in the status's order.
    uploaded = [call.files[m["media"].removeprefix("attach://")][2] for m in media]
    expected = [masto.file_bytes(a["url"]) for a in status["media_attachments"]]
    assert uploaded == [hashlib.sha256(data).hexdigest() for data in expected]
    caption = media[0]["caption"]
    assert caption.startswith("<b>Alice A</b> (@alice)")
    assert "Three pictures" in caption
    assert f'href="{masto.status_url(STATUS)}"' in caption
    assert call.params["reply_parameters"]["message_id"] == update["message"]["message_id"]
    assert gallery(h).runs == 1
    assert masto.file_hits(FILES) == 3


async def test_the_same_link_in_another_chat_is_sent_by_file_id(
    h: Harness, sites: tuple[MastodonServer, BooruServer]
) -> None:
    masto, _ = sites
    masto.add_status(STATUS, photos=3)
    await settle(h, CHAT, masto.status_url(STATUS))
    runs, hits, api = gallery(h).runs, masto.file_hits(FILES), masto.hits.total()
    await settle(h, CHAT + 1, masto.status_url(STATUS))
    (call,) = media_calls(h, CHAT + 1)
    assert call.method == "sendMediaGroup"
    assert not call.files, "by file_id: nothing uploaded"
    assert all(not m["media"].startswith(("http", "attach")) for m in call.params["media"])
    assert gallery(h).runs == runs, "no gallery-dl run"
    assert masto.file_hits(FILES) == hits, "no download"
    assert masto.hits.total() == api


async def test_a_booru_post_names_its_artist_and_spoils_a_questionable_rating(
    h: Harness, sites: tuple[MastodonServer, BooruServer]
) -> None:
    _, booru = sites
    booru.add_post(8123456, artist="mitsuki_art", rating="q")
    await settle(h, CHAT, booru.post_url(8123456))
    (call,) = media_calls(h, CHAT)
    assert call.method == "sendPhoto"
    assert call.params["caption"].startswith("<b>mitsuki art</b>")
    assert call.params.get("has_spoiler") in (True, "true"), "spoilers for sensitive posts: on"


@pytest.mark.parametrize(
    ("setup", "sentence"),
    [
        ("missing", GONE),
        ("login_only", LOGIN),
        ("junk", JUNK),
    ],
    ids=["missing", "login-only", "junk"],
)
async def test_what_cannot_be_sent_is_one_sentence(
    h: Harness, sites: tuple[MastodonServer, BooruServer], setup: str, sentence: str
) -> None:
    masto, _ = sites
    if setup != "missing":
        masto.add_status(STATUS)
        setattr(masto, setup, True)
    await settle(h, CHAT, masto.status_url(STATUS))
    assert texts(h, CHAT) == [sentence]
    assert media_calls(h, CHAT) == []
    (task,) = await h.services.queue.list(chat_id=CHAT)
    assert task.state == "done", "answered; not retried"
    assert gallery(h).runs == 1


async def test_a_hang_is_one_sentence_and_is_not_retried(
    h: Harness, sites: tuple[MastodonServer, BooruServer]
) -> None:
    masto, _ = sites
    masto.add_status(STATUS)
    masto.hang = True
    gallery(h).time_limit = 3.0
    await settle(h, CHAT, masto.status_url(STATUS))
    assert texts(h, CHAT) == [TOO_SLOW]
    (task,) = await h.services.queue.list(chat_id=CHAT)
    assert task.state == "done"
    assert gallery(h).runs == 1, "given up on, not retried"


async def test_a_crash_is_one_sentence(
    h: Harness, sites: tuple[MastodonServer, BooruServer]
) -> None:
    masto, _ = sites
    masto.add_status(STATUS)
    gallery(h).memory_limit = 16 * 1024 * 1024  # Python cannot even start in that
    await settle(h, CHAT, masto.status_url(STATUS))
    assert texts(h, CHAT) == [CRASHED]


async def test_a_group_with_other_sites_off_gets_nothing(
    h: Harness, sites: tuple[MastodonServer, BooruServer]
) -> None:
    masto, _ = sites
    masto.add_status(STATUS, photos=3)
    h.api.user_message(GROUP, masto.status_url(STATUS), chat_type="group")
    h.fx.add_post("701", text="x still works", photos=[h.photo("g")])
    await settle(h, GROUP, "https://x.com/a/status/701", chat_type="group")
    assert len(await h.services.queue.list(chat_id=GROUP)) == 1, "only the X link was queued"
    assert gallery(h).runs == 0
    assert masto.hits.total() == 0
    assert len(media_calls(h, GROUP)) == 1


async def test_a_link_gallery_dl_does_not_know_goes_to_yt_dlp(h: Harness) -> None:
    page = h.media.add("/pages/nothing.html", b"<html><body>no media</body></html>", "text/html")
    await settle(h, CHAT, page)
    assert gallery(h).runs == 1, "gallery-dl was asked first"
    assert h.media.hits["/pages/nothing.html"] == 0, "and said no without a request"
    assert texts(h, CHAT) == ["I cannot fetch a video from that link."], "yt-dlp's answer"


# -- every chat's settings, topics, languages --------------------------------------------


async def test_photos_as_files_and_the_caption_template(
    h: Harness, sites: tuple[MastodonServer, BooruServer]
) -> None:
    masto, _ = sites
    masto.add_status(STATUS, photos=2, name="Alice A")
    await h.services.chats.set_settings(CHAT, h.clock(), photos_as_documents=True,
                                        caption_template="{author} — {url}")  # fmt: skip
    await settle(h, CHAT, masto.status_url(STATUS))
    (call,) = media_calls(h, CHAT)
    assert call.method == "sendMediaGroup"
    assert [m["type"] for m in call.params["media"]] == ["document", "document"]
    caption = call.params["media"][0]["caption"]
    assert caption.startswith("Alice A")
    assert masto.status_url(STATUS) in caption
    assert "Three pictures" not in caption, "the template, not the built-in caption"


async def test_a_sensitive_status_is_under_a_spoiler_and_its_gifv_an_animation(
    h: Harness, sites: tuple[MastodonServer, BooruServer]
) -> None:
    masto, _ = sites
    masto.add_status(STATUS, photos=1, gifv=1, sensitive=True)
    await settle(h, CHAT, masto.status_url(STATUS))
    calls = media_calls(h, CHAT)
    assert [c.method for c in calls] == ["sendPhoto", "sendAnimation"], "in the post's order"
    assert all(c.params.get("has_spoiler") in (True, "true") for c in calls)


async def test_answers_stay_in_the_forum_topic_and_speak_the_chats_language(
    h: Harness, sites: tuple[MastodonServer, BooruServer]
) -> None:
    masto, _ = sites
    masto.add_status(STATUS, photos=2)
    forum = -100702
    h.api.add_forum(forum, "Forum")
    topic = h.api.create_topic(forum, "Art")
    await h.services.chats.set_settings(forum, h.clock(), ytdlp=True, language="ru")
    for link in (masto.status_url(STATUS), masto.status_url("1")):  # the second is missing
        h.api.user_message(forum, link, user_id=5, chat_type="supergroup", topic_id=topic)
    await h.api.wait_for(lambda: media_calls(h, forum) and texts(h, forum), 30)
    await h.wait_idle(30)
    sends = [c for c in h.api.calls if c.chat_id == forum and c.method.startswith("send")
             and c.method != "sendChatAction" and c.status == 200]  # fmt: skip
    assert len(sends) == 2
    assert all(c.params["message_thread_id"] == topic for c in sends)
    assert texts(h, forum) == [translate_reason(GONE, "ru")]
    assert texts(h, forum) != [GONE], "translated"


async def test_a_long_run_shows_progress_and_the_status_becomes_nothing(
    h: Harness, sites: tuple[MastodonServer, BooruServer]
) -> None:
    masto, _ = sites
    masto.add_status(STATUS)
    masto.hang = True
    gallery(h).time_limit = 2.5
    h.services.delivery.progress_first = 0.3
    await settle(h, CHAT, masto.status_url(STATUS))
    shown = [m for m in h.api.sent_messages(CHAT, include_deleted=True) if "text" in m]
    assert shown[0]["text"] == "Looking at the link…", "the status message, while it runs"
    assert texts(h, CHAT) == [TOO_SLOW], "deleted when the run ended; the sentence stays"
    assert h.api.calls_for("sendChatAction", CHAT)


async def test_one_run_for_two_chats_asking_at_once(
    h: Harness, sites: tuple[MastodonServer, BooruServer]
) -> None:
    masto, _ = sites
    masto.add_status(STATUS, photos=3)
    for chat in (CHAT, CHAT + 1):
        h.api.user_message(chat, masto.status_url(STATUS))
    await h.api.wait_for(lambda: media_calls(h, CHAT) and media_calls(h, CHAT + 1), 30)
    await h.wait_idle(30)
    assert gallery(h).runs == 1, "single flight: the second waited, then used the cache"
    assert masto.file_hits(FILES) == 3


def _gallerydl_processes(data_dir: Path) -> list[int]:
    """Our gallery-dl processes: their command line names a temp folder in `data_dir`."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if "gallery_dl" in cmdline and str(data_dir) in cmdline and state != "Z":
            found.append(int(proc.name))
    return found


async def test_stopping_the_bot_kills_a_running_gallery_dl(
    h: Harness, sites: tuple[MastodonServer, BooruServer]
) -> None:
    masto, _ = sites
    masto.add_status(STATUS)
    masto.hang = True
    h.api.user_message(CHAT, masto.status_url(STATUS))
    await h.api.wait_for(lambda: masto.hits["/api/v1/statuses/" + STATUS] > 0, 30)
    assert _gallerydl_processes(h.data_dir), "gallery-dl is running, waiting for the site"
    await h.stop_bot()  # SIGTERM's path: running tasks are cancelled after the grace
    assert _gallerydl_processes(h.data_dir) == []


async def test_the_configs_cookies_go_with_the_sites_own_files(
    start_harness: Callable[..., Awaitable[Harness]],
    sites: tuple[MastodonServer, BooruServer],
    tmp_path: Path,
) -> None:
    masto, booru = sites
    config = tmp_path / "with-cookies.json"
    config.write_text(json.dumps(gallerydl_config(masto, booru, cookies={"sid": "s3cret"})))
    h = await start_harness(gallerydl_config=config)
    masto.file_cookie = "sid=s3cret"
    masto.add_status(STATUS, photos=2)
    await settle(h, CHAT, masto.status_url(STATUS))
    (call,) = media_calls(h, CHAT)
    assert call.method == "sendMediaGroup"
    assert masto.refused == 0, "every file was asked for with the session cookie"
    booru.file_cookie = "sid=s3cret"  # another site: the cookie never goes there
    booru.add_post(77)
    await settle(h, CHAT + 1, booru.post_url(77))
    assert booru.refused == 1
    assert media_calls(h, CHAT + 1) == []


async def test_a_gallery_post_is_forwarded_to_the_linked_channel_by_file_id(
    h: Harness, sites: tuple[MastodonServer, BooruServer]
) -> None:
    masto, _ = sites
    channel, user = -1009701, 1701
    h.api.add_chat(channel, "channel", title="My Channel", username="mychan", creator=user)
    await h.services.chats.set_settings(user, h.clock(), channel_id=channel,
                                        channel_title="My Channel")  # fmt: skip
    masto.add_status(STATUS, photos=3, name="Alice A")
    h.api.user_message(user, masto.status_url(STATUS))

    def prompt() -> dict[str, Any] | None:
        found = [m for m in h.sent(user) if "Forward this post" in m.get("text", "")]
        return found[-1] if found else None

    await h.api.wait_for(lambda: prompt() is not None, 30)
    await h.wait_idle(30)  # the prompt's record is written when the task is done
    message = prompt()
    assert message is not None
    rows = message["reply_markup"]["inline_keyboard"]
    data = next(
        b["callback_data"] for row in rows for b in row if b["text"] == "Forward to channel"
    )
    hits = masto.file_hits(FILES)
    h.api.callback_query(user, message["message_id"], data, user)
    await h.api.wait_for(lambda: len(h.sent(channel)) == 3, 30)
    posts = h.sent(channel)
    assert len({p["media_group_id"] for p in posts}) == 1
    assert posts[0]["caption"].startswith("Alice A (@alice)")
    assert masto.file_hits(FILES) == hits, "copied by file_id, nothing downloaded again"


# -- known sites only; operator cookies to their own domains -----------------------------


async def test_known_sites_only_means_no_bare_file(h: Harness) -> None:
    """A link to a file with an image extension (``.bmp``: not yt-dlp's, gallery-dl's
    ``directlink``) is not a known site: nothing is fetched, one sentence."""
    h.media.add("/pics/bare.bmp", b"BM" + b"\0" * 64, "image/bmp")
    await settle(h, CHAT, h.media.url_for("/pics/bare.bmp"))
    assert gallery(h).runs == 1
    assert h.media.hits["/pics/bare.bmp"] == 0, "no bare-file fetch"
    assert media_calls(h, CHAT) == []
    assert texts(h, CHAT) == ["I cannot fetch a video from that link."]


async def test_global_cookies_never_go_to_a_bare_files_host(
    start_harness: Callable[..., Awaitable[Harness]],
    sites: tuple[MastodonServer, BooruServer],
    tmp_path: Path,
) -> None:
    """``all`` lets bare files through; the operator's global ``extractor.cookies`` (a dict:
    no domain) still goes nowhere, least of all to a host a user names."""
    config = tmp_path / "global-cookies.json"
    operator = gallerydl_config(*sites)
    operator["extractor"]["cookies"] = {"sid": "s3cret"}
    config.write_text(json.dumps(operator))
    h = await start_harness(gallerydl_config=config, ytdlp_sites="all")
    h.media.add("/pics/bare.bmp", b"BM" + b"\0" * 64, "image/bmp")
    await settle(h, CHAT, h.media.url_for("/pics/bare.bmp"))
    assert h.media.hits["/pics/bare.bmp"] >= 1, "with all, the bare file is fetched"
    assert h.media.cookies["/pics/bare.bmp"] == 0, "without the operator's cookie"
