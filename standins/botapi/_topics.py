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

`ForumTopics` owns the topics; the messages are the state's.
"""

from __future__ import annotations

import time
from typing import Any

import attrs

from standins.botapi._chats import ChatInfo
from standins.botapi._state import BotApiState, api_method
from standins.botapi._wire import (
    JSON,
    REPLY_NOT_FOUND,
    Upload,
    as_int,
    as_json,
    bad_request,
    user,
)

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
    """Topics per chat, and the placement of every new message.

    Every method takes the state's lock (re-entrant: the other parts call in holding it).
    """

    def __init__(self, state: BotApiState) -> None:
        self._state = state
        self._topics: dict[tuple[int, int], Topic] = {}

    # ------------------------------------------------------------------ test controls

    def make_forum(self, chat: ChatInfo) -> ChatInfo:
        """`chat` (a supergroup) gets topics."""
        with self._state.lock:
            chat.is_forum = True
            # Message id 1 is the forum's start, never a topic: "message_thread_id=1" must fail.
            if self._state.messages.get((chat.id, 1)) is None:
                self._state.take_message_id(chat.id)
            return chat

    def create_topic(self, chat_id: int, name: str, *, creator: int = 1001) -> int:
        """A member opens topic `name`; returns its id (``message_thread_id``)."""
        state = self._state
        with state.lock:
            chat = state.chats.get(chat_id)
            if chat is None or not chat.is_forum:
                raise bad_request(NOT_A_FORUM)
            topic_id = state.take_message_id(chat_id)
            state.remember(
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
        with self._state.lock:
            self._topics[(chat_id, topic_id)].closed = closed

    def delete_topic(self, chat_id: int, topic_id: int) -> None:
        """The topic goes, and every message in it (as on Telegram)."""
        state = self._state
        with state.lock:
            self._topics[(chat_id, topic_id)].deleted = True
            for key, msg in state.messages.items():
                if key[0] == chat_id and topic_of(msg) == topic_id:
                    state.deleted.add(key)

    def topic(self, chat_id: int, topic_id: int) -> Topic | None:
        with self._state.lock:
            return self._topics.get((chat_id, topic_id))

    # ------------------------------------------------------------------ placement

    def place_user_message(
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
                msg["reply_to_message"] = self._state.messages[(chat.id, topic.id)]
        elif reply_to is not None and chat.type == "supergroup":
            # A reply thread, not a topic: naming it in a send fails in a forum.
            msg["message_thread_id"] = reply_to.get("message_thread_id", reply_to["message_id"])

    def reply_target(self, chat: ChatInfo, params: JSON) -> JSON | None:
        """The message a send replies to (``reply_parameters`` or the older fields)."""
        reply_params = params.get("reply_parameters")
        if reply_params is not None:
            rp = as_json(reply_params, "reply parameters")
            if not isinstance(rp, dict) or "message_id" not in rp:
                raise bad_request("Bad Request: can't parse reply parameters JSON object")
            target_chat = self._state.chats.resolve_id(rp.get("chat_id", chat.id))
            message_id = as_int(rp["message_id"], "message_id")
            allow = bool(rp.get("allow_sending_without_reply"))
        elif params.get("reply_to_message_id") is not None:
            target_chat = chat.id
            message_id = as_int(params["reply_to_message_id"], "reply_to_message_id")
            allow = bool(params.get("allow_sending_without_reply"))
        else:
            return None
        found = self._state.live(target_chat if target_chat is not None else chat.id, message_id)
        if found is None:
            if allow:
                return None
            raise bad_request(REPLY_NOT_FOUND)
        return found

    def placement(self, chat: ChatInfo, params: JSON) -> tuple[JSON | None, JSON]:
        """The reply target (or the topic's service message) and the topic fields of a send."""
        messages = self._state.messages
        reply = self.reply_target(chat, params)
        raw = params.get("message_thread_id")
        thread = None if raw in (None, "") else as_int(raw, "message thread identifier")
        if thread is not None:
            if not chat.is_forum:
                if chat.type != "supergroup" or self._state.live(chat.id, thread) is None:
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
            reply = messages[(chat.id, topic.id)]
        return reply, {"message_thread_id": topic.id, "is_topic_message": True}

    def check_thread(self, chat: ChatInfo, params: JSON) -> None:
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

    @api_method("createForumTopic")
    async def create_forum_topic(self, params: JSON, files: dict[str, Upload]) -> Any:
        with self._state.lock:
            chat = self._state.chats.require(params)
            name = str(params.get("name", ""))
            if not 1 <= len(name) <= 128:
                raise bad_request("Bad Request: TOPIC_TITLE_EMPTY")
            topic_id = self.create_topic(chat.id, name, creator=self._state.bot_id)
            return self._topics[(chat.id, topic_id)].as_forum_topic()

    @api_method("closeForumTopic")
    async def close_forum_topic(self, params: JSON, files: dict[str, Upload]) -> Any:
        return self._set_closed(params, closed=True)

    @api_method("reopenForumTopic")
    async def reopen_forum_topic(self, params: JSON, files: dict[str, Upload]) -> Any:
        return self._set_closed(params, closed=False)

    @api_method("deleteForumTopic")
    async def delete_forum_topic(self, params: JSON, files: dict[str, Upload]) -> Any:
        with self._state.lock:
            chat = self._state.chats.require(params, posting=False)
            topic = self._existing_topic(chat, params)
            self.delete_topic(chat.id, topic.id)
        return True

    def _set_closed(self, params: JSON, *, closed: bool) -> bool:
        with self._state.lock:
            chat = self._state.chats.require(params, posting=False)
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
