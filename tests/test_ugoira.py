"""ugoira: frames and delays into ffmpeg's concat script (pure), the bounded unpacking of
the zip, and ffmpeg as a child process that a cancelled task kills."""

from __future__ import annotations

import asyncio
import io
import os
import threading
import zipfile
from pathlib import Path

import pytest

from standins import tiny_jpeg
from xbot.errors import FetchError
from xbot.media import ugoira
from xbot.media.models import Frame


def zip_of(members: dict[str, bytes], method: int = zipfile.ZIP_STORED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", method) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("names", "delays", "script"),
    [
        (["a.jpg"], [100], "file a.jpg|option framerate 1000|duration 0.100|"
                           "file a.jpg|option framerate 1000"),
        (["a.jpg", "b.jpg"], [40, 1000],
         "file a.jpg|option framerate 1000|duration 0.040|"
         "file b.jpg|option framerate 1000|duration 1.000|file b.jpg|option framerate 1000"),
        (["a.jpg"], [1], "file a.jpg|option framerate 1000|duration 0.001|"
                         "file a.jpg|option framerate 1000"),
    ],
    ids=["one-frame", "the-last-file-twice", "a-millisecond"],
)  # fmt: skip
def test_concat_script(names: list[str], delays: list[int], script: str) -> None:
    lines = ugoira.concat_script(names, delays).splitlines()
    assert lines[0] == "ffconcat version 1.0"
    assert "|".join(lines[1:]) == script


def frames(n: int) -> list[Frame]:
    return [Frame(f"{i:06d}.jpg", 80) for i in range(n)]


def test_unpack_writes_the_frames_in_order_under_our_names(tmp_path: Path) -> None:
    archive = tmp_path / "a.zip"
    archive.write_bytes(zip_of({"000001.jpg": b"second", "000000.jpg": b"first"}))
    out = tmp_path / "out"
    out.mkdir()
    paths = ugoira.unpack(archive, out, frames(2), max_bytes=1024)
    assert [p.name for p in paths] == ["000000.jpg", "000001.jpg"]
    assert [p.read_bytes() for p in paths] == [b"first", b"second"]


@pytest.mark.parametrize(
    ("data", "wanted", "sentence"),
    [
        (b"PK\x03\x04 not really", 1, ugoira.NOT_AN_ARCHIVE),
        (b"", 1, ugoira.NOT_AN_ARCHIVE),
        (zip_of({"000000.jpg": b"x"}), 2, ugoira.MISSING_FRAMES),
        (zip_of({"000000.jpg": bytes(4 * 1024 * 1024)}, zipfile.ZIP_DEFLATED), 1, ugoira.TOO_BIG),
        (zip_of({"000000.jpg": bytes(600 * 1024), "000001.jpg": bytes(600 * 1024)}), 2,
         ugoira.TOO_BIG),
    ],
    ids=["not-a-zip", "empty", "frame-missing", "bomb", "too-much-in-all"],
)  # fmt: skip
def test_unpack_refuses_in_one_sentence(
    tmp_path: Path, data: bytes, wanted: int, sentence: str
) -> None:
    archive = tmp_path / "a.zip"
    archive.write_bytes(data)
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(FetchError) as info:
        ugoira.unpack(archive, out, frames(wanted), max_bytes=1024 * 1024)
    assert info.value.reason == sentence


def test_a_bomb_is_stopped_at_the_cap_whatever_the_header_claims(tmp_path: Path) -> None:
    """A member whose header claims 10 bytes but inflates to megabytes is counted as it
    inflates: the cap holds without trusting the archive."""
    archive = tmp_path / "a.zip"
    data = bytearray(zip_of({"000000.jpg": bytes(2 * 1024 * 1024)}, zipfile.ZIP_DEFLATED))
    # Forge the uncompressed size in the central directory (and the local header).
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as zf:
        info = zf.infolist()[0]
    real = (2 * 1024 * 1024).to_bytes(4, "little")
    data = bytearray(bytes(data).replace(real, (10).to_bytes(4, "little")))
    archive.write_bytes(bytes(data))
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(FetchError) as raised:
        ugoira.unpack(archive, out, frames(1), max_bytes=256 * 1024)
    assert raised.value.reason in (ugoira.TOO_BIG, ugoira.NOT_AN_ARCHIVE)
    assert info.file_size == 2 * 1024 * 1024
    assert sum(p.stat().st_size for p in out.iterdir()) <= 256 * 1024


async def test_to_mp4_leaves_nothing_but_the_video(tmp_path: Path) -> None:
    if not ugoira.available():
        pytest.skip("needs ffmpeg")
    archive = tmp_path / "a.zip"
    archive.write_bytes(zip_of({f"{i:06d}.jpg": tiny_jpeg(33, 21) for i in range(3)}))
    dest = tmp_path / "v.mp4"
    await ugoira.to_mp4(archive, frames(3), dest)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.zip", "v.mp4"]
    assert dest.read_bytes()[4:8] == b"ftyp"


async def test_a_cancelled_conversion_kills_ffmpeg_and_leaves_nothing(tmp_path: Path) -> None:
    """A stand-in ffmpeg that writes its pid and hangs: cancelling the task kills it."""
    fake = tmp_path / "ffmpeg"
    pid_file = tmp_path / "pid"
    fake.write_text(f"#!/bin/sh\necho $$ > {pid_file}\nexec sleep 600\n")
    fake.chmod(0o755)
    archive = tmp_path / "a.zip"
    archive.write_bytes(zip_of({"000000.jpg": b"x"}))
    dest = tmp_path / "v.mp4"
    task = asyncio.create_task(ugoira.to_mp4(archive, frames(1), dest, ffmpeg=str(fake)))
    async with asyncio.timeout(10):
        while not pid_file.exists() or not pid_file.read_text().strip():
            await asyncio.sleep(0.01)
    pid = int(pid_file.read_text())
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # killed and reaped: no such process
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.zip", "ffmpeg", "pid"]


async def test_ffmpeg_failing_is_one_sentence(tmp_path: Path) -> None:
    archive = tmp_path / "a.zip"
    archive.write_bytes(zip_of({"000000.jpg": b"x"}))
    with pytest.raises(FetchError) as info:
        await ugoira.to_mp4(archive, frames(1), tmp_path / "v.mp4", ffmpeg="/nonexistent/ffmpeg")
    assert info.value.reason == ugoira.NOT_CONVERTED
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.zip"]


def test_a_stopped_unpack_ends_at_the_next_step(tmp_path: Path) -> None:
    archive = tmp_path / "a.zip"
    archive.write_bytes(zip_of({"000000.jpg": bytes(1024 * 1024)}))
    out = tmp_path / "out"
    out.mkdir()
    stop = threading.Event()
    stop.set()
    with pytest.raises(FetchError):
        ugoira.unpack(archive, out, frames(1), max_bytes=4 * 1024 * 1024, stop=stop)
    assert sum(p.stat().st_size for p in out.iterdir()) == 0
