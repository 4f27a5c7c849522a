"""Video thumbnails: fetched as a courtesy, sent only when Telegram would take them.

Telegram's rule for the ``thumbnail`` of sendVideo and InputMediaVideo (Bot
API): a JPEG under 200 kB whose width and height are at most 320, and it is
"ignored if the file is not uploaded using multipart/form-data" — so only an
uploaded video carries one (`xbot.sending.sender` decides that).

There is no image library here (no Pillow), so nothing is converted or
scaled: a still that breaks the rule is dropped and Telegram makes its own
from the video. Whether it fits is read from the JPEG's own frame header
(SOF), not from the server's word: `jpeg_size` walks the segments.

A thumbnail is never worth a failed video: `fetch` returns None on any
failure (logged at debug) and the video goes without.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from pathlib import Path

import httpx

from xbot.errors import FetchError
from xbot.logs import kv
from xbot.media.download import download

log = logging.getLogger(__name__)

# "less than 200 kB": the smaller reading of kB, so no reading of the rule refuses it.
MAX_BYTES = 200_000
MAX_SIDE = 320
# A slow image host may not hold up the video much; the client's own timeouts are longer.
FETCH_TIMEOUT = 10.0
FILENAME = "thumb.jpg"

_SOI = b"\xff\xd8"
# Start-of-frame markers carry the picture size: C0-CF but DHT (C4), JPG (C8) and DAC (CC).
_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
# Markers that stand alone, without a length: TEM and the restart markers.
_STANDALONE = frozenset({0x01, *range(0xD0, 0xD8)})


def jpeg_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) from a JPEG's frame header, or None if `data` is no JPEG we can read.

    Walks the segments from the start (an Exif block with its own little JPEG
    inside is skipped whole, so its size is never taken for the picture's).
    A scan before any frame header, the end marker, a truncated or malformed
    segment, or a height of 0 (given later by a DNL marker) all give None.
    """
    if not data.startswith(_SOI):
        return None
    pos, end = 2, len(data)
    while pos + 2 <= end:
        if data[pos] != 0xFF:
            return None
        marker = data[pos + 1]
        if marker == 0xFF:  # fill bytes may pad before a marker
            pos += 1
            continue
        if marker in _STANDALONE:
            pos += 2
            continue
        if marker in (0x00, 0xD8, 0xD9, 0xDA):  # stuffing, a second SOI, end, scan: no frame
            return None
        if pos + 4 > end:
            return None
        (length,) = struct.unpack_from(">H", data, pos + 2)
        if length < 2:
            return None
        if marker in _SOF:
            # length(2) precision(1) height(2) width(2) components(1)
            if length < 8 or pos + 9 > end:
                return None
            height, width = struct.unpack_from(">HH", data, pos + 5)
            return (width, height) if width and height else None
        pos += 2 + length
    return None


def acceptable(data: bytes) -> bool:
    """Telegram's thumbnail rule: a JPEG, under 200 kB, at most 320 x 320."""
    if len(data) > MAX_BYTES:
        return False
    size = jpeg_size(data)
    return size is not None and max(size) <= MAX_SIDE


def read_acceptable(path: Path) -> bytes | None:
    """The file's bytes if they make a thumbnail Telegram takes, else None (never raises)."""
    try:
        with path.open("rb") as f:
            data = f.read(MAX_BYTES + 1)  # never more than the rule allows, whatever is there
    except OSError as exc:
        log.debug("thumbnail unreadable %s", kv(path=path.name, error=type(exc).__name__))
        return None
    return data if acceptable(data) else None


def _drop(path: Path) -> None:
    # One syscall on a small file in our own temp folder: not worth a thread hop.
    path.unlink(missing_ok=True)


async def fetch(client: httpx.AsyncClient, url: str, dest: Path) -> Path | None:
    """Download `url` to `dest` (in the job's temp folder) if it is a thumbnail Telegram takes.

    `client` must be the guarded one: the URL comes from fetched content. The
    download stops past `MAX_BYTES` and after `FETCH_TIMEOUT` seconds; any
    failure (refused, gone, too big, not a small JPEG) gives None and no file.
    """
    try:
        async with asyncio.timeout(FETCH_TIMEOUT):
            await download(client, url, dest, max_bytes=MAX_BYTES)
        if read_acceptable(dest) is not None:
            return dest
        reason = "not a JPEG of at most 320x320"
    except (FetchError, OSError, TimeoutError) as exc:
        reason = getattr(exc, "reason", None) or type(exc).__name__
    _drop(dest)
    log.debug("video sent without thumbnail %s", kv(url=url, reason=reason))
    return None
