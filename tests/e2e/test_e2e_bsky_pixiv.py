"""Bluesky and pixiv links in a chat become the post's media, like X links: the real
PTB client over HTTP against the Bot API stand-in, the Bluesky and pixiv stand-ins,
the real queue on a temp file, real downloads through the SSRF guard."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from standins.bskyapi import did_for
from standins.harness import Harness, mp4_with_header
from standins.media_server import fake_mp4
from xbot.sources import bsky, pixiv

CHAT = 601
ALICE = "alice.bsky.social"
RKEY = "3lbdpylqvrk2c"


def media_calls(h: Harness, chat: int) -> list[Any]:
    methods = ("sendPhoto", "sendVideo", "sendAnimation", "sendDocument", "sendMediaGroup")
    return [c for c in h.api.calls if c.method in methods and c.chat_id == chat]


def ok_media_calls(h: Harness, chat: int) -> list[Any]:
    return [c for c in media_calls(h, chat) if c.status == 200]


def texts(h: Harness, chat: int) -> list[str]:
    return [m.get("text", "") for m in h.sent(chat) if "text" in m]


async def send_and_settle(h: Harness, chat: int, text: str) -> None:
    before = len(h.sent(chat))
    h.api.user_message(chat, text)
    await h.api.wait_for(lambda: len(h.sent(chat)) > before, 15)
    await h.wait_idle(15)


def threads_asked(h: Harness) -> int:
    return h.bsky.hits["/xrpc/app.bsky.feed.getPostThread"]


# -- Bluesky ------------------------------------------------------------------------


async def test_bluesky_images_answer_as_an_album_with_the_caption(harness: Harness) -> None:
    h = harness
    text = "Morning ☀️ photos at example.com/p/2024/no..."
    start = len("Morning ☀️ photos at ".encode())
    facet = {"index": {"byteStart": start, "byteEnd": start + len(b"example.com/p/2024/no...")},
             "features": [{"$type": "app.bsky.richtext.facet#link",
                           "uri": "https://example.com/p/2024/november"}]}  # fmt: skip
    photos = [h.photo("b1"), h.photo("b2")]
    h.bsky.add_post(ALICE, RKEY, name="Alice A", text=text, facets=[facet], images=photos)
    update = h.api.user_message(CHAT, f"https://bsky.app/profile/{ALICE}/post/{RKEY}?ref_src=x")
    await h.api.wait_for(lambda: ok_media_calls(h, CHAT), 10)
    (call,) = ok_media_calls(h, CHAT)
    assert call.method == "sendMediaGroup"
    assert [m["media"] for m in call.params["media"]] == photos
    caption = call.params["media"][0]["caption"]
    assert caption.startswith(f"<b>Alice A</b> (@{ALICE})")
    assert "https://example.com/p/2024/november" in caption  # the facet's link, whole
    assert f'href="https://bsky.app/profile/{ALICE}/post/{RKEY}"' in caption
    assert call.params["reply_parameters"]["message_id"] == update["message"]["message_id"]


async def test_bluesky_did_and_mirror_spellings_share_the_cache_entry(harness: Harness) -> None:
    h = harness
    h.bsky.add_post(ALICE, RKEY, text="once", images=[h.photo("c1")])
    await send_and_settle(h, CHAT, f"https://bsky.app/profile/{ALICE}/post/{RKEY}")
    asked, hits = threads_asked(h), h.media_hits()
    did = did_for(ALICE)
    for n, link in enumerate([f"https://fxbsky.app/profile/{did}/post/{RKEY}",
                              f"https://bskx.app/profile/{ALICE}/post/{RKEY}"]):  # fmt: skip
        await send_and_settle(h, CHAT + 1 + n, link)
        (call,) = ok_media_calls(h, CHAT + 1 + n)
        assert not call.params["photo"].startswith("http"), "answered by file_id"
    assert threads_asked(h) == asked, "a cache hit does not ask the AppView for the post"
    assert h.media_hits() == hits


async def test_bluesky_video_is_uploaded_from_the_pds_with_its_thumbnail(harness: Harness) -> None:
    h = harness
    data = fake_mp4(96 * 1024)
    h.bsky.add_post(ALICE, "3lbvideo12345", text="a clip", video=data)
    await send_and_settle(h, CHAT, f"https://bsky.app/profile/{ALICE}/post/3lbvideo12345")
    (call,) = ok_media_calls(h, CHAT)
    assert call.method == "sendVideo"
    assert call.files["video"][1] == len(data)  # the file itself, uploaded
    assert call.params["thumbnail"].startswith("attach://")
    assert any(name == "thumb.jpg" for name, _, _ in call.files.values())
    assert (call.params["width"], call.params["height"]) == (1280, 720)
    assert "duration" not in call.params  # this file's header names none
    assert h.bsky.hits["/pds/xrpc/com.atproto.sync.getBlob"] == 1
    assert not [p for p in h.bsky.hits if p.endswith(".m3u8")], "the playlist is never fetched"


BOB = "bob.bsky.social"
CHANNEL = -1009601


def prompt_buttons(message: dict[str, Any]) -> dict[str, str]:
    rows = message.get("reply_markup", {}).get("inline_keyboard", [])
    return {b["text"]: b["callback_data"] for row in rows for b in row}


def quote_caption_ok(caption: str, own_rkey: str) -> None:
    """Both authors named, both posts linked, and no "Quoting …" line in the text."""
    assert caption.startswith(f"<b>Alice</b> (@{ALICE})\n\nmine:\n\n↪ quoting "), caption
    assert f"<b>Bob</b> (@{BOB}):\na view" in caption
    assert f'href="https://bsky.app/profile/{BOB}/post/3lbquoted1234"' in caption
    assert f'href="https://bsky.app/profile/{ALICE}/post/{own_rkey}"' in caption
    assert "Quoting" not in caption


async def test_bluesky_quote_names_both_authors_fresh_cached_and_forwarded(
    harness: Harness,
) -> None:
    h = harness
    quoted = h.bsky.build_post(BOB, "3lbquoted1234", name="Bob", text="a view",
                               images=[h.photo("q")])  # fmt: skip
    h.bsky.add_post(ALICE, "3lbquoting123", name="Alice", text="mine:", images=[h.photo("own")],
                    quote=quoted)  # fmt: skip
    h.api.add_chat(CHANNEL, "channel", title="Chan", username="chan", creator=CHAT + 1)
    await h.services.chats.set_settings(CHAT + 1, h.clock(), channel_id=CHANNEL,
                                        channel_title="Chan")  # fmt: skip
    await send_and_settle(h, CHAT, f"https://bsky.app/profile/{ALICE}/post/3lbquoting123")
    (call,) = ok_media_calls(h, CHAT)
    assert call.method == "sendMediaGroup"
    assert [m["media"].rsplit("/", 1)[1] for m in call.params["media"]] == ["own.jpg", "q.jpg"]
    quote_caption_ok(call.params["media"][0]["caption"], "3lbquoting123")

    # The same post again, by its DID on a mirror: from the link cache, both authors kept;
    # this chat has a channel, so the forward prompt follows and the forward keeps them too.
    did = did_for(ALICE)
    h.api.user_message(CHAT + 1, f"https://fxbsky.app/profile/{did}/post/3lbquoting123")
    prompts = lambda: [m for m in h.sent(CHAT + 1) if prompt_buttons(m)]  # noqa: E731
    await h.api.wait_for(prompts, 15)
    await h.wait_idle(15)
    (again,) = ok_media_calls(h, CHAT + 1)
    assert all(not m["media"].startswith("http") for m in again.params["media"]), "file_ids"
    quote_caption_ok(again.params["media"][0]["caption"], "3lbquoting123")
    prompt = prompts()[-1]
    update = h.api.callback_query(CHAT + 1, prompt["message_id"],
                                  prompt_buttons(prompt)["Forward to channel"])  # fmt: skip
    await h.api.wait_for(lambda: update["callback_query"]["id"] in h.api.callback_answers, 5)
    await h.api.wait_for(lambda: h.sent(CHANNEL), 15)
    await h.wait_idle(15)
    (forward,) = [c for c in h.api.calls_for("sendMediaGroup", CHANNEL) if c.status == 200]
    quote_caption_ok(forward.params["media"][0]["caption"], "3lbquoting123")


async def test_bluesky_quote_without_own_media_sends_the_quoted_media(harness: Harness) -> None:
    h = harness
    quoted = h.bsky.build_post(BOB, "3lbquoted1234", name="Bob", text="a view",
                               images=[h.photo("q")])  # fmt: skip
    h.bsky.add_post(ALICE, "3lbquoteonly1", name="Alice", text="mine:", quote=quoted)
    await send_and_settle(h, CHAT, f"https://bsky.app/profile/{ALICE}/post/3lbquoteonly1")
    (call,) = ok_media_calls(h, CHAT)
    assert call.method == "sendPhoto"
    assert call.params["photo"].endswith("/q.jpg")
    quote_caption_ok(call.params["caption"], "3lbquoteonly1")


async def test_bluesky_answers_in_one_sentence(harness: Harness) -> None:
    h = harness
    h.bsky.add_deleted(ALICE, "3lbdeleted123")
    h.bsky.add_blocked(ALICE, "3lbblocked123")
    h.bsky.add_post(ALICE, "3lbtextonly12", name="Alice", text="just words",
                    external="https://example.com/article")  # fmt: skip
    h.bsky.add_post("quiet.bsky.social", "3lbquiet12345", text="x", images=[h.photo("z")],
                    author_labels=["!no-unauthenticated"])  # fmt: skip
    cases = [
        (f"https://bsky.app/profile/{ALICE}/post/3lbdeleted123", bsky.DELETED),
        (f"https://bsky.app/profile/{ALICE}/post/3lbblocked123", bsky.BLOCKED),
        ("https://bsky.app/profile/quiet.bsky.social/post/3lbquiet12345", bsky.SIGNED_IN_ONLY),
        ("https://bsky.app/profile/nobody.example.com/post/3lbnobody1234", bsky.NO_ACCOUNT),
    ]
    for n, (link, sentence) in enumerate(cases):
        await send_and_settle(h, CHAT + n, link)
        assert texts(h, CHAT + n) == [sentence]
        assert not media_calls(h, CHAT + n)
    await send_and_settle(h, CHAT + 9, f"https://bsky.app/profile/{ALICE}/post/3lbtextonly12")
    (answer,) = texts(h, CHAT + 9)
    assert answer.startswith("Alice (@alice.bsky.social)\n\njust words")
    assert not media_calls(h, CHAT + 9), "a link card's thumbnail is not media"


# -- pixiv ----------------------------------------------------------------------------


def image_requests(h: Harness) -> int:
    return sum(
        n for p, n in h.pixiv.hits.items() if p.startswith(("/img-original/", "/img-master/"))
    )


async def test_pixiv_work_is_downloaded_with_the_referer_and_uploaded(harness: Harness) -> None:
    h = harness
    h.pixiv.add_work("120000001", title="夏の空", user=("みつき", "4338012", "mitsuki_art"),
                     tags=["オリジナル", "blue sky"])  # fmt: skip
    await send_and_settle(h, CHAT, "https://www.pixiv.net/en/artworks/120000001")
    (call,) = ok_media_calls(h, CHAT)
    assert call.method == "sendPhoto"
    assert "photo" in call.files, "uploaded: Telegram cannot fetch pixiv's images by URL"
    assert h.pixiv.refused == 0
    caption = call.params["caption"]
    assert caption.startswith(
        "<b>夏の空</b>\n\n<b>みつき</b> (@mitsuki_art)\n\n#オリジナル #blue_sky"
    )
    assert 'href="https://www.pixiv.net/artworks/120000001"' in caption


async def test_pixiv_forty_pages_are_four_albums_in_order_with_one_caption(
    harness: Harness,
) -> None:
    h = harness
    h.pixiv.add_work("120000040", title="Forty", pages=40)
    await send_and_settle(h, CHAT, "https://phixiv.net/artworks/120000040")
    await h.api.wait_for(lambda: len(ok_media_calls(h, CHAT)) == 4, 20)
    albums = ok_media_calls(h, CHAT)
    assert [c.method for c in albums] == ["sendMediaGroup"] * 4
    assert [len(c.params["media"]) for c in albums] == [10, 10, 10, 10]
    names = [a.files[m["media"].removeprefix("attach://")][0] for a in albums
             for m in a.params["media"]]  # fmt: skip
    assert len(names) == 40
    captions = [m for a in albums for m in a.params["media"] if "caption" in m]
    assert len(captions) == 1
    assert captions[0] is albums[0].params["media"][0]
    assert h.pixiv.hits["/ajax/illust/120000040/pages"] == 1
    assert image_requests(h) == 40


async def test_pixiv_original_over_the_photo_limit_sends_the_regular_size(harness: Harness) -> None:
    h = harness
    h.pixiv.add_work("120000002", title="Huge", big_originals=True)
    await send_and_settle(h, CHAT, "https://www.pixiv.net/artworks/120000002")
    (call,) = ok_media_calls(h, CHAT)
    assert call.method == "sendPhoto"
    assert call.files["photo"][1] < 1024 * 1024  # the regular rendition, not the 11 MB original


async def test_pixiv_link_again_is_answered_from_the_cache(harness: Harness) -> None:
    h = harness
    h.pixiv.add_work("120000003", title="Two", pages=2)
    await send_and_settle(h, CHAT, "https://www.pixiv.net/artworks/120000003")
    asked, images = h.pixiv.hits["/ajax/illust/120000003"], image_requests(h)
    await send_and_settle(
        h, CHAT + 1, "https://www.pixiv.net/member_illust.php?mode=medium&illust_id=120000003"
    )
    (call,) = ok_media_calls(h, CHAT + 1)
    assert call.method == "sendMediaGroup"
    assert not call.files
    assert (h.pixiv.hits["/ajax/illust/120000003"], image_requests(h)) == (asked, images)
    assert call.params["media"][0]["caption"].startswith("<b>Two</b>\n\n<b>"), "title first"


async def test_pixiv_answers_in_one_sentence(harness: Harness) -> None:
    h = harness
    h.pixiv.add_work("120000011", x_restrict=1)
    h.pixiv.add_work("120000012", restrict=1)
    cases = [  # without XBOT_PIXIV_SESSION; ugoira: tests/e2e/test_e2e_pixiv_login.py
        ("https://www.pixiv.net/artworks/120000011", pixiv.R18),
        ("https://www.pixiv.net/artworks/120000012", pixiv.MY_PIXIV),
        ("https://www.pixiv.net/artworks/120000099", pixiv.DELETED),
    ]
    for n, (link, sentence) in enumerate(cases):
        await send_and_settle(h, CHAT + n, link)
        assert texts(h, CHAT + n) == [sentence]
        assert not media_calls(h, CHAT + n)
    assert image_requests(h) == 0


async def test_pixiv_page_too_narrow_for_a_photo_goes_as_a_document(harness: Harness) -> None:
    h = harness
    h.pixiv.add_work("120000020", title="Scroll", size=(100, 2500))  # aspect ratio 25
    await send_and_settle(h, CHAT, "https://www.pixiv.net/artworks/120000020")
    (call,) = ok_media_calls(h, CHAT)
    assert call.method == "sendDocument"
    assert h.pixiv.hits["/img-master/img/2024/11/20/10/00/00/120000020_p0_master1200.jpg"] == 0


async def test_a_flaky_appview_or_pixiv_is_retried(harness: Harness) -> None:
    h = harness
    h.bsky.add_post(ALICE, "3lbflaky12345", text="later", images=[h.photo("f")])
    h.pixiv.add_work("120000030")
    h.bsky.fail_next(1)
    h.pixiv.fail_next(1)
    h.api.user_message(CHAT, f"https://bsky.app/profile/{ALICE}/post/3lbflaky12345")
    h.api.user_message(CHAT + 1, "https://www.pixiv.net/artworks/120000030")
    await h.api.wait_for(lambda: ok_media_calls(h, CHAT) and ok_media_calls(h, CHAT + 1), 20)
    assert not texts(h, CHAT)
    assert not texts(h, CHAT + 1)


# -- the rest works unchanged: groups (other sites off there), forum topics ------------

FORUM = -100778


def forum_link(h: Harness, link: str, topic: int) -> None:
    """`link` posted in forum topic `topic` (the stand-in refuses a topic it never made)."""
    h.api.user_message(FORUM, link, user_id=5, chat_type="supergroup", topic_id=topic)


async def test_in_a_group_both_sites_answer_though_other_sites_are_off(harness: Harness) -> None:
    h = harness
    group = -100600
    h.bsky.add_post(ALICE, "3lbgroup12345", text="g", images=[h.photo("g1")])
    h.pixiv.add_work("120000050")
    h.api.user_message(group, f"https://bsky.app/profile/{ALICE}/post/3lbgroup12345",
                       chat_type="supergroup")  # fmt: skip
    h.api.user_message(group, "https://www.pixiv.net/artworks/120000050", chat_type="supergroup")
    await h.api.wait_for(lambda: len(ok_media_calls(h, group)) == 2, 15)
    assert sorted(c.method for c in ok_media_calls(h, group)) == ["sendPhoto", "sendPhoto"]


async def test_answers_stay_in_the_links_forum_topic(harness: Harness) -> None:
    h = harness
    h.api.add_forum(FORUM, "Forum")
    topic = h.api.create_topic(FORUM, "Art")
    h.bsky.add_post(ALICE, "3lbtopic12345", text="t", images=[h.photo("t1"), h.photo("t2")])
    forum_link(h, f"https://bsky.app/profile/{ALICE}/post/3lbtopic12345", topic)
    forum_link(h, "https://www.pixiv.net/artworks/120000098", topic)  # missing: a sentence
    forum_link(h, "https://bsky.app/profile/nobody.example.com/post/3lbnobody1234", topic)
    await h.api.wait_for(lambda: ok_media_calls(h, FORUM) and len(texts(h, FORUM)) == 2, 15)
    sends = [c for c in h.api.calls if c.chat_id == FORUM and c.method.startswith("send")
             and c.method != "sendChatAction" and c.status == 200]  # fmt: skip
    assert len(sends) == 3
    assert all(c.params["message_thread_id"] == topic for c in sends)


async def test_bluesky_video_length_comes_from_the_files_header(harness: Harness) -> None:
    h = harness
    h.bsky.add_post(ALICE, "3lbvideolen12", video=mp4_with_header(64 * 1024, duration=7.0))
    await send_and_settle(h, CHAT, f"https://bsky.app/profile/{ALICE}/post/3lbvideolen12")
    (call,) = ok_media_calls(h, CHAT)
    assert call.params["duration"] == 7


async def test_pixiv_original_over_the_upload_limit_sends_the_regular_size(
    tmp_path: Path,
) -> None:
    h = await Harness.start(tmp_path, upload_limit_mb=5)
    try:
        h.pixiv.add_work("120000060", title="Huge", big_originals=True)  # 11 MB > 5 MB
        await send_and_settle(h, CHAT, "https://www.pixiv.net/artworks/120000060")
        (call,) = ok_media_calls(h, CHAT)
        assert call.method == "sendPhoto"
        assert not texts(h, CHAT), "nothing was left out"
    finally:
        await h.stop()
