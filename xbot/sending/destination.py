"""Where a new message goes: the chat, its kind, the forum topic and the message it answers.

Every task payload carries one (`xbot.tasks.payloads`) and every `Sender` method
that sends something new takes one, so what the bot sends because of a
message in a topic lands in that topic, reply or not. Rules of the Bot API
kept here once:

- A topic is addressed by ``message_thread_id``; General is addressed by
  leaving it out (``message_thread_id=1`` fails with "message thread not
  found"), so General is ``topic_id=None`` (`in_general`).
- A reply goes with ``allow_sending_without_reply``: when the message it
  answers was deleted meanwhile it still goes out, in the topic because
  ``message_thread_id`` is sent beside the reply.

A message that already exists (an edit, a delete) is named by its chat id and
message id alone: a topic or a reply target means nothing there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

import attrs

from xbot.i18n import DEFAULT, normalize

if TYPE_CHECKING:
    from telegram import Message

__all__ = ["CHAT_KINDS", "Destination"]

CHAT_KINDS: Final = ("private", "group", "supergroup", "channel")


def _kind(value: str) -> str:
    # An unknown kind (a future Bot API chat type) is paced like a group: the cautious pace.
    return value if value in CHAT_KINDS else "group"


@attrs.frozen
class Destination:
    """Where a new message goes.

    Attributes:
        chat_id: the chat (negative for groups, supergroups and channels).
        chat_kind: ``private``, ``group``, ``supergroup`` or ``channel`` (Telegram's type).
        topic_id: the forum topic (``message_thread_id``); None for General and for
            chats without topics.
        reply_to: the message this one answers; None for no quote.
        lang: the language every sentence to this chat is in (`xbot.i18n`), decided
            when the task was queued: a worker cannot ask a private user's Telegram
            language later. English for payloads written before languages.
    """

    chat_id: int
    chat_kind: str = attrs.field(converter=_kind)
    topic_id: int | None = None
    reply_to: int | None = None
    lang: str = attrs.field(default=DEFAULT, converter=normalize)

    @property
    def is_group(self) -> bool:
        """A group or supergroup: people talk to each other there, not to the bot."""
        return self.chat_kind in ("group", "supergroup")

    @property
    def paced_as_group(self) -> bool:
        """Held to Telegram's 20 messages a minute: groups, supergroups and channels."""
        return self.chat_kind != "private"

    @property
    def is_private(self) -> bool:
        return self.chat_kind == "private"

    def without_reply(self) -> Destination:
        """The same chat and topic, quoting nothing (a follow-up, a notice to the chat)."""
        return attrs.evolve(self, reply_to=None)

    def replying_to(self, message_id: int | None) -> Destination:
        return attrs.evolve(self, reply_to=message_id)

    def in_general(self) -> Destination:
        """The same chat outside any topic."""
        return attrs.evolve(self, topic_id=None)

    def moved_to(self, chat_id: int) -> Destination:
        """The chat became ``chat_id`` (a group turned supergroup); the rest is kept."""
        if chat_id == self.chat_id:
            return self
        kind = "supergroup" if self.chat_kind == "group" else self.chat_kind
        return attrs.evolve(self, chat_id=chat_id, chat_kind=kind)

    def thread_kwargs(self) -> dict[str, int]:
        """``message_thread_id`` for a send, only for a topic (General takes none)."""
        return {} if self.topic_id is None else {"message_thread_id": self.topic_id}

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"chat_id": self.chat_id, "kind": self.chat_kind}
        if self.topic_id is not None:
            out["topic"] = self.topic_id
        if self.reply_to is not None:
            out["reply_to"] = self.reply_to
        if self.lang != DEFAULT:
            out["lang"] = self.lang
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Destination:
        """The inverse of `to_dict`. Raises ValueError, TypeError or KeyError on junk."""
        if not isinstance(data, Mapping):
            raise TypeError("a destination is an object")
        return cls(
            chat_id=_int(data["chat_id"]),
            chat_kind=str(data.get("kind", "private")),
            topic_id=_opt_int(data.get("topic")),
            reply_to=_opt_int(data.get("reply_to")),
            lang=_opt_str(data.get("lang")),
        )

    @classmethod
    def answering(
        cls, message: Message, *, quote: bool | None = None, lang: str | None = None
    ) -> Destination:
        """Where an answer to ``message`` goes: its chat, its topic, quoting it, in `lang`
        (`xbot.handlers.language.language_of`; English when not given).

        ``quote=None`` quotes as PTB's ``reply_text`` did: everywhere but in
        private chats, where the answer follows the message anyway.
        """
        topic = message.message_thread_id if message.is_topic_message else None
        chat = message.chat
        if quote is None:
            quote = chat.type != "private"
        reply_to = message.message_id if quote else None
        return cls(chat.id, str(chat.type), topic, reply_to, lang)

    @classmethod
    def legacy(cls, chat_id: int, *, chat_type: str | None, reply_to: int | None) -> Destination:
        """A payload written before destinations: its chat from the task row, no topic.

        Without a stored kind, a negative id is a group (what the old notice guessed).
        """
        kind = chat_type if chat_type else ("group" if chat_id < 0 else "private")
        return cls(chat_id, kind, None, reply_to)


def _int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise TypeError(f"not an integer: {value!r}"[:100])
    return int(value)


def _opt_int(value: object) -> int | None:
    return None if value is None else _int(value)


def _opt_str(value: object) -> str | None:
    return value if isinstance(value, str) else None
