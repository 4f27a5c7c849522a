"""Per-chat state: durable settings plus short-lived records, cached in memory.

The values (`ChatSettings`, `Record`, `ChatState`) are in `xbot.storage.chat_state`;
this module is their store.

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
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import apsw
import attrs

from xbot.errors import StoreError
from xbot.storage.chat_state import (
    CAPTION_EDIT,
    CAPTION_STYLES,
    VIDEO_QUALITIES,
    CaptionStyle,
    ChatSettings,
    ChatState,
    Record,
    VideoQuality,
    caption_edit_record,
    max_height,
    record_key,
    records_from_json,
    records_to_json,
)
from xbot.storage.db import DbPool

# The values live in chat_state.py; importers take them from here, with the store.
__all__ = [
    "CAPTION_EDIT",
    "CAPTION_STYLES",
    "VIDEO_QUALITIES",
    "CaptionStyle",
    "ChatSettings",
    "ChatState",
    "ChatStore",
    "Record",
    "VideoQuality",
    "caption_edit_record",
    "max_height",
    "record_key",
    "records_from_json",
    "records_to_json",
]

log = logging.getLogger(__name__)


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
