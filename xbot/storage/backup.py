"""`xbot backup PATH`: an online copy of the database, consistent while the bot runs.

SQLite's backup API copies the pages of a live database (`xbot.storage.db.copy_live`,
which owns the connections). It is run in one step, inside one read
transaction: in WAL mode a reader sees one snapshot and never blocks the
bot's writers, so the copy is exactly the database as of the moment the step
began. (Stepping in small chunks would let the bot's commits restart the copy
from scratch each time, and a busy bot could keep it from ever finishing.)

The copy is written to a private temporary file next to the destination,
switched out of WAL mode so it is one self-contained file, checked with
``PRAGMA integrity_check``, and only then renamed into place, mode 0600: a
failed or interrupted backup never leaves a half-written file under the
name the operator asked for.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import BinaryIO

import apsw
import attrs

from xbot.errors import StoreError
from xbot.storage import migrations
from xbot.storage.db import copy_live
from xbot.storage.files import sync_file, sync_folder


@attrs.frozen
class BackupResult:
    """What was written.

    Attributes:
        path: the backup file.
        size: its size in bytes.
        schema_version: the schema version inside it.
        tasks: how many rows its task table holds.
        seconds: how long the copy took.
    """

    path: Path
    size: int
    schema_version: int
    tasks: int
    seconds: float


def backup_name(now: float) -> str:
    """The file name used when the destination is a folder, e.g. xbot-20250101-120000.sqlite3."""
    return time.strftime("xbot-%Y%m%d-%H%M%S.sqlite3", time.gmtime(now))


def resolve_destination(dest: Path, now: float) -> Path:
    """A folder gets a time-stamped file inside it; anything else is the file itself."""
    return dest / backup_name(now) if dest.is_dir() else dest


def backup(
    db_path: Path, dest: Path, *, force: bool = False, now: float | None = None
) -> BackupResult:
    """Copy the database at `db_path` to `dest` (a file, or a folder to put one in).

    Raises `FileExistsError` when the file exists and not `force`, `StoreError` when the
    database cannot be read or the copy fails its check, and `OSError` for the destination.
    """
    started = time.monotonic()
    target = resolve_destination(dest, time.time() if now is None else now)
    if not db_path.is_file():
        raise StoreError(f"there is no database at {db_path} (is XBOT_DATA_DIR right?)")
    if target.exists() and not force:
        raise FileExistsError(f"{target} exists; choose another name or pass --force")
    if target.resolve() == db_path.resolve():
        raise StoreError(f"{target} is the live database itself")
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=".xbot-backup-", suffix=".tmp", dir=target.parent)
    os.close(fd)  # mkstemp made it 0600; SQLite takes an empty file as an empty database
    tmp = Path(tmp_name)
    try:
        version, tasks = copy_live(db_path, tmp, _check_copy)
        sync_file(tmp)
        if force:
            # A stale -wal beside an overwritten database would be replayed into it.
            for suffix in ("-wal", "-shm", "-journal"):
                Path(f"{target}{suffix}").unlink(missing_ok=True)
        os.replace(tmp, target)
        sync_folder(target.parent)  # the rename is durable once the folder is
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return BackupResult(
        path=target,
        size=target.stat().st_size,
        schema_version=version,
        tasks=tasks,
        seconds=time.monotonic() - started,
    )


def backup_to_stream(db_path: Path, out: BinaryIO, *, scratch: Path | None = None) -> BackupResult:
    """`backup` into a private temp folder, then the bytes to `out` (``xbot backup -``).

    For `xbotctl`, whose command runs as the service's user in the service's
    sandbox: it can write nowhere but its own directories, but its standard
    output reaches the operator's shell.
    """
    with tempfile.TemporaryDirectory(prefix="xbot-backup-", dir=scratch) as folder:
        result = backup(db_path, Path(folder) / "xbot.sqlite3")
        with result.path.open("rb") as f:
            shutil.copyfileobj(f, out)
        out.flush()
    return attrs.evolve(result, path=Path("-"))


def _check_copy(copy: apsw.Connection) -> tuple[int, int]:
    """The copy's integrity, schema version and task count (raises `StoreError` if broken)."""
    verdict = [str(row[0]) for row in copy.execute("PRAGMA integrity_check").fetchall()]
    if verdict != ["ok"]:
        raise StoreError(f"the copy failed its integrity check: {'; '.join(verdict[:3])}")
    version = migrations.current_version(copy)
    has_tasks = copy.execute(
        "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'tasks'"
    ).fetchall()
    tasks = int(copy.execute("SELECT count(*) FROM tasks").fetchall()[0][0]) if has_tasks else 0  # type: ignore[arg-type]
    return version, tasks
