"""The three rules of the schema's history, each proven by mutation (see CHANGELOG/notes).

1. A literal pre-migration database upgrades: latest version, the expected
   columns and indexes, rows intact.
2. Shipped migrations are frozen: compared entry by entry with a recorded copy.
3. A fresh database lands at the latest version with the same schema as an
   upgraded one, and reopening is a no-op.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import apsw
import pytest

from xbot.errors import SchemaTooNew, StoreError
from xbot.storage import migrations
from xbot.storage.db import open_store

FROZEN = Path(__file__).parent / "data" / "frozen_migrations.json"

# The historical baseline, written out here on purpose (not read from
# migrations_sql/): this is what a database created by the first release holds.
LITERAL_V1_DDL = """
CREATE TABLE tasks (
    id INTEGER PRIMARY KEY, kind TEXT NOT NULL, chat_id INTEGER NOT NULL,
    payload TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending'
        CHECK (state IN ('pending', 'running', 'done', 'dead')),
    dedup_key TEXT, attempts INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL DEFAULT 5, run_after REAL NOT NULL,
    lease_token TEXT, lease_expires REAL, last_error TEXT,
    created_at REAL NOT NULL, updated_at REAL NOT NULL
);
CREATE TABLE chat_state (
    chat_id INTEGER PRIMARY KEY, settings TEXT NOT NULL DEFAULT '{}',
    records TEXT NOT NULL DEFAULT '{}', updated_at REAL NOT NULL
);
CREATE TABLE link_cache (key TEXT PRIMARY KEY, entry TEXT NOT NULL, created_at REAL NOT NULL);
INSERT INTO tasks (kind, chat_id, payload, run_after, created_at, updated_at)
    VALUES ('x_post', 42, '{"url": "https://x.com/a/status/1"}', 10, 10, 10);
INSERT INTO chat_state VALUES (42, '{"ytdlp": true}', '{}', 10);
INSERT INTO link_cache VALUES ('x:1', '{}', 10);
PRAGMA user_version = 1;
"""

EXPECTED_COLUMNS = {
    "tasks": [
        "id", "kind", "chat_id", "payload", "state", "dedup_key", "attempts", "max_attempts",
        "run_after", "lease_token", "lease_expires", "last_error", "created_at", "updated_at",
        "lost_leases", "progressed", "ambiguous_sends", "user_id",
    ],
    "chat_state": ["chat_id", "settings", "records", "updated_at"],
    "link_cache": ["key", "entry", "created_at"],
    "chat_holds": ["chat_id", "not_before"],
    "chat_lanes": ["chat_id", "head_run_after", "head_id"],
    "webhook_updates": ["update_id", "answered_at"],
}  # fmt: skip

EXPECTED_INDEXES = {
    "tasks_running_chat",
    "tasks_done_updated",
    "tasks_dead_updated",
    "tasks_dedup_live",
    "link_cache_created",
    "tasks_chat_pending",
    "chat_lanes_order",
    "webhook_updates_by_age",
}


def schema(path: Path) -> dict[str, list[tuple[str, str]]]:
    conn = apsw.Connection(str(path))
    try:
        out: dict[str, list[tuple[str, str]]] = {}
        for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type='table' ORDER BY name"
        ).fetchall():
            out[name] = [(r[1], r[2]) for r in conn.execute(f"PRAGMA table_info({name})")]
        out["__indexes__"] = sorted(
            conn.execute(
                "SELECT name, coalesce(sql, '') FROM sqlite_master WHERE type='index' ORDER BY name"
            ).fetchall()
        )
        out["__version__"] = [(str(conn.pragma("user_version")), "")]
        return out
    finally:
        conn.close()


async def test_literal_old_database_upgrades(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    conn = apsw.Connection(str(path))
    conn.execute(LITERAL_V1_DDL)
    conn.close()

    pool = await open_store(path)
    await pool.close()

    conn = apsw.Connection(str(path))
    try:
        assert conn.pragma("user_version") == migrations.latest_version(), (
            "rule 1: an old database must be upgraded to the latest version"
        )
        for table, columns in EXPECTED_COLUMNS.items():
            got = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
            assert got == columns, f"rule 1: columns of {table} after upgrade"
        indexes = {
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type='index' AND sql IS NOT NULL"
            )
        }
        assert indexes == EXPECTED_INDEXES, "rule 1: indexes after upgrade"
        assert conn.execute("SELECT kind, chat_id, payload FROM tasks").fetchall() == [
            ("x_post", 42, '{"url": "https://x.com/a/status/1"}')
        ], "rule 1: rows must survive the upgrade"
        assert conn.execute("SELECT settings FROM chat_state").fetchall() == [('{"ytdlp": true}',)]
        assert conn.execute("SELECT key FROM link_cache").fetchall() == [("x:1",)]
        assert conn.execute("SELECT chat_id, head_id FROM chat_lanes").fetchall() == [(42, 1)], (
            "rule 1: pending work already there must be claimable after the upgrade"
        )
    finally:
        conn.close()


def test_shipped_migrations_are_frozen() -> None:
    recorded: dict[str, str] = json.loads(FROZEN.read_text("utf-8"))
    shipped = {m.name: m.sql for m in migrations.load_migrations()}
    for name, text in recorded.items():
        assert name in shipped, (
            f"rule 2: shipped migration {name} was removed or renumbered; "
            "migrations are append-only"
        )
        assert shipped[name] == text, (
            f"rule 2: shipped migration {name} was edited; add a new numbered file instead"
        )
    new = sorted(set(shipped) - set(recorded))
    # Appending is allowed: new files must come after every recorded one.
    assert all(n > max(recorded) for n in new), (
        f"rule 2: new migrations {new} must be numbered after the shipped ones"
    )


def test_baseline_never_gains_a_column() -> None:
    baseline = migrations.load_migrations()[0]
    conn = apsw.Connection(":memory:")
    conn.execute(baseline.sql)
    for table in ("tasks", "chat_state", "link_cache"):
        got = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
        want = EXPECTED_COLUMNS[table]
        if table == "tasks":  # what 0005, 0006 and 0009 added, the baseline never had
            added = ("lost_leases", "progressed", "ambiguous_sends", "user_id")
            want = [c for c in want if c not in added]
        assert got == want, f"the baseline's {table} must never gain a column"


async def test_fresh_database_matches_upgraded_and_reopen_is_noop(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh.sqlite3"
    pool = await open_store(fresh)
    await pool.close()

    old = tmp_path / "old.sqlite3"
    conn = apsw.Connection(str(old))
    conn.execute(LITERAL_V1_DDL)
    conn.execute("DELETE FROM tasks; DELETE FROM chat_state; DELETE FROM link_cache")
    conn.close()
    pool = await open_store(old)
    await pool.close()

    assert schema(fresh)["__version__"] == [(str(migrations.latest_version()), "")], (
        "rule 3: a fresh database lands at the latest version"
    )
    fresh_tables = {k: v for k, v in schema(fresh).items() if k != "__indexes__"}
    old_tables = {k: v for k, v in schema(old).items() if k != "__indexes__"}
    assert fresh_tables == old_tables, "rule 3: fresh and upgraded schemas must be the same"
    assert [n for n, _ in schema(fresh)["__indexes__"]] == [
        n for n, _ in schema(old)["__indexes__"]
    ]

    before = fresh.read_bytes()
    pool = await open_store(fresh)
    await pool.close()
    assert schema(fresh) == schema(tmp_path / "fresh.sqlite3")
    assert migrations.migrate(apsw.Connection(str(fresh))) == migrations.latest_version()
    assert len(fresh.read_bytes()) == len(before), "rule 3: reopening must be a no-op"


async def test_newer_database_is_refused_and_untouched(tmp_path: Path) -> None:
    path = tmp_path / "future.sqlite3"
    conn = apsw.Connection(str(path))
    conn.execute("CREATE TABLE t (x); PRAGMA user_version = 999")
    conn.close()
    before = path.read_bytes()
    with pytest.raises(SchemaTooNew, match="newer xbot"):
        await open_store(path)
    assert path.read_bytes() == before, "a newer database must not be written to"
    assert not Path(str(path) + "-wal").exists()


def test_failed_migration_leaves_previous_version(tmp_path: Path) -> None:
    folder = tmp_path / "migs"
    shutil.copytree(migrations.migrations_dir(), folder)
    (folder / f"{migrations.latest_version():04d}_broken.sql").write_text(
        "CREATE TABLE half_done (x);\nTHIS IS NOT SQL;\n"
    )
    migs = migrations.load_migrations(folder)
    conn = apsw.Connection(str(tmp_path / "db.sqlite3"))
    with pytest.raises(apsw.SQLError):
        migrations.migrate(conn, migs)
    assert conn.pragma("user_version") == len(migs) - 1
    assert not conn.execute("SELECT 1 FROM sqlite_master WHERE name='half_done'").fetchall()


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (["0000_a.sql", "0002_b.sql"], "out of sequence"),
        (["0000_a.sql", "1_b.sql"], "not named"),
        (["0001_a.sql"], "out of sequence"),
    ],
    ids=["gap", "bad-name", "no-baseline"],
)
def test_migration_folder_rules(tmp_path: Path, names: list[str], message: str) -> None:
    for name in names:
        (tmp_path / name).write_text("SELECT 1;")
    with pytest.raises(StoreError, match=message):
        migrations.load_migrations(tmp_path)


async def test_junk_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "junk.sqlite3"
    path.write_bytes(b"this is not a database, it is a shopping list\n" * 100)
    with pytest.raises(StoreError, match="not an SQLite database"):
        await open_store(path)


@pytest.mark.parametrize(
    ("path", "advice", "text"),
    [
        (None, None, "the database is at schema version 9, but this xbot knows only up to 8: "
         "it was used by a newer xbot; upgrade xbot (nothing was changed)"),
        (Path("/d/xbot.sqlite3"), None, "the database /d/xbot.sqlite3 is at schema version 9"),
        (Path("/d/x"), "use that version's `xbot`", "newer xbot; use that version's `xbot` ("),
    ],
    ids=["no-path", "with-path", "other-advice"],
)  # fmt: skip
def test_one_sentence_for_a_database_from_a_newer_xbot(
    path: Path | None, advice: str | None, text: str
) -> None:
    """The migrator, the pool, the operator's commands and doctor all say it this way."""
    error = (
        migrations.too_new(9, 8, path)
        if advice is None
        else migrations.too_new(9, 8, path, advice=advice)
    )
    assert isinstance(error, SchemaTooNew)
    assert text in str(error)
