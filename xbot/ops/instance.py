"""One bot per data dir: an advisory lock on ``<data_dir>/xbot.lock``.

Two bots on one database would both poll Telegram (a 409 Conflict for one of
them) and, worse, the second one's startup could not tell a crashed
process's leases from a live process's. Holding the lock, the starting bot
knows every lease in the database belongs to a process that is gone, and
hands them back at once instead of waiting for them to expire.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from pathlib import Path

import attrs

from xbot.errors import StoreError
from xbot.logs import kv

log = logging.getLogger(__name__)

LOCK_NAME = "xbot.lock"


@attrs.define
class InstanceLock:
    """Held from `acquire` until `release` (or the process dies: the kernel drops it)."""

    path: Path
    _fd: int | None = attrs.field(default=None, init=False)

    def acquire(self) -> None:
        make_private(self.path.parent)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            who = f" (pid {holder})" if holder else ""
            raise StoreError(
                f"another xbot is already running on {self.path.parent}{who}; "
                "stop it first, or give this one its own XBOT_DATA_DIR"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None


def make_private(folder: Path) -> None:
    """Create the data dir readable by its owner only, or close one that others could list.

    The database and temp files in it are private already; an existing folder
    left at 0755 still shows who uses the bot's names and sizes. Only a folder
    we own is changed (never a shared parent someone pointed us at).
    """
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    info = folder.stat()
    if info.st_uid == os.geteuid() and info.st_mode & 0o077:
        os.chmod(folder, 0o700)
        log.warning("data dir was open to others; made it private %s", kv(path=folder))


def instance_lock(data_dir: Path) -> InstanceLock:
    return InstanceLock(data_dir / LOCK_NAME)


def _read_pid(fd: int) -> str:
    with contextlib.suppress(OSError, ValueError):
        os.lseek(fd, 0, os.SEEK_SET)
        return str(int(os.read(fd, 32).decode().strip()))
    return ""
