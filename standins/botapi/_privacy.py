"""Privacy mode in the Bot API stand-in: which group messages Telegram gives the bot.

Every new bot has privacy mode on (@BotFather's ``/setprivacy``), and getMe says so in
``can_read_all_group_messages``. Telegram's rules (the Bot API's "Privacy mode" section
of its bot features page, and @BotFather's own wording), kept here once:

- It applies in groups and supergroups where the bot is not an administrator (an admin
  bot receives every message). Private chats and channels are never filtered, nor are
  service messages (members joining, a group becoming a supergroup…).
- With it on, the bot receives a message that
  - starts with a command meant for it: ``/get@thisbot``, or a bare ``/get`` when no
    other bot is in the group or this bot was the last bot to post there (Telegram's
    rule for several bots: a bare command goes to the bot that spoke last);
  - mentions it (``@thisbot``, or a text mention of its user);
  - replies to one of its own messages, or was sent via it (inline mode).
- Replies come first: a reply to another bot's message is that bot's alone, whatever
  command or mention it holds.
- What it receives carries ``reply_to_message`` in full even when the bot never
  received that message (a ``/get`` sent in reply to someone's link).

`PrivacyMode` owns the other bots of each group; the rest is the state's, under its lock.
What was kept from the bot is recorded in `withheld`, so a test can show that a plain
link never reached it.
"""

from __future__ import annotations

import time

from standins.botapi._chats import ChatInfo
from standins.botapi._state import BotApiState
from standins.botapi._wire import JSON

_SERVICE_KEYS = frozenset(
    {
        "new_chat_members",
        "left_chat_member",
        "new_chat_title",
        "new_chat_photo",
        "delete_chat_photo",
        "group_chat_created",
        "supergroup_chat_created",
        "migrate_to_chat_id",
        "migrate_from_chat_id",
        "pinned_message",
        "forum_topic_created",
        "forum_topic_closed",
        "forum_topic_reopened",
    }
)


def _utf16_slice(text: str, offset: int, length: int) -> str:
    units = text.encode("utf-16-le", "surrogatepass")
    return units[2 * offset : 2 * (offset + length)].decode("utf-16-le", "surrogatepass")


class PrivacyMode:
    """Telegram's privacy-mode filter of group messages (on or off in the state's `bot_user`)."""

    def __init__(self, state: BotApiState) -> None:
        self._state = state
        self._other_bots: dict[int, dict[str, int]] = {}  # chat -> username -> user id
        self._withheld: list[JSON] = []

    @property
    def privacy_mode(self) -> bool:
        with self._state.lock:
            return not self._state.bot_user["can_read_all_group_messages"]

    def set_privacy_mode(self, on: bool) -> None:
        """@BotFather's ``/setprivacy``: getMe reports it, groups are filtered by it."""
        with self._state.lock:
            self._state.bot_user["can_read_all_group_messages"] = not on

    @property
    def withheld(self) -> list[JSON]:
        """Messages users sent in groups that privacy mode kept from the bot, in order."""
        with self._state.lock:
            return list(self._withheld)

    def add_group_bot(self, chat_id: int, username: str, user_id: int | None = None) -> int:
        """Another bot is a member of the group (bare commands may be its, then)."""
        with self._state.lock:
            bots = self._other_bots.setdefault(chat_id, {})
            uid = user_id if user_id is not None else 7_000_000 + len(bots) + 1
            bots[username.lstrip("@").lower()] = uid
            return uid

    def other_bot_message(self, chat_id: int, username: str, text: str) -> JSON:
        """Another bot of the group posts `text`: it is now the last bot that spoke there."""
        with self._state.lock:
            name = username.lstrip("@")
            uid = self._other_bots.get(chat_id, {}).get(name.lower())
            if uid is None:
                uid = self.add_group_bot(chat_id, name)
            chat = self._state.chats.get(chat_id)
            assert chat is not None, "add the chat first"
            msg: JSON = {
                "message_id": self._state.take_message_id(chat_id),
                "date": int(time.time()),
                "chat": chat.as_message_chat(),
                "from": {"id": uid, "is_bot": True, "first_name": name, "username": name},
                "text": text,
            }
            self._state.remember(msg)
            self._state.last_bot[chat_id] = uid
            return msg

    def withhold(self, msg: JSON) -> None:
        with self._state.lock:
            self._withheld.append(msg)

    def delivered_to_bot(self, chat: ChatInfo, msg: JSON) -> bool:
        """Whether Telegram gives this user message to the bot (see the module docstring)."""
        if chat.type not in ("group", "supergroup") or chat.bot_is_admin:
            return True
        if self._state.bot_user["can_read_all_group_messages"]:
            return True
        if _SERVICE_KEYS & msg.keys():
            return True
        me = self._state.bot_id
        replied = msg.get("reply_to_message")
        if replied is not None and not replied.get("forum_topic_created"):
            author = replied.get("from") or {}
            if author.get("is_bot"):
                # Replies come first: a reply to a bot is that bot's alone.
                return bool(author.get("id") == me)
        if (msg.get("via_bot") or {}).get("id") == me:
            return True
        text = str(msg.get("text") or msg.get("caption") or "")
        entities: list[JSON] = msg.get("entities") or msg.get("caption_entities") or []
        return any(self._meant_for_me(chat, text, e) for e in entities)

    def _meant_for_me(self, chat: ChatInfo, text: str, entity: JSON) -> bool:
        kind = entity.get("type")
        my_name = str(self._state.bot_user["username"]).lower()
        if kind == "text_mention":
            return bool((entity.get("user") or {}).get("id") == self._state.bot_user["id"])
        if kind == "mention":
            said = _utf16_slice(text, entity["offset"], entity["length"])
            return said.lstrip("@").lower() == my_name
        if kind != "bot_command" or entity.get("offset") != 0:
            return False
        command = _utf16_slice(text, 0, entity["length"])
        _, at, addressee = command.partition("@")
        if at:
            return addressee.lower() == my_name
        others = self._other_bots.get(chat.id)
        if not others:
            return True
        return self._state.last_bot.get(chat.id) == self._state.bot_id
