"""Forum topics as the Bot API stand-in knows them, and where each message lands.

A forum is a supergroup with ``is_forum``. Its topics have ids (the message id
of their ``forum_topic_created`` service message); General is not a topic and
has no id a bot may name. The rules kept here, as Telegram applies them
(tdlib/telegram-bot-api #447, #472, #798; grammyjs/auto-thread #3):

- A message in topic T carries ``message_thread_id: T`` and ``is_topic_message``;
  one that replies to nothing carries the topic's service message as
  ``reply_to_message``.
- A reply in a supergroup outside any topic (General, or a chat that is not a
  forum) still carries ``message_thread_id``: the id of the thread's first
  message, which is not a topic. Only ``is_topic_message`` tells them apart.
- A send lands in ``message_thread_id`` when given, else in the topic of the
  message it replies to, else in General. A reply target deleted meanwhile
  with ``allow_sending_without_reply`` is dropped: without
  ``message_thread_id`` the message then lands in General.
- ``message_thread_id`` of General (1), of a thread root, of a topic deleted
  or of no topic at all fails with "message thread not found"; a closed
  topic fails with ``TOPIC_CLOSED``.

`ForumTopics` is a mixin of `TelegramModel`; every method runs under the
model's lock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs

from standins._botapi_wire import (
    JSON,
    REPLY_NOT_FOUND,
    as_int,
    bad_request,
    user,
)

if TYPE_CHECKING:
    from standins._botapi_chats import ChatInfo, ChatRegistry

THREAD_NOT_FOUND = "Bad Request: message thread not found"
TOPIC_CLOSED = "Bad Request: TOPIC_CLOSED"
NOT_A_FORUM = "Bad Request: the chat is not a forum"
_ICON_COLOR = 7322096  # the first of Telegram's six topic colours


@attrs.define
class Topic:
    """A forum topic.

    Attributes:
        id: its ``message_thread_id`` (the id of its creation message).
        closed: only administrators with ``can_manage_topics`` may post (the bot has not).
        deleted: gone, with every message in it.
    """

    chat_id: int
    id: int
    name: str
    closed: bool = False
    deleted: bool = False

    def as_forum_topic(self) -> JSON:
        return {"message_thread_id": self.id, "name": self.name, "icon_color": _ICON_COLOR}


def topic_of(message: JSON) -> int | None:
    """The topic a message is in: None for General, a chat without topics, or a reply thread."""
    if message.get("is_topic_message"):
        thread = message.get("message_thread_id")
        return int(thread) if thread is not None else None
    return None


class ForumTopics:
    """Topics per chat, and the placement of every new message (a mixin of `TelegramModel`)."""

    if TYPE_CHECKING:
        _lock: threading.RLock
        _chats: ChatRegistry
        _messages: dict[tuple[int, int], JSON]
        _deleted: set[tuple[int, int]]
        _topics: dict[tuple[int, int], Topic]
        bot_user: JSON

        def _take_message_id(self, chat_id: int) -> int: ...
        def _remember(self, msg: JSON) -> None: ...
        def _reply_target(self, chat: ChatInfo, params: JSON) -> JSON | None: ...

        add_chat: Callable[..., ChatInfo]

    def _init_topics(self) -> None:
        self._topics = {}

    # ------------------------------------------------------------------ test controls

    def add_forum(self, chat_id: int, title: str | None = None, **kwargs: Any) -> ChatInfo:
        """A supergroup with topics (`add_chat` arguments otherwise)."""
        with self._lock:
            chat = self.add_chat(chat_id, "supergroup", title, **kwargs)
            chat.is_forum = True
            # Message id 1 is the forum's start, never a topic: "message_thread_id=1" must fail.
            if self._messages.get((chat_id, 1)) is None:
                self._take_message_id(chat_id)
            return chat

    def create_topic(self, chat_id: int, name: str, *, creator: int = 1001) -> int:
        """A member opens topic `name`; returns its id (``message_thread_id``)."""
        with self._lock:
            chat = self._chats.get(chat_id)
            if chat is None or not chat.is_forum:
                raise bad_request(NOT_A_FORUM)
            topic_id = self._take_message_id(chat_id)
            self._remember(
                {
                    "message_id": topic_id,
                    "date": int(time.time()),
                    "chat": chat.as_message_chat(),
                    "from": user(creator),
                    "message_thread_id": topic_id,
                    "is_topic_message": True,
                    "forum_topic_created": {"name": name, "icon_color": _ICON_COLOR},
                }
            )
            self._topics[(chat_id, topic_id)] = Topic(chat_id, topic_id, name)
            return topic_id

    def close_topic(self, chat_id: int, topic_id: int, closed: bool = True) -> None:
        with self._lock:
            self._topics[(chat_id, topic_id)].closed = closed

    def delete_topic(self, chat_id: int, topic_id: int) -> None:
        """The topic goes, and every message in it (as on Telegram)."""
        with self._lock:
            self._topics[(chat_id, topic_id)].deleted = True
            for key, msg in self._messages.items():
                if key[0] == chat_id and topic_of(msg) == topic_id:
                    self._deleted.add(key)

    def delete_message(self, chat_id: int, message_id: int) -> None:
        """Someone (the sender, an admin, an anti-spam bot) deleted a message meanwhile."""
        with self._lock:
            self._deleted.add((chat_id, message_id))

    def topic(self, chat_id: int, topic_id: int) -> Topic | None:
        with self._lock:
            return self._topics.get((chat_id, topic_id))

    # ------------------------------------------------------------------ placement

    def _place_user_message(
        self, chat: ChatInfo, msg: JSON, topic_id: int | None, reply_to: JSON | None
    ) -> None:
        """Where a member's message sits: its topic, or the reply thread in General."""
        if reply_to is not None:
            target_topic = topic_of(reply_to)
            if target_topic is not None:
                topic_id = target_topic
        if topic_id is not None:
            topic = self._open_topic(chat, topic_id)
            msg["message_thread_id"] = topic.id
            msg["is_topic_message"] = True
            if reply_to is None:
                msg["reply_to_message"] = self._messages[(chat.id, topic.id)]
        elif reply_to is not None and chat.type == "supergroup":
            # A reply thread, not a topic: naming it in a send fails in a forum.
            msg["message_thread_id"] = reply_to.get("message_thread_id", reply_to["message_id"])

    def _placement(self, chat: ChatInfo, params: JSON) -> tuple[JSON | None, JSON]:
        """The reply target (or the topic's service message) and the topic fields of a send."""
        reply = self._reply_target(chat, params)
        raw = params.get("message_thread_id")
        thread = None if raw in (None, "") else as_int(raw, "message thread identifier")
        if thread is not None:
            if not chat.is_forum:
                root = self._messages.get((chat.id, thread))
                if chat.type != "supergroup" or root is None or (chat.id, thread) in self._deleted:
                    raise bad_request(THREAD_NOT_FOUND)
                return reply, {"message_thread_id": thread}
            topic = self._open_topic(chat, thread)
            if reply is not None and topic_of(reply) != topic.id:
                if not _allows_without_reply(params):
                    raise bad_request(REPLY_NOT_FOUND)
                reply = None
        elif reply is not None and chat.is_forum and topic_of(reply) is not None:
            topic = self._open_topic(chat, topic_of(reply) or 0)
        else:
            return reply, {}
        if reply is None:
            reply = self._messages[(chat.id, topic.id)]
        return reply, {"message_thread_id": topic.id, "is_topic_message": True}

    def _check_thread(self, chat: ChatInfo, params: JSON) -> None:
        """For methods that post nothing lasting (sendChatAction): the thread must exist."""
        raw = params.get("message_thread_id")
        if raw in (None, ""):
            return
        thread = as_int(raw, "message thread identifier")
        topic = self._topics.get((chat.id, thread))
        if not chat.is_forum or topic is None or topic.deleted:
            raise bad_request(THREAD_NOT_FOUND)

    def _open_topic(self, chat: ChatInfo, thread: int) -> Topic:
        topic = self._topics.get((chat.id, thread))
        if topic is None or topic.deleted:
            raise bad_request(THREAD_NOT_FOUND)
        if topic.closed:
            raise bad_request(TOPIC_CLOSED)
        return topic

    # ------------------------------------------------------------------ Bot API methods

    async def _m_createForumTopic(self, params: JSON, files: dict[str, Any]) -> Any:
        with self._lock:
            chat = self._chats.require(params)
            name = str(params.get("name", ""))
            if not 1 <= len(name) <= 128:
                raise bad_request("Bad Request: TOPIC_TITLE_EMPTY")
            topic_id = self.create_topic(chat.id, name, creator=int(self.bot_user["id"]))
            return self._topics[(chat.id, topic_id)].as_forum_topic()

    async def _m_closeForumTopic(self, params: JSON, files: dict[str, Any]) -> Any:
        return self._set_closed(params, closed=True)

    async def _m_reopenForumTopic(self, params: JSON, files: dict[str, Any]) -> Any:
        return self._set_closed(params, closed=False)

    async def _m_deleteForumTopic(self, params: JSON, files: dict[str, Any]) -> Any:
        with self._lock:
            chat = self._chats.require(params, posting=False)
            topic = self._existing_topic(chat, params)
            self.delete_topic(chat.id, topic.id)
        return True

    def _set_closed(self, params: JSON, *, closed: bool) -> bool:
        with self._lock:
            chat = self._chats.require(params, posting=False)
            topic = self._existing_topic(chat, params)
            if topic.closed == closed:
                raise bad_request("Bad Request: TOPIC_NOT_MODIFIED")
            topic.closed = closed
        return True

    def _existing_topic(self, chat: ChatInfo, params: JSON) -> Topic:
        if not chat.is_forum:
            raise bad_request(NOT_A_FORUM)
        thread = as_int(params.get("message_thread_id"), "message thread identifier")
        topic = self._topics.get((chat.id, thread))
        if topic is None or topic.deleted:
            raise bad_request(THREAD_NOT_FOUND)
        return topic


def _allows_without_reply(params: JSON) -> bool:
    raw = params.get("reply_parameters")
    if isinstance(raw, dict):
        return bool(raw.get("allow_sending_without_reply"))
    return bool(params.get("allow_sending_without_reply"))


__all__ = [
    "NOT_A_FORUM",
    "THREAD_NOT_FOUND",
    "TOPIC_CLOSED",
    "ForumTopics",
    "Topic",
    "topic_of",
]
