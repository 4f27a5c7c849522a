"""Duration and picture size from an MP4's header, for sendVideo's player.

A direct video link (or a page with a bare ``<video src>``) tells yt-dlp
nothing about the video, and a video sent without width, height and
duration shows in Telegram as a square with no length. The MP4 itself
knows: ``moov/mvhd`` has the duration, ``moov/trak/tkhd`` the display size
and the rotation matrix (a phone video filmed upright is stored sideways).
Only the ``moov`` box is read (it may sit at the end of the file), with a
bound; anything that does not parse is "unknown", never an error.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import attrs

MAX_MOOV = 32 * 1024 * 1024  # a long video's sample tables; beyond this, junk
_FIXED = 65536  # 16.16 fixed point


@attrs.frozen
class Mp4Info:
    """What the header says; None where it does not.

    Attributes:
        duration: seconds.
        width, height: the display size (after the track's rotation).
    """

    duration: float | None = None
    width: int | None = None
    height: int | None = None


def boxes(data: bytes, start: int = 0, end: int | None = None) -> Iterator[tuple[bytes, int, int]]:
    """(type, payload start, payload end) of each box in ``data[start:end]``; stops at junk."""
    end = len(data) if end is None else end
    pos = start
    while pos + 8 <= end:
        size, kind = struct.unpack_from(">I4s", data, pos)
        header = 8
        if size == 1:
            if pos + 16 > end:
                return
            (size,) = struct.unpack_from(">Q", data, pos + 8)
            header = 16
        elif size == 0:
            size = end - pos
        if size < header or pos + size > end:
            return
        yield kind, pos + header, pos + size
        pos += size


def _mvhd(data: bytes, start: int, end: int) -> float | None:
    version = data[start] if start < end else -1
    if version == 0 and start + 20 <= end:
        timescale, duration = struct.unpack_from(">II", data, start + 12)
    elif version == 1 and start + 32 <= end:
        (timescale,) = struct.unpack_from(">I", data, start + 20)
        (duration,) = struct.unpack_from(">Q", data, start + 24)
    else:
        return None
    if not timescale or not duration or duration in (0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF):
        return None
    return float(duration) / float(timescale)


def _tkhd(data: bytes, start: int, end: int) -> tuple[int, int] | None:
    version = data[start] if start < end else -1
    # version/flags, times, track id, reserved, duration: then 8 reserved, 8 more fields.
    fixed = {0: 4 + 20, 1: 4 + 32}.get(version)
    if fixed is None:
        return None
    matrix_at = start + fixed + 8 + 8
    if matrix_at + 36 + 8 > end:
        return None
    a, b, _u, c, d = struct.unpack_from(">iiiii", data, matrix_at)
    width, height = struct.unpack_from(">II", data, matrix_at + 36)
    width, height = width // _FIXED, height // _FIXED
    if not width or not height:
        return None  # a sound track
    if a == 0 and d == 0 and abs(b) == _FIXED and abs(c) == _FIXED:
        width, height = height, width  # turned by 90 or 270 degrees
    return width, height


def parse_moov(data: bytes) -> Mp4Info:
    """Pure: the duration and the first picture track's size from a ``moov`` payload."""
    duration: float | None = None
    size: tuple[int, int] | None = None
    for kind, start, end in boxes(data):
        if kind == b"mvhd":
            duration = _mvhd(data, start, end)
        elif kind == b"trak" and size is None:
            for inner, s, e in boxes(data, start, end):
                if inner == b"tkhd":
                    size = _tkhd(data, s, e)
    width, height = size if size else (None, None)
    return Mp4Info(duration=duration, width=width, height=height)


def probe_mp4(path: Path) -> Mp4Info:
    """Read the ``moov`` box of the file at `path` (blocking: call it in a thread)."""
    try:
        with path.open("rb") as f:
            total = path.stat().st_size
            pos = 0
            while pos + 8 <= total:
                f.seek(pos)
                head = f.read(16)
                if len(head) < 8:
                    break
                size, kind = struct.unpack_from(">I4s", head)
                header = 8
                if size == 1 and len(head) == 16:
                    (size,) = struct.unpack_from(">Q", head, 8)
                    header = 16
                elif size == 0:
                    size = total - pos
                if size < header:
                    break
                if kind == b"moov":
                    if size > MAX_MOOV:
                        break
                    f.seek(pos + header)
                    return parse_moov(f.read(size - header))
                pos += size
    except OSError:
        pass
    return Mp4Info()
