"""One Bot API call per chat at a time, so a 429 is known before the next call goes.

The race is made deterministic with a bot whose calls wait on a gate; the same
rule is checked end to end by the soak ("requests before a chat's retry_after").
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest
import telegram
from telegram.error import RetryAfter

from xbot.destination import Destination
from xbot.errors import RateLimited
from xbot.pacing import Pacer
from xbot.sender import LONG_CALL, OutMedia, Sender

CHAT = 77
TO = Destination(CHAT, "private")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class GatedBot:
    """Answers each call only when its gate opens: with a 429, or a message."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.gate = asyncio.Event()
        self.refuse = True

    async def _answer(self, method: str) -> Any:
        self.calls.append(method)
        await self.gate.wait()
        if self.refuse:
            raise RetryAfter(3)
        photo = telegram.PhotoSize("file-1", "unique-1", 10, 10)
        chat = telegram.Chat(CHAT, "private")
        return telegram.Message(1, None, chat, photo=(photo,))  # type: ignore[arg-type]

    async def send_photo(self, chat_id: int, photo: object, **kw: object) -> Any:
        return await self._answer("sendPhoto")

    send_video = send_animation = send_document = send_photo

    async def send_chat_action(self, chat_id: int, action: str, **kw: object) -> Any:
        return await self._answer("sendChatAction")


async def until_called(bot: GatedBot, n: int) -> None:
    for _ in range(200):
        if len(bot.calls) >= n:
            return
        await asyncio.sleep(0)
    raise AssertionError(f"expected {n} calls, saw {bot.calls}")


def sender(bot: GatedBot, clock: Clock) -> Sender:
    return Sender(cast("telegram.Bot", bot), Pacer(enabled=False, clock=clock))


PHOTO = [OutMedia("photo", "https://media.example/a.jpg", "url")]


async def test_no_chat_action_while_a_send_just_went_out_and_none_after_its_429() -> None:
    bot, clock = GatedBot(), Clock()
    s = sender(bot, clock)
    send = asyncio.create_task(s.send_media(TO, PHOTO, caption=None))
    await until_called(bot, 1)
    await asyncio.wait_for(s.chat_action(TO, "upload_photo"), 1)  # its answer may be a 429
    bot.gate.set()
    with pytest.raises(RateLimited):
        await asyncio.wait_for(send, 1)
    await s.chat_action(TO, "upload_photo")  # and it was: the chat is held
    assert bot.calls == ["sendPhoto"]


async def test_a_send_long_out_is_shown_by_a_chat_action_beside_it() -> None:
    bot, clock = GatedBot(), Clock()
    bot.refuse = False
    s = sender(bot, clock)
    send = asyncio.create_task(s.send_media(TO, PHOTO, caption=None))
    await until_called(bot, 1)
    clock.now += LONG_CALL  # Telegram is fetching the URL: no refusal comes this late
    action = asyncio.create_task(s.chat_action(TO, "upload_photo"))
    await until_called(bot, 2)
    assert bot.calls == ["sendPhoto", "sendChatAction"]
    bot.gate.set()
    await asyncio.wait_for(action, 1)
    await asyncio.wait_for(send, 1)


async def test_a_send_waits_for_a_chat_action_out_and_keeps_its_429() -> None:
    bot, clock = GatedBot(), Clock()
    s = sender(bot, clock)
    action = asyncio.create_task(s.chat_action(TO, "upload_photo"))
    await until_called(bot, 1)
    send = asyncio.create_task(s.send_media(TO, PHOTO, caption=None))
    for _ in range(50):
        await asyncio.sleep(0)
    assert bot.calls == ["sendChatAction"], "the send waits for the action's answer"
    bot.gate.set()  # the action drew a 429 for the chat
    await asyncio.wait_for(action, 1)
    with pytest.raises(RateLimited):
        await asyncio.wait_for(send, 1)
    assert bot.calls == ["sendChatAction"], "nothing goes to the chat inside retry_after"
