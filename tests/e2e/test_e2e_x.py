"""An X link in a chat becomes the post's media: the real PTB client over HTTP
against the Bot API stand-in, the real queue on a temp file, real downloads."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from standins.harness import Harness

CHAT = 501


def media_calls(h: Harness, chat: int | None = None) -> list[Any]:
    methods = ("sendPhoto", "sendVideo", "sendAnimation", "sendDocument", "sendMediaGroup")
    return [c for c in h.api.calls if c.method in methods and (chat is None or c.chat_id == chat)]


def ok_media_calls(h: Harness, chat: int | None = None) -> list[Any]:
    return [c for c in media_calls(h, chat) if c.status == 200]


async def send_and_settle(h: Harness, chat: int, text: str, **kw: Any) -> None:
    """Send a message and wait until the bot answered and its queue is empty."""
    before = len(h.sent(chat))
    h.api.user_message(chat, text, **kw)
    await h.api.wait_for(lambda: len(h.sent(chat)) > before, 15)
    await h.wait_idle(15)


async def test_photo_post_answers_with_caption_replying_to_the_link(harness: Harness) -> None:
    h = harness
    h.fx.add_post("100", author=("Alice A", "alice"), text="Look <here> & there",
                  photos=[h.photo("a")])  # fmt: skip
    update = h.api.user_message(CHAT, "see https://twitter.com/alice/status/100?s=20")
    await h.api.wait_for(lambda: ok_media_calls(h, CHAT), 10)
    (call,) = ok_media_calls(h, CHAT)
    assert call.method == "sendPhoto"
    caption = call.params["caption"]
    assert caption.startswith("<b>Alice A</b> (@alice)")
    assert "Look &lt;here&gt; &amp; there" in caption
    assert 'href="https://x.com/alice/status/100"' in caption
    assert call.params["parse_mode"] == "HTML"
    reply = call.params["reply_parameters"]
    assert reply["message_id"] == update["message"]["message_id"]


async def test_video_post_and_gif(harness: Harness) -> None:
    h = harness
    h.fx.add_post("101", text="clip", videos=[h.video("v")])
    h.fx.add_post("102", text="loop", gifs=[h.video("g")])
    h.api.user_message(CHAT, "https://x.com/a/status/101 and https://x.com/b/status/102")
    await h.api.wait_for(lambda: len(ok_media_calls(h, CHAT)) == 2, 10)
    assert [c.method for c in ok_media_calls(h, CHAT)] == ["sendVideo", "sendAnimation"]


async def test_post_with_twelve_photos_becomes_two_albums_in_order(harness: Harness) -> None:
    h = harness
    urls = [h.photo(f"p{i}") for i in range(12)]
    h.fx.add_post("103", text="many", photos=urls)
    h.api.user_message(CHAT, "https://x.com/a/status/103")
    await h.api.wait_for(lambda: len(ok_media_calls(h, CHAT)) == 2, 10)
    groups = ok_media_calls(h, CHAT)
    assert [c.method for c in groups] == ["sendMediaGroup", "sendMediaGroup"]
    sent_urls = [m["media"] for c in groups for m in c.params["media"]]
    assert sent_urls == urls
    assert [len(c.params["media"]) for c in groups] == [6, 6]
    assert "caption" in groups[0].params["media"][0]
    assert all("caption" not in m for c in groups for m in c.params["media"][1:])


async def test_url_first_then_upload_when_telegram_cannot_fetch(
    harness_no_url_fetch: Harness,
) -> None:
    h = harness_no_url_fetch
    h.fx.add_post("104", text="upload me", photos=[h.photo("u")])
    h.api.user_message(CHAT, "https://x.com/a/status/104")
    await h.api.wait_for(lambda: ok_media_calls(h, CHAT), 10)
    calls = media_calls(h, CHAT)
    assert [(c.method, c.status) for c in calls] == [("sendPhoto", 400), ("sendPhoto", 200)]
    assert isinstance(calls[0].params["photo"], str)  # the URL Telegram could not fetch
    assert "photo" in calls[1].files  # then the bytes, uploaded


async def test_same_link_again_is_answered_from_cache_without_downloads(
    harness_no_url_fetch: Harness,
) -> None:
    h = harness_no_url_fetch
    h.fx.add_post("105", text="cached", photos=[h.photo("c1"), h.photo("c2")])
    await send_and_settle(h, CHAT, "https://x.com/a/status/105")
    hits, fx_hits = h.media_hits(), sum(h.fx.hits.values())
    calls_before = len(h.api.calls)
    other = CHAT + 1
    await send_and_settle(h, other, "https://fixupx.com/someone/status/105/photo/1")
    assert h.media_hits() == hits, "a cache hit must not download"
    assert sum(h.fx.hits.values()) == fx_hits, "a cache hit must not ask the X API"
    new_sends = [c for c in h.api.calls[calls_before:] if c.method.startswith("send")]
    new_sends = [c for c in new_sends if c.method != "sendChatAction"]
    assert [c.method for c in new_sends] == ["sendMediaGroup"], "one call per album"
    assert all(not m["media"].startswith("http") for m in new_sends[0].params["media"])


async def test_same_link_in_five_chats_at_once_downloads_each_file_once(
    harness_no_url_fetch: Harness,
) -> None:
    h = harness_no_url_fetch
    h.fx.add_post("106", text="popular", photos=[h.photo("x1"), h.photo("x2")])
    chats = [700 + i for i in range(5)]
    for chat in chats:
        h.api.user_message(chat, "https://x.com/a/status/106")
    await h.api.wait_for(lambda: all(ok_media_calls(h, c) for c in chats), 15)
    assert h.media.hits["/media/x1.jpg"] == 1
    assert h.media.hits["/media/x2.jpg"] == 1


async def test_stale_file_id_invalidates_and_refetches(harness: Harness) -> None:
    h = harness
    h.fx.add_post("107", text="stale", photos=[h.photo("s")])
    await send_and_settle(h, CHAT, "https://x.com/a/status/107")
    (first,) = ok_media_calls(h, CHAT)
    file_id = h.sent(CHAT)[-1]["photo"][-1]["file_id"]
    h.api.invalidate_file_id(file_id)
    await send_and_settle(h, CHAT + 1, "https://x.com/a/status/107")
    calls = media_calls(h, CHAT + 1)
    assert [c.status for c in calls] == [400, 200]
    assert calls[0].params["photo"] == file_id
    assert calls[1].params["photo"].startswith("http")  # fetched afresh
    assert first.params["photo"] == calls[1].params["photo"]


@pytest.mark.parametrize(
    ("post", "expected"),
    [
        ({"private": True}, "private"),
        ({"deleted": True}, "deleted"),
        ({"text": "just words, no media"}, "just words, no media"),
    ],
    ids=["private", "deleted", "no-media"],
)
async def test_unavailable_posts_get_one_sentence(
    harness: Harness, post: dict[str, Any], expected: str
) -> None:
    h = harness
    h.fx.add_post("108", **{"text": "", **post})
    await send_and_settle(h, CHAT, "https://x.com/a/status/108")
    (message,) = h.sent(CHAT)
    assert expected in message["text"].lower() or expected in message["text"]
    stats = await h.services.queue.stats(h.clock())
    assert stats.counts_by_state.get("dead", 0) == 0


async def test_one_chats_links_arrive_in_the_order_sent(harness: Harness) -> None:
    h = harness
    for i in range(6):
        h.fx.add_post(str(200 + i), text=f"post {i}", photos=[h.photo(f"o{i}")])
    for i in range(6):
        h.api.user_message(CHAT, f"https://x.com/a/status/{200 + i}")
    await h.api.wait_for(lambda: len(ok_media_calls(h, CHAT)) == 6, 15)
    order = [c.params["caption"] for c in ok_media_calls(h, CHAT)]
    assert [f"post {i}" in cap for i, cap in enumerate(order)] == [True] * 6


async def test_more_than_ten_links_are_capped_with_one_sentence(harness: Harness) -> None:
    h = harness
    for i in range(12):
        h.fx.add_post(str(300 + i), text=f"n{i}", photos=[h.photo(f"n{i}")])
    text = " ".join(f"https://x.com/a/status/{300 + i}" for i in range(12))
    text += " https://twitter.com/a/status/300"  # a duplicate counts once
    await send_and_settle(h, CHAT, text)
    assert len(ok_media_calls(h, CHAT)) == 10
    notes = [m["text"] for m in h.sent(CHAT) if "text" in m]
    assert len(notes) == 1
    assert "skipped 2" in notes[0]


async def test_rate_limit_storm_every_link_once_and_never_early(harness: Harness) -> None:
    h = harness
    h.api.set_rate_limit_storm(0.3, retry_after_range=(1, 2), seed=7)
    chats = [900 + i for i in range(4)]
    n = 0
    for _ in range(3):
        for chat in chats:
            pid = str(400 + n)
            h.fx.add_post(pid, text=f"storm {pid}", photos=[h.photo(f"st{pid}")])
            h.api.user_message(chat, f"https://x.com/a/status/{pid}")
            n += 1
    await h.api.wait_for(lambda: len(ok_media_calls(h)) == n, 60)
    await h.wait_idle(30)
    captions = [c.params["caption"] for c in ok_media_calls(h)]
    for i in range(n):
        assert sum(f"storm {400 + i}" in cap for cap in captions) == 1
    assert h.api.early_requests == []
    assert any(c.status == 429 for c in h.api.calls), "the storm must have hit"
    stats = await h.services.queue.stats(h.clock())
    assert stats.counts_by_state.get("dead", 0) == 0


async def test_media_on_a_private_address_is_refused_when_not_allowed(tmp_path: Any) -> None:
    h = await Harness.start(tmp_path / "d", allow_url_fetch=False, allow_private_networks=False)
    try:
        h.fx.add_post("109", text="ssrf", photos=[h.photo("secret")])
        await send_and_settle(h, CHAT, "https://x.com/a/status/109")
        assert h.media.hits["/media/secret.jpg"] == 0, "the guard must stop us before connecting"
        (message,) = [m for m in h.sent(CHAT) if "text" in m]
        assert "could not deliver" in message["text"]
    finally:
        await h.stop()


JUNK: list[dict[str, Any]] = [
    {"message": {"message_id": 1, "date": 0, "chat": {"id": 1, "type": "private"}, "text": ""}},
    {"message": {"message_id": 2, "date": 0, "chat": {"id": 1, "type": "private"},
                 "text": "x", "entities": [{"type": "url", "offset": 5, "length": 90}]}},
    {"message": {"message_id": 3, "date": 0, "chat": {"id": 1, "type": "private"},
                 "sticker": {"file_id": "s", "file_unique_id": "u", "width": 1, "height": 1,
                             "is_animated": False, "is_video": False, "type": "regular"}}},
    {"edited_message": {"message_id": 4, "date": 0, "chat": {"id": 1, "type": "private"},
                        "text": "https://x.com/a/status/1", "edit_date": 1}},
    {"callback_query": {"id": "1", "from": {"id": 1, "is_bot": False, "first_name": "a"},
                        "chat_instance": "c", "data": "\x00" * 64}},
    {"inline_query": {"id": "1", "from": {"id": 1, "is_bot": False, "first_name": "a"},
                      "query": "q", "offset": ""}},
    {"my_chat_member": {"chat": {"id": -5, "type": "group", "title": "g"},
                        "from": {"id": 1, "is_bot": False, "first_name": "a"}, "date": 0,
                        "old_chat_member": {"status": "left",
                                            "user": {"id": 9, "is_bot": True, "first_name": "b"}},
                        "new_chat_member": {"status": "member",
                                            "user": {"id": 9, "is_bot": True, "first_name": "b"}}}},
    {"some_future_update": {"x": 1}},
    {"message": {"message_id": 5, "date": 0, "chat": {"id": 1, "type": "private"},
                 "text": "https://x.com/a/status/99999999999999999999999999999"}},
    {"message": {"message_id": 6, "date": 0, "chat": {"id": 1, "type": "private"},
                 "text": "\u202ehttps://x.com/a/status/1\u200b"}},
]  # fmt: skip


async def test_junk_updates_never_produce_a_traceback(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    h = harness
    caplog.set_level(logging.INFO)
    for i in range(200):
        update = json.loads(json.dumps(JUNK[i % len(JUNK)]))
        h.api.inject_update(update)
    h.fx.add_post("110", text="alive", photos=[h.photo("alive")])
    h.api.user_message(CHAT, "https://x.com/a/status/110")
    await h.api.wait_for(lambda: ok_media_calls(h, CHAT), 15)
    await h.wait_idle(15)
    tracebacks = [r for r in caplog.records if r.exc_info or "Traceback" in r.getMessage()]
    assert tracebacks == []
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == []


async def test_slow_work_shows_the_matching_chat_action_fast_work_none(harness: Harness) -> None:
    h = harness
    h.fx.add_post("120", text="slow photo", photos=[h.photo("slow", delay=1.6)])
    h.fx.add_post("121", text="slow video", videos=[h.video("slowv", delay=1.6)])
    await send_and_settle(h, CHAT, "https://x.com/a/status/120")
    await send_and_settle(h, CHAT + 1, "https://x.com/a/status/121")
    actions = [(c.chat_id, c.params["action"]) for c in h.api.calls_for("sendChatAction")]
    assert (CHAT, "upload_photo") in actions
    assert (CHAT + 1, "upload_video") in actions
    before = len(h.api.calls_for("sendChatAction"))
    await send_and_settle(h, CHAT + 2, "https://x.com/a/status/120")  # a cache hit
    assert len(h.api.calls_for("sendChatAction")) == before, "a quick answer needs no action"


async def test_photos_as_documents_are_uploaded_as_files_and_cached_apart(
    harness: Harness,
) -> None:
    h = harness
    h.fx.add_post("130", text="raw", photos=[h.photo("r1"), h.photo("r2")], videos=[h.video("rv")])
    await h.services.chats.set_settings(CHAT, h.clock(), photos_as_documents=True)
    await send_and_settle(h, CHAT, "https://x.com/a/status/130")
    calls = ok_media_calls(h, CHAT)
    assert [c.method for c in calls] == ["sendMediaGroup", "sendVideo"]
    assert [m["type"] for m in calls[0].params["media"]] == ["document", "document"]
    assert set(calls[0].files) == {m["media"].removeprefix("attach://")
                                   for m in calls[0].params["media"]}  # fmt: skip
    # Another chat that wants photos as photos gets photos, not the files' file_ids.
    await send_and_settle(h, CHAT + 1, "https://x.com/a/status/130")
    (album,) = ok_media_calls(h, CHAT + 1)
    assert [m["type"] for m in album.params["media"]] == ["photo", "photo", "video"]
    # And the files come from the cache the second time: no download.
    hits = h.media_hits()
    await send_and_settle(h, CHAT + 2, "https://x.com/a/status/130")  # photos again
    await h.services.chats.set_settings(CHAT + 3, h.clock(), photos_as_documents=True)
    await send_and_settle(h, CHAT + 3, "https://x.com/a/status/130")
    assert h.media_hits() == hits
    docs = ok_media_calls(h, CHAT + 3)
    assert [m["type"] for m in docs[0].params["media"]] == ["document", "document"]


async def test_the_dead_letter_notice_survives_a_429_on_its_way(harness: Harness) -> None:
    h = harness
    h.fx.add_raw("140", {"code": 200, "message": "OK", "tweet": "junk"})  # no status: permanent
    h.api.fail_next("sendMessage", 429, "Too Many Requests: retry after 1", retry_after=1)
    h.api.user_message(CHAT, "https://x.com/a/status/140")
    await h.api.wait_for(lambda: any("text" in m for m in h.sent(CHAT)), 15)
    await h.wait_idle(15)
    notices = [m["text"] for m in h.sent(CHAT) if "text" in m]
    assert len(notices) == 1
    assert "could not deliver https://x.com/a/status/140" in notices[0]
    assert [c.status for c in h.api.calls_for("sendMessage", CHAT)] == [429, 200]
    assert h.api.early_requests == []


async def test_a_429_keeps_the_chat_in_order(harness: Harness) -> None:
    """The first of two links meets a 429: the chat waits out retry_after, then gets
    them in the order they were sent (the held link did not go to the back)."""
    h = harness
    h.add_post("150", text="first of two", photos=[h.photo("first")])
    h.add_post("151", text="second of two", photos=[h.photo("second")])
    h.api.fail_next("sendPhoto", 429, "Too Many Requests: retry after 1", retry_after=1)
    h.api.user_message(CHAT + 5, "https://x.com/a/status/150 https://x.com/a/status/151")
    await h.api.wait_for(lambda: len(ok_media_calls(h, CHAT + 5)) == 2, 15)
    await h.wait_idle(15)
    calls = h.api.calls_for("sendPhoto", CHAT + 5)
    assert [c.status for c in calls] == [429, 200, 200]
    captions = [str(c.params.get("caption", "")) for c in calls[1:]]
    assert "first of two" in captions[0]
    assert "second of two" in captions[1]
    assert h.api.early_requests == []
