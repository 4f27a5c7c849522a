"""Connections to the one SQLite file: a small pool of apsw connections.

Every call runs its closure on a pooled connection in a worker thread, so the
event loop never blocks on SQLite. Writes run inside ``BEGIN IMMEDIATE`` (a
deferred transaction that reads then writes gets ``SQLITE_BUSY_SNAPSHOT`` at
once, whatever the busy timeout) and are serialised inside the process by one
lock, so SQLite's busy handler only ever arbitrates between processes; that
cut the lease-latency tail from hundreds of ms to a few (see
docs/benchmarks.md). Every connection to the file is opened here: the pool's,
the read-only probes (`read_only`: the CLI's version check, ``xbot doctor``,
`open_store`'s refusal of a newer database) and the backup's (`copy_live`).
apsw errors are translated into `StoreError` here and nowhere else
(tests/test_db.py holds every other module of xbot to that).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import apsw
import apsw.bestpractice
import attrs

from xbot.errors import StoreBusy, StoreDamaged, StoreError
from xbot.storage import migrations

log = logging.getLogger(__name__)

T = TypeVar("T")

BUSY_TIMEOUT_MS = 5000
BUSY_NAP = 0.001  # seconds between looks at a lock another process holds
# Checkpoint after this many WAL pages (16 MB) rather than SQLite's 1000: the
# checkpoint runs inside a commit, under the write lock, with two fsyncs, and
# at 1000 pages it set the lease p99 (docs/benchmarks.md, "Queue").
WAL_AUTOCHECKPOINT_PAGES = 4000
# After a checkpoint the -wal file is truncated back to at most this size.
JOURNAL_SIZE_LIMIT = 32 * 1024 * 1024
# Durability (issue 31): nothing is confirmed to Telegram before it is on the
# disk. In WAL mode NORMAL syncs the -wal only at a checkpoint, so a power cut
# took the commits since (a kill -9 takes none: they are in the page cache):
# updates Telegram had been told were handled, records of albums already sent.
# FULL syncs the -wal inside every commit: a commit that returned is on the
# disk, so every confirmation that follows a commit (the next getUpdates'
# offset, a webhook's 200, the next message after an album's record) is safe
# by construction, wherever it is written. The other way, NORMAL plus one sync
# of the -wal before each Bot API request and each 200 (a thread of the pool
# syncing behind the commits), was built and measured against it
# (docs/benchmarks.md, "Power loss"): no faster for the bot, slower for the
# queue and dearer in CPU; the group commit already shares one sync among the
# concurrent writers. A checkpoint syncs the -wal before it copies pages and
# the database after, so folding the -wal in never undoes a sync.
SYNCHRONOUS = "FULL"


def set_busy_patience(conn: apsw.Connection, timeout_ms: int = BUSY_TIMEOUT_MS) -> None:
    """Wait for another process's lock for up to ``timeout_ms``, looking every millisecond.

    SQLite's own busy timeout naps longer and longer (up to 100 ms a time),
    so a lease that met another process's short transaction waited up to
    100 ms past its end (docs/benchmarks.md, "Queue"). Short naps
    keep that wait near the other transaction's length; a lock held past the
    timeout is still `apsw.BusyError`.
    """
    deadline = 0.0

    def patience(attempts: int) -> bool:
        nonlocal deadline
        now = time.monotonic()
        if attempts == 0:
            deadline = now + timeout_ms / 1000
        if now >= deadline:
            return False
        time.sleep(BUSY_NAP)
        return True

    conn.set_busy_handler(patience)


def _configure(conn: apsw.Connection, synchronous: str) -> None:
    """The per-connection settings, one line each (apsw.bestpractice, minus its globals)."""
    # The busy handler must come before the switch to WAL: that switch needs a write lock.
    set_busy_patience(conn)
    conn.pragma("journal_mode", "wal")
    conn.pragma("synchronous", synchronous)
    apsw.bestpractice.connection_enable_foreign_keys(conn)
    apsw.bestpractice.connection_dqs(conn)
    conn.pragma("journal_size_limit", JOURNAL_SIZE_LIMIT)
    conn.wal_autocheckpoint(WAL_AUTOCHECKPOINT_PAGES)
    # Query-planner stability: once PRAGMA optimize has gathered statistics,
    # SQLite re-prepares a statement whenever a range parameter changes value
    # (every `now`): the claim cost several times more (docs/benchmarks.md). Keep the plans.
    conn.config(apsw.SQLITE_DBCONFIG_ENABLE_QPSG, 1)


def _touch_private(path: Path) -> None:
    """Create the database file readable by its owner only (the WAL inherits the mode)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not path.exists():
        fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
        os.close(fd)


def connect(path: Path | str, *, synchronous: str = SYNCHRONOUS) -> apsw.Connection:
    """One configured connection (for the pool, the CLI and tests). Does not migrate.

    ``synchronous``: FULL; another level only for a benchmark's comparison.
    """
    try:
        conn = apsw.Connection(str(path))
        _configure(conn, synchronous)
    except apsw.Error as exc:
        raise StoreError(f"cannot open the database {path}: {exc}") from exc
    return conn


def _open_read_only(path: Path | str) -> apsw.Connection:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    conn.set_busy_timeout(BUSY_TIMEOUT_MS)
    return conn


@contextlib.contextmanager
def _reading(path: Path | str, conn: apsw.Connection) -> Iterator[apsw.Connection]:
    """Close ``conn`` at the end; apsw errors inside come out as `StoreError`."""
    try:
        yield conn
    except apsw.NotADBError as exc:
        raise StoreError(f"{path} is not an SQLite database (is XBOT_DATA_DIR right?)") from exc
    except apsw.CorruptError as exc:
        raise damaged(path, str(exc)) from exc
    except apsw.Error as exc:
        raise StoreError(f"cannot read the database {path}: {exc}") from exc
    finally:
        conn.close()


@contextlib.contextmanager
def read_only(path: Path | str) -> Iterator[apsw.Connection]:
    """The file opened read-only, for a look that must change nothing (not even create it).

    For the operator's tools next to a running bot: no pragma is set (WAL is
    the file's own), the busy timeout is. Raises `StoreError` when the file
    cannot be opened, is not a database, or a statement inside the block fails.
    """
    try:
        conn = _open_read_only(path)
    except apsw.Error as exc:
        raise StoreError(f"cannot open the database {path}: {exc}") from exc
    with _reading(path, conn):
        yield conn


def schema_version(path: Path | str) -> int:
    """The file's schema version (``PRAGMA user_version``), read without changing anything."""
    with read_only(path) as conn:
        return migrations.current_version(conn)


def is_database_error(exc: BaseException) -> bool:
    """True for an error of the database itself (apsw's), not of the code that used it.

    For code that runs closures on a connection and must tell the two apart
    (the group commit aborts a whole batch for the first kind only).
    """
    return isinstance(exc, apsw.Error)


def copy_live(source: Path, dest: Path, inspect: Callable[[apsw.Connection], T]) -> T:
    """SQLite's online backup of ``source`` into the empty file ``dest``, then ``inspect(copy)``.

    One step, one read transaction: in WAL a reader sees one snapshot and
    never blocks the bot's writers, so the copy is the database as of the
    moment the step began (small steps would let the bot's commits restart
    the copy each time). The copy is switched out of WAL, one self-contained
    file. A `StoreError` from ``inspect`` passes as it is; apsw's become ours.
    """
    with read_only(source) as src:
        copy: apsw.Connection | None = None
        try:
            copy = apsw.Connection(str(dest))
            with copy.backup("main", src, "main") as job:
                _step_all(job)
            # One self-contained file: the copied header still says WAL.
            copy.pragma("journal_mode", "delete")
            return inspect(copy)
        except apsw.BusyError as exc:
            raise StoreError(
                f"the database stayed locked for more than {BUSY_TIMEOUT_MS // 1000} s"
            ) from exc
        except apsw.Error as exc:
            raise StoreError(f"backup of {source} failed: {exc}") from exc
        finally:
            if copy is not None:
                copy.close()


def _step_all(job: apsw.Backup, patience: float = BUSY_TIMEOUT_MS / 1000) -> None:
    """Copy every page in one step (one read transaction: one consistent snapshot).

    A reader of a WAL database is only refused while another connection recovers
    the WAL or checkpoints in TRUNCATE mode; that is short, so wait and retry.
    """
    deadline = time.monotonic() + patience
    while True:
        try:
            if job.step(-1):
                return
        except (apsw.BusyError, apsw.LockedError):
            if time.monotonic() > deadline:
                raise
        time.sleep(0.05)


def _check_version(path: Path) -> None:
    """Refuse a database from a newer xbot before anything is written to it."""
    try:
        probe = _open_read_only(path)
    except apsw.CantOpenError:
        return  # a new file: nothing to check
    with _reading(path, probe):
        version = migrations.current_version(probe)
    latest = migrations.latest_version()
    if version > latest:
        raise migrations.too_new(version, latest, path)


@attrs.define
class DbPool:
    """A bounded pool of apsw connections to one file, each owned by one thread.

    A call goes on one queue; whichever connection's thread is free takes it
    and hands the result back with ``call_soon_threadsafe``. That round trip
    costs less than ``run_in_executor`` did (docs/benchmarks.md, "Queue"), and a connection
    never changes threads, so a cancelled caller cannot hand back one that is
    still in use: the call runs to its end and its result is dropped.

    Attributes:
        path: the database file.
        size: how many connections (and threads) at most.
        synchronous: ``PRAGMA synchronous`` of its connections (FULL: see `SYNCHRONOUS`).
    """

    path: Path
    size: int = 4
    _all: list[apsw.Connection] = attrs.field(factory=list, init=False)
    _calls: queue.SimpleQueue[_Call | None] = attrs.field(factory=queue.SimpleQueue, init=False)
    _threads: list[threading.Thread] = attrs.field(factory=list, init=False)
    _write_lock: threading.Lock = attrs.field(factory=threading.Lock, init=False)
    _closed: bool = attrs.field(default=False, init=False)
    synchronous: str = attrs.field(default=SYNCHRONOUS, kw_only=True)

    def open(self) -> None:
        for i in range(self.size):
            conn = connect(self.path, synchronous=self.synchronous)
            self._all.append(conn)
            thread = threading.Thread(
                target=_serve, args=(conn, self._calls), name=f"xbot-db-{i}", daemon=True
            )
            self._threads.append(thread)
        for thread in self._threads:
            thread.start()

    async def run(self, fn: Callable[[apsw.Connection], T]) -> T:
        """Run ``fn(conn)`` on a pooled connection in its thread (autocommit)."""
        if self._closed or not self._threads:
            raise StoreError("the database pool is closed")
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[T] = loop.create_future()
        self._calls.put(_Call(fn, fut, loop))
        return await fut

    async def write(self, fn: Callable[[apsw.Connection], T]) -> T:
        """Run ``fn(conn)`` inside one ``BEGIN IMMEDIATE`` transaction; rolls back on error."""
        return await self.run(lambda conn: self.write_sync(conn, fn))

    async def read(self, fn: Callable[[apsw.Connection], T]) -> T:
        """Run ``fn(conn)`` inside one short read transaction (a consistent snapshot)."""
        return await self.run(lambda conn: read_sync(conn, fn))

    def write_sync(self, conn: apsw.Connection, fn: Callable[[apsw.Connection], T]) -> T:
        with self._write_lock:
            return write_sync(conn, fn)

    async def checkpoint(self) -> None:
        """Fold the WAL back into the database and truncate it (call when idle)."""

        def _checkpoint(conn: apsw.Connection) -> None:
            conn.wal_checkpoint(mode=apsw.SQLITE_CHECKPOINT_TRUNCATE)

        await self.run(_checkpoint)

    async def close(self) -> None:
        """Let the calls already queued finish, then close every connection."""
        if self._closed:
            return
        self._closed = True
        for _ in self._threads:
            self._calls.put(None)  # one stop sign per thread, behind every queued call
        await asyncio.to_thread(_join_all, self._threads)
        self._threads.clear()
        for conn in self._all:
            with contextlib.suppress(apsw.Error):
                apsw.bestpractice.connection_optimize(conn)
            conn.close()
        self._all.clear()


@attrs.frozen
class _Call:
    """One call waiting for a connection: what to run, and where its result goes."""

    fn: Callable[[apsw.Connection], Any]
    fut: asyncio.Future[Any]
    loop: asyncio.AbstractEventLoop


def _serve(conn: apsw.Connection, calls: queue.SimpleQueue[_Call | None]) -> None:
    """A pool thread: run calls on its own connection until the stop sign."""
    while (call := calls.get()) is not None:
        if call.fut.cancelled():  # the caller gave up before it began: do nothing
            continue
        try:
            value = _translated(call.fn, conn)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, whatever it is
            _deliver(call, None, exc)
        else:
            _deliver(call, value, None)


def _deliver(call: _Call, value: object, exc: BaseException | None) -> None:
    with contextlib.suppress(RuntimeError):  # the loop closed: nobody is waiting any more
        call.loop.call_soon_threadsafe(settle_future, call.fut, value, exc)


def settle_future(fut: asyncio.Future[Any], value: object, exc: BaseException | None) -> None:
    """Hand a call's outcome to its waiter, unless the waiter gave up (the call ran anyway)."""
    if fut.done():
        return
    if exc is not None:
        fut.set_exception(exc)
    else:
        fut.set_result(value)


def _join_all(threads: list[threading.Thread]) -> None:
    for thread in threads:
        thread.join()


def _translated(fn: Callable[[apsw.Connection], T], conn: apsw.Connection) -> T:
    try:
        return fn(conn)
    except apsw.Error as exc:
        raise store_error(exc) from exc


def damaged(path: Path | str, detail: str) -> StoreDamaged:
    """The one line for a torn or corrupt database, with where to turn."""
    return StoreDamaged(
        f"the database {path} is damaged ({detail}); xbot will not use it: restore the "
        'latest backup (docs/deployment.md, "Backups and restore"), or move the file and '
        "its -wal aside to start empty"
    )


def store_error(exc: apsw.Error) -> StoreError:
    """apsw's error as ours; a lock or a full disk is `StoreBusy` (it may pass)."""
    if isinstance(exc, apsw.CorruptError):
        return damaged("file", str(exc))
    if isinstance(exc, apsw.BusyError):
        return StoreBusy(
            f"the database is locked by another process for longer than {BUSY_TIMEOUT_MS // 1000} s"
        )
    if isinstance(exc, apsw.FullError):
        return StoreBusy("the disk holding the database is full")
    return StoreError(f"database error: {exc}")


def write_sync(conn: apsw.Connection, fn: Callable[[apsw.Connection], T]) -> T:
    """``BEGIN IMMEDIATE`` … ``COMMIT`` around ``fn``; any exception rolls back."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = fn(conn)
    except BaseException:
        if not conn.get_autocommit():
            conn.execute("ROLLBACK")
        raise
    try:
        conn.execute("COMMIT")
    except BaseException:
        if not conn.get_autocommit():
            conn.execute("ROLLBACK")
        raise
    return result


def read_sync(conn: apsw.Connection, fn: Callable[[apsw.Connection], T]) -> T:
    conn.execute("BEGIN")
    try:
        return fn(conn)
    finally:
        if not conn.get_autocommit():
            conn.execute("COMMIT")


async def open_store(path: Path | str, *, size: int = 4) -> DbPool:
    """Create the folder, open the file, migrate it, and return a ready pool."""
    path = Path(path)
    try:
        await asyncio.to_thread(_prepare, path)
    except OSError as exc:
        raise StoreError(f"cannot create the database at {path}: {exc.strerror}") from exc
    pool = DbPool(path, size)
    await asyncio.to_thread(pool.open)
    return pool


def prepare_store(path: Path) -> int:
    """Synchronous half of `open_store` (also used by `xbot migrate`): returns the version."""
    _prepare(path)
    conn = connect(path)
    try:
        return migrations.current_version(conn)
    finally:
        conn.close()


def _prepare(path: Path) -> None:
    # A clean stop's last connection folds the -wal into the file and removes it:
    # one left behind means a crash or a power cut, after which the file is checked.
    unclean = Path(f"{path}-wal").exists()
    _check_version(path)
    _touch_private(path)
    conn = connect(path)
    try:
        if unclean:
            _check_whole(path, conn)
        migrations.migrate(conn)
    except (apsw.BusyError, apsw.FullError) as exc:
        raise store_error(exc) from exc
    except apsw.CorruptError as exc:
        raise damaged(path, str(exc)) from exc
    except apsw.Error as exc:
        raise StoreError(f"migrating {path} failed: {exc}") from exc
    except StoreError:
        raise
    finally:
        conn.close()
    log.debug("store ready path=%s", path)


def _check_whole(path: Path, conn: apsw.Connection) -> None:
    """``PRAGMA quick_check`` (every page read once; what it skips is index order):
    a torn or corrupt file is refused before anything reads or writes it.

    Only after an unclean stop: it reads the whole file (docs/benchmarks.md,
    "Power loss"), and SQLite's WAL with the pool's syncs leaves nothing torn
    on a disk that keeps its fsyncs; a disk that did not is what it finds.
    """
    verdict = [str(row[0]) for row in conn.execute("PRAGMA quick_check").fetchall()]
    if verdict != ["ok"]:
        raise damaged(path, "; ".join(verdict[:2]))
    log.info("database checked after an unclean stop path=%s", path)
