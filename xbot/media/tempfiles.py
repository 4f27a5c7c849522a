"""Temp files and folders for downloads: prefixed, private, always removed.

Everything lives in ``<data dir>/tmp`` (mode 0700) and carries `TEMP_PREFIX`,
so the startup and periodic sweep can remove what a crash left behind
without touching anything else. Names come from `tempfile` (random, created
exclusively), never from user input: a suffix is the only part a caller
chooses, and it is whitelisted.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

TEMP_PREFIX = "xbot-"
DEFAULT_MAX_AGE = 3600.0
# What this process has open right now: the sweep never removes these, whatever
# their mtime says (a forward step of the wall clock makes a fresh file look old).
_in_use: set[Path] = set()

_SUFFIX = re.compile(r"[.a-z0-9]{0,8}")


def temp_dir(base: Path) -> Path:
    """``base/tmp``, created private to this user."""
    path = base / "tmp"
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    # mkdir's mode is filtered by the umask and ignored for an existing folder.
    path.chmod(0o700)
    return path


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
