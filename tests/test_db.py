"""The pool: pragmas per connection, transactions that roll back, bounded concurrency."""

from __future__ import annotations

import ast
import asyncio
import stat
import threading
from pathlib import Path

import apsw
import pytest

from xbot.errors import StoreDamaged, StoreError
from xbot.storage import db, migrations
from xbot.storage.db import (
    DbPool,
    open_store,
    prepare_store,
    read_only,
    schema_version,
    set_busy_patience,
)


@pytest.fixture
async def pool(tmp_path: Path):  # type: ignore[no-untyped-def]
    p = await open_store(tmp_path / "data" / "xbot.sqlite3", size=3)
    yield p
    await p.close()


@pytest.mark.parametrize(
    ("pragma", "expected"),
    [
        ("journal_mode", "wal"),
        ("synchronous", 2),  # FULL: a commit that returned is on the disk
        ("foreign_keys", 1),
        ("journal_size_limit", 32 * 1024 * 1024),
        ("wal_autocheckpoint", 4000),
    ],
    ids=["wal", "synchronous-full", "foreign-keys", "wal-bounded", "checkpoint"],
)
async def test_every_connection_is_configured(pool: DbPool, pragma: str, expected: object) -> None:
    values = await asyncio.gather(*(pool.run(lambda c: c.pragma(pragma)) for _ in range(6)))
    assert set(values) == {expected}


async def test_double_quoted_strings_are_errors(pool: DbPool) -> None:
    with pytest.raises(StoreError):
        await pool.run(lambda c: c.execute('SELECT "no such column"').fetchall())


async def test_write_rolls_back_and_connection_comes_back_clean(pool: DbPool) -> None:
    def half(conn: apsw.Connection) -> None:
        conn.execute("INSERT INTO link_cache VALUES ('a', '{}', 1)")
        raise RuntimeError("boom")

    for _ in range(5):  # more than the pool size: every connection must be clean again
        with pytest.raises(RuntimeError):
            await pool.write(half)
    assert await pool.run(lambda c: c.execute("SELECT count(*) FROM link_cache").fetchall()) == [
        (0,)
    ]
    autocommit = await asyncio.gather(*(pool.run(lambda c: c.get_autocommit()) for _ in range(3)))
    assert all(autocommit)


async def test_concurrency_is_bounded_by_the_pool_size(pool: DbPool) -> None:
    active = 0
    peak = 0
    lock = threading.Lock()
    gate = threading.Event()

    def slow(conn: apsw.Connection) -> None:
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
        gate.wait(0.05)
        with lock:
            active -= 1

    await asyncio.gather(*(pool.run(slow) for _ in range(12)))
    assert peak == 3


async def test_cancelled_caller_does_not_hand_back_a_busy_connection(pool: DbPool) -> None:
    started = threading.Event()
    release = threading.Event()

    def blocking(conn: apsw.Connection) -> int:
        started.set()
        release.wait(5)
        return int(conn.execute("SELECT 1").fetchall()[0][0])

    task = asyncio.create_task(pool.run(blocking))
    await asyncio.to_thread(started.wait, 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # The thread still holds its connection: only 2 of 3 are free.
    results = await asyncio.gather(*(pool.run(id) for _ in range(4)))
    release.set()
    assert len(set(results)) <= 2
    await pool.run(lambda c: None)


async def test_busy_database_is_a_store_error_not_apsw(tmp_path: Path) -> None:
    path = tmp_path / "x.sqlite3"
    pool = await open_store(path, size=1)
    other = apsw.Connection(str(path))
    other.execute("BEGIN EXCLUSIVE")
    try:
        pool_conn_timeout = 200

        def short(conn: apsw.Connection) -> None:
            conn.set_busy_timeout(pool_conn_timeout)
            try:
                conn.execute("BEGIN IMMEDIATE")
            finally:
                conn.set_busy_timeout(5000)

        with pytest.raises(StoreError, match="locked"):
            await pool.run(short)
    finally:
        other.execute("ROLLBACK")
        other.close()
        await pool.close()


async def test_files_are_private(tmp_path: Path) -> None:
    path = tmp_path / "new" / "xbot.sqlite3"
    pool = await open_store(path)
    await pool.write(lambda c: c.execute("INSERT INTO link_cache VALUES ('a', '{}', 1)"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    await pool.close()


async def test_closed_pool_refuses(tmp_path: Path) -> None:
    pool = await open_store(tmp_path / "x.sqlite3")
    await pool.close()
    await pool.close()  # idempotent
    with pytest.raises(StoreError, match="closed"):
        await pool.run(lambda c: None)


async def test_checkpoint_truncates_wal(pool: DbPool) -> None:
    for i in range(200):
        await pool.write(
            lambda c, i=i: c.execute("INSERT INTO link_cache VALUES (?, ?, 1)", (str(i), "x" * 999))
        )
    wal = Path(str(pool.path) + "-wal")
    assert wal.stat().st_size > 0
    await pool.checkpoint()
    assert wal.stat().st_size == 0


async def test_a_write_waits_out_another_process_lock_and_no_longer(tmp_path: Path) -> None:
    """The busy handler waits for the other connection's lock, then the write goes on."""
    path = tmp_path / "x.sqlite3"
    pool = await open_store(path, size=1)
    other = apsw.Connection(str(path))
    other.execute("BEGIN IMMEDIATE")
    released = threading.Event()

    def let_go() -> None:
        released.set()
        other.execute("COMMIT")

    release = threading.Timer(0.3, let_go)
    try:
        release.start()
        await pool.write(lambda c: c.execute("INSERT INTO link_cache VALUES ('a', '{}', 1)"))
        after_release = released.is_set()
        rows = await pool.run(lambda c: c.execute("SELECT key FROM link_cache").fetchall())
    finally:
        release.join()
        other.close()
        await pool.close()
    assert after_release, "it must have waited for the lock, neither failing nor going first"
    assert rows == [("a",)]


def test_a_lock_held_past_the_patience_is_busy(tmp_path: Path) -> None:
    path = tmp_path / "x.sqlite3"
    holder = apsw.Connection(str(path))
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN IMMEDIATE")
    waiter = apsw.Connection(str(path))
    set_busy_patience(waiter, 200)
    try:
        with pytest.raises(apsw.BusyError):
            waiter.execute("BEGIN IMMEDIATE")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        waiter.close()


# --- db is the one owner of connections and of apsw's errors ---------------------------------

PACKAGE = Path(__file__).resolve().parent.parent / "xbot"


def _apsw_misuse(tree: ast.AST) -> list[str]:
    """What a module other than db may not do with apsw: open a connection, name,
    import or catch one of its errors. Naming its types (``apsw.Connection``) is fine."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("apsw"):
            found += [f"line {node.lineno}: from {node.module} import {a.name}" for a in node.names]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id == "apsw" and (node.attr.endswith("Error") or node.attr == "Error"):
                found.append(f"line {node.lineno}: apsw.{node.attr}")
        elif isinstance(node, ast.Call) and ast.unparse(node.func) == "apsw.Connection":
            found.append(f"line {node.lineno}: opens apsw.Connection")
    return found


def _modules() -> list[Path]:
    owner = Path(db.__file__).resolve()  # wherever the package's layout puts it
    return sorted(p for p in PACKAGE.rglob("*.py") if p.resolve() != owner)


def test_the_walk_finds_the_package() -> None:
    names = {p.name for p in _modules()}
    assert {"_lease.py", "backup.py", "doctor.py", "opscli.py", "group_commit.py"} <= names
    assert Path(db.__file__).resolve() not in {p.resolve() for p in _modules()}


@pytest.mark.parametrize("module", _modules(), ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_only_db_opens_connections_and_touches_apsw_errors(module: Path) -> None:
    assert _apsw_misuse(ast.parse(module.read_text(encoding="utf-8"))) == []


@pytest.mark.parametrize(
    "source",
    [
        "import apsw\ntry:\n    pass\nexcept apsw.BusyError:\n    pass\n",
        "from apsw import Error\n",
        "import apsw\nconn = apsw.Connection('x', flags=apsw.SQLITE_OPEN_READONLY)\n",
        "import apsw\nok = isinstance(e, apsw.Error)\n",
    ],
    ids=["except", "from-import", "open", "isinstance"],
)
def test_the_check_sees_misuse(source: str) -> None:
    assert _apsw_misuse(ast.parse(source)) != []


def test_read_only_changes_nothing_and_speaks_store_errors(tmp_path: Path) -> None:
    missing = tmp_path / "none.sqlite3"
    with pytest.raises(StoreError, match="cannot open the database"):
        schema_version(missing)
    assert not missing.exists(), "a look never creates the file"
    junk = tmp_path / "junk.sqlite3"
    junk.write_bytes(b"not a database" * 100)
    with pytest.raises(StoreError, match="is not an SQLite database"):
        schema_version(junk)
    prepare_store(tmp_path / "db.sqlite3")
    assert schema_version(tmp_path / "db.sqlite3") == migrations.latest_version()
    with pytest.raises(StoreError, match="cannot read"), read_only(tmp_path / "db.sqlite3") as c:
        c.execute("INSERT INTO tasks DEFAULT VALUES")


# --- power loss (issue 31) -----------------------------------------------------------------------


async def _filled(path: Path, rows: int = 400) -> None:
    """A database with some pages of rows, closed cleanly (its -wal folded in and removed)."""
    p = await open_store(path, size=1)
    await p.write(
        lambda c: c.execute(
            "INSERT INTO link_cache VALUES " + ",".join(["(?, '{}', 1)"] * rows),
            [f"https://x.com/a/status/{i}" + "x" * 200 for i in range(rows)],
        )
    )
    await p.close()


def _tear(path: Path) -> None:
    """Pages in the middle of the file overwritten with noise, as a lying disk leaves them."""
    with path.open("r+b") as f:
        f.seek(4096 * 3)
        f.write(bytes(range(256)) * 64)


@pytest.mark.parametrize(
    "unclean",
    [True, False],
    ids=["after-a-crash-checked", "after-a-clean-stop-trusted"],
)
async def test_a_torn_database_is_refused_after_an_unclean_stop(
    tmp_path: Path, unclean: bool
) -> None:
    path = tmp_path / "data" / "xbot.sqlite3"
    await _filled(path)
    assert not Path(f"{path}-wal").exists(), "a clean close removes the -wal"
    _tear(path)
    if not unclean:
        # Not read whole at every start: the check costs a read of the whole file.
        await (await open_store(path)).close()
        return
    Path(f"{path}-wal").touch()  # what a crash or a power cut leaves behind
    with pytest.raises(StoreDamaged) as refused:
        await open_store(path)
    line = str(refused.value)
    assert "\n" not in line
    assert "damaged" in line
    assert "Backups and restore" in line
