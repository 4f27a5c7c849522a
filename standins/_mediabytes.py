"""Media bytes for the stand-ins: a real tiny JPEG encoder, MP4-ish bytes, big streams, sniffing.

No Pillow: the JPEG encoder writes a baseline JPEG of one solid colour (every
8x8 block carries only its DC coefficient), which any decoder reads and whose
size we choose, so tests can exercise Telegram's photo-dimension rules.
"""

from __future__ import annotations

import gzip
import hashlib
import struct
import zlib
from collections.abc import Iterator

import attrs

from xbot.media.thumbnail import jpeg_size

# Huffman table for DC differences: the standard luminance table (ITU T.81 K.3).
_DC_BITS = (0, 1, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0)
_DC_VALS = tuple(range(12))
# AC: one symbol, EOB (0x00), with the one-bit code "0": every block is DC only.
_AC_BITS = (1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
_AC_VALS = (0x00,)


def _canonical_codes(bits: tuple[int, ...], vals: tuple[int, ...]) -> dict[int, tuple[int, int]]:
    codes: dict[int, tuple[int, int]] = {}
    code = 0
    k = 0
    for length, count in enumerate(bits, start=1):
        for _ in range(count):
            codes[vals[k]] = (code, length)
            code += 1
            k += 1
        code <<= 1
    return codes


_DC_CODES = _canonical_codes(_DC_BITS, _DC_VALS)
_AC_CODES = _canonical_codes(_AC_BITS, _AC_VALS)


class _BitWriter:
    def __init__(self) -> None:
        self.out = bytearray()
        self._acc = 0
        self._n = 0

    def write(self, value: int, length: int) -> None:
        self._acc = (self._acc << length) | (value & ((1 << length) - 1))
        self._n += length
        while self._n >= 8:
            self._n -= 8
            byte = (self._acc >> self._n) & 0xFF
            self.out.append(byte)
            if byte == 0xFF:
                self.out.append(0x00)  # byte stuffing
        self._acc &= (1 << self._n) - 1

    def zeros(self, count: int) -> None:
        """`count` zero bits, fast: whole zero bytes never need stuffing."""
        head = min(count, (8 - self._n) % 8)
        if head:
            self.write(0, head)
        self.out += bytes((count - head) // 8)
        rest = (count - head) % 8
        if rest:
            self.write(0, rest)

    def flush(self) -> bytes:
        if self._n:
            self.write((1 << (8 - self._n)) - 1, 8 - self._n)  # pad with ones
        return bytes(self.out)


def _segment(marker: int, payload: bytes) -> bytes:
    return struct.pack(">HH", 0xFF00 | marker, len(payload) + 2) + payload


def _dht(table_class: int, table_id: int, bits: tuple[int, ...], vals: tuple[int, ...]) -> bytes:
    return _segment(0xC4, bytes([(table_class << 4) | table_id, *bits, *vals]))


def tiny_jpeg(
    width: int = 16, height: int = 16, rgb: tuple[int, int, int] = (200, 40, 40)
) -> bytes:
    """A valid baseline JPEG of `width` x `height` pixels of one colour."""
    if not (1 <= width <= 65535 and 1 <= height <= 65535):
        raise ValueError("JPEG dimensions must be 1..65535")
    r, g, b = rgb
    ycc = (
        0.299 * r + 0.587 * g + 0.114 * b,
        128 - 0.168736 * r - 0.331264 * g + 0.5 * b,
        128 + 0.5 * r - 0.418688 * g - 0.081312 * b,
    )
    # With a quantiser of 1 the DC coefficient of a flat block is 8 x (sample - 128).
    dcs = [round(8 * (min(255.0, max(0.0, c)) - 128)) for c in ycc]
    blocks = ((width + 7) // 8) * ((height + 7) // 8)
    bits = _BitWriter()
    for comp in range(3):  # the first block of each component carries the colour
        category = abs(dcs[comp]).bit_length()
        code, length = _DC_CODES[category]
        bits.write(code, length)
        if category:
            value = dcs[comp]
            bits.write(value if value > 0 else value + (1 << category) - 1, category)
        code, length = _AC_CODES[0x00]
        bits.write(code, length)
    # Every later block repeats it: DC difference 0 ("00") and EOB ("0") per component,
    # nine zero bits per 8x8 block, whatever the size of the picture.
    assert _DC_CODES[0] == (0, 2)
    assert _AC_CODES[0] == (0, 1)
    bits.zeros((blocks - 1) * 9)
    jfif = b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    sof = struct.pack(">BHHB", 8, height, width, 3) + bytes([1, 0x11, 0, 2, 0x11, 0, 3, 0x11, 0])
    sos = bytes([3, 1, 0x00, 2, 0x00, 3, 0x00, 0, 63, 0])
    return b"".join(
        [
            b"\xff\xd8",
            _segment(0xE0, jfif),
            _segment(0xDB, bytes([0]) + bytes([1] * 64)),
            _segment(0xC0, sof),
            _dht(0, 0, _DC_BITS, _DC_VALS),
            _dht(1, 0, _AC_BITS, _AC_VALS),
            _segment(0xDA, sos),
            bits.flush(),
            b"\xff\xd9",
        ]
    )


_FTYP = struct.pack(">I4s4sI16s", 32, b"ftyp", b"isom", 0x200, b"isomiso2avc1mp41")


_BLOCK = bytes((i * 7 + 13) & 0xFF for i in range(251))  # a prime length: no 2**n alignment


def _pattern(offset: int, length: int) -> bytes:
    """Deterministic filler at `offset`: bytes that do not compress to nothing, no seed needed."""
    start = offset % len(_BLOCK)
    reps = (start + length) // len(_BLOCK) + 1
    return (_BLOCK * reps)[start : start + length]


def fake_mp4(size: int = 4096) -> bytes:
    """`size` bytes that start like an MP4 (an `ftyp` box, then one `mdat` box filling the rest)."""
    if size < 40:
        raise ValueError("fake_mp4 needs at least 40 bytes")
    mdat = size - len(_FTYP)
    return _FTYP + struct.pack(">I4s", mdat, b"mdat") + _pattern(0, mdat - 8)


@attrs.frozen
class Blob:
    """A large deterministic body generated on the fly: `prefix`, then filler up to `size`.

    Attributes:
        size: total length in bytes.
        prefix: the first bytes (e.g. an MP4 header), at most `size`.
    """

    size: int
    prefix: bytes = b""

    def chunks(
        self, start: int = 0, end: int | None = None, chunk_size: int = 64 * 1024
    ) -> Iterator[bytes]:
        """The bytes in ``[start, end)`` (default: all), `chunk_size` at a time."""
        stop = self.size if end is None else min(end, self.size)
        pos = max(0, start)
        head = self.prefix[: self.size]
        while pos < stop:
            n = min(chunk_size, stop - pos)
            if pos < len(head):
                n = min(n, len(head) - pos)
                yield head[pos : pos + n]
            else:
                yield _pattern(pos, n)
            pos += n

    def sha256(self) -> str:
        h = hashlib.sha256()
        for chunk in self.chunks():
            h.update(chunk)
        return h.hexdigest()


def big(size: int, *, prefix: bytes | None = None) -> Blob:
    """A `size`-byte body streamed without being held in memory; MP4-looking by default."""
    if prefix is None:
        prefix = _FTYP + struct.pack(">I4s", max(0, size - len(_FTYP)) & 0xFFFFFFFF, b"mdat")
    return Blob(size=size, prefix=prefix)


_ZEROS = bytes(1024 * 1024)
# Past this a bomb's gzip trailer carries no real CRC: computing it costs a second per
# GiB, and a bomb is never read to its end (the reader stops at its cap).
_CRC_UP_TO = 256 * 1024 * 1024


def _deflated(prefix: bytes, size: int) -> bytes:
    """A raw deflate stream of `prefix` and then zero bytes up to `size` in all, built
    without deflating them all.

    After a full flush the compressor starts afresh, so each MiB of zeros
    deflates to the same bytes: one block, repeated (about 1,000 to 1).
    """
    size = max(0, size - len(prefix))
    c = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    head = c.compress(prefix) + c.flush(zlib.Z_FULL_FLUSH)
    block = c.compress(_ZEROS) + c.flush(zlib.Z_FULL_FLUSH)
    whole, rest = divmod(size, len(_ZEROS))
    if whole:
        whole -= 1  # the first block was made above
    else:
        block = b""
    return head + block * (whole + bool(block)) + c.compress(_ZEROS[:rest]) + c.flush()


def _gzip_zeros(prefix: bytes, size: int) -> bytes:
    crc = 0
    if size <= _CRC_UP_TO:
        crc = zlib.crc32(prefix)
        for start in range(len(prefix), size, len(_ZEROS)):
            crc = zlib.crc32(_ZEROS[: min(len(_ZEROS), size - start)], crc)
    head = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"  # no name, no mtime, best
    return (
        head
        + _deflated(prefix, size)
        + struct.pack("<II", crc, max(size, len(prefix)) & 0xFFFFFFFF)
    )


def _zlib_zeros(prefix: bytes, size: int) -> bytes:
    # Adler-32: a zero byte leaves `a` as it is and adds `a` to `b`.
    a, b = 1, 0
    for byte in prefix:
        a = (a + byte) % 65521
        b = (b + a) % 65521
    b = (b + a * max(0, size - len(prefix))) % 65521
    return b"\x78\xda" + _deflated(prefix, size) + struct.pack(">I", b << 16 | a)


def bomb(size: int, encoding: str = "gzip", *, prefix: bytes = b"") -> bytes:
    """`prefix` and then zero bytes, `size` in all, under a ``Content-Encoding`` (``gzip``,
    ``deflate``, ``gzip, gzip``, ``deflate, gzip``: applied in the order listed), small
    however large `size` is: 3 GiB as ``gzip, gzip`` is some 7 KB. A decompression bomb,
    to show a reader stops; `prefix` makes it look like something (``<html>``)."""
    codings = [c.strip() for c in encoding.split(",")]
    first, *rest = codings
    body = {"gzip": _gzip_zeros, "deflate": _zlib_zeros}[first](prefix, size)
    for coding in rest:
        body = gzip.compress(body, 9, mtime=0) if coding == "gzip" else zlib.compress(body, 9)
    return body


def image_size(data: bytes) -> tuple[str, int, int] | None:
    """(format, width, height) of a JPEG, PNG, GIF or WebP, or None if it is not one of those."""
    if data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) >= 24 and data[12:16] == b"IHDR":
        w, h = struct.unpack(">II", data[16:24])
        return "png", w, h
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        w, h = struct.unpack("<HH", data[6:10])
        return "gif", w, h
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP" and len(data) >= 30:
        chunk = data[12:16]
        if chunk == b"VP8X":
            w = 1 + int.from_bytes(data[24:27], "little")
            h = 1 + int.from_bytes(data[27:30], "little")
            return "webp", w, h
        if chunk == b"VP8 " and data[23:26] == b"\x9d\x01\x2a":
            w, h = struct.unpack("<HH", data[26:30])
            return "webp", w & 0x3FFF, h & 0x3FFF
        if chunk == b"VP8L" and data[20] == 0x2F:
            v = int.from_bytes(data[21:25], "little")
            return "webp", (v & 0x3FFF) + 1, ((v >> 14) & 0x3FFF) + 1
        return None
    if data.startswith(b"\xff\xd8"):
        return _jpeg_size(data)
    return None


def _jpeg_size(data: bytes) -> tuple[str, int, int] | None:
    # The production parser (the one that vets video stills), not a second one.
    size = jpeg_size(data)
    return None if size is None else ("jpeg", *size)


def looks_like_mp4(data: bytes) -> bool:
    return len(data) >= 8 and data[4:8] == b"ftyp"
