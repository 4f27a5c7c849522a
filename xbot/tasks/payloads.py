"""Every task payload and its codec: the one reader of what the ``tasks`` table stores.

A payload is JSON text (the queue never parses it). Each kind has an attrs
value with ``to_json``/``from_json``; ``from_json`` raises `PayloadError` and
nothing else on input it cannot read, so the worker dead-letters it.

Every payload carries the `Destination` its answer goes to. The task row's
``chat_id`` is the truth for the chat (a group that became a supergroup has
its rows moved, not its payloads rewritten): readers given the row's chat id
(``from_task``) get a destination moved there. Payloads written before
destinations existed (``chat_type`` and ``reply_to`` beside the url, the chat
only on the row) still decode, and new payloads keep those two fields too,
so the version before this one can still read a task it finds after a
downgrade.

    kind        value            what it is
    deliver     DeliverPayload   a link to answer with its media
    forward     ForwardPayload   a delivered post to copy to the linked channel
    notice      NoticePayload    a sentence worded when queued (a held reply, "X is down")
                BuriedNotice     a dead letter's notice, worded when it runs: written by
                                 the queue with the dead mark (`xbot.storage.queue`)
    alert       AlertPayload     an alert to one of the bot's admins (xbot.tasks.alerts)

A notice task holds either of its two values; `notice_from_task` alone tells which.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, cast

import attrs

from xbot.errors import PayloadError, reading_payload
from xbot.i18n import DEFAULT, normalize
from xbot.links import Link
from xbot.sending.destination import Destination
from xbot.sending.sent import OUT_KINDS, OutKind, SentItem
from xbot.storage.queue import NOTICE_KIND, BuriedNotice

if TYPE_CHECKING:
    from xbot.storage.queue import Task

__all__ = [
    "ALERT",
    "DELIVER",
    "FORWARD",
    "NOTICE",
    "AlertPayload",
    "BuriedNotice",
    "DeliverPayload",
    "ForwardPayload",
    "NoticePayload",
    "OutKind",
    "SentItem",
    "SentStep",
    "forward_dedup_key",
    "items_data",
    "items_from",
    "notice_from_task",
    "payload_identity",
]

DELIVER: Final = "deliver"
FORWARD: Final = "forward"
NOTICE: Final = NOTICE_KIND  # the queue writes the dead letter's notice: its kind is the queue's
ALERT: Final = "alert"


@attrs.frozen
class SentStep:
    """One confirmed send (a single message or an album) of a delivery, by its index."""

    step: int
    items: tuple[SentItem, ...]


def items_data(items: Sequence[SentItem]) -> list[list[str]]:
    return [[i.kind, i.file_id] for i in items]


def items_from(raw: object) -> tuple[SentItem, ...]:
    if not isinstance(raw, list):
        raise TypeError("items must be a list")
    out = []
    for entry in raw:
        kind, file_id = entry
        if kind not in OUT_KINDS or not isinstance(file_id, str):
            raise ValueError(f"not a sent item: {entry!r}")
        out.append(SentItem(cast("OutKind", kind), file_id))
    return tuple(out)


def _dumps(data: Mapping[str, Any]) -> str:
    return json.dumps(data, separators=(",", ":"))


def _object(raw: str, what: str) -> dict[str, Any]:
    data = json.loads(raw)
    if not isinstance(data, dict) or data.get("v") != 1:
        raise PayloadError(f"unknown {what} payload version")
    return data


def _opt_str(value: object) -> str | None:
    return None if value is None else str(value)


def _opt_int(value: object) -> int | None:
    return None if value is None else int(value)  # type: ignore[call-overload]


def _dest(data: Mapping[str, Any], chat_id: int | None) -> Destination:
    """The stored destination, or one rebuilt from an older payload; moved to the row's chat."""
    if "dest" in data:
        dest = Destination.from_dict(data["dest"])
    else:
        dest = Destination.legacy(
            chat_id if chat_id is not None else 0,
            chat_type=_opt_str(data.get("chat_type")),
            reply_to=_opt_int(data.get("reply_to")),
        )
    return dest if chat_id is None else dest.moved_to(chat_id)


_NOWHERE: Final = Destination(0, "private")  # a default only: every real payload names its own


# --- deliver ------------------------------------------------------------------------------------


@attrs.frozen
class DeliverPayload:
    """What a deliver task carries. `sent` grows as albums are confirmed.

    Attributes:
        url, key, kind, post_id, handle: the link as canonicalised when it arrived.
        dest: where the answer goes; ``dest.reply_to`` is the user's message.
        sent: the send steps Telegram has confirmed, in order.
        skipped: media left out (too large), so the entry is not cached.
        announced: the follow-up after the last album ran (e.g. the forward prompt).
        user_id: who sent the link (None: unknown, an anonymous admin, a channel);
            their forward prompt is theirs to press.
        told_down: the chat was told that X is not answering (said once per task).
        texts_sent: how many text messages of a long post's whole text Telegram has
            confirmed (`xbot.sending.caption_long`), so a retry sends the rest only.
        text_anchor: the message those text messages answer (the post's first media
            message, or its first message when it has no media); None until sent.
        audio: bring the sound alone (an audio message) of another site's video: the
            🎵 button under one, or the chat's "audio only" setting.
    """

    url: str
    key: str
    kind: str
    post_id: str | None = None
    handle: str | None = None
    dest: Destination = _NOWHERE
    sent: tuple[SentStep, ...] = ()
    skipped: int = 0
    announced: bool = False
    user_id: int | None = None
    told_down: bool = False
    texts_sent: int = 0
    text_anchor: int | None = None
    audio: bool = False

    @property
    def reply_to(self) -> int | None:
        return self.dest.reply_to

    @property
    def chat_type(self) -> str:
        return self.dest.chat_kind

    @property
    def is_group(self) -> bool:
        return self.dest.is_group

    def to_json(self) -> str:
        return _dumps(
            {
                "v": 1,
                "url": self.url,
                "key": self.key,
                "kind": self.kind,
                "post_id": self.post_id,
                "handle": self.handle,
                "dest": self.dest.to_dict(),
                # The two fields the version before destinations reads (a downgrade).
                "reply_to": self.dest.reply_to,
                "chat_type": self.dest.chat_kind,
                "sent": [{"step": s.step, "items": items_data(s.items)} for s in self.sent],
                "skipped": self.skipped,
                "announced": self.announced,
                "user_id": self.user_id,
                "told_down": self.told_down,
                "texts_sent": self.texts_sent,
                "text_anchor": self.text_anchor,
                "audio": self.audio,
            }
        )

    @classmethod
    def from_json(cls, raw: str, *, chat_id: int | None = None) -> DeliverPayload:
        """Read a payload; ``chat_id`` (the task row's) moves its destination there."""
        with reading_payload("deliver"):
            data = _object(raw, "deliver")
            sent = tuple(
                SentStep(
                    int(s["step"]),
                    tuple(SentItem(str(k), str(f)) for k, f in s["items"]),  # type: ignore[arg-type]
                )
                for s in data.get("sent", [])
            )
            return cls(
                url=str(data["url"]),
                key=str(data["key"]),
                kind=str(data["kind"]),
                post_id=_opt_str(data.get("post_id")),
                handle=_opt_str(data.get("handle")),
                dest=_dest(data, chat_id),
                sent=sent,
                skipped=int(data.get("skipped", 0)),
                announced=bool(data.get("announced", False)),
                user_id=_opt_int(data.get("user_id")),
                told_down=bool(data.get("told_down", False)),
                texts_sent=int(data.get("texts_sent", 0)),
                text_anchor=_opt_int(data.get("text_anchor")),
                audio=bool(data.get("audio", False)),
            )

    @classmethod
    def from_task(cls, task: Task) -> DeliverPayload:
        return cls.from_json(task.payload, chat_id=task.chat_id)

    @classmethod
    def for_link(
        cls, link: Link, dest: Destination, *, user_id: int | None = None
    ) -> DeliverPayload:
        return cls(
            url=link.url,
            key=link.key,
            kind=link.kind,
            post_id=link.post_id,
            handle=link.handle,
            dest=dest,
            user_id=user_id,
        )

    @property
    def link(self) -> Link:
        """The link as it was canonicalised (a t.co link: as it was expanded)."""
        return Link(self.url, self.key, self.kind, self.post_id, self.handle)

    def steps_sent(self) -> frozenset[int]:
        return frozenset(s.step for s in self.sent)

    def items_sent(self) -> tuple[SentItem, ...]:
        """Every item confirmed so far, in post order."""
        return tuple(i for step in sorted(self.sent, key=lambda s: s.step) for i in step.items)


# --- forward ------------------------------------------------------------------------------------


def forward_dedup_key(chat_id: int, prompt_id: int) -> str:
    return f"fwd:{chat_id}:{prompt_id}"


@attrs.frozen
class ForwardPayload:
    """What a forward task carries.

    Attributes:
        chat_id: the chat of the prompt (the task itself runs on the channel's lane).
        channel_id, channel_title: where it goes, as linked when the button was pressed.
        sent: the send steps Telegram confirmed, so a retry never posts one twice.
        lang: the prompt's language, for the sentence that ends it ("Forwarded to …").
    """

    chat_id: int
    prompt_id: int
    prompt_message_id: int
    channel_id: int
    channel_title: str
    items: tuple[SentItem, ...]
    caption: str
    spoiler: bool = False
    sent: tuple[int, ...] = ()
    lang: str = attrs.field(default=DEFAULT, converter=normalize)

    @property
    def dest(self) -> Destination:
        """The channel: no topic, nothing to quote."""
        return Destination(self.channel_id, "channel")

    @property
    def dedup_key(self) -> str:
        return forward_dedup_key(self.chat_id, self.prompt_id)

    def to_json(self) -> str:
        return _dumps(
            {
                "v": 1,
                "chat_id": self.chat_id,
                "prompt_id": self.prompt_id,
                "prompt_message_id": self.prompt_message_id,
                "channel_id": self.channel_id,
                "channel_title": self.channel_title,
                "items": items_data(self.items),
                "caption": self.caption,
                "spoiler": self.spoiler,
                "sent": list(self.sent),
                "lang": self.lang,
            }
        )

    @classmethod
    def from_json(cls, raw: str) -> ForwardPayload:
        with reading_payload("forward"):
            data = _object(raw, "forward")
            return cls(
                chat_id=int(data["chat_id"]),
                prompt_id=int(data["prompt_id"]),
                prompt_message_id=int(data["prompt_message_id"]),
                channel_id=int(data["channel_id"]),
                channel_title=str(data["channel_title"]),
                items=items_from(data["items"]),
                caption=str(data["caption"]),
                spoiler=bool(data.get("spoiler", False)),
                sent=tuple(int(s) for s in data.get("sent", [])),
                lang=_opt_str(data.get("lang")),
            )


# --- notice -------------------------------------------------------------------------------------


@attrs.frozen
class NoticePayload:
    """A sentence queued for a chat: a dead letter's notice, or a handler's reply held
    by a 429 or by Telegram's unreachability (`xbot.handlers.answers`).

    Attributes:
        text: what is said.
        dest: where it goes.
        for_task: which task it is about (a dead letter's).
        html: the text is Telegram HTML (a reply's may be).
        markup: a reply's buttons, as Telegram's ``InlineKeyboardMarkup`` JSON.
    """

    text: str
    dest: Destination
    for_task: int | None = None
    html: bool = False
    markup: Mapping[str, Any] | None = None

    def to_json(self) -> str:
        data: dict[str, Any] = {
            "v": 1,
            "text": self.text,
            "dest": self.dest.to_dict(),
            "reply_to": self.dest.reply_to,
            "for_task": self.for_task,
        }
        if self.html:
            data["html"] = True
        if self.markup is not None:
            data["markup"] = dict(self.markup)
        return _dumps(data)

    @classmethod
    def from_json(cls, raw: str, *, chat_id: int | None = None) -> NoticePayload:
        """Also reads the version without ``v`` and ``dest`` (text, reply_to, for_task)."""
        with reading_payload("notice"):
            data = json.loads(raw)
            if not isinstance(data, dict) or data.get("v", 1) != 1:
                raise PayloadError("unknown notice payload version")
            markup = data.get("markup")
            return cls(
                text=str(data["text"]),
                dest=_dest(data, chat_id),
                for_task=_opt_int(data.get("for_task")),
                html=data.get("html") is True,
                markup=markup if isinstance(markup, dict) else None,
            )

    @classmethod
    def from_task(cls, task: Task) -> NoticePayload:
        return cls.from_json(task.payload, chat_id=task.chat_id)


def notice_from_task(task: Task) -> NoticePayload | BuriedNotice:
    """What a notice task holds: a sentence worded when it was queued (it has a
    ``text``), or the dead letter's mark the queue wrote (`BuriedNotice`).

    Raises `PayloadError` for anything else."""
    with reading_payload("notice"):
        data = json.loads(task.payload)
        if not isinstance(data, dict):
            raise PayloadError("a notice payload is a JSON object")
        if "text" in data:
            return NoticePayload.from_task(task)
    return BuriedNotice.from_json(task.payload)


@attrs.frozen
class AlertPayload:
    """An alert to one admin, worded when it was queued (in the admin's language).

    Attributes:
        text: what the admin reads.
        condition: which condition (`xbot.tasks.alert_rules.Condition`): the mute button's.
        lang: the language it is in (the button's label follows it).
    """

    text: str
    condition: str
    lang: str = attrs.field(default=DEFAULT, converter=normalize)

    def to_json(self) -> str:
        return _dumps({"v": 1, "text": self.text, "condition": self.condition, "lang": self.lang})

    @classmethod
    def from_json(cls, raw: str) -> AlertPayload:
        with reading_payload("alert"):
            data = json.loads(raw)
            if not isinstance(data, dict) or data.get("v") != 1:
                raise PayloadError("unknown alert payload version")
            return cls(str(data["text"]), str(data["condition"]), str(data.get("lang", DEFAULT)))

    @classmethod
    def from_task(cls, task: Task) -> AlertPayload:
        return cls.from_json(task.payload)


# --- any payload --------------------------------------------------------------------------------

_IDENTITY_KEYS: Final = ("url", "key")


def payload_identity(raw: str) -> dict[str, str]:
    """Best effort: the ``url`` and ``key`` of a payload, for a dead-letter notice.

    Never raises: a payload that does not parse as JSON is searched for the
    ``"url": "…"`` pattern instead, and what is not found is left out.
    """
    found: dict[str, str] = {}
    try:
        data = json.loads(raw)
    except (ValueError, TypeError, RecursionError):
        data = None
    if isinstance(data, dict):
        for name in _IDENTITY_KEYS:
            value = data.get(name)
            if isinstance(value, str | int) and not isinstance(value, bool):
                found[name] = str(value)
        return found
    for name in _IDENTITY_KEYS:
        match = re.search(rf'"{name}"\s*:\s*"((?:[^"\\]|\\.){{0,2000}})"', str(raw))
        if match:
            found[name] = match.group(1)
    return found
