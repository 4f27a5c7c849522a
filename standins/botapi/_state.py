"""What the Bot API stand-in knows, in one place: the state every part of the API reads.

`BotApiState` holds the bot, its chats, their messages, the files, the callback
queries and the record of every call. The parts of the API (`_messages`, `_edits`,
`_copies`, `_topics`, `_inline`, `_privacy`, `_updates`, `_builders`, `_referee`) each
take it in their constructor and keep what only they use to themselves.

One re-entrant lock guards it, because tests drive the stand-in from their own thread
while the server runs on its loop; the lock is never held across an await.
"""

from __future__ import annotations

import random
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import attrs

from standins.botapi._chats import ChatInfo, ChatRegistry
from standins.botapi._files import FileStore
from standins.botapi._wire import JSON, Call, Upload

MethodFn = Callable[[JSON, dict[str, Upload]], Awaitable[Any]]
_F = TypeVar("_F", bound=Callable[..., Awaitable[Any]])
_API_NAME = "__botapi_method__"


def api_method(name: str) -> Callable[[_F], _F]:
    """Mark an implementation of the Bot API method `name` (collected by `method_table`)."""

    def mark(fn: _F) -> _F:
        setattr(fn, _API_NAME, name)
        return fn

    return mark


def method_table(*parts: object) -> dict[str, tuple[str, MethodFn]]:
    """lower-case method name -> (canonical name, implementation), over the parts' marks."""
    table: dict[str, tuple[str, MethodFn]] = {}
    for part in parts:
        for attr in dir(type(part)):
            name = getattr(getattr(type(part), attr), _API_NAME, None)
            if isinstance(name, str):
                assert name.lower() not in table, f"{name} implemented twice"
                table[name.lower()] = (name, getattr(part, attr))
    return table


def bot_user(token: str, first_name: str, username: str, *, privacy_mode: bool) -> JSON:
    """The bot's User, as getMe answers (its id is the token's number)."""
    return {
        "id": int(token.split(":", 1)[0]),
        "is_bot": True,
        "first_name": first_name,
        "username": username,
        "can_join_groups": True,
        "can_read_all_group_messages": not privacy_mode,
        "supports_inline_queries": False,
        "can_connect_to_business": False,
        "has_main_web_app": False,
    }


def without_reply(msg: JSON) -> JSON:
    """Telegram nests one level of reply only."""
    return {k: v for k, v in msg.items() if k != "reply_to_message"}


@attrs.define
class BotApiState:
    """The stand-in's Telegram: what every part of the API shares.

    Attributes:
        bot_user: the User dict of the bot (getMe's answer, switches included).
        messages: (chat id, message id) -> the message as it is now (edits applied),
            every message: the bot's, users', service messages.
        deleted: the keys of messages deleted since (they stay in `messages`).
        sent_order: the bot's own messages, oldest first.
        last_bot: chat id -> the user id of the bot that posted there last.
        callbacks: callback query id -> (when it was pressed, the query).
        callback_answers: callback query id -> the answerCallbackQuery parameters.
        calls: every request answered, oldest first (at most `max_records`).
    """

    bot_user: JSON
    chats: ChatRegistry
    files: FileStore
    rng: random.Random
    max_records: int = 200_000
    lock: threading.RLock = attrs.field(factory=threading.RLock)
    messages: dict[tuple[int, int], JSON] = attrs.field(factory=dict)
    deleted: set[tuple[int, int]] = attrs.field(factory=set)
    sent_order: deque[tuple[int, int]] = attrs.field(init=False)
    next_message_id: dict[int, int] = attrs.field(factory=dict)
    last_bot: dict[int, int] = attrs.field(factory=dict)
    callbacks: dict[str, tuple[float, JSON]] = attrs.field(factory=dict)
    callback_answers: dict[str, JSON] = attrs.field(factory=dict)
    calls: deque[Call] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.sent_order = deque(maxlen=self.max_records)
        self.calls = deque(maxlen=self.max_records)

    @property
    def bot_id(self) -> int:
        return int(self.bot_user["id"])

    @property
    def bot_user_short(self) -> JSON:
        """The bot as the ``from`` of its messages."""
        return {k: self.bot_user[k] for k in ("id", "is_bot", "first_name", "username")}

    def take_message_id(self, chat_id: int) -> int:
        n = self.next_message_id.get(chat_id, 1)
        self.next_message_id[chat_id] = n + 1
        return n

    def remember(self, msg: JSON) -> None:
        self.messages[(msg["chat"]["id"], msg["message_id"])] = msg

    def live(self, chat_id: int, message_id: int) -> JSON | None:
        """The message, unless it was never there or was deleted."""
        key = (chat_id, message_id)
        return None if key in self.deleted else self.messages.get(key)

    def new_message(
        self,
        chat: ChatInfo,
        content: JSON,
        *,
        reply: JSON | None = None,
        markup: JSON | None = None,
        extra: JSON | None = None,
    ) -> JSON:
        """A message the bot posts in `chat`, kept and counted as the bot's."""
        msg: JSON = {
            "message_id": self.take_message_id(chat.id),
            "date": int(time.time()),
            "chat": chat.as_message_chat(),
        }
        if chat.type == "channel":
            msg["sender_chat"] = chat.as_message_chat()
        else:
            msg["from"] = self.bot_user_short
        msg.update(content)
        if extra:
            msg.update(extra)
        if reply is not None:
            msg["reply_to_message"] = without_reply(reply)
        if markup is not None:
            msg["reply_markup"] = markup
        self.remember(msg)
        self.sent_order.append((chat.id, msg["message_id"]))
        if chat.type != "private":
            self.last_bot[chat.id] = self.bot_id
        return msg
