"""The schema's history: `migrations_sql/NNNN_name.sql`, append-only.

Rules (each pinned by a test in tests/test_migrations.py):

- Files are numbered from 0000 without gaps; applying file N leaves
  ``PRAGMA user_version = N + 1``, so a fresh database is at 0 and the latest
  version is the number of files.
- A migration and its ``user_version`` bump commit in one transaction: a
  failure leaves the database at the previous version.
- A shipped file is frozen: never edited, never renumbered. The baseline
  (0000) never gains a column.

The files live at the repository root; the wheel carries them as
``xbot/migrations_sql`` (see pyproject.toml), so both places are searched.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import apsw
import attrs

from xbot.errors import SchemaTooNew, StoreError

_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


@attrs.frozen
class Migration:
    number: int
    name: str
    sql: str


def migrations_dir() -> Path:
    """Where the SQL files are: inside the installed package, else the checkout's root."""
    packaged = resources.files("xbot") / "migrations_sql"
    if packaged.is_dir():
        return Path(str(packaged))
    checkout = Path(__file__).resolve().parent.parent.parent / "migrations_sql"
    if checkout.is_dir():
        return checkout
    raise StoreError("the schema files (migrations_sql/) are missing from this installation")


def load_migrations(folder: Path | None = None) -> list[Migration]:
    """Every migration in order; refuses gaps, duplicates and stray names."""
    folder = folder or migrations_dir()
    found: list[Migration] = []
    for path in sorted(folder.iterdir()):
        if path.suffix != ".sql":
            continue
        match = _NAME.match(path.name)
        if not match:
            raise StoreError(f"migration file {path.name!r} is not named NNNN_name.sql")
        found.append(Migration(int(match.group(1)), path.name, path.read_text("utf-8")))
    for expected, mig in enumerate(found):
        if mig.number != expected:
            raise StoreError(f"migration {mig.name} is out of sequence (expected {expected:04d})")
    return found


def latest_version(migrations: list[Migration] | None = None) -> int:
    return len(migrations if migrations is not None else load_migrations())


def too_new(
    version: int, latest: int, path: Path | None = None, *, advice: str = "upgrade xbot"
) -> SchemaTooNew:
    """The one sentence for a database at `version` from a newer xbot than this one
    (which knows up to `latest`); `advice` says what to do instead."""
    where = "the database" if path is None else f"the database {path}"
    return SchemaTooNew(
        f"{where} is at schema version {version}, but this xbot knows only up to {latest}: "
        f"it was used by a newer xbot; {advice} (nothing was changed)"
    )


def current_version(conn: apsw.Connection) -> int:
    return int(conn.pragma("user_version"))


def migrate(conn: apsw.Connection, migrations: list[Migration] | None = None) -> int:
    """Apply what is pending, each file in its own transaction. Returns the new version.

    A database newer than this code is refused before anything is written.
    """
    migs = migrations if migrations is not None else load_migrations()
    version = current_version(conn)
    if version > len(migs):
        raise too_new(version, len(migs))
    for mig in migs[version:]:
        # BEGIN IMMEDIATE: take the write lock up front, and re-check the version
        # under it so two processes starting at once do not both apply a file.
        conn.execute("BEGIN IMMEDIATE")
        try:
            if current_version(conn) != mig.number:
                conn.execute("ROLLBACK")
                continue
            conn.execute(mig.sql)
            conn.execute(f"PRAGMA user_version = {mig.number + 1}")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
    return current_version(conn)
