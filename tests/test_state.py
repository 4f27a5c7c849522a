"""ChatStore: settings and records per chat, cached, written through, swept.

Every store test runs on a real SQLite file. Time is injected (``now``); no
test sleeps.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import apsw
import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from xbot.errors import StoreError
from xbot.storage.db import DbPool, open_store
from xbot.storage.state import (
    CAPTION_EDIT,
    ChatSettings,
    ChatState,
    ChatStore,
    Record,
    caption_edit_record,
    records_from_json,
    records_to_json,
)

T = TypeVar("T")

HOUR = 3600.0


@attrs.define
class TracingPool:
    """The real pool, recording every SQL statement run through it (apsw exec trace)."""

    inner: DbPool
    sql: list[str] = attrs.Factory(list)

    def _traced(self, conn: apsw.Connection, fn: Callable[[apsw.Connection], T]) -> T:
        def tracer(_cursor: apsw.Cursor, statement: str, _bindings: object) -> bool:
            self.sql.append(statement.strip())
            return True

        conn.exec_trace = tracer
        try:
            return fn(conn)
        finally:
            conn.exec_trace = None

    async def run(self, fn: Callable[[apsw.Connection], T]) -> T:
        return await self.inner.run(lambda c: self._traced(c, fn))

    async def write(self, fn: Callable[[apsw.Connection], T]) -> T:
        return await self.run(lambda c: self.inner.write_sync(c, fn))

    def selects(self) -> list[str]:
        return [s for s in self.sql if s.upper().startswith("SELECT")]


@pytest.fixture
def traced(pool: DbPool) -> TracingPool:
    return TracingPool(pool)


@pytest.fixture
def store(traced: TracingPool) -> ChatStore:
    return ChatStore(traced, idle_after=HOUR)  # type: ignore[arg-type]


async def rows(pool: DbPool) -> list[tuple[Any, ...]]:
    return await pool.run(
        lambda c: c.execute(
            "SELECT chat_id, settings, records FROM chat_state ORDER BY chat_id"
        ).fetchall()
    )


def counter(state: ChatState) -> int:
    rec = state.records.get("counter:n")
    return 0 if rec is None else int(rec.data["n"])  # type: ignore[call-overload]


def bump(state: ChatState) -> ChatState:
    return state.with_record(Record("counter", "n", {"n": counter(state) + 1}, 1e12))


# -- values -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("choice", "chat_type", "expected"),
    [
        (None, "private", True),
        (None, "group", False),
        (None, "supergroup", False),
        (None, "channel", False),
        (True, "group", True),
        (False, "private", False),
    ],
    ids=[
        "default-private-on",
        "default-group-off",
        "default-supergroup-off",
        "default-channel-off",
        "group-turned-on",
        "private-turned-off",
    ],
)
def test_ytdlp_default_follows_chat_type(
    choice: bool | None, chat_type: str, expected: bool
) -> None:
    assert ChatSettings(ytdlp=choice).ytdlp_enabled(chat_type) is expected


@pytest.mark.parametrize(
    ("choice", "chat_type", "rating", "allowed"),
    [
        (None, "private", 0, True),
        (None, "supergroup", 0, True),
        (None, "private", 1, True),
        (None, "private", 2, True),
        (None, "group", 1, False),
        (None, "supergroup", 1, False),
        (None, "channel", 1, False),
        (True, "supergroup", 1, True),
        (True, "channel", 1, True),
        (True, "supergroup", 2, False),
        (False, "private", 1, False),
        (False, "private", 2, False),
    ],
    ids=["all-ages-private", "all-ages-group", "r18-private-default", "r18g-private-default",
         "r18-group-default", "r18-supergroup-default", "r18-channel-default", "r18-group-on",
         "r18-channel-on", "r18g-never-in-a-group", "r18-private-off", "r18g-private-off"],
)  # fmt: skip
def test_which_ratings_a_chat_allows(
    choice: bool | None, chat_type: str, rating: int, allowed: bool
) -> None:
    assert ChatSettings(sensitive_works=choice).allows_rating(chat_type, rating) is allowed


@pytest.mark.parametrize(
    ("spoiler_sensitive", "sensitive", "rating", "hidden"),
    [(False, False, 1, True), (False, False, 2, True), (True, True, 0, True),
     (False, True, 0, False), (True, False, 0, False)],
    ids=["r18-whatever-the-chat", "r18g", "sensitive-asked", "sensitive-not-asked", "plain"],
)  # fmt: skip
def test_spoiler_for(spoiler_sensitive: bool, sensitive: bool, rating: int, hidden: bool) -> None:
    settings = ChatSettings(spoiler_sensitive=spoiler_sensitive)
    assert settings.spoiler_for(sensitive=sensitive, rating=rating) is hidden


def test_defaults() -> None:
    s = ChatSettings()
    assert (s.ytdlp, s.caption_style, s.photos_as_documents, s.delete_original) == (
        None,
        "full",
        False,
        False,
    )
    assert (s.spoiler_sensitive, s.edit_before_forward) == (True, False)
    assert (s.channel_id, s.channel_title, s.caption_template) == (None, None, None)
    # Only choices are stored: a chat that never chose follows future defaults.
    assert s.to_json() == "{}"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, ChatSettings()),
        ("", ChatSettings()),
        ("not json", ChatSettings()),
        ("[1, 2]", ChatSettings()),
        ('"a string"', ChatSettings()),
        ("null", ChatSettings()),
        ('{"unknown": 1, "caption_style": "short"}', ChatSettings(caption_style="short")),
        ('{"caption_style": "loud"}', ChatSettings()),
        ('{"ytdlp": 1, "delete_original": true}', ChatSettings(delete_original=True)),
        ('{"spoiler_sensitive": "no"}', ChatSettings()),
        ('{"channel_id": true}', ChatSettings()),
        ('{"channel_id": -100123, "channel_title": 5}', ChatSettings(channel_id=-100123)),
        ('{"channel_id": 1.5}', ChatSettings()),
        ('{"caption_template": ["x"]}', ChatSettings()),
        ('{"caption_style": ["full"]}', ChatSettings()),
        ('{"ytdlp": null}', ChatSettings()),
        (b"\xff\xfe", ChatSettings()),
    ],
    ids=[
        "none",
        "empty",
        "not-json",
        "array",
        "string",
        "null",
        "unknown-key-ignored",
        "bad-style",
        "int-is-not-bool",
        "string-is-not-bool",
        "bool-is-not-chat-id",
        "bad-field-alone-falls-back",
        "float-chat-id",
        "list-template",
        "unhashable-style",
        "explicit-null",
        "bad-utf8-bytes",
    ],
)
def test_settings_from_junk_fall_back_field_by_field(
    text: str | bytes | None, expected: ChatSettings
) -> None:
    assert ChatSettings.from_json(text) == expected


settings_strategy = st.builds(
    ChatSettings,
    ytdlp=st.none() | st.booleans(),
    caption_style=st.sampled_from(["full", "short", "none"]),
    photos_as_documents=st.booleans(),
    delete_original=st.booleans(),
    spoiler_sensitive=st.booleans(),
    edit_before_forward=st.booleans(),
    channel_id=st.none() | st.integers(-(2**63), 2**63 - 1),
    channel_title=st.none() | st.text(),
    caption_template=st.none() | st.text(),
)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


@given(settings_strategy)
def test_settings_json_round_trip(settings: ChatSettings) -> None:
    assert ChatSettings.from_json(settings.to_json()) == settings


@given(st.dictionaries(st.sampled_from(list(attrs.fields_dict(ChatSettings))), json_values))
def test_settings_from_any_json_never_raise(data: dict[str, object]) -> None:
    settings = ChatSettings.from_json(json.dumps(data))
    # Whatever came in, what comes out is a valid value that round-trips.
    assert ChatSettings.from_json(settings.to_json()) == settings


@pytest.mark.parametrize(
    "raw",
    [
        "nope",
        {"kind": "x", "key": "1", "data": {}},
        {"kind": "x", "key": "1", "data": [], "expires_at": 5},
        {"kind": "x:y", "key": "1", "data": {}, "expires_at": 5},
        {"kind": "", "key": "1", "data": {}, "expires_at": 5},
        {"kind": "x", "key": 1, "data": {}, "expires_at": 5},
        {"kind": "x", "key": "1", "data": {}, "expires_at": True},
        {"kind": "x", "key": "1", "data": {}, "expires_at": "5"},
    ],
    ids=[
        "not-object",
        "no-expiry",
        "data-not-object",
        "colon-in-kind",
        "empty-kind",
        "int-key",
        "bool-expiry",
        "string-expiry",
    ],
)
def test_bad_records_are_dropped_good_ones_kept(raw: object) -> None:
    good = Record("caption_edit", "7", {"prompt_message_id": 3}, 100.0)
    text = json.dumps({"bad": raw, good.map_key: good.to_dict()})
    assert records_from_json(text) == {good.map_key: good}


@given(
    st.lists(
        st.builds(
            Record,
            kind=st.text(min_size=1).filter(lambda k: ":" not in k),
            key=st.text(),
            data=st.dictionaries(st.text(), json_values, max_size=3),
            expires_at=st.floats(allow_nan=False, allow_infinity=False),
        ),
        max_size=4,
    )
)
def test_records_json_round_trip(records: list[Record]) -> None:
    by_key = {r.map_key: r for r in records}
    assert records_from_json(records_to_json(by_key)) == by_key


def test_caption_edit_record_is_one_per_user() -> None:
    a = caption_edit_record(42, prompt_message_id=1, source="x:1", expires_at=10.0)
    b = caption_edit_record(42, prompt_message_id=2, source="x:2", expires_at=20.0)
    assert a.kind == CAPTION_EDIT
    assert a.map_key == b.map_key == "caption_edit:42"
    assert dict(b.data) == {"prompt_message_id": 2, "source": "x:2"}
    state = ChatState(1).with_record(a).with_record(b)
    assert state.record(CAPTION_EDIT, "42", now=0.0) == b


def test_record_expiry_boundary() -> None:
    r = Record("k", "1", {}, 100.0)
    state = ChatState(1).with_record(r)
    assert state.record("k", "1", 99.999) == r
    assert state.record("k", "1", 100.0) is None  # expires_at is the first instant it is gone


# -- the store ----------------------------------------------------------------


async def test_missing_chat_gets_defaults_and_writes_nothing(
    store: ChatStore, pool: DbPool
) -> None:
    state = await store.get(-100, now=0.0)
    assert state == ChatState(-100)
    assert await rows(pool) == []


async def test_settings_survive_a_restart(db_path: Path) -> None:
    pool = await open_store(db_path)
    try:
        store = ChatStore(pool)
        await store.set_settings(5, 1.0, caption_style="short", ytdlp=True, channel_id=-1007)
    finally:
        await pool.close()

    pool = await open_store(db_path)
    try:
        fresh = ChatStore(pool)
        assert len(fresh) == 0
        settings = (await fresh.get(5, now=2.0)).settings
    finally:
        await pool.close()
    assert settings == ChatSettings(caption_style="short", ytdlp=True, channel_id=-1007)


async def test_get_costs_one_select_then_none(store: ChatStore, traced: TracingPool) -> None:
    await store.get(1, now=0.0)
    await store.get(1, now=1.0)
    await asyncio.gather(*(store.get(1, now=2.0) for _ in range(5)))
    assert len(traced.selects()) == 1


async def test_concurrent_first_gets_share_one_select(
    store: ChatStore, traced: TracingPool
) -> None:
    await asyncio.gather(*(store.get(9, now=0.0) for _ in range(10)))
    assert len(traced.selects()) == 1


async def test_concurrent_updates_lose_nothing(store: ChatStore, pool: DbPool) -> None:
    # Each update awaits its write; without the per-chat lock, read-modify-write
    # interleaves and increments are lost.
    await asyncio.gather(*(store.update(7, bump, now=float(i)) for i in range(100)))
    assert counter(await store.get(7, now=200.0)) == 100
    assert counter(await ChatStore(pool).get(7, now=200.0)) == 100  # and in the row


async def test_updates_of_different_chats_do_not_mix(store: ChatStore) -> None:
    await asyncio.gather(*(store.update(i % 4, bump, now=0.0) for i in range(40)))
    assert [counter(await store.get(i, now=0.0)) for i in range(4)] == [10, 10, 10, 10]


def _raise(_: ChatState) -> ChatState:
    raise RuntimeError("boom")


async def test_a_failing_fn_changes_nothing(store: ChatStore, pool: DbPool) -> None:
    await store.set_settings(3, 0.0, caption_style="none")
    before_rows = await rows(pool)
    before = await store.get(3, now=0.0)
    with pytest.raises(RuntimeError):
        await store.update(3, _raise, now=1.0)
    with pytest.raises(TypeError):
        await store.set_settings(3, 1.0, no_such_setting=True)
    with pytest.raises(TypeError):
        await store.set_settings(3, 1.0, delete_original="yes")
    with pytest.raises(TypeError):  # not JSON: fails before any I/O
        await store.put_record(3, Record("k", "1", {"x": object()}, 10.0), now=1.0)
    assert await store.get(3, now=1.0) == before
    assert await rows(pool) == before_rows


async def test_a_failed_write_leaves_memory_unchanged(store: ChatStore, pool: DbPool) -> None:
    await store.set_settings(3, 0.0, caption_style="short")
    before = await store.get(3, now=0.0)
    await pool.write(
        lambda c: c.execute(
            "CREATE TRIGGER refuse BEFORE UPDATE ON chat_state "
            "BEGIN SELECT RAISE(ABORT, 'disk says no'); END"
        )
    )
    with pytest.raises(StoreError, match="disk says no"):
        await store.set_settings(3, 1.0, caption_style="none")
    assert await store.get(3, now=1.0) == before

    await pool.close()
    with pytest.raises(StoreError, match="closed"):
        await store.update(3, bump, now=2.0)
    assert await store.get(3, now=2.0) == before


async def test_update_must_keep_the_chat_id(store: ChatStore) -> None:
    with pytest.raises(ValueError, match="returned chat"):
        await store.update(1, lambda s: ChatState(2), now=0.0)


async def test_put_replaces_and_pop_takes_once(store: ChatStore) -> None:
    first = caption_edit_record(42, prompt_message_id=1, source="x:1", expires_at=100.0)
    second = caption_edit_record(42, prompt_message_id=2, source="x:2", expires_at=100.0)
    assert await store.put_record(1, first, now=0.0) is None
    assert await store.put_record(1, second, now=0.0) == first
    assert await store.get_record(1, CAPTION_EDIT, "42", now=50.0) == second
    assert await store.pop_record(1, CAPTION_EDIT, "42", now=50.0) == second
    assert await store.pop_record(1, CAPTION_EDIT, "42", now=50.0) is None


async def test_an_expired_record_is_absent_but_left_for_the_sweep(store: ChatStore) -> None:
    rec = caption_edit_record(42, prompt_message_id=1, source="x:1", expires_at=100.0)
    await store.put_record(1, rec, now=0.0)
    assert await store.get_record(1, CAPTION_EDIT, "42", now=100.0) is None
    assert await store.pop_record(1, CAPTION_EDIT, "42", now=100.0) is None
    # The sweep still reports it, so its prompt can be retired.
    assert await store.prune_expired(now=100.0) == [(1, rec)]


async def test_eviction_happens_and_settings_come_back_with_one_select(
    store: ChatStore, traced: TracingPool
) -> None:
    for chat in range(1, 6):
        await store.set_settings(chat, 0.0, caption_style="short")
    await store.get(6, now=0.0)  # cached defaults, never written
    assert store.cached_chats() == {1, 2, 3, 4, 5, 6}
    assert store.lock_count() == 6

    assert await store.prune_expired(now=HOUR) == []  # not idle for *more* than an hour
    assert len(store) == 6
    await store.get(2, now=HOUR)  # used: stays
    assert await store.prune_expired(now=HOUR + 1) == []
    assert store.cached_chats() == {2}
    assert store.lock_count() == 1

    traced.sql.clear()
    state = await store.get(1, now=HOUR + 2)
    assert state.settings == ChatSettings(caption_style="short")
    assert len(traced.selects()) == 1
    assert store.cached_chats() == {1, 2}


async def test_chats_with_records_or_a_held_lock_are_not_evicted(store: ChatStore) -> None:
    await store.put_record(1, Record("k", "1", {}, 10 * HOUR), now=0.0)
    await store.get(2, now=0.0)
    async with store._locked(2):  # someone is mid-update on chat 2
        await store.prune_expired(now=2 * HOUR)
        assert store.cached_chats() == {1, 2}
    await store.prune_expired(now=2 * HOUR)
    assert store.cached_chats() == {1}
    # Once its record expires, the chat is swept of it and then evictable.
    assert [c for c, _ in await store.prune_expired(now=11 * HOUR)] == [1]
    assert store.cached_chats() == set()
    assert store.lock_count() == 0


async def test_prune_returns_expired_records_and_drops_them_from_the_row(
    store: ChatStore, pool: DbPool
) -> None:
    old = caption_edit_record(1, prompt_message_id=10, source="x:1", expires_at=50.0)
    live = caption_edit_record(2, prompt_message_id=11, source="x:2", expires_at=500.0)
    await store.put_record(-5, old, now=0.0)
    await store.put_record(-5, live, now=0.0)
    assert await store.prune_expired(now=100.0) == [(-5, old)]
    assert await store.prune_expired(now=100.0) == []
    (row,) = await rows(pool)
    assert records_from_json(row[2]) == {live.map_key: live}
    assert dict((await store.get(-5, now=100.0)).records) == {live.map_key: live}


async def test_prune_finds_expired_records_of_chats_not_in_memory(db_path: Path) -> None:
    pool = await open_store(db_path)
    try:
        store = ChatStore(pool)
        for chat in (1, 2, 3):
            await store.put_record(
                chat, caption_edit_record(9, prompt_message_id=chat, source="t", expires_at=50.0), 0
            )
        await store.put_record(3, Record("other", "x", {}, 500.0), now=0.0)
    finally:
        await pool.close()

    pool = await open_store(db_path)  # a restart: nothing cached
    try:
        store = ChatStore(pool)
        assert [c for c, _ in await store.all_expired_records(now=60.0)] == [1, 2, 3]
        dropped = await store.prune_expired(now=60.0)
        assert [(c, r.data["prompt_message_id"]) for c, r in dropped] == [(1, 1), (2, 2), (3, 3)]
        # The sweep is not use: it caches nothing and holds no locks afterwards.
        assert len(store) == 0
        assert store.lock_count() == 0
        assert await store.all_expired_records(now=60.0) == []
        assert [r[0] for r in await rows(pool) if r[2] != "{}"] == [3]
    finally:
        await pool.close()


@pytest.mark.parametrize(
    ("settings", "records"),
    [
        ("not json", "{}"),
        ('{"caption_style": 7}', "[]"),
        ("{}", '{"caption_edit:1": {"kind": "caption_edit"}}'),
        ("\x00\x01", "also junk"),
        ("[]", "null"),
    ],
    ids=["junk-settings", "wrong-type-and-array", "half-record", "binary-ish", "array-and-null"],
)
async def test_junk_rows_mean_defaults_not_crashes(
    store: ChatStore, pool: DbPool, settings: str, records: str
) -> None:
    await pool.write(
        lambda c: c.execute(
            "INSERT INTO chat_state (chat_id, settings, records, updated_at) VALUES (1, ?, ?, 0)",
            (settings, records),
        )
    )
    assert await store.get(1, now=0.0) == ChatState(1)
    assert await store.prune_expired(now=1e9) == []
    # The next change writes a clean row.
    await store.set_settings(1, 1.0, delete_original=True)
    (row,) = await rows(pool)
    assert row[1:] == ('{"delete_original":true}', "{}")


async def test_move_chat_carries_settings_and_records(store: ChatStore, pool: DbPool) -> None:
    rec = caption_edit_record(42, prompt_message_id=1, source="x:1", expires_at=100.0)
    await store.set_settings(-1, 0.0, caption_style="none", channel_id=-1009)
    await store.put_record(-1, rec, now=0.0)

    moved = await store.move_chat(-1, -1001, now=1.0)
    assert moved.settings == ChatSettings(caption_style="none", channel_id=-1009)
    assert moved.record(CAPTION_EDIT, "42", now=1.0) == rec
    assert [r[0] for r in await rows(pool)] == [-1001]
    assert await store.get(-1, now=1.0) == ChatState(-1)
    # Again (both updates of a migration report it): nothing changes.
    assert await store.move_chat(-1, -1001, now=2.0) == moved
    assert await ChatStore(pool).get(-1001, now=2.0) == moved


async def test_move_chat_keeps_settings_already_made_in_the_new_chat(
    store: ChatStore, pool: DbPool
) -> None:
    await store.set_settings(-1, 0.0, caption_style="none")
    await store.put_record(-1, Record("a", "1", {}, 100.0), now=0.0)
    await store.set_settings(-1001, 0.0, caption_style="short")
    moved = await store.move_chat(-1, -1001, now=1.0)
    assert moved.settings.caption_style == "short"
    assert set(moved.records) == {"a:1"}
    assert [r[0] for r in await rows(pool)] == [-1001]


async def test_a_failed_sweep_of_one_chat_spares_the_others(store: ChatStore, pool: DbPool) -> None:
    for chat in (1, 2, 3):
        await store.put_record(chat, Record("k", "1", {}, 50.0), now=0.0)
    await pool.write(
        lambda c: c.execute(
            "CREATE TRIGGER refuse_2 BEFORE UPDATE ON chat_state WHEN old.chat_id = 2 "
            "BEGIN SELECT RAISE(ABORT, 'disk says no'); END"
        )
    )
    assert [c for c, _ in await store.prune_expired(now=60.0)] == [1, 3]
    await pool.write(lambda c: c.execute("DROP TRIGGER refuse_2"))
    assert [c for c, _ in await store.prune_expired(now=60.0)] == [2]
