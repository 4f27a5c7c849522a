"""Picture and sound merged: the real yt-dlp and the real ffmpeg against DASH and HLS served
on 127.0.0.1 (`standins.streams`: a 6 s clip at 240/480/720/1080p plus one AAC sound), under
a 2 MB upload limit where 720p with its sound fits and 1080p does not."""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
import subprocess
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from standins.media_server import MediaServer
from standins.streams import LIMIT_MB, Streams, probe_streams, serve_dash, serve_hls
from xbot.errors import PostUnavailable, TooLarge
from xbot.media import connguard
from xbot.media.ffmpeg import find_ffmpeg, parse_version
from xbot.media.mp4info import probe_mp4
from xbot.sending.progress import Snapshot
from xbot.sources.ytdlp import NO_SINGLE_FILE, OVER_LIMIT, YtdlpConfig, YtdlpJob

LIMIT = LIMIT_MB * 1024 * 1024
FFMPEG = shutil.which("ffmpeg")


@pytest.fixture
async def media() -> AsyncIterator[MediaServer]:
    server = await MediaServer().start()
    try:
        yield server
    finally:
        await server.stop()


def config(
    *, ffmpeg: str | None = FFMPEG, max_height: int | None = None, limit: int = LIMIT
) -> YtdlpConfig:
    return YtdlpConfig(
        limit_bytes=limit, sites="all", allow_private=True, ffmpeg=ffmpeg, max_height=max_height
    )


async def run(url: str, folder: Path, cfg: YtdlpConfig, seen: list[Snapshot] | None = None) -> Path:
    progress = seen.append if seen is not None else None
    async with YtdlpJob(url, folder, cfg, on_progress=progress) as job:
        await job.extract()
        return await job.download()


def picture_and_sound(path: Path) -> tuple[tuple[str, int, int], str]:
    """(codec, width, height) of the picture and the sound's codec, as ffprobe reads them."""
    found = {str(s["codec_type"]): s for s in probe_streams(path)}
    video, audio = found["video"], found.get("audio", {})
    return (str(video["codec_name"]), int(str(video["width"])), int(str(video["height"]))), str(
        audio.get("codec_name", "")
    )


def fetched(media: MediaServer, prefix: str) -> int:
    return sum(n for path, n in media.hits.items() if path.startswith(prefix))


def moov_before_mdat(path: Path) -> bool:
    data = path.read_bytes()
    return 0 <= data.find(b"moov") < data.find(b"mdat")


async def test_hls_gives_720p_with_its_sound_in_one_mp4(
    streams: Streams, media: MediaServer, tmp_path: Path
) -> None:
    url = serve_hls(media, streams)
    seen: list[Snapshot] = []
    path = await run(url, tmp_path, config(), seen)
    assert picture_and_sound(path) == (("h264", 1280, 720), "aac")
    assert path.suffix == ".mp4"
    assert path.stat().st_size <= LIMIT
    assert moov_before_mdat(path), "faststart: the index first, so playing starts at once"
    header = probe_mp4(path)
    assert (header.width, header.height) == (1280, 720)
    assert header.duration is not None
    assert abs(header.duration - 6) < 0.5
    # The bitrate x duration estimate ruled 1080p out before a byte of it was fetched.
    assert fetched(media, "/hls/v1080/seg") == 0
    assert fetched(media, "/hls/audio/seg") >= 1
    assert "merge" in [s.phase for s in seen], "the status message says it is merging"


async def test_dash_without_sizes_steps_down_from_1080p_to_720p_with_sound(
    streams: Streams, media: MediaServer, tmp_path: Path
) -> None:
    url = serve_dash(media, streams)
    path = await run(url, tmp_path, config())
    assert picture_and_sound(path) == (("h264", 1280, 720), "aac")
    # No size or duration in the manifest: 1080p was tried, ran over the cap, and the
    # next rendition down was fetched instead of giving up.
    assert media.hits["/dash/v1080.mp4"] >= 1
    assert media.hits["/dash/v720.mp4"] >= 1
    assert media.hits["/dash/muxed.mp4"] == 0, "not the 240p single file"
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name], "the parts are gone"


async def test_a_wrong_estimate_steps_down_instead_of_failing(
    streams: Streams, media: MediaServer, tmp_path: Path
) -> None:
    # The playlist states a third of 1080p's real bitrate: it looks as if it fits.
    url = serve_hls(media, streams, understate={1080: 0.3})
    path = await run(url, tmp_path, config())
    assert fetched(media, "/hls/v1080/seg") >= 1, "1080p was tried on the estimate's word"
    assert picture_and_sound(path) == (("h264", 1280, 720), "aac")


@pytest.mark.parametrize(
    ("cap", "size"), [(720, (1280, 720)), (480, (854, 480))], ids=["at-most-720p", "at-most-480p"]
)
async def test_a_chats_quality_cap(
    streams: Streams, media: MediaServer, tmp_path: Path, cap: int, size: tuple[int, int]
) -> None:
    url = serve_hls(media, streams)
    path = await run(url, tmp_path, config(max_height=cap))
    assert picture_and_sound(path) == (("h264", *size), "aac")


async def test_without_ffmpeg_dash_falls_back_to_the_single_file(
    streams: Streams, media: MediaServer, tmp_path: Path
) -> None:
    path = await run(serve_dash(media, streams), tmp_path, config(ffmpeg=None))
    assert picture_and_sound(path) == (("h264", 426, 240), "aac")


async def test_without_ffmpeg_hls_says_why_not_that_it_is_too_big(
    streams: Streams, media: MediaServer, tmp_path: Path
) -> None:
    with pytest.raises(PostUnavailable) as caught:
        await run(serve_hls(media, streams), tmp_path, config(ffmpeg=None))
    assert caught.value.reason == NO_SINGLE_FILE


async def test_a_video_that_truly_cannot_fit_is_too_large(
    streams: Streams, media: MediaServer, tmp_path: Path
) -> None:
    # Even 240p with its sound (about 280 kB) is over this limit.
    with pytest.raises(TooLarge) as caught:
        await run(serve_dash(media, streams), tmp_path, config(limit=200_000))
    assert caught.value.reason == OVER_LIMIT


def _wrapper(folder: Path, body: str) -> str:
    """An ``ffmpeg`` that logs its arguments (one call a line) before it does `body`."""
    folder.mkdir()
    script = folder / "ffmpeg"
    log = folder / "calls"
    script.write_text(
        "#!/bin/bash\n"
        f'printf "%s\\n" "$*" >> {log}\n'
        # Its version checks (``-version``, ``-bsfs``) go to the real one.
        'case " $* " in *" -i "*) ;; *) exec ' + str(FFMPEG) + ' "$@";; esac\n' + body
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    (folder / "ffprobe").symlink_to(shutil.which("ffprobe") or "ffprobe")
    return str(script)


async def test_ffmpeg_only_merges_local_files_it_never_fetches(
    streams: Streams, media: MediaServer, tmp_path: Path
) -> None:
    bin_dir = tmp_path / "bin"
    wrapper = _wrapper(bin_dir, f'exec {FFMPEG} "$@"\n')
    out = tmp_path / "job"
    out.mkdir()
    for url in (serve_hls(media, streams), serve_dash(media, streams)):
        await run(url, out, config(ffmpeg=wrapper))
    calls = [line.split() for line in (bin_dir / "calls").read_text().splitlines()]
    merges = [c for c in calls if "-i" in c]
    assert len(merges) >= 2
    for args in merges:
        assert not any("://" in a for a in args), args
        inputs = [i for i, a in enumerate(args) if a == "-i"]
        for i in inputs:
            assert args[i - 2 : i] == ["-protocol_whitelist", "file"], args


def test_a_guarded_thread_may_not_start_a_program_on_a_url(tmp_path: Path) -> None:
    outcome: list[object] = []
    watch = connguard.Watch(True)

    def work() -> None:
        with connguard.guarded(watch):
            local = subprocess.run(["true", f"file:{tmp_path}/x.mp4"], check=False)
            outcome.append(local.returncode)
            try:
                subprocess.run(["true", "-i", "http://127.0.0.1:9/v.m3u8"], check=False)
            except connguard.ConnectRefused as exc:
                outcome.append(exc)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(10)
    assert outcome[0] == 0
    assert isinstance(outcome[1], connguard.ConnectRefused)
    assert watch.refused
    # Outside a guarded thread nothing changes.
    assert subprocess.run(["true", "http://127.0.0.1:9/"], check=False).returncode == 0


async def test_a_cancelled_job_kills_its_merge(
    streams: Streams, media: MediaServer, tmp_path: Path
) -> None:
    bin_dir = tmp_path / "bin"
    pid_file = tmp_path / "merge.pid"
    # A merge that would take 30 s: it says its pid, then waits (in short sleeps, so
    # nothing outlives it by more than one of them).
    wrapper = _wrapper(
        bin_dir, f"echo $$ > {pid_file}\nfor i in $(seq 300); do sleep 0.1; done\nexit 1\n"
    )
    out = tmp_path / "job"
    out.mkdir()
    task = asyncio.create_task(run(serve_hls(media, streams), out, config(ffmpeg=wrapper)))
    for _ in range(300):
        if pid_file.exists() and pid_file.read_text().strip():
            break
        await asyncio.sleep(0.05)
    else:
        pytest.fail("the merge never started")
    pid = int(pid_file.read_text())
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for _ in range(100):
        if not _alive(pid):
            break
        await asyncio.sleep(0.05)
    assert not _alive(pid), "ffmpeg outlived its job"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z" and os.path.exists(f"/proc/{pid}")


@pytest.mark.parametrize(
    ("output", "version"),
    [
        ("ffmpeg version 5.1.6-0+deb12u1 Copyright (c) 2000-2024 the FFmpeg developers\n",
         "5.1.6-0+deb12u1"),
        ("ffmpeg version n7.1 Copyright\nbuilt with gcc\n", "n7.1"),
        ("avconv version 12\n", ""),
        ("", ""),
    ],
    ids=["debian", "upstream", "not-ffmpeg", "nothing"],
)  # fmt: skip
def test_parse_version(output: str, version: str) -> None:
    assert parse_version(output) == version


def test_find_ffmpeg_without_one_on_the_path() -> None:
    assert find_ffmpeg(which=lambda _: None) is None
