"""The power-cut model (tests/powercut) checked against files and against SQLite itself.

Before the bot is judged by it, the model must show what a real disk does:
an unsynced write is gone after the cut, a synced one stays, a file renamed
before its data was synced comes back empty; and SQLite in WAL mode loses the
commits after its last sync with ``synchronous=NORMAL``, loses none that
returned with ``FULL``, and its file passes ``integrity_check`` either way.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import apsw
import pytest
from powercut import Disk, build

pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def shim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("powercut"))


@pytest.fixture
def disk(shim: Path, tmp_path: Path) -> Disk:
    d = Disk(shim, tmp_path / "data", tmp_path / "shadow")
    d.power_on()
    return d


@contextlib.contextmanager
def child(disk: Disk, code: str) -> Iterator[IO[str]]:
    """``code`` run under the model; its output to read; killed at the end (the power cut)."""
    with subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), str(disk.root)],
        env={**os.environ, **disk.env()},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stdout is not None
        try:
            yield proc.stdout
        finally:
            proc.kill()
            proc.wait(10)


def run_then_cut(disk: Disk, code: str) -> list[str]:
    """Run ``code`` under the model to its end (it must not exit: it waits), then cut."""
    with child(disk, code) as out:
        assert out.readline() == "ready\n"
    return disk.cut()


FILES = """
import os, sys
from pathlib import Path
from typing import IO
root = Path(sys.argv[1])
def put(name, data, sync):
    fd = os.open(root / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, data)
    if sync:
        os.fsync(fd)
    os.close(fd)
put("synced", b"kept", True)
put("unsynced", b"lost", False)
put("old", b"old", True)
fd = os.open(root / "old", os.O_WRONLY | os.O_APPEND)
os.write(fd, b" and more")  # after the sync: gone
os.close(fd)
put("tmp-bare", b"new", False)
os.replace(root / "tmp-bare", root / "renamed-bare")
put("tmp-synced", b"new", True)
os.replace(root / "tmp-synced", root / "renamed-synced")
put("doomed", b"x", True)
os.unlink(root / "doomed")
os.makedirs(root / "sub")
put("sub/deep", b"deep", True)
print("ready", flush=True)
sys.stdin.read()
"""


def test_the_model_keeps_what_was_synced_and_nothing_else(disk: Disk) -> None:
    run_then_cut(disk, FILES)
    found = {
        str(p.relative_to(disk.root)): p.read_bytes() for p in disk.root.rglob("*") if p.is_file()
    }
    assert found == {
        "synced": b"kept",
        "unsynced": b"",  # its name is on the disk, its data never was
        "old": b"old",
        "renamed-bare": b"",  # renamed before a sync: the classic lost config file
        "renamed-synced": b"new",
        "sub/deep": b"deep",
    }


# Commits one row at a time, printing each id once COMMIT returned; waits after COUNT.
WRITER = """
import sys, apsw
conn = apsw.Connection(sys.argv[1] + "/db.sqlite3")
conn.pragma("journal_mode", "wal")
conn.pragma("synchronous", "{sync}")
conn.wal_autocheckpoint({pages})
for i in range({count}):
    with conn:
        conn.execute("INSERT INTO t (body) VALUES (?)", (bytes(1000),))
    print(conn.last_insert_rowid(), flush=True)
print("ready", flush=True)
sys.stdin.read()
"""


def create_table(disk: Disk) -> None:
    conn = apsw.Connection(str(disk.root / "db.sqlite3"))
    conn.pragma("journal_mode", "wal")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB)")
    conn.close()  # the last connection: checkpointed, and the -wal removed
    disk.power_on()


def rows_after_cut(disk: Disk, sync: str, pages: int, count: int) -> tuple[int, list[str]]:
    create_table(disk)
    with child(disk, WRITER.format(sync=sync, pages=pages, count=count)) as out:
        lines = [out.readline() for _ in range(count + 1)]  # bounded: ends at EOF
        assert lines[-1] == "ready\n", f"the writer stopped early: {lines[-3:]}"
    disk.cut()
    conn = apsw.Connection(str(disk.root / "db.sqlite3"))
    try:
        verdict = [str(r[0]) for r in conn.execute("PRAGMA integrity_check").fetchall()]
        (rows,) = conn.execute("SELECT count(*) FROM t").fetchall()[0]
    finally:
        conn.close()
    return int(rows), verdict  # type: ignore[call-overload]


@pytest.mark.parametrize(
    ("sync", "pages", "survive"),
    [
        ("NORMAL", 4000, "none"),  # no checkpoint ran: the WAL was never synced
        ("NORMAL", 40, "some"),  # a checkpoint syncs; the commits after it are gone
        ("FULL", 4000, "all"),
        ("FULL", 40, "all"),  # checkpoints and WAL restarts under the model
    ],
    ids=["normal", "normal-checkpoints", "full", "full-checkpoints"],
)
def test_sqlite_under_the_model(disk: Disk, sync: str, pages: int, survive: str) -> None:
    count = 150
    rows, verdict = rows_after_cut(disk, sync, pages, count)
    assert verdict == ["ok"]
    expected = {"none": rows == 0, "some": 0 < rows < count, "all": rows == count}
    assert expected[survive], f"{rows} of {count} committed rows after the cut"


# The bot's one way to write a file that must survive (xbot.storage.files), against the
# rename-before-sync the health record used: after the cut, whole or empty.
REWRITES = """
import os, sys
from pathlib import Path
from xbot.storage.files import write_atomically
root = Path(sys.argv[1])
for i in range(20):
    write_atomically(root / "atomic.json", b'{"n": %d}' % i)
    tmp = root / "naive.tmp"
    tmp.write_bytes(b'{"n": %d}' % i)
    os.replace(tmp, root / "naive.json")
print("ready", flush=True)
sys.stdin.read()
"""


def test_a_file_written_atomically_survives_a_cut_whole(disk: Disk) -> None:
    run_then_cut(disk, REWRITES)
    assert (disk.root / "atomic.json").read_bytes() == b'{"n": 19}'
    assert (disk.root / "naive.json").read_bytes() == b"", "the model must catch the naive way"
