"""Chats and members as the Bot API stand-in knows them.

Not thread-safe on its own: the state's lock (`_state`) guards every use.
"""

from __future__ import annotations

from typing import Any

import attrs

from standins.botapi._wire import (
    CHAT_NOT_FOUND,
    JSON,
    ApiError,
    admin_rights,
    bad_request,
    user,
)

CHAT_TYPES = ("private", "group", "supergroup", "channel")


@attrs.define
class ChatInfo:
    """A chat the stand-in knows. Private chats with positive ids exist without being added.

    Attributes:
        admins: user ids of administrators (besides `creator` and the bot).
        cannot_post: administrators (in `admins`) of a channel whose
            ``can_post_messages`` is false (they may edit or delete, not post).
        bot_is_admin: the bot is an administrator (in a channel: a member at all).
        bot_can_post: in a channel, the bot may post messages.
        members: user id -> status for everyone else (default: "member" in groups,
            "left" in channels).
        bot_blocked: the user blocked the bot, or the bot was removed from the chat.
        is_forum: a supergroup with topics (`_topics`).
    """

    id: int
    type: str
    title: str | None = None
    username: str | None = None
    first_name: str | None = None
    admins: list[int] = attrs.Factory(list)
    cannot_post: list[int] = attrs.Factory(list)
    creator: int | None = None
    bot_is_admin: bool = True
    bot_can_post: bool = True
    linked_chat_id: int | None = None
    members: dict[int, str] = attrs.Factory(dict)
    bot_blocked: bool = False
    is_forum: bool = False

    def as_message_chat(self) -> JSON:
        """The Chat object as it appears inside a Message."""
        out: JSON = {"id": self.id, "type": self.type}
        if self.type == "private":
            out["first_name"] = self.first_name or f"User{self.id}"
        else:
            out["title"] = self.title or f"Chat {self.id}"
        if self.username:
            out["username"] = self.username
        if self.is_forum:
            out["is_forum"] = True
        return out

    def full_info(self) -> JSON:
        """ChatFullInfo, as getChat answers (PTB 22 needs the three extra fields)."""
        info: JSON = {
            **self.as_message_chat(),
            "accent_color_id": 0,
            "max_reaction_count": 11,
            "accepted_gift_types": {
                "unlimited_gifts": False,
                "limited_gifts": False,
                "unique_gifts": False,
                "premium_subscription": False,
                "gifts_from_channels": False,
            },
        }
        if self.linked_chat_id is not None:
            info["linked_chat_id"] = self.linked_chat_id
        return info


def blocked_text(chat_type: str) -> str:
    if chat_type == "private":
        return "Forbidden: bot was blocked by the user"
    place = {"group": "group chat", "supergroup": "supergroup chat"}.get(chat_type, "channel chat")
    return f"Forbidden: bot was kicked from the {place}"


class ChatRegistry:
    """The chats by id; resolves ``@username`` and applies Telegram's access errors."""

    def __init__(self, bot_user: JSON) -> None:
        self._bot_user = bot_user
        self._chats: dict[int, ChatInfo] = {}

    def add(self, chat: ChatInfo) -> ChatInfo:
        if chat.type not in CHAT_TYPES:
            raise ValueError(f"unknown chat type {chat.type!r}")
        self._chats[chat.id] = chat
        return chat

    def get(self, chat_id: int) -> ChatInfo | None:
        chat = self._chats.get(chat_id)
        if chat is None and chat_id > 0:
            chat = self.add(ChatInfo(id=chat_id, type="private"))
        return chat

    def resolve_id(self, value: Any) -> int | None:
        """A chat_id parameter (int, numeric string or ``@username``) as an int, if known."""
        if isinstance(value, str) and value.startswith("@"):
            name = value[1:].lower()
            for chat in self._chats.values():
                if chat.username and chat.username.lower() == name:
                    return chat.id
            return None
        if isinstance(value, bool) or value is None:
            return None
        if isinstance(value, int):
            return value
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                return None
        return None

    def require(self, params: JSON, key: str = "chat_id", *, posting: bool = True) -> ChatInfo:
        """The target chat, or Telegram's error for a missing, unknown or closed one."""
        if params.get(key) in (None, ""):
            raise bad_request(f"Bad Request: {key} is empty")
        chat_id = self.resolve_id(params[key])
        chat = self.get(chat_id) if chat_id is not None else None
        if chat is None:
            raise bad_request(CHAT_NOT_FOUND)
        if chat.bot_blocked:
            raise ApiError(403, blocked_text(chat.type))
        if posting and chat.type == "channel":
            if not chat.bot_is_admin:
                raise ApiError(403, "Forbidden: bot is not a member of the channel chat")
            if not chat.bot_can_post:
                raise bad_request("Bad Request: need administrator rights in the channel chat")
        return chat

    def member(self, chat: ChatInfo, user_id: int) -> JSON:
        """ChatMember of `user_id` in `chat`, with the fields PTB requires per status."""
        channel = chat.type == "channel"
        bot = {k: self._bot_user[k] for k in ("id", "is_bot", "first_name", "username")}
        if user_id == bot["id"]:
            if chat.bot_is_admin and chat.type != "private":
                rights = admin_rights(
                    channel=channel, can_post=chat.bot_can_post, can_be_edited=False
                )
                return {"user": bot, "status": "administrator", **rights}
            return {"user": bot, "status": "member"}
        who = user(user_id)
        if chat.type == "private":
            return {"user": who, "status": "member" if user_id == chat.id else "left"}
        if user_id == chat.creator:
            return {"user": who, "status": "creator", "is_anonymous": False}
        if user_id in chat.admins:
            can_post = user_id not in chat.cannot_post
            rights = admin_rights(channel=channel, can_post=can_post, can_be_edited=False)
            return {"user": who, "status": "administrator", **rights}
        status = chat.members.get(user_id, "left" if channel else "member")
        if status == "kicked":
            return {"user": who, "status": "kicked", "until_date": 0}
        return {"user": who, "status": status}

    def administrators(self, chat: ChatInfo) -> list[JSON]:
        if chat.type == "private":
            raise bad_request("Bad Request: there are no administrators in the private chat")
        ids = [i for i in [chat.creator, *chat.admins] if i is not None]
        out = [self.member(chat, i) for i in dict.fromkeys(ids)]
        if chat.bot_is_admin:
            out.append(self.member(chat, self._bot_user["id"]))
        return out
