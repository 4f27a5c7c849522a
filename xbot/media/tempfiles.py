"""Temp files and folders for downloads: prefixed, private, always removed.

Everything lives in ``<data dir>/tmp`` (mode 0700) and carries `TEMP_PREFIX`,
so the startup and periodic sweep can remove what a crash left behind
without touching anything else. Names come from `tempfile` (random, created
exclusively), never from user input: a suffix is the only part a caller
chooses, and it is whitelisted.

Before a download stages a file here, `room` looks at the free space, less what
the downloads in flight may still write, and holds the new one's cap:
an album is staged whole (up to ten files of the upload limit each, per
worker), and a disk filled to the last byte would stop SQLite too. When the
file could bring the free space under the margin (`DISK_MARGIN`, or a
tenth of a smaller disk), the download is not
started: the task is retried later (a `TransientFetch`) and the operator's
log says why.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import stat
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from xbot.errors import TransientFetch
from xbot.i18n import N_
from xbot.logs import kv

log = logging.getLogger(__name__)

TEMP_PREFIX = "xbot-"
# What a download may never leave less of: room for the database, its WAL and the logs;
# a tenth of a smaller disk (a 64 MB tmpfs in the soak).
DISK_MARGIN = 256 * 1024 * 1024
DISK_LOW = N_("The bot's disk is nearly full, so I will try this link again later.")
DEFAULT_MAX_AGE = 3600.0
# What this process has open right now: the sweep never removes these, whatever
# their mtime says (a forward step of the wall clock makes a fresh file look old).
_in_use: set[Path] = set()


class _Held:
    """Bytes that downloads in flight may still write (each its whole cap): the disk's
    free space does not show them yet, and up to 4 x XBOT_WORKERS tasks download at
    once. yt-dlp's downloads run in threads, hence the lock."""

    def __init__(self) -> None:
        self.bytes = 0
        self.lock = threading.Lock()


_held = _Held()

_SUFFIX = re.compile(r"[.a-z0-9]{0,8}")


def temp_dir(base: Path) -> Path:
    """``base/tmp``, created private to this user."""
    path = base / "tmp"
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    # mkdir's mode is filtered by the umask and ignored for an existing folder.
    path.chmod(0o700)
    return path


def margin_of(total: int) -> int:
    """The free space a download must leave on a disk of `total` bytes. Pure."""
    return min(DISK_MARGIN, total // 10)


def room_for(need: int, free: int, margin: int) -> bool:
    """Whether `need` more bytes leave at least `margin` free. Pure."""
    return free - need >= margin


@contextmanager
def room(folder: Path, need: int, margin: int | None = None) -> Iterator[None]:
    """`check_room`, and `need` bytes held for the block: downloads in flight at the
    same time each count the others' caps, so together they cannot pass the margin."""
    with _held.lock:
        check_room(folder, need, margin, reserved=_held.bytes)
        _held.bytes += need
    try:
        yield
    finally:
        with _held.lock:
            _held.bytes -= need


def check_room(folder: Path, need: int, margin: int | None = None, *, reserved: int = 0) -> None:
    """Refuse, for now, a download of up to `need` bytes into `folder` that could leave
    less than `margin` (default `margin_of` the disk) free, counting `reserved` bytes
    that others may still write; one WARNING line says so.

    Raises:
        TransientFetch: not enough room; the task is retried later.
    """
    try:
        usage = shutil.disk_usage(folder)
    except OSError:
        return  # the folder is gone or unreadable: the write itself will say so
    free = usage.free - reserved
    if margin is None:
        margin = margin_of(usage.total)
    if room_for(need, free, margin):
        return
    mb = 1024 * 1024
    log.warning(
        "disk nearly full, download put off %s",
        kv(folder=folder, free_mb=free // mb, need_mb=need // mb, margin_mb=margin // mb),
    )
    raise TransientFetch(DISK_LOW)


def _check_suffix(suffix: str) -> str:
    if not _SUFFIX.fullmatch(suffix):
        raise ValueError(f"temp suffix must match [.a-z0-9]{{0,8}}, got {suffix!r}")
    return suffix


@contextmanager
def temp_path(base: Path, suffix: str = "") -> Iterator[Path]:
    """A fresh empty file (mode 0600) under `temp_dir`, removed when the block ends.

    Removal runs on any exit: normal, exception, or a task's cancellation
    (``CancelledError`` passes through the ``with`` like any exception).
    Works as is inside coroutines: nothing here awaits.
    """
    fd, name = tempfile.mkstemp(
        prefix=TEMP_PREFIX, suffix=_check_suffix(suffix), dir=temp_dir(base)
    )
    os.close(fd)
    path = Path(name)
    _in_use.add(path)
    try:
        yield path
    finally:
        _in_use.discard(path)
        path.unlink(missing_ok=True)


@contextmanager
def temp_folder(base: Path) -> Iterator[Path]:
    """A fresh private folder under `temp_dir` (for yt-dlp's files), removed with its contents."""
    path = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=temp_dir(base)))
    _in_use.add(path)
    try:
        yield path
    finally:
        _in_use.discard(path)
        shutil.rmtree(path, ignore_errors=True)


def _newest_mtime(path: Path) -> float:
    """The newest modification time in a tree: a folder's own mtime does not move when a file
    inside it grows, and a long download must not look idle."""
    newest = path.lstat().st_mtime
    for root, dirs, files in os.walk(path):
        for name in (*dirs, *files):
            try:
                newest = max(newest, os.lstat(os.path.join(root, name)).st_mtime)
            except FileNotFoundError:
                continue
    return newest


def sweep_temp(base: Path, now: float, max_age: float = DEFAULT_MAX_AGE) -> int:
    """Remove prefixed temp files and folders untouched for `max_age` seconds; return how many.

    Entries without the prefix are never touched, nor those this process has open
    (`temp_path`, `temp_folder`). Symlinks are removed, not followed. ``now`` is the
    wall clock: mtimes are.
    """
    folder = base / "tmp"
    if not folder.is_dir():
        return 0
    removed = 0
    for entry in folder.iterdir():
        if not entry.name.startswith(TEMP_PREFIX) or entry in _in_use:
            continue
        try:
            is_dir = stat.S_ISDIR(entry.lstat().st_mode)
            age = now - (_newest_mtime(entry) if is_dir else entry.lstat().st_mtime)
            if age < max_age:
                continue
            if is_dir:
                shutil.rmtree(entry)
            else:
                entry.unlink()
        except FileNotFoundError:
            continue  # removed by its owner while we looked
        removed += 1
    return removed
