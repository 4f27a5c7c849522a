"""The MP4 header probe that gives a direct link's video its player size and length."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from standins.harness import mp4_with_header
from standins.media_server import fake_mp4
from xbot.media.mp4info import Mp4Info, boxes, parse_moov, probe_mp4


def probe_bytes(tmp_path: Path, data: bytes) -> Mp4Info:
    path = tmp_path / "v.mp4"
    path.write_bytes(data)
    return probe_mp4(path)


@pytest.mark.parametrize(
    ("layout", "expected"),
    [
        ({}, Mp4Info(12.5, 1280, 720)),
        ({"moov_last": True}, Mp4Info(12.5, 1280, 720)),
        ({"rotated": True}, Mp4Info(12.5, 1280, 720)),
    ],
    ids=["fast-start", "header-at-the-end", "stored-sideways"],
)
def test_probe_reads_the_header_wherever_it_is(
    tmp_path: Path, layout: dict[str, bool], expected: Mp4Info
) -> None:
    data = mp4_with_header(20_000, width=1280, height=720, duration=12.5, **layout)
    assert probe_bytes(tmp_path, data) == expected


@pytest.mark.parametrize(
    "data",
    [b"", b"\x00" * 7, fake_mp4(4096), b"<html>not a video</html>",
     struct.pack(">I4s", 4, b"moov") + bytes(100), struct.pack(">I4sQ", 1, b"moov", 2**40)],
    ids=["empty", "short", "no-moov", "html", "box-smaller-than-header", "huge-moov"],
)  # fmt: skip
def test_probe_of_anything_else_knows_nothing(tmp_path: Path, data: bytes) -> None:
    assert probe_bytes(tmp_path, data) == Mp4Info()


def test_probe_of_a_missing_file_knows_nothing(tmp_path: Path) -> None:
    assert probe_mp4(tmp_path / "gone.mp4") == Mp4Info()


def test_a_sound_track_first_does_not_hide_the_picture() -> None:
    def box(kind: bytes, payload: bytes) -> bytes:
        return struct.pack(">I4s", 8 + len(payload), kind) + payload

    def tkhd(width: int, height: int) -> bytes:
        matrix = struct.pack(">9i", 65536, 0, 0, 0, 65536, 0, 0, 0, 0x40000000)
        return box(
            b"tkhd", bytes(4 + 20 + 16) + matrix + struct.pack(">II", width << 16, height << 16)
        )

    moov = box(b"trak", tkhd(0, 0)) + box(b"trak", tkhd(640, 480))
    assert parse_moov(moov) == Mp4Info(None, 640, 480)


@given(
    width=st.integers(1, 8192),
    height=st.integers(1, 8192),
    millis=st.integers(1, 10**7),
    rotated=st.booleans(),
    moov_last=st.booleans(),
)
def test_round_trip(width: int, height: int, millis: int, rotated: bool, moov_last: bool) -> None:
    data = mp4_with_header(
        4096, width=width, height=height, duration=millis / 1000, rotated=rotated,
        moov_last=moov_last,
    )  # fmt: skip
    (moov,) = [data[s:e] for kind, s, e in boxes(data) if kind == b"moov"]
    assert parse_moov(moov) == Mp4Info(millis / 1000, width, height)


@given(st.binary(max_size=600))
def test_parse_never_raises(data: bytes) -> None:
    info = parse_moov(data)
    assert info.width is None or info.width > 0
    assert list(boxes(data)) is not None
