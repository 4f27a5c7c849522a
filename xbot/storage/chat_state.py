"""A chat's state as values: `ChatSettings`, `Record`, and `ChatState`, which holds both.

Pure and frozen; `xbot.storage.state.ChatStore` keeps them in the ``chat_state``
table. Parsing never raises: settings or records that do not parse (an older
shape, a hand edit, corruption) fall back to the defaults, field by field, and
are logged.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Literal

import attrs

log = logging.getLogger(__name__)

CaptionStyle = Literal["full", "short", "none"]
CAPTION_STYLES: tuple[CaptionStyle, ...] = ("full", "short", "none")
# Video from other sites: the best that fits the upload limit, or at most 720p / 480p
# (a data saver for groups); the value is the height cap, "best" none.
VideoQuality = Literal["best", "720", "480"]
VIDEO_QUALITIES: tuple[VideoQuality, ...] = ("best", "720", "480")


def max_height(quality: VideoQuality) -> int | None:
    """The height cap of a video quality; None for the best that fits."""
    return None if quality == "best" else int(quality)


# The record kind of a pending caption edit (one per user per chat).
CAPTION_EDIT = "caption_edit"


def _optional_bool(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not isinstance(value, bool):
        raise TypeError(f"{attribute.name} must be a bool or None, not {value!r}")


def _optional_int(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    # bool is an int in Python; True is no chat id.
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise TypeError(f"{attribute.name} must be an int or None, not {value!r}")


_bool = attrs.validators.instance_of(bool)
_optional_str = attrs.validators.optional(attrs.validators.instance_of(str))


@attrs.frozen
class ChatSettings:
    """What a chat chose in ``/settings``, ``/channel`` and ``/format``.

    Attributes:
        ytdlp: links to other sites (yt-dlp); None follows the chat type
            (see `ytdlp_enabled`).
        caption_style: ``full`` (author, text, link), ``short`` (author and
            link) or ``none``.
        photos_as_documents: send photos as files (original quality).
        delete_original: delete the message with the link (groups, when allowed).
        spoiler_sensitive: hide media of posts marked sensitive under a spoiler.
        edit_before_forward: forwarding to the channel always goes through the
            caption-edit step.
        channel_id, channel_title: the linked channel, if any.
        caption_template: a ``/format`` template, None for the built-in caption.
        language: the language an admin picked in ``/settings`` (groups and
            channels; a private chat follows the user's Telegram language).
        adder_language: the Telegram language of whoever added the bot here,
            the group's language until an admin picks one (`xbot.i18n`).
        operator_language: in an operator's private chat, their Telegram language,
            learnt from their last admin command or alert button: alerts are in it.
        muted_alerts: in an operator's private chat, the alert conditions they
            muted, comma-separated (`xbot.tasks.alert_rules.Condition`).
        long_text: a post whose text does not fit its caption gets the whole text
            as text messages after its media (`xbot.sending.caption_long`).
        video_quality: video from other sites: ``best`` (that fits), ``720`` or
            ``480`` (at most that many lines; `max_height`).
        sensitive_works: R-18 works (pixiv, with the operator's login) are sent
            here; None follows the chat type (see `allows_rating`).
        ytdlp_audio: links to other sites bring their sound alone, as audio messages.
    """

    ytdlp: bool | None = attrs.field(default=None, validator=_optional_bool)
    caption_style: CaptionStyle = attrs.field(
        default="full", validator=attrs.validators.in_(CAPTION_STYLES)
    )
    photos_as_documents: bool = attrs.field(default=False, validator=_bool)
    delete_original: bool = attrs.field(default=False, validator=_bool)
    spoiler_sensitive: bool = attrs.field(default=True, validator=_bool)
    edit_before_forward: bool = attrs.field(default=False, validator=_bool)
    channel_id: int | None = attrs.field(default=None, validator=_optional_int)
    channel_title: str | None = attrs.field(default=None, validator=_optional_str)
    caption_template: str | None = attrs.field(default=None, validator=_optional_str)
    language: str | None = attrs.field(default=None, validator=_optional_str)
    adder_language: str | None = attrs.field(default=None, validator=_optional_str)
    operator_language: str | None = attrs.field(default=None, validator=_optional_str)
    muted_alerts: str | None = attrs.field(default=None, validator=_optional_str)
    long_text: bool = attrs.field(default=True, validator=_bool)
    video_quality: VideoQuality = attrs.field(
        default="best", validator=attrs.validators.in_(VIDEO_QUALITIES)
    )
    sensitive_works: bool | None = attrs.field(default=None, validator=_optional_bool)
    ytdlp_audio: bool = attrs.field(default=False, validator=_bool)

    def ytdlp_enabled(self, chat_type: str) -> bool:
        """Whether links to other sites are served: the chat's choice, else on only in private."""
        if self.ytdlp is not None:
            return self.ytdlp
        return chat_type == "private"

    def sensitive_works_on(self, chat_type: str) -> bool:
        """Whether R-18 works are sent here: the chat's choice, else only in private chats."""
        if self.sensitive_works is not None:
            return self.sensitive_works
        return chat_type == "private"

    def allows_rating(self, chat_type: str, rating: int) -> bool:
        """Whether a work of `rating` (`xbot.media.models.R18` ...) may be sent here.

        R-18G (gore) goes only to a private chat that allows R-18: the group toggle
        names R-18, and an admin who turned it on did not agree to gore for everyone.
        """
        if rating <= 0:
            return True
        if not self.sensitive_works_on(chat_type):
            return False
        return rating == 1 or chat_type == "private"

    def spoiler_for(self, *, sensitive: bool, rating: int) -> bool:
        """Whether media go under Telegram's spoiler: a rated work (R-18, R-18G) always,
        whatever the chat chose; another marked sensitive when the chat asks for it."""
        return rating > 0 or (sensitive and self.spoiler_sensitive)

    def to_dict(self) -> dict[str, object]:
        """Only what differs from the defaults: a chat that never touched a setting
        follows the default, even if a later version changes it."""
        out: dict[str, object] = {}
        for field in attrs.fields(ChatSettings):
            value = getattr(self, field.name)
            if value != field.default:
                out[field.name] = value
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: object) -> ChatSettings:
        """Never raises: unknown keys are ignored, a value of the wrong type is the default."""
        if not isinstance(data, Mapping):
            return cls()
        good: dict[str, Any] = {}
        for field in attrs.fields(ChatSettings):
            if field.name not in data:
                continue
            value = data[field.name]
            try:
                if field.validator is not None:
                    field.validator(None, field, value)
            except (TypeError, ValueError):
                log.warning("chat setting %s=%r ignored: wrong type", field.name, value)
                continue
            good[field.name] = value
        return cls(**good)

    @classmethod
    def from_json(cls, text: str | bytes | None) -> ChatSettings:
        return cls.from_dict(_loads(text))


def _loads(text: str | bytes | None) -> object:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:  # JSONDecodeError and UnicodeDecodeError are both ValueErrors
        return None


def _check_kind(_: object, attribute: attrs.Attribute[Any], value: str) -> None:
    # The record map is keyed "kind:key"; a colon in the kind would make that ambiguous.
    if not isinstance(value, str) or not value or ":" in value:
        raise ValueError(f"record kind must be a non-empty string without ':', not {value!r}")


def _check_expiry(_: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"expires_at must be a finite number, not {value!r}")


def _freeze_data(data: Mapping[str, object]) -> Mapping[str, object]:
    return MappingProxyType(dict(data))


@attrs.frozen
class Record:
    """A short-lived fact about a chat, e.g. a pending caption edit.

    Attributes:
        kind: what it is (`CAPTION_EDIT`, …); no ``:``.
        key: which one within the chat (a caption edit: the user id as text).
        data: JSON values only (read-only; tuples come back as lists).
        expires_at: epoch seconds from which the record counts as absent.
    """

    kind: str = attrs.field(validator=_check_kind)
    key: str = attrs.field(validator=attrs.validators.instance_of(str))
    data: Mapping[str, object] = attrs.field(converter=_freeze_data)
    expires_at: float = attrs.field(validator=_check_expiry)

    @property
    def map_key(self) -> str:
        return record_key(self.kind, self.key)

    def expired(self, now: float) -> bool:
        return now >= self.expires_at

    def to_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "key": self.key,
            "data": dict(self.data),
            "expires_at": self.expires_at,
        }

    @classmethod
    def from_dict(cls, raw: object) -> Record:
        """Raises ValueError (or TypeError) on anything that is not a record."""
        if not isinstance(raw, Mapping):
            raise TypeError("a record is a JSON object")
        data = raw.get("data")
        if not isinstance(data, Mapping):
            raise TypeError("record data is a JSON object")
        return cls(raw.get("kind"), raw.get("key"), data, raw.get("expires_at"))  # type: ignore[arg-type]


def record_key(kind: str, key: str) -> str:
    return f"{kind}:{key}"


def caption_edit_record(
    user_id: int, *, prompt_message_id: int, source: str, expires_at: float, **extra: object
) -> Record:
    """A pending caption edit: one per user per chat (a new one replaces the old).

    ``source`` names what was sent (the link-cache key or the task id), so the
    forward can be rebuilt from it.
    """
    data: dict[str, object] = {"prompt_message_id": prompt_message_id, "source": source}
    data.update(extra)
    return Record(CAPTION_EDIT, str(user_id), data, expires_at)


def _freeze_records(records: Mapping[str, Record]) -> Mapping[str, Record]:
    return MappingProxyType(dict(records))


def records_to_json(records: Mapping[str, Record]) -> str:
    # ensure_ascii (the default) keeps lone surrogates from breaking the UTF-8 bind.
    return json.dumps(
        {k: r.to_dict() for k, r in sorted(records.items())},
        separators=(",", ":"),
        allow_nan=False,
    )


def records_from_json(text: str | bytes | None) -> dict[str, Record]:
    """Never raises: a record that does not parse is dropped (and logged), the rest kept."""
    raw = _loads(text)
    if not isinstance(raw, Mapping):
        if text not in (None, "{}"):
            log.warning("chat records %.80r ignored: not a JSON object", text)
        return {}
    out: dict[str, Record] = {}
    for value in raw.values():
        try:
            record = Record.from_dict(value)
        except (TypeError, ValueError) as exc:
            log.warning("chat record %.80r dropped: %s", value, exc)
            continue
        out[record.map_key] = record
    return out


@attrs.frozen
class ChatState:
    """One chat's settings and records, as a value.

    Attributes:
        chat_id: the Telegram chat id.
        settings: what the chat chose.
        records: short-lived records keyed ``"kind:key"`` (expired ones may
            still be here until the sweep; use `record` to read live ones).
    """

    chat_id: int
    settings: ChatSettings = attrs.field(factory=ChatSettings)
    records: Mapping[str, Record] = attrs.field(
        factory=lambda: MappingProxyType({}), converter=_freeze_records
    )

    def record(self, kind: str, key: str, now: float) -> Record | None:
        """The live record of that kind and key; an expired one counts as absent."""
        found = self.records.get(record_key(kind, key))
        if found is None or found.expired(now):
            return None
        return found

    def with_settings(self, **changes: Any) -> ChatState:
        """Raises TypeError/ValueError on an unknown setting or a wrong type."""
        return attrs.evolve(self, settings=attrs.evolve(self.settings, **changes))

    def with_record(self, record: Record) -> ChatState:
        return attrs.evolve(self, records={**self.records, record.map_key: record})

    def without_record(self, kind: str, key: str) -> ChatState:
        records = dict(self.records)
        records.pop(record_key(kind, key), None)
        return attrs.evolve(self, records=records)

    def without_expired(self, now: float) -> ChatState:
        return attrs.evolve(
            self, records={k: r for k, r in self.records.items() if not r.expired(now)}
        )

    def expired_records(self, now: float) -> list[Record]:
        return [r for _, r in sorted(self.records.items()) if r.expired(now)]
