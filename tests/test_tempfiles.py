"""Temp files: prefixed, private, removed on every exit, swept by age."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import stat
import time
from pathlib import Path

import httpx
import pytest

from standins.media_server import MediaServer
from xbot.errors import TransientFetch
from xbot.media.download import download
from xbot.media.tempfiles import (
    DISK_LOW,
    TEMP_PREFIX,
    check_room,
    margin_of,
    room,
    room_for,
    sweep_temp,
    temp_dir,
    temp_folder,
    temp_path,
)

NOW = 1_800_000_000.0
HOUR = 3600.0


def age(path: Path, seconds_before_now: float) -> None:
    when = NOW - seconds_before_now
    os.utime(path, (when, when), follow_symlinks=False)


def test_temp_dir_is_private(tmp_path: Path) -> None:
    (tmp_path / "tmp").mkdir(mode=0o755)
    folder = temp_dir(tmp_path)
    assert folder == tmp_path / "tmp"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700


def test_temp_path_is_prefixed_and_removed(tmp_path: Path) -> None:
    with temp_path(tmp_path, ".mp4") as path:
        assert path.parent == tmp_path / "tmp"
        assert path.name.startswith(TEMP_PREFIX)
        assert path.name.endswith(".mp4")
        assert path.exists()
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        path.write_bytes(b"x")
    assert not path.exists()


def test_temp_paths_are_distinct(tmp_path: Path) -> None:
    with temp_path(tmp_path) as a, temp_path(tmp_path) as b:
        assert a != b


def test_temp_path_removed_on_exception(tmp_path: Path) -> None:
    seen: list[Path] = []

    def write_then_fail() -> None:
        with temp_path(tmp_path, ".jpg") as path:
            seen.append(path)
            path.write_bytes(b"partial")
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        write_then_fail()
    assert not seen[0].exists()


def test_temp_path_tolerates_the_file_already_gone(tmp_path: Path) -> None:
    with temp_path(tmp_path) as path:
        path.unlink()
    assert list((tmp_path / "tmp").iterdir()) == []


async def test_temp_path_removed_on_cancellation(tmp_path: Path) -> None:
    inside = asyncio.Event()
    seen: list[Path] = []

    async def job() -> None:
        with temp_path(tmp_path, ".mp4") as path:
            seen.append(path)
            path.write_bytes(b"partial")
            inside.set()
            await asyncio.Event().wait()  # until cancelled

    task = asyncio.create_task(job())
    await asyncio.wait_for(inside.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not seen[0].exists()


@pytest.mark.parametrize(
    "suffix",
    ["../x", "/etc", ".MP4", ".toolong1", "a b", ".mp4\x00", "é"],
    ids=["traversal", "absolute", "upper", "too-long", "space", "nul", "non-ascii"],
)
def test_temp_path_rejects_suffixes_from_outside_the_whitelist(tmp_path: Path, suffix: str) -> None:
    with pytest.raises(ValueError, match="suffix"), temp_path(tmp_path, suffix):
        pass


def test_temp_folder_removed_with_contents(tmp_path: Path) -> None:
    with temp_folder(tmp_path) as folder:
        assert folder.name.startswith(TEMP_PREFIX)
        (folder / "sub").mkdir()
        (folder / "sub" / "video.mp4.part").write_bytes(b"x")
    assert not folder.exists()


def test_temp_folder_removed_on_exception(tmp_path: Path) -> None:
    seen: list[Path] = []

    def write_then_fail() -> None:
        with temp_folder(tmp_path) as folder:
            seen.append(folder)
            (folder / "a").write_bytes(b"x")
            raise KeyError("boom")

    with pytest.raises(KeyError):
        write_then_fail()
    assert not seen[0].exists()


def test_sweep_removes_only_aged_prefixed_entries(tmp_path: Path) -> None:
    folder = temp_dir(tmp_path)
    old_file = folder / f"{TEMP_PREFIX}old.mp4"
    fresh_file = folder / f"{TEMP_PREFIX}fresh.mp4"
    unrelated = folder / "operator-notes.txt"
    old_dir = folder / f"{TEMP_PREFIX}olddir"
    for f in (old_file, fresh_file, unrelated):
        f.write_bytes(b"x")
    old_dir.mkdir()
    (old_dir / "a.part").write_bytes(b"x")
    age(old_file, 2 * HOUR)
    age(fresh_file, 10)
    age(unrelated, 100 * HOUR)
    age(old_dir / "a.part", 2 * HOUR)
    age(old_dir, 2 * HOUR)

    assert sweep_temp(tmp_path, NOW) == 2

    assert sorted(p.name for p in folder.iterdir()) == sorted([fresh_file.name, unrelated.name])


def test_sweep_keeps_a_folder_whose_contents_are_fresh(tmp_path: Path) -> None:
    # A long yt-dlp download grows a file inside; the folder's own mtime stays old.
    folder = temp_dir(tmp_path)
    busy = folder / f"{TEMP_PREFIX}busy"
    busy.mkdir()
    (busy / "video.mp4.part").write_bytes(b"x")
    age(busy / "video.mp4.part", 5)
    age(busy, 5 * HOUR)
    assert sweep_temp(tmp_path, NOW) == 0
    assert busy.exists()


def test_the_sweep_never_removes_what_this_process_has_open(tmp_path: Path) -> None:
    """A forward step of the wall clock makes a download begun a minute ago look hours
    old; the files and folders in use are left alone whatever their mtime says."""
    with temp_path(tmp_path, ".jpg") as photo, temp_folder(tmp_path) as folder:
        (folder / "video.mp4.part").write_bytes(b"x")
        for entry in (photo, folder, folder / "video.mp4.part"):
            age(entry, 5 * HOUR)
        assert sweep_temp(tmp_path, NOW) == 0
        assert photo.exists()
        assert folder.exists()
    left = temp_dir(tmp_path) / f"{TEMP_PREFIX}left-by-a-crash"
    left.write_bytes(b"x")
    age(left, 5 * HOUR)
    assert sweep_temp(tmp_path, NOW) == 1


def test_sweep_respects_max_age(tmp_path: Path) -> None:
    f = temp_dir(tmp_path) / f"{TEMP_PREFIX}x"
    f.write_bytes(b"x")
    age(f, 120)
    assert sweep_temp(tmp_path, NOW, max_age=300) == 0
    assert sweep_temp(tmp_path, NOW, max_age=60) == 1


def test_sweep_removes_a_prefixed_symlink_not_its_target(tmp_path: Path) -> None:
    target = tmp_path / "precious.txt"
    target.write_bytes(b"keep me")
    link = temp_dir(tmp_path) / f"{TEMP_PREFIX}link"
    link.symlink_to(target)
    age(link, 2 * HOUR)
    assert sweep_temp(tmp_path, NOW) == 1
    assert not link.is_symlink()
    assert target.read_bytes() == b"keep me"


def test_sweep_without_a_temp_dir_is_a_no_op(tmp_path: Path) -> None:
    assert sweep_temp(tmp_path / "missing", time.time()) == 0


MB = 1024 * 1024


@pytest.mark.parametrize(
    ("need", "free", "margin", "room"),
    [
        (50 * MB, 1024 * MB, 256 * MB, True),
        (50 * MB, 306 * MB, 256 * MB, True),  # exactly the margin left
        (50 * MB, 306 * MB - 1, 256 * MB, False),
        (500 * MB, 700 * MB, 256 * MB, False),  # an album of ten 50 MB files
        (0, 100 * MB, 256 * MB, False),  # already under the margin
        (2000 * MB, 100 * 1024 * MB, 256 * MB, True),
    ],
    ids=["plenty", "at-margin", "one-byte-short", "album-too-big", "already-low", "big-disk"],
)
def test_room_for(need: int, free: int, margin: int, room: bool) -> None:
    assert room_for(need, free, margin) is room


@pytest.mark.parametrize(
    ("total", "margin"),
    [(64 * MB, 64 * MB // 10), (2560 * MB, 256 * MB), (250 * 1024 * MB, 256 * MB)],
    ids=["soak-tmpfs", "at-the-turn", "vps"],
)
def test_margin_of(total: int, margin: int) -> None:
    assert margin_of(total) == margin


def test_check_room_on_the_real_disk(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    free = shutil.disk_usage(tmp_path).free
    check_room(tmp_path, 1024, margin=0)  # a KiB fits
    with (
        caplog.at_level(logging.WARNING, logger="xbot.media.tempfiles"),
        pytest.raises(TransientFetch) as info,
    ):
        check_room(tmp_path, free + 1, margin=0)
    assert info.value.reason == DISK_LOW
    assert "disk nearly full" in caplog.text


async def test_a_download_that_could_fill_the_disk_is_not_started(tmp_path: Path) -> None:
    """A cap larger than the disk's free space: put off before the request goes out."""
    async with MediaServer() as media:
        url = media.add("/a.jpg", b"x" * 1000, "image/jpeg")
        async with httpx.AsyncClient() as client:
            cap = shutil.disk_usage(tmp_path).free
            with pytest.raises(TransientFetch) as info:
                await download(client, url, tmp_path / "a.jpg", max_bytes=cap)
            assert info.value.reason == DISK_LOW
            assert media.hits["/a.jpg"] == 0
            # With room to spare, the same file comes.
            done = await download(client, url, tmp_path / "a.jpg", max_bytes=1024 * MB)
            assert done.size == 1000


def test_rooms_held_count_each_others_caps(tmp_path: Path) -> None:
    """Downloads in flight have not written their bytes yet: two caps that each fit the
    free space but not together are not both let in."""
    share = shutil.disk_usage(tmp_path).free * 5 // 8  # one fits, two do not
    with (
        room(tmp_path, share, margin=0),
        pytest.raises(TransientFetch),
        room(tmp_path, share, margin=0),
    ):
        pass
    with room(tmp_path, share, margin=0):  # let go: it fits again
        pass


async def test_a_download_waits_for_the_room_another_holds(tmp_path: Path) -> None:
    async with MediaServer() as media:
        url = media.add("/a.jpg", b"x" * 1000, "image/jpeg")
        share = shutil.disk_usage(tmp_path).free * 5 // 8
        async with httpx.AsyncClient() as client:
            with room(tmp_path, share, margin=0), pytest.raises(TransientFetch) as info:
                await download(client, url, tmp_path / "a.jpg", max_bytes=share)
            assert info.value.reason == DISK_LOW
            assert media.hits["/a.jpg"] == 0
            done = await download(client, url, tmp_path / "a.jpg", max_bytes=share)
            assert done.size == 1000
