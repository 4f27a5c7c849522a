"""The Bot API stand-in's forum topics, driven by the real PTB client over HTTP."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import pytest
import telegram
from telegram import ReplyParameters
from telegram.error import BadRequest
from telegram.request import HTTPXRequest

from standins._botapi_topics import topic_of
from standins._mediabytes import tiny_jpeg
from standins.botapi import BotApiServer

FORUM = -1001234


@pytest.fixture
async def srv() -> AsyncIterator[BotApiServer]:
    async with BotApiServer() as s:
        s.add_forum(FORUM, "Big group")
        yield s


@pytest.fixture
async def bot(srv: BotApiServer) -> AsyncIterator[telegram.Bot]:
    plain = HTTPXRequest(httpx_kwargs={"verify": False})
    async with telegram.Bot(srv.token, base_url=f"{srv.url}/bot", request=plain) as b:
        yield b


def exactly(text: str) -> str:
    return f"^{re.escape(text)}$"


def where(message: telegram.Message) -> int | None:
    """The topic PTB sees a message in: its thread id only if it is a topic message."""
    return message.message_thread_id if message.is_topic_message else None


async def test_a_member_message_in_a_topic_carries_the_topic(srv: BotApiServer) -> None:
    topic = srv.create_topic(FORUM, "Cats")
    update = srv.user_message(FORUM, "hi", user_id=7, topic_id=topic)
    msg = update["message"]
    assert msg["message_thread_id"] == topic
    assert msg["is_topic_message"] is True
    assert msg["chat"]["is_forum"] is True
    # Telegram shows the topic's creation as what a non-reply in a topic answers.
    assert msg["reply_to_message"]["forum_topic_created"]["name"] == "Cats"


async def test_a_reply_in_general_has_a_thread_that_is_not_a_topic(srv: BotApiServer) -> None:
    first = srv.user_message(FORUM, "root", user_id=7)["message"]
    reply = srv.user_message(FORUM, "re", user_id=8, reply_to=first["message_id"])["message"]
    assert reply["message_thread_id"] == first["message_id"]
    assert "is_topic_message" not in reply
    assert topic_of(reply) is None


async def test_topic_ids_never_are_one(srv: BotApiServer) -> None:
    assert srv.create_topic(FORUM, "First") != 1


async def test_a_reply_lands_in_its_targets_topic(srv: BotApiServer, bot: telegram.Bot) -> None:
    topic = srv.create_topic(FORUM, "Cats")
    asked = srv.user_message(FORUM, "link", user_id=7, topic_id=topic)["message"]
    sent = await bot.send_message(
        FORUM, "answer", reply_parameters=ReplyParameters(asked["message_id"])
    )
    assert where(sent) == topic
    assert sent.reply_to_message is not None
    assert sent.reply_to_message.message_id == asked["message_id"]


async def test_a_message_with_thread_id_lands_in_the_topic(
    srv: BotApiServer, bot: telegram.Bot
) -> None:
    topic = srv.create_topic(FORUM, "Cats")
    sent = await bot.send_message(FORUM, "notice", message_thread_id=topic)
    assert where(sent) == topic
    plain = await bot.send_message(FORUM, "elsewhere")
    assert where(plain) is None
    album = await bot.send_media_group(
        FORUM,
        [telegram.InputMediaPhoto(_jpeg()), telegram.InputMediaPhoto(_jpeg())],
        message_thread_id=topic,
    )
    assert [where(m) for m in album] == [topic, topic]


async def test_a_deleted_reply_target_drops_the_reply_and_lands_in_general(
    srv: BotApiServer, bot: telegram.Bot
) -> None:
    topic = srv.create_topic(FORUM, "Cats")
    asked = srv.user_message(FORUM, "link", user_id=7, topic_id=topic)["message"]
    await bot.delete_message(FORUM, asked["message_id"])
    lost = ReplyParameters(asked["message_id"], allow_sending_without_reply=True)
    in_general = await bot.send_message(FORUM, "a", reply_parameters=lost)
    assert where(in_general) is None
    kept = await bot.send_message(FORUM, "b", reply_parameters=lost, message_thread_id=topic)
    assert where(kept) == topic
    with pytest.raises(BadRequest, match=exactly("Message to be replied not found")):
        await bot.send_message(FORUM, "c", reply_parameters=ReplyParameters(asked["message_id"]))


@pytest.mark.parametrize(
    ("thread", "error"),
    [
        ("general", "Message thread not found"),
        ("unknown", "Message thread not found"),
        ("deleted", "Message thread not found"),
        ("reply-thread", "Message thread not found"),
        ("closed", "Topic_closed"),
    ],
    ids=["general-is-1", "unknown", "deleted", "reply-thread-root", "closed"],
)
async def test_sends_to_a_thread_that_is_not_an_open_topic_fail(
    srv: BotApiServer, bot: telegram.Bot, thread: str, error: str
) -> None:
    topic = srv.create_topic(FORUM, "Cats")
    root = srv.user_message(FORUM, "root", user_id=7)["message"]["message_id"]
    thread_id = {"general": 1, "unknown": 99_999, "reply-thread": root}.get(thread, topic)
    if thread == "deleted":
        srv.delete_topic(FORUM, topic)
    if thread == "closed":
        srv.close_topic(FORUM, topic)
    for send in (
        bot.send_message(FORUM, "x", message_thread_id=thread_id),
        bot.send_photo(FORUM, _jpeg(), message_thread_id=thread_id),
    ):
        with pytest.raises(BadRequest, match=f"^{re.escape(error)}$"):
            await send


async def test_a_reply_into_a_closed_topic_fails_too(srv: BotApiServer, bot: telegram.Bot) -> None:
    topic = srv.create_topic(FORUM, "Cats")
    asked = srv.user_message(FORUM, "link", user_id=7, topic_id=topic)["message"]
    srv.close_topic(FORUM, topic)
    with pytest.raises(BadRequest, match=exactly("Topic_closed")):
        await bot.send_message(FORUM, "x", reply_parameters=ReplyParameters(asked["message_id"]))
    srv.close_topic(FORUM, topic, closed=False)
    assert where(await bot.send_message(FORUM, "y", message_thread_id=topic)) == topic


async def test_a_deleted_topic_takes_its_messages(srv: BotApiServer, bot: telegram.Bot) -> None:
    topic = srv.create_topic(FORUM, "Cats")
    await bot.send_message(FORUM, "in the topic", message_thread_id=topic)
    await bot.send_message(FORUM, "in general")
    srv.delete_topic(FORUM, topic)
    assert [m["text"] for m in srv.sent_messages(FORUM)] == ["in general"]


async def test_chat_action_checks_the_thread(srv: BotApiServer, bot: telegram.Bot) -> None:
    topic = srv.create_topic(FORUM, "Cats")
    assert await bot.send_chat_action(FORUM, "typing", message_thread_id=topic)
    with pytest.raises(BadRequest, match=exactly("Message thread not found")):
        await bot.send_chat_action(FORUM, "typing", message_thread_id=1)


async def test_topics_through_the_bot_api_methods(srv: BotApiServer, bot: telegram.Bot) -> None:
    created = await bot.create_forum_topic(FORUM, "News")
    assert srv.topic(FORUM, created.message_thread_id) is not None
    await bot.close_forum_topic(FORUM, created.message_thread_id)
    with pytest.raises(BadRequest, match=exactly("Topic_closed")):
        await bot.send_message(FORUM, "x", message_thread_id=created.message_thread_id)
    await bot.reopen_forum_topic(FORUM, created.message_thread_id)
    await bot.delete_forum_topic(FORUM, created.message_thread_id)
    with pytest.raises(BadRequest, match=exactly("Message thread not found")):
        await bot.send_message(FORUM, "x", message_thread_id=created.message_thread_id)


async def test_thread_ids_outside_forums(srv: BotApiServer, bot: telegram.Bot) -> None:
    with pytest.raises(BadRequest, match=exactly("Message thread not found")):
        await bot.send_message(4242, "x", message_thread_id=5)
    assert (
        "is_forum" not in srv.user_message(-100777, "hi", chat_type="supergroup")["message"]["chat"]
    )


def _jpeg() -> bytes:
    return tiny_jpeg()
