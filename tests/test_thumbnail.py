"""Thumbnails: the JPEG frame-header reader, Telegram's rule, and the best-effort fetch."""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from standins._mediabytes import tiny_jpeg
from xbot.media import netguard
from xbot.media import thumbnail as thumbnails
from xbot.media.thumbnail import MAX_BYTES, acceptable, jpeg_size, read_acceptable


def _segment(marker: int, payload: bytes) -> bytes:
    return struct.pack(">HH", 0xFF00 | marker, len(payload) + 2) + payload


def _sof(marker: int, width: int, height: int) -> bytes:
    return _segment(marker, struct.pack(">BHHB", 8, height, width, 1) + b"\x01\x11\x00")


SOI, EOI = b"\xff\xd8", b"\xff\xd9"
SOS = _segment(0xDA, b"\x01\x01\x00\x00\x3f\x00") + b"\x12\x34"
DHT = _segment(0xC4, bytes([0x00, *(0,) * 15, 1]) + b"\x00")
APP0 = _segment(0xE0, b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00")
# An Exif block carries its own little JPEG (160x120) inside: it is not the picture.
EXIF = _segment(0xE1, b"Exif\x00\x00" + SOI + _sof(0xC0, 160, 120) + EOI)
PNG = b"\x89PNG\r\n\x1a\n" + struct.pack(">I4sII", 13, b"IHDR", 100, 100) + bytes(5)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (tiny_jpeg(16, 16), (16, 16)),
        (tiny_jpeg(320, 180), (320, 180)),
        (tiny_jpeg(90, 320), (90, 320)),
        (tiny_jpeg(640, 480), (640, 480)),
        (SOI + APP0 + DHT + _sof(0xC2, 300, 200) + SOS + EOI, (300, 200)),
        (SOI + _sof(0xC1, 7, 9) + SOS + EOI, (7, 9)),
        (SOI + EXIF + _sof(0xC0, 640, 480) + SOS + EOI, (640, 480)),
        (SOI + b"\xff\xff\xff" + _sof(0xC0, 50, 40) + EOI, (50, 40)),
        (SOI + b"\xff\xd0" + _sof(0xC0, 50, 40), (50, 40)),
        (b"", None),
        (b"GIF89a\x10\x00\x10\x00", None),
        (PNG, None),
        (SOI, None),
        (SOI + APP0 + SOS + _sof(0xC0, 50, 40) + EOI, None),
        (SOI + APP0 + EOI + _sof(0xC0, 50, 40), None),
        (SOI + _sof(0xC0, 50, 40)[:7], None),
        (SOI + APP0[:3], None),
        (SOI + b"\x00\x10" + _sof(0xC0, 50, 40), None),
        (SOI + b"\xff\x00" + _sof(0xC0, 50, 40), None),
        (SOI + b"\xff\xe0\x00\x01" + _sof(0xC0, 50, 40), None),
        (SOI + _segment(0xC0, b"\x08\x00"), None),
        (SOI + _sof(0xC0, 50, 0) + SOS + EOI, None),
        (SOI + _sof(0xC0, 0, 50) + SOS + EOI, None),
        (SOI + _segment(0xE0, bytes(60_000))[:10] + _sof(0xC0, 50, 40), None),
    ],
    ids=[
        "tiny-16",
        "tiny-320x180",
        "tiny-90x320",
        "tiny-640x480",
        "progressive-after-dht",
        "extended-sequential",
        "exif-thumbnail-skipped",
        "fill-bytes",
        "restart-marker-standalone",
        "empty",
        "gif",
        "png",
        "soi-only",
        "scan-before-frame",
        "end-before-frame",
        "frame-truncated",
        "segment-length-truncated",
        "no-marker-after-soi",
        "stuffed-zero-not-a-marker",
        "length-below-two",
        "frame-too-short",
        "height-from-dnl",
        "width-zero",
        "segment-runs-past-end",
    ],
)
def test_jpeg_size(data: bytes, expected: tuple[int, int] | None) -> None:
    assert jpeg_size(data) == expected


def _padded(width: int, height: int, size: int) -> bytes:
    """A valid JPEG of exactly `size` bytes: comment segments make up the rest."""
    body = tiny_jpeg(width, height)
    missing = size - len(body)
    comments = b""
    while missing > 0:
        n = min(missing, 60_000)
        assert n >= 4, "choose a size that leaves room for a segment header"
        comments += _segment(0xFE, bytes(n - 4))
        missing -= n
    out = body[:2] + comments + body[2:]
    assert len(out) == size
    return out


@pytest.mark.parametrize(
    ("data", "ok"),
    [
        (tiny_jpeg(320, 320), True),
        (tiny_jpeg(320, 180), True),
        (tiny_jpeg(1, 1), True),
        (tiny_jpeg(321, 100), False),
        (tiny_jpeg(100, 321), False),
        (tiny_jpeg(640, 480), False),
        (_padded(90, 90, MAX_BYTES), True),
        (_padded(90, 90, MAX_BYTES + 1), False),
        (PNG, False),
        (b"not an image", False),
    ],
    ids=[
        "320-square",
        "320-wide",
        "one-pixel",
        "321-wide",
        "321-high",
        "640x480",
        "exactly-200kB",
        "one-byte-over",
        "png",
        "text",
    ],
)
def test_telegrams_rule(data: bytes, ok: bool) -> None:
    assert acceptable(data) is ok


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 3000), st.integers(1, 3000))
def test_reads_the_size_any_jpeg_was_written_with(width: int, height: int) -> None:
    assert jpeg_size(tiny_jpeg(width, height)) == (width, height)


@given(st.binary(max_size=300))
def test_any_bytes_give_a_size_or_none_never_an_error(tail: bytes) -> None:
    for data in (tail, SOI + tail):
        size = jpeg_size(data)
        assert size is None or (size[0] > 0 and size[1] > 0)


def test_read_acceptable_reads_files_and_tolerates_a_missing_one(tmp_path: Path) -> None:
    good, big, gone = tmp_path / "good.jpg", tmp_path / "big.jpg", tmp_path / "gone.jpg"
    good.write_bytes(tiny_jpeg(64, 64))
    big.write_bytes(_padded(64, 64, MAX_BYTES + 1))
    assert read_acceptable(good) == tiny_jpeg(64, 64)
    assert read_acceptable(big) is None
    assert read_acceptable(gone) is None


# -- fetch ------------------------------------------------------------------------------


def _client(handler: httpx.MockTransport) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=handler)


def _serving(body: bytes, *, status: int = 200, length: bool = True) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        if length:
            return httpx.Response(status, content=body)

        async def stream() -> object:
            yield body

        return httpx.Response(status, content=stream())  # type: ignore[arg-type]

    return httpx.MockTransport(handle)


@pytest.mark.parametrize(
    ("transport", "kept"),
    [
        (_serving(tiny_jpeg(160, 90)), True),
        (_serving(tiny_jpeg(640, 480)), False),
        (_serving(PNG), False),
        (_serving(b"gone", status=404), False),
        (_serving(b"busy", status=503), False),
        (_serving(_padded(90, 90, MAX_BYTES + 1)), False),
        (_serving(_padded(90, 90, MAX_BYTES + 1), length=False), False),
    ],
    ids=["small-jpeg", "too-wide", "png", "404", "503", "too-large", "too-large-no-length"],
)
async def test_fetch_keeps_only_what_telegram_takes(
    tmp_path: Path, transport: httpx.MockTransport, kept: bool
) -> None:
    dest = tmp_path / "thumb.jpg"
    async with _client(transport) as client:
        got = await thumbnails.fetch(client, "https://img.example/t.jpg", dest)
    assert (got == dest) is kept
    assert dest.exists() is kept, "a refused thumbnail leaves no file"


async def test_fetch_refused_by_the_network_guard_is_none(tmp_path: Path) -> None:
    client = netguard.make_client(
        allow_private=False, timeout=httpx.Timeout(5.0), user_agent="xbot-test"
    )
    async with client:
        got = await thumbnails.fetch(client, "http://127.0.0.1:9/t.jpg", tmp_path / "t.jpg")
    assert got is None
    assert not (tmp_path / "t.jpg").exists()


async def test_a_slow_thumbnail_gives_up_after_its_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(thumbnails, "FETCH_TIMEOUT", 0.05)
    never = asyncio.Event()

    async def handle(request: httpx.Request) -> httpx.Response:
        await never.wait()
        raise AssertionError("unreachable")

    async with _client(httpx.MockTransport(handle)) as client:
        got = await asyncio.wait_for(
            thumbnails.fetch(client, "https://img.example/slow.jpg", tmp_path / "t.jpg"), 5
        )
    assert got is None
