"""`xbot backup`: a consistent copy while a writer keeps committing."""

from __future__ import annotations

import stat
import threading
import time
from pathlib import Path

import apsw
import pytest
from conftest import wait_until

from standins.queue_sync import SyncQueue
from xbot.errors import StoreError
from xbot.storage import migrations
from xbot.storage.backup import backup, backup_name
from xbot.storage.db import connect, prepare_store

PAYLOAD = {"url": "https://x.com/a/status/1", "pad": "x" * 2000}


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "data" / "xbot.sqlite3"
    prepare_store(path)
    return path


def _fill(path: Path, count: int) -> None:
    conn = connect(path)
    try:
        conn.execute("BEGIN IMMEDIATE")
        for i in range(count):
            conn.execute(
                "INSERT INTO tasks (kind, chat_id, payload, run_after, created_at, updated_at)"
                " VALUES ('deliver', ?, ?, 0, 0, 0)",
                (i % 50, "x" * 2000),
            )
        conn.execute("COMMIT")
    finally:
        conn.close()


def _ids(path: Path) -> list[int]:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return [int(r[0]) for r in conn.execute("SELECT id FROM tasks ORDER BY id")]  # type: ignore[arg-type]
    finally:
        conn.close()


def _integrity(path: Path) -> list[str]:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return [str(r[0]) for r in conn.execute("PRAGMA integrity_check")]
    finally:
        conn.close()


class Writer(threading.Thread):
    """Enqueues tasks one transaction each, recording every id once its commit returned."""

    def __init__(self, path: Path) -> None:
        super().__init__(daemon=True)
        self.path = path
        self.committed: list[int] = []
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        conn = connect(self.path)
        queue = SyncQueue(conn)
        try:
            n = 0
            while not self.stop.is_set():
                n += 1
                task = queue.enqueue("deliver", PAYLOAD, n % 7, now=time.time())
                self.committed.append(task.id)
        except BaseException as exc:
            self.error = exc
        finally:
            conn.close()


def test_consistent_copy_while_a_writer_commits(db: Path, tmp_path: Path) -> None:
    _fill(db, 20_000)  # ~40 MB: the copy takes long enough for the writer to interleave
    writer = Writer(db)
    writer.start()
    try:
        wait_until(lambda: len(writer.committed) >= 50)
        committed_before = set(writer.committed)
        count_at_start = len(writer.committed)
        result = backup(db, tmp_path / "copy.sqlite3")
        count_at_end = len(writer.committed)
        wait_until(lambda: len(writer.committed) > count_at_end + 10)  # still writing after
    finally:
        writer.stop.set()
        writer.join(10)
    assert writer.error is None
    assert count_at_end > count_at_start, "the writer was blocked during the backup"
    assert _integrity(result.path) == ["ok"]
    ids = _ids(result.path)
    assert committed_before <= set(ids)
    # One snapshot: ids are handed out in commit order, so the copy holds a prefix.
    assert ids == list(range(1, len(ids) + 1))
    assert result.tasks == len(ids)
    assert result.schema_version == migrations.latest_version()
    assert stat.S_IMODE(result.path.stat().st_mode) == 0o600
    assert not Path(f"{result.path}-wal").exists()


def test_refuses_to_overwrite_unless_forced(db: Path, tmp_path: Path) -> None:
    dest = tmp_path / "copy.sqlite3"
    dest.write_text("precious")
    with pytest.raises(FileExistsError, match="--force"):
        backup(db, dest)
    assert dest.read_text() == "precious"
    Path(f"{dest}-wal").write_bytes(b"stale")
    result = backup(db, dest, force=True)
    assert _integrity(result.path) == ["ok"]
    assert not Path(f"{dest}-wal").exists()


def test_a_folder_gets_a_timestamped_file(db: Path, tmp_path: Path) -> None:
    folder = tmp_path / "backups"
    folder.mkdir()
    result = backup(db, folder, now=1_700_000_000)
    assert result.path == folder / "xbot-20231114-221320.sqlite3"
    assert backup_name(1_700_000_000) == result.path.name
    assert [p.name for p in folder.iterdir()] == [result.path.name]  # no temp file left


def test_missing_database_and_self_copy(db: Path, tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no database"):
        backup(tmp_path / "nothing.sqlite3", tmp_path / "copy.sqlite3")
    with pytest.raises(StoreError, match="live database itself"):
        backup(db, db, force=True)


def test_a_failed_copy_leaves_nothing(tmp_path: Path) -> None:
    junk = tmp_path / "junk.sqlite3"
    junk.write_bytes(b"not a database" * 100)
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(StoreError):
        backup(junk, out / "copy.sqlite3")
    assert list(out.iterdir()) == []
