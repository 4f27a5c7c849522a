"""ffmpeg, the program that merges a video's picture and sound: where it is, which
version, and its children stopped with the job that started them.

Sites that serve DASH or HLS (YouTube above 360p, Reddit, Vimeo, Bilibili, …)
keep picture and sound apart; yt-dlp downloads both and has ffmpeg copy them
into one MP4 (`xbot.sources.ytdlp`). Without ffmpeg the bot runs as before: the
best single file only (``xbot doctor`` says what is lost).

The merge is a child process that yt-dlp starts and waits for in the job's
thread, with no handle the job can reach. A job given up (its lease lost, the
bot stopping, too slow) ends it with `kill_children`: the children of this
process whose command line names the job's own temp folder, found in
``/proc`` (Linux, where the bot runs; elsewhere nothing is found).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import attrs

from xbot.logs import kv

log = logging.getLogger(__name__)

VERSION_TIMEOUT = 10.0
_VERSION = re.compile(r"^ffmpeg version (\S+)")


@attrs.frozen
class Ffmpeg:
    """An ffmpeg found on the PATH.

    Attributes:
        path: the program.
        version: as it says (``5.1.6-0+deb12u1``), "" when it would not say.
    """

    path: str
    version: str = ""


def parse_version(output: str) -> str:
    """The version from ``ffmpeg -version``'s first line. Pure."""
    match = _VERSION.match(output.strip())
    return match.group(1) if match else ""


def ffmpeg_path(which: Callable[[str], str | None] = shutil.which) -> str | None:
    """The ffmpeg the bot uses: the PATH's (Debian's package: /usr/bin/ffmpeg), or None."""
    return which("ffmpeg")


def find_ffmpeg(which: Callable[[str], str | None] = shutil.which) -> Ffmpeg | None:
    """`ffmpeg_path` and its version, or None (blocking: runs ``ffmpeg -version``)."""
    path = ffmpeg_path(which)
    if path is None:
        return None
    try:
        out = subprocess.run(  # noqa: S603 - the program found on the PATH, a fixed argument
            [path, "-version"], capture_output=True, text=True, timeout=VERSION_TIMEOUT, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None  # there, but it does not run: as good as missing
    return Ffmpeg(path=path, version=parse_version(out))


def _children(proc: Path) -> list[tuple[int, str]]:
    """(pid, command line) of each process whose parent is this one."""
    me = os.getpid()
    found: list[tuple[int, str]] = []
    for entry in proc.iterdir() if proc.is_dir() else ():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            # "pid (comm) state ppid …": comm may hold spaces and parentheses.
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid != me:
                continue
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile, or not ours to read
        found.append((int(entry.name), cmdline))
    return found


def kill_children(marker: str, proc: Path = Path("/proc")) -> list[int]:
    """Kill this process's children whose command line contains `marker` (a job's
    temp folder); return their pids. Never raises."""
    killed: list[int] = []
    for pid, cmdline in _children(proc):
        if marker and marker in cmdline:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
    if killed:
        log.info("killed a merge %s", kv(pids=killed))
    return killed
