"""Forum topics: what the bot sends because of a message in a topic lands in that topic.

The real PTB client against the Bot API stand-in: the media, a handler's
answer and the chat action carry ``message_thread_id``; a message in General
(no topic) gets none (``message_thread_id=1`` would fail on Telegram).
"""

from __future__ import annotations

import time
from typing import Any

from xbot.standins.harness import Harness

FORUM = -100777
TOPIC = 7


def forum_message(h: Harness, text: str, *, topic: int | None, message_id: int) -> None:
    h.api.add_chat(FORUM, "supergroup")
    msg: dict[str, Any] = {
        "message_id": message_id,
        "date": int(time.time()),
        "chat": {"id": FORUM, "type": "supergroup", "title": "Forum", "is_forum": True},
        "from": {"id": 5, "is_bot": False, "first_name": "Ann"},
        "text": text,
        "entities": [
            {"type": "bot_command" if text.startswith("/") else "url", "offset": 0,
             "length": len(text.split(maxsplit=1)[0])}
        ],
    }  # fmt: skip
    if topic is not None:
        msg.update(message_thread_id=topic, is_topic_message=True)
    h.api.inject_update({"message": msg})


def calls(h: Harness, method: str) -> list[Any]:
    return [c for c in h.api.calls_for(method, FORUM) if c.status == 200]


async def test_media_answer_lands_in_the_links_topic(harness: Harness) -> None:
    h = harness
    h.fx.add_post("700", text="in a topic", photos=[h.photo("t")])
    forum_message(h, "https://x.com/a/status/700", topic=TOPIC, message_id=90)
    await h.api.wait_for(lambda: calls(h, "sendPhoto"), 10)
    (call,) = calls(h, "sendPhoto")
    assert call.params["message_thread_id"] == TOPIC
    assert call.params["reply_parameters"]["message_id"] == 90


async def test_general_gets_no_thread_id(harness: Harness) -> None:
    h = harness
    h.fx.add_post("701", text="in general", photos=[h.photo("g")])
    forum_message(h, "https://x.com/a/status/701", topic=None, message_id=91)
    await h.api.wait_for(lambda: calls(h, "sendPhoto"), 10)
    (call,) = calls(h, "sendPhoto")
    assert "message_thread_id" not in call.params
    assert call.params["reply_parameters"]["message_id"] == 91


async def test_a_commands_answer_stays_in_the_topic(harness: Harness) -> None:
    h = harness
    forum_message(h, "/help", topic=TOPIC, message_id=92)
    await h.api.wait_for(lambda: calls(h, "sendMessage"), 10)
    (call,) = calls(h, "sendMessage")
    assert call.params["message_thread_id"] == TOPIC
    assert call.params["reply_parameters"]["message_id"] == 92


async def test_a_failed_posts_sentence_stays_in_the_topic(harness: Harness) -> None:
    h = harness
    h.fx.add_post("702", private=True)
    forum_message(h, "https://x.com/a/status/702", topic=TOPIC, message_id=93)
    await h.api.wait_for(lambda: calls(h, "sendMessage"), 10)
    (call,) = calls(h, "sendMessage")
    assert call.params["message_thread_id"] == TOPIC
