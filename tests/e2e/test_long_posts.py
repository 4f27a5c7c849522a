"""Posts longer than a caption, end to end through the real PTB client and the stand-ins.

The media keep a short caption and the whole text follows as text messages in reply
to them, in expandable blockquotes; the same link again sends the same messages from
the link cache without asking X; a crash between two of those messages resends none
already delivered; `/settings` turns it off; an X article's body comes the same way.
"""

from __future__ import annotations

import re
from typing import Any

from standins.harness import Harness
from xbot.sending.caption import utf16_len
from xbot.tasks.delivery import KIND
from xbot.tasks.payloads import DeliverPayload

CHAT = 611
Json = dict[str, Any]
PARAGRAPH = (
    "Queues matter because a job that is written down survives the crash that follows. "
    "Every lease carries a token, and every write is fenced by it. "
)  # 146 characters


def long_text(n: int = 3000) -> str:
    """About `n` characters (whole paragraphs of three sentences pairs each)."""
    paragraphs = []
    while sum(len(p) + 2 for p in paragraphs) < n:
        paragraphs.append(f"Part {len(paragraphs) + 1}. " + (PARAGRAPH * 3).strip())
    return "\n\n".join(paragraphs)


def squeezed(text: str) -> str:
    return re.sub(r"\s", "", text)


def fx_hits(h: Harness, post_id: str) -> int:
    return sum(n for path, n in h.fx.hits.items() if path.endswith(f"/{post_id}"))


def quotes_of(message: Json) -> list[Json]:
    return [e for e in message.get("entities", []) if e["type"] == "expandable_blockquote"]


async def ask(h: Harness, text: str, *, count: int, chat: int = CHAT) -> list[Json]:
    """Send `text`; the `count` messages the bot sent for it, once the queue is idle."""
    before = len(h.sent(chat))
    h.api.user_message(chat, text)
    await h.api.wait_for(lambda: len(h.sent(chat)) >= before + count, 15)
    await h.wait_idle(15)
    new = h.sent(chat)[before:]
    assert len(new) == count, [m.get("text", m.get("caption", ""))[:40] for m in new]
    return new


async def test_a_3000_character_post_with_a_photo_then_the_same_link_from_the_cache(
    harness: Harness,
) -> None:
    h = harness
    text = long_text(3000)
    assert 3000 <= len(text) < 3200
    h.add_post("1301", author=("Ann", "ann"), text=text, photos=[h.photo("long")])
    photo, whole = await ask(h, "https://x.com/ann/status/1301", count=2)
    # The photo with a short caption: the author, the start of the text, the link.
    assert "photo" in photo
    caption = photo["caption"]
    assert caption.startswith("Ann (@ann)")
    assert text[:100] in caption
    assert "https://x.com/ann/status/1301" in caption
    assert utf16_len(caption) < 400
    # Then the whole text, in reply to the photo, in an expandable blockquote.
    assert whole["text"] == text
    assert whole["reply_to_message"]["message_id"] == photo["message_id"]
    assert quotes_of(whole) == [{"type": "expandable_blockquote", "offset": 0,
                                 "length": utf16_len(text)}]  # fmt: skip
    fetched, media_hits = fx_hits(h, "1301"), h.media_hits()
    assert fetched == 1

    # The same link again (another spelling): the same messages, from the cache, no fetch.
    photo2, whole2 = await ask(h, "https://fxtwitter.com/ann/status/1301?s=20", count=2)
    assert fx_hits(h, "1301") == fetched
    assert h.media_hits() == media_hits
    assert photo2["caption"] == caption
    assert photo2["photo"][-1]["file_id"] == photo["photo"][-1]["file_id"]
    assert whole2["text"] == whole["text"]
    assert whole2["entities"] == whole["entities"]
    assert whole2["reply_to_message"]["message_id"] == photo2["message_id"]


async def test_a_text_longer_than_a_message_is_split_and_a_text_post_gets_a_head(
    harness: Harness,
) -> None:
    h = harness
    text = long_text(9000)
    h.add_post("1302", author=("Ann", "ann"), text=text)  # no media
    head, *parts = await ask(h, "https://x.com/ann/status/1302", count=4)
    assert "Ann (@ann)" in head["text"]
    assert "https://x.com/ann/status/1302" in head["text"]
    assert [utf16_len(p["text"]) <= 4096 for p in parts] == [True, True, True]
    assert all(p["reply_to_message"]["message_id"] == head["message_id"] for p in parts)
    # Cut at paragraph breaks: each part ends a sentence, and nothing is lost.
    assert all(p["text"].endswith(".") for p in parts)
    assert squeezed("".join(p["text"] for p in parts)) == squeezed(text)


async def test_a_crash_between_two_text_messages_resends_none_already_delivered(
    harness: Harness,
) -> None:
    h = harness
    text = long_text(9000)
    h.add_post("1303", author=("Ann", "ann"), text=text, photos=[h.photo("crash")])
    # Telegram refuses the third text message once: the task is retried, and sends on.
    sent_before = len(h.sent(CHAT))
    h.api.fail_next("sendMessage", 500, "Internal Server Error", chat_id=CHAT, skip=2)
    h.api.user_message(CHAT, "https://x.com/ann/status/1303")
    await h.api.wait_for(lambda: len(h.sent(CHAT)) >= sent_before + 4, 30)
    await h.wait_idle(30)
    new = h.sent(CHAT)[sent_before:]
    assert ["photo" in m for m in new] == [True, False, False, False]
    assert squeezed("".join(m["text"] for m in new[1:])) == squeezed(text)
    # Nothing was sent twice: three text messages confirmed, the refused one sent again.
    sends = [c.status for c in h.api.calls_for("sendMessage", CHAT)]
    assert sorted(sends) == [200, 200, 200, 500]
    assert len({m["text"] for m in new[1:]}) == 3


async def test_settings_turn_the_whole_text_off(harness: Harness) -> None:
    h = harness
    await h.services.chats.set_settings(CHAT, h.clock(), long_text=False)
    text = long_text(3000)
    h.add_post("1304", author=("Ann", "ann"), text=text, photos=[h.photo("off")])
    (photo,) = await ask(h, "https://x.com/ann/status/1304", count=1)
    assert utf16_len(photo["caption"]) <= 1024
    assert photo["caption"].endswith("https://x.com/ann/status/1304")


async def test_an_x_article_comes_with_its_cover_title_and_whole_body(harness: Harness) -> None:
    h = harness
    cover = h.photo("cover")
    blocks = [
        {"key": "a", "type": "header-one", "text": "Why queues matter", "data": {},
         "entityRanges": [], "inlineStyleRanges": []},
        {"key": "b", "type": "unstyled", "text": "A lease is a promise with a deadline.",
         "data": {}, "entityRanges": [{"key": 0, "offset": 2, "length": 5}],
         "inlineStyleRanges": [{"offset": 28, "length": 8, "style": "Bold"}]},
        {"key": "c", "type": "atomic", "text": " ", "data": {},
         "entityRanges": [{"key": 1, "offset": 0, "length": 1}], "inlineStyleRanges": []},
        {"key": "d", "type": "unordered-list-item", "text": "fenced writes", "data": {},
         "entityRanges": [], "inlineStyleRanges": []},
    ]  # fmt: skip
    entity_map = [
        {"key": "0", "value": {"type": "LINK", "mutability": "MUTABLE",
                               "data": {"url": "https://example.com/lease"}}},
        {"key": "1", "value": {"type": "MEDIA", "mutability": "Immutable",
                               "data": {"entityKey": "1", "mediaItems": []}}},
    ]  # fmt: skip
    article = {
        "id": "99", "title": "Why queues matter", "preview_text": "A lease is a promise",
        "created_at": "2024-03-13T12:00:00Z",
        "cover_media": {"id": "1", "media_key": "3_1", "media_id": "1",
                        "media_info": {"__typename": "ApiImage", "original_img_url": cover,
                                       "original_img_width": 1500, "original_img_height": 600}},
        "content": {"blocks": blocks, "entityMap": entity_map},
        "media_entities": [],
    }  # fmt: skip
    h.add_post("1305", author=("Gina", "gina"), text="", extra={"article": article})
    photo, body = await ask(h, "https://x.com/gina/status/1305", count=2)
    assert photo["photo"]
    assert "📰 Why queues matter" in photo["caption"]
    assert body["text"] == (
        "Why queues matter\n\nA lease is a promise with a deadline.\n\n• fenced writes"
    )
    kinds = {(e["type"], e["offset"], e["length"], e.get("url")) for e in body["entities"]}
    assert ("bold", 0, 17, None) in kinds  # the heading
    assert ("text_link", 21, 5, "https://example.com/lease") in kinds
    assert ("bold", 47, 8, None) in kinds
    assert body["reply_to_message"]["message_id"] == photo["message_id"]


def test_a_payload_written_before_long_texts_still_reads() -> None:
    old = '{"v":1,"url":"https://x.com/a/status/1","key":"x:1","kind":"x","dest":{"chat_id":1}}'
    payload = DeliverPayload.from_json(old)
    assert (payload.texts_sent, payload.text_anchor) == (0, None)
    assert KIND == "deliver"
