"""The one way the bot writes a file it must find whole after a power cut.

`write_atomically`: a temp file beside the target, its data synced, renamed
over the target, the folder synced. A reader (or the bot after a reboot)
sees the old file or the new one, never a torn or empty one: a rename before
the data is synced can come back as an empty file on ext4 and others.
`sync_folder` is the last step alone, for a file put in place some other
way (the backup). Which files are written this way and which
can be rebuilt instead: docs/reliability.md ("Power loss").
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def sync_folder(folder: Path) -> None:
    """Sync a folder, so the names created or renamed in it survive a power cut."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_file(path: Path) -> None:
    """Sync a file's data (and size) to the disk."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, data: bytes, *, mode: int = 0o600) -> None:
    """Replace ``path`` with ``data`` as one step that a power cut cannot tear.

    Private (``mode``, 0600 by default, whatever the umask and whatever a
    leftover temp file had). Raises `OSError`; the temp file is gone then.
    """
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, mode)
        try:
            os.fchmod(fd, mode)  # a .tmp left by a kill keeps its old mode otherwise
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    sync_folder(path.parent)
