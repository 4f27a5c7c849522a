"""Per-chat state: durable settings plus short-lived records, cached in memory.

`ChatStore` is the only reader and writer of the ``chat_state`` table. Each
chat is one row: ``settings`` (JSON of what the chat chose) and ``records``
(JSON of short-lived records such as a pending caption edit, each with an
expiry). The row is the truth across restarts; memory is a cache of it:

- ``get`` answers from memory, and costs one SELECT on a miss (a chat without
  a row gets the defaults, and nothing is written for it).
- ``update`` is read-modify-write under a per-chat `asyncio.Lock`, written
  through (UPSERT in ``BEGIN IMMEDIATE``) *before* memory changes, so a failed
  write leaves both the row and memory as they were.
- ``prune_expired`` (the sweep) drops expired records from rows and memory and
  returns them, and evicts idle chats without records from memory and from
  the lock map.

A row never breaks a chat: settings or records that do not parse (an older
shape, a hand edit, corruption) fall back to the defaults, field by field.
Times are float epoch seconds passed in as ``now``; nothing here reads a clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
from collections.abc import AsyncIterator, Callable, Mapping
from types import MappingProxyType
from typing import Any, Literal

import apsw
import attrs

from xbot.errors import StoreError
from xbot.storage.db import DbPool

log = logging.getLogger(__name__)

CaptionStyle = Literal["full", "short", "none"]
CAPTION_STYLES: tuple[CaptionStyle, ...] = ("full", "short", "none")

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

    def ytdlp_enabled(self, chat_type: str) -> bool:
        """Whether links to other sites are served: the chat's choice, else on only in private."""
        if self.ytdlp is not None:
            return self.ytdlp
        return chat_type == "private"

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


def _row_to_state(chat_id: int, settings: object, records: object) -> ChatState:
    return ChatState(
        chat_id,
        ChatSettings.from_json(settings if isinstance(settings, str | bytes) else None),
        records_from_json(records if isinstance(records, str | bytes) else None),
    )


_SELECT = "SELECT settings, records FROM chat_state WHERE chat_id = ?"
_UPSERT = (
    "INSERT INTO chat_state (chat_id, settings, records, updated_at) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (chat_id) DO UPDATE SET settings = excluded.settings, "
    "records = excluded.records, updated_at = excluded.updated_at"
)
# The sweep reads every row that holds records. No index serves "records != '{}'"
# (it is a JSON text), so this is a scan of chat_state: one short row per chat
# that ever changed a setting. Cheap at thousands of chats; a partial index or a
# next-expiry column (a new migration) would make it proportional to the rows
# with records if that ever matters.
_WITH_RECORDS = "SELECT chat_id, records FROM chat_state WHERE records != '{}'"


@attrs.define
class _Slot:
    """One chat's lock and, when cached, its state.

    ``users`` counts tasks inside or waiting for the lock: a slot is dropped only
    at zero, so nobody ever holds a lock that is no longer in the map (which
    would let a second lock for the same chat appear).
    """

    lock: asyncio.Lock = attrs.field(factory=asyncio.Lock)
    users: int = 0
    state: ChatState | None = None
    last_used: float = 0.0


@attrs.define
class ChatStore:
    """Chat settings and records: cached in memory, written through to ``chat_state``.

    Attributes:
        pool: the database.
        idle_after: seconds without use after which the sweep evicts a chat
            that holds no records from memory (its row stays).
    """

    pool: DbPool
    idle_after: float = attrs.field(default=3600.0, kw_only=True)
    _slots: dict[int, _Slot] = attrs.field(factory=dict, init=False)

    # -- reading --------------------------------------------------------------

    async def get(self, chat_id: int, now: float) -> ChatState:
        """The chat's state: from memory, else one SELECT (no row: the defaults, no write)."""
        slot = self._slots.get(chat_id)
        if slot is not None and slot.state is not None:
            slot.last_used = now
            return slot.state
        async with self._locked(chat_id) as slot:
            if slot.state is None:  # another task may have loaded it while we waited
                slot.state, _ = await self._select(chat_id)
            slot.last_used = now
            return slot.state

    async def get_record(self, chat_id: int, kind: str, key: str, now: float) -> Record | None:
        return (await self.get(chat_id, now)).record(kind, key, now)

    # -- writing --------------------------------------------------------------

    async def update(
        self, chat_id: int, fn: Callable[[ChatState], ChatState], now: float
    ) -> ChatState:
        """Read-modify-write of one chat under its lock; returns the new state.

        The row is written before memory changes: if ``fn`` raises, the new
        state does not serialise, or the write fails, nothing changes.
        """
        _, new = await self._modify(chat_id, fn, now, touch=True)
        return new

    async def set_settings(self, chat_id: int, now: float, **changes: Any) -> ChatState:
        """Change settings by name; an unknown name or a wrong type raises and changes nothing."""
        return await self.update(chat_id, lambda s: s.with_settings(**changes), now)

    async def put_record(self, chat_id: int, record: Record, now: float) -> Record | None:
        """Store a record, replacing the one of the same kind and key; returns the replaced one
        (live or expired), so the caller can retire its prompt."""
        old, _ = await self._modify(chat_id, lambda s: s.with_record(record), now, touch=True)
        return old.records.get(record.map_key)

    async def pop_record(self, chat_id: int, kind: str, key: str, now: float) -> Record | None:
        """Remove and return the live record; an expired one counts as absent and is left
        for the sweep, which reports it (its prompt still has to be retired)."""
        old, _ = await self._modify(
            chat_id,
            lambda s: s.without_record(kind, key) if s.record(kind, key, now) is not None else s,
            now,
            touch=True,
        )
        return old.record(kind, key, now)

    async def move_chat(self, old_id: int, new_id: int, now: float) -> ChatState:
        """A group became a supergroup: its settings and records move to the new id.

        If the new id already has a row (someone changed settings there first),
        its settings win and the records are merged (the new chat's on a clash).
        The old row is deleted in the same transaction. Moving again is a no-op.
        """
        if old_id == new_id:
            return await self.get(new_id, now)
        async with contextlib.AsyncExitStack() as stack:
            # Both locks, in id order, so two moves can never wait on each other.
            slots = {
                cid: await stack.enter_async_context(self._locked(cid))
                for cid in sorted((old_id, new_id))
            }
            old_slot, new_slot = slots[old_id], slots[new_id]
            # Rare (once per group, ever): read both rows to learn whether they exist.
            old_row, old_exists = await self._select(old_id)
            new_row, new_exists = await self._select(new_id)
            # Memory mirrors the row; prefer it when cached.
            old_state = old_row if old_slot.state is None else old_slot.state
            new_state = new_row if new_slot.state is None else new_slot.state
            if not old_exists:
                new_slot.state, new_slot.last_used = new_state, now
                return new_state
            settings = new_state.settings if new_exists else old_state.settings
            merged = ChatState(new_id, settings, {**old_state.records, **new_state.records})
            settings_json, records_json = merged.settings.to_json(), records_to_json(merged.records)

            def _move(conn: apsw.Connection) -> None:
                conn.execute(_UPSERT, (new_id, settings_json, records_json, now))
                conn.execute("DELETE FROM chat_state WHERE chat_id = ?", (old_id,))

            await self.pool.write(_move)
            old_slot.state = None
            new_slot.state, new_slot.last_used = merged, now
            return merged

    # -- the sweep ------------------------------------------------------------

    async def all_expired_records(self, now: float) -> list[tuple[int, Record]]:
        """Expired records of every chat, cached or not (read from the rows; see _WITH_RECORDS)."""

        def _scan(conn: apsw.Connection) -> list[tuple[int, Record]]:
            found: list[tuple[int, Record]] = []
            for chat_id, text in conn.execute(_WITH_RECORDS).fetchall():
                if not isinstance(chat_id, int):  # INTEGER PRIMARY KEY: cannot happen
                    continue
                records = records_from_json(text if isinstance(text, str | bytes) else None)
                found.extend((chat_id, r) for _, r in sorted(records.items()) if r.expired(now))
            return found

        return await self.pool.run(_scan)

    async def prune_expired(self, now: float) -> list[tuple[int, Record]]:
        """Drop expired records (rows and memory) and return them; evict idle chats.

        A chat is evicted from memory and from the lock map when it holds no
        records, nobody holds or waits for its lock, and it was last used more
        than ``idle_after`` ago. Its row stays; the next use costs one SELECT.
        """
        dropped: list[tuple[int, Record]] = []
        candidates = sorted({chat_id for chat_id, _ in await self.all_expired_records(now)})
        for chat_id in candidates:
            # Re-read under the lock: the scan ran without it.
            try:
                old, _ = await self._modify(
                    chat_id, lambda s: s.without_expired(now), now, touch=False
                )
            except StoreError as exc:
                # This chat's records stay (row and memory) and come back next sweep;
                # the records already dropped for other chats must still be returned.
                log.warning("sweep of chat %s failed, retried next sweep: %s", chat_id, exc)
                continue
            dropped.extend((chat_id, r) for r in old.expired_records(now))
        for chat_id, slot in list(self._slots.items()):
            if (
                slot.users == 0
                and not slot.lock.locked()
                and slot.state is not None
                and not slot.state.records
                and now - slot.last_used > self.idle_after
            ):
                del self._slots[chat_id]
        return dropped

    # -- for tests and /stats -------------------------------------------------

    def cached_chats(self) -> frozenset[int]:
        return frozenset(cid for cid, slot in self._slots.items() if slot.state is not None)

    def lock_count(self) -> int:
        """Entries in the lock map (cached chats plus chats being loaded or written)."""
        return len(self._slots)

    def __len__(self) -> int:
        return len(self.cached_chats())

    # -- internals ------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _locked(self, chat_id: int) -> AsyncIterator[_Slot]:
        slot = self._slots.get(chat_id)
        if slot is None:
            slot = self._slots[chat_id] = _Slot()
        slot.users += 1
        try:
            async with slot.lock:
                yield slot
        finally:
            slot.users -= 1
            # A slot that caches nothing and has no users is garbage.
            if slot.users == 0 and slot.state is None and self._slots.get(chat_id) is slot:
                del self._slots[chat_id]

    async def _select(self, chat_id: int) -> tuple[ChatState, bool]:
        """One SELECT; returns the state and whether the row exists."""
        rows = await self.pool.run(lambda conn: conn.execute(_SELECT, (chat_id,)).fetchall())
        if not rows:
            return ChatState(chat_id), False
        settings, records = rows[0]
        return _row_to_state(chat_id, settings, records), True

    async def _modify(
        self,
        chat_id: int,
        fn: Callable[[ChatState], ChatState],
        now: float,
        *,
        touch: bool,
    ) -> tuple[ChatState, ChatState]:
        """The one read-modify-write path. ``touch=False`` (the sweep) neither counts
        as use nor caches a chat that was not cached."""
        async with self._locked(chat_id) as slot:
            cached = slot.state is not None
            old = slot.state if slot.state is not None else (await self._select(chat_id))[0]
            new = fn(old)
            if new.chat_id != chat_id:
                raise ValueError(f"update of chat {chat_id} returned chat {new.chat_id}")
            if new != old:
                # Serialise here, before any I/O: a value that is not JSON fails cleanly.
                params = (chat_id, new.settings.to_json(), records_to_json(new.records), now)
                await self.pool.write(lambda conn: conn.execute(_UPSERT, params).fetchall())
            if cached or touch:
                slot.state = new
            if touch:
                slot.last_used = now
            return old, new
