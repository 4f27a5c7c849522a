"""One yt-dlp job, the real yt-dlp against the media stand-in on 127.0.0.1: the cap counts
bytes, cancellation stops the thread, and every request passes the guard."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import subprocess
import time
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from standins.media_server import MediaServer, big, bomb, fake_mp4
from standins.streams import Streams, probe_streams, serve_dash
from xbot.errors import BlockedAddress, FetchError, TooLarge, TooSlow
from xbot.media.speed_floor import SLOW_SITE, SpeedFloor
from xbot.media.tempfiles import temp_folder
from xbot.sending.progress import Snapshot
from xbot.sources.ytdlp import MAX_PAGE, OVER_LIMIT, PAGE_TOO_LARGE, YtdlpConfig, YtdlpJob

LIMIT = 1_000_000


@pytest.fixture
async def media() -> AsyncIterator[MediaServer]:
    server = await MediaServer().start()
    try:
        yield server
    finally:
        await server.stop()


def config(*, allow_private: bool = True, **overrides: object) -> YtdlpConfig:
    return YtdlpConfig(
        limit_bytes=LIMIT, sites="all", allow_private=allow_private, overrides=dict(overrides)
    )


async def run(url: str, folder: Path, cfg: YtdlpConfig, seen: list[Snapshot]) -> Path:
    async with YtdlpJob(url, folder, cfg, on_progress=seen.append) as job:
        await job.extract()
        return await job.download()


@pytest.mark.parametrize("chunked", [True, False], ids=["no-content-length", "content-length"])
async def test_the_cap_stops_the_download_itself(
    media: MediaServer, tmp_path: Path, chunked: bool
) -> None:
    url = media.add("/huge.mp4", big(100 * 2**20), "video/mp4", chunked=chunked)
    seen: list[Snapshot] = []
    started = time.monotonic()
    with pytest.raises(TooLarge) as caught:
        await run(url, tmp_path, config(), seen)
    assert caught.value.reason == OVER_LIMIT
    assert time.monotonic() - started < 5, "100 MB were not read to the end"
    # yt-dlp reads in blocks: the hook stops it at the first block past the cap.
    assert all(s.done <= LIMIT for s in seen)
    part = [p.stat().st_size for p in tmp_path.iterdir()]
    assert all(size <= 2 * LIMIT for size in part), part


async def test_a_file_under_the_cap_is_kept_with_a_fixed_name(
    media: MediaServer, tmp_path: Path
) -> None:
    url = media.add("/My Video (1).mp4", fake_mp4(300_000), "video/mp4", chunked=True)
    seen: list[Snapshot] = []
    path = await run(url.replace(" ", "%20"), tmp_path, config(), seen)
    assert path == (tmp_path / "media.mp4").resolve(), "never a name from the site"
    assert path.stat().st_size == 300_000
    assert seen[-1] == Snapshot("download", 300_000, 300_000)


async def test_cancelling_stops_the_thread_and_the_folder_goes(
    media: MediaServer, tmp_path: Path
) -> None:
    url = media.add("/slow.mp4", fake_mp4(900_000), "video/mp4")  # under the cap: ~9 s
    jobs: list[YtdlpJob] = []

    async def job() -> None:
        with temp_folder(tmp_path) as folder:
            async with YtdlpJob(url, folder, config(ratelimit=100_000)) as j:
                jobs.append(j)
                await j.extract()
                await j.download()

    task = asyncio.create_task(job())
    parts = tmp_path / "tmp"
    deadline = time.monotonic() + 10
    while not any(p.suffix == ".part" for p in parts.rglob("*")):
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)
    started = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - started < 1.5
    assert jobs[0]._busy is not None
    assert jobs[0]._busy.done(), "the yt-dlp thread stopped at its next block"
    assert list(parts.iterdir()) == []


async def test_a_thread_stuck_on_a_stalled_socket_cleans_up_when_it_ends(
    media: MediaServer, tmp_path: Path
) -> None:
    # The page answers a few bytes, then goes silent: yt-dlp blocks in a read that
    # no flag can interrupt; only its socket timeout ends it.
    page = media.add("/stall.html", b"<html>" + bytes(5000), "text/html", stall_after=10)
    folder = tmp_path / "job"
    folder.mkdir()
    cfg = YtdlpConfig(
        limit_bytes=LIMIT, sites="all", allow_private=True, socket_timeout=1.0,
        cancel_grace=0.1, overrides={"retries": 0, "extractor_retries": 0},
    )  # fmt: skip
    jobs: list[YtdlpJob] = []

    async def job() -> None:
        async with YtdlpJob(page, folder, cfg) as j:
            jobs.append(j)
            await j.extract()

    task = asyncio.create_task(job())
    deadline = time.monotonic() + 10
    while media.hits["/stall.html"] == 0:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.01)
    started = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - started < 0.5, "the job returns after its grace"
    busy = jobs[0]._busy
    assert busy is not None
    assert not busy.done(), "still blocked in a read: the socket timeout has not passed"
    assert folder.exists()
    deadline = time.monotonic() + 10
    while folder.exists():
        assert time.monotonic() < deadline, "removed once the thread gave up"
        await asyncio.sleep(0.02)
    with contextlib.suppress(Exception):
        await asyncio.wait_for(asyncio.shield(busy), 5)


async def test_every_request_passes_the_guard_embedded_media_too(
    media: MediaServer, tmp_path: Path
) -> None:
    video = f"http://localhost:{media.port}/elsewhere.mp4"
    media.add("/elsewhere.mp4", fake_mp4(50_000), "video/mp4")
    page = media.add(
        "/page.html",
        f'<html><body><video src="{video}"></video></body></html>'.encode(),
        "text/html",
    )
    asked: list[str] = []

    def guard(url: str) -> None:
        asked.append(url)
        if "localhost" in url:  # stands for a host that resolves to a private address
            raise BlockedAddress("blocked")

    async with YtdlpJob(page, tmp_path, config(), guard=guard) as job:
        await job.extract()
        with pytest.raises(BlockedAddress):
            await job.download()
    assert asked[0] == page
    assert video in asked
    assert media.hits["/elsewhere.mp4"] == 0, "refused before connecting"


async def test_a_redirect_to_a_refused_address_is_not_used(
    media: MediaServer, tmp_path: Path
) -> None:
    url = media.add("/moving.mp4", fake_mp4(50_000), "video/mp4")
    media.add("/secret.mp4", fake_mp4(50_000), "video/mp4")

    def guard(url: str) -> None:
        if "localhost" in url:
            raise BlockedAddress("blocked")

    async with YtdlpJob(url, tmp_path, config(), guard=guard) as job:
        await job.extract()
        # Between the look and the download the host starts redirecting the media.
        media.add("/moving.mp4", b"", redirect_to=f"http://localhost:{media.port}/secret.mp4")
        with pytest.raises(BlockedAddress):
            await job.download()
    # yt-dlp follows redirects inside its HTTP handler, beyond any hook: the request
    # was made (the residual risk the systemd unit's IPAddressDeny covers), but its
    # answer was not used.
    assert media.hits["/secret.mp4"] == 1
    assert not (tmp_path / "media.mp4").exists()


# --- the connect-time guard (xbot.media.connguard) around the job's thread ------------------


@pytest.fixture
def rebinding(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """``rebind.test`` resolves to a public address the first time, to 127.0.0.1 after."""
    real = socket.getaddrinfo
    answers: list[str] = []

    def resolve(host: str, port: object, *args: object, **kwargs: object) -> list[Any]:
        if host != "rebind.test":
            return real(host, port, *args, **kwargs)  # type: ignore[arg-type]
        answers.append("93.184.216.34" if not answers else "127.0.0.1")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (answers[-1], int(str(port))))]

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    return answers


async def test_a_name_that_resolves_to_loopback_the_second_time_is_refused(
    media: MediaServer, tmp_path: Path, rebinding: list[str]
) -> None:
    """DNS rebinding: the pre-flight check sees a public address, yt-dlp's own lookup
    gets 127.0.0.1; the connection is judged on the address it is made to."""
    media.add("/v.mp4", fake_mp4(50_000), "video/mp4")
    url = f"http://rebind.test:{media.port}/v.mp4"
    with pytest.raises(BlockedAddress):
        await run(url, tmp_path, config(allow_private=False), [])
    assert rebinding[:2] == ["93.184.216.34", "127.0.0.1"], "checked, then rebound"
    assert media.hits["/v.mp4"] == 0, "nothing reached the loopback server"


async def test_a_redirect_to_loopback_is_refused_before_it_is_requested(
    media: MediaServer, tmp_path: Path
) -> None:
    """The generic extractor (``all``) follows a redirect from a public host (one local
    port stands for it) to 127.0.0.1: the hop is refused at connect, not read and dropped."""
    inner = await MediaServer().start()
    try:
        secret = inner.add("/secret.mp4", fake_mp4(50_000), "video/mp4")
        url = media.add("/moving.mp4", b"", redirect_to=secret)

        def public_host_only(ip: Any, port: int) -> bool:
            return port == media.port  # stands for a host whose address is public

        job = YtdlpJob(
            url, tmp_path, config(allow_private=False), guard=lambda _: None,
            policy=public_host_only,
        )  # fmt: skip
        async with job:
            with pytest.raises(BlockedAddress):
                await job.extract()  # the generic extractor asks for the file itself
        assert media.hits["/moving.mp4"] >= 1, "the public host was asked"
        assert inner.hits["/secret.mp4"] == 0, "the loopback one never was"
    finally:
        await inner.stop()


async def peak_of(work: Any) -> tuple[BaseException | None, int]:
    """What `work` raised, and the most Python memory held at once (every thread)."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        raised: BaseException | None = None
        try:
            await work
        except FetchError as exc:
            raised = exc
        return raised, tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


async def test_a_page_that_inflates_is_refused_in_bounded_memory(
    media: MediaServer, tmp_path: Path
) -> None:
    """yt-dlp reads a page whole, and urllib3 inflates it as it reads: a 256 MiB
    ``gzip, gzip`` page (a few KB on the wire) is refused past `MAX_PAGE`."""
    page = bomb(256 * 2**20, "gzip, gzip", prefix=b"<!DOCTYPE html><html><head><title>")
    url = media.add("/watch", page, "text/html", headers={"content-encoding": "gzip, gzip"})
    raised, peak = await peak_of(run(url, tmp_path, config(), []))
    assert isinstance(raised, FetchError)
    assert raised.reason == PAGE_TOO_LARGE
    assert peak < 4 * MAX_PAGE, f"held {peak / 2**20:.0f} MB at once"


async def test_an_encoded_media_file_is_capped_as_it_inflates(
    media: MediaServer, tmp_path: Path
) -> None:
    """yt-dlp's downloader asks for identity; a server that gzips the file anyway is
    decoded a block at a time (urllib3 >= 2.6) and the hook stops it at the cap."""
    url = media.add("/v.mp4", bomb(3 * 2**30, "gzip, gzip"), "video/mp4",
                    headers={"content-encoding": "gzip, gzip"})  # fmt: skip
    raised, peak = await peak_of(run(url, tmp_path, config(), []))
    assert isinstance(raised, TooLarge)
    assert peak < 4 * MAX_PAGE, f"held {peak / 2**20:.0f} MB at once"


# -- time: the speed floor on the download, a limit on saying what a link is -----------------

QUICK = SpeedFloor(rate=2000.0, window=0.5)


async def _thread_ends(job: YtdlpJob) -> None:
    busy = job._busy
    assert busy is not None
    with contextlib.suppress(Exception):
        await asyncio.wait_for(asyncio.shield(busy), 10)
    assert busy.done(), "the thread's blocked read was woken: its socket was shut down"


async def test_a_dripping_download_is_given_up_and_its_socket_shut(
    media: MediaServer, tmp_path: Path
) -> None:
    # One byte every 0.05 s: yt-dlp's read of a 1 KiB block would block ~50 s, and its
    # socket timeout (20 s) never fires; the hook is not even called meanwhile.
    url = media.add("/drip.mp4", fake_mp4(100_000), "video/mp4", drip=0.05)
    cfg = attrs.evolve(config(), floor=QUICK, cancel_grace=0.1)
    jobs: list[YtdlpJob] = []

    async def job() -> None:
        async with YtdlpJob(url, tmp_path, cfg) as j:
            jobs.append(j)
            await j.extract()
            await j.download()

    with pytest.raises(TooSlow, match="too slowly"):
        await asyncio.wait_for(job(), 30)
    await _thread_ends(jobs[0])


async def test_a_dripping_page_is_given_up_at_the_extract_limit(
    media: MediaServer, tmp_path: Path
) -> None:
    page = media.add("/drip.html", b"<html>" + bytes(50_000), "text/html", drip=0.05)
    cfg = attrs.evolve(config(), extract_limit=0.5, cancel_grace=0.1)
    jobs: list[YtdlpJob] = []

    async def job() -> None:
        async with YtdlpJob(page, tmp_path, cfg) as j:
            jobs.append(j)
            await j.extract()

    with pytest.raises(TooSlow) as caught:
        await asyncio.wait_for(job(), 30)
    assert caught.value.reason == SLOW_SITE
    await _thread_ends(jobs[0])


# --- the sound alone -------------------------------------------------------------------


def _encode(folder: Path, name: str, audio: list[str], container: list[str]) -> bytes:
    """A 1 s clip (a picture and a tone) encoded by ffmpeg."""
    path = folder / name
    subprocess.run(
        [str(shutil.which("ffmpeg")), "-hide_banner", "-loglevel", "error", "-y",
         "-f", "lavfi", "-i", "sine=frequency=440:duration=1",
         "-f", "lavfi", "-i", "color=c=red:s=64x48:d=1:r=10",
         *audio, *container, "-shortest", str(path)],
        check=True, timeout=60,
    )  # fmt: skip
    return path.read_bytes()


@pytest.mark.skipif(not shutil.which("ffmpeg"), reason="needs ffmpeg")
@pytest.mark.parametrize(
    ("name", "audio", "container", "ctype", "suffix", "codec"),
    [
        ("aac.mp4", ["-c:a", "aac"], ["-c:v", "libx264", "-preset", "ultrafast"], "video/mp4",
         ".m4a", "aac"),
        ("opus.webm", ["-c:a", "libopus"], ["-c:v", "libvpx", "-deadline", "realtime"],
         "video/webm", ".mp3", "mp3"),
    ],
    ids=["aac-kept-in-m4a", "anything-else-mp3"],
)  # fmt: skip
async def test_the_sound_alone_is_m4a_when_aac_else_mp3(
    media: MediaServer,
    tmp_path: Path,
    name: str,
    audio: list[str],
    container: list[str],
    ctype: str,
    suffix: str,
    codec: str,
) -> None:
    url = media.add(f"/{name}", _encode(tmp_path, name, audio, container), ctype)
    folder = tmp_path / "job"
    folder.mkdir()
    cfg = attrs.evolve(config(), ffmpeg=shutil.which("ffmpeg"))
    async with YtdlpJob(url, folder, cfg, audio=True) as job:
        await job.extract()
        path = await job.download()
    assert path.suffix == suffix
    streams = [s for s in probe_streams(path) if s.get("codec_type") != "data"]
    assert [(s["codec_type"], s["codec_name"]) for s in streams] == [("audio", codec)]
    assert [p.name for p in folder.iterdir()] == [path.name], "the video part is gone"


async def test_the_sound_of_a_dash_link_is_its_sound_stream_alone(
    media: MediaServer, tmp_path: Path, streams: Streams
) -> None:
    """A site that serves picture and sound apart: the sound's stream is fetched and
    kept as it is (AAC in M4A), and no picture is downloaded for it."""
    url = serve_dash(media, streams)
    cfg = attrs.evolve(config(), limit_bytes=10 * 2**20, ffmpeg=shutil.which("ffmpeg"))
    async with YtdlpJob(url, tmp_path, cfg, audio=True) as job:
        await job.extract()
        path = await job.download()
    assert path.suffix == ".m4a"
    assert [s["codec_name"] for s in probe_streams(path) if s["codec_type"] == "audio"] == ["aac"]
    fetched = {p for p, n in media.hits.items() if n}
    assert not {p for p in fetched if "/v" in p or "muxed" in p}, fetched
    assert "/dash/a.m4a" in fetched


@pytest.mark.parametrize("ffmpeg", [shutil.which("ffmpeg"), None], ids=["ffmpeg", "no-ffmpeg"])
async def test_the_sound_alone_of_a_video_without_sound_is_known_before_a_download(
    media: MediaServer, tmp_path: Path, streams: Streams, ffmpeg: str | None
) -> None:
    """Every rendition says it has no sound: extraction says so (the task decides what
    then), never "nothing fits", and without ffmpeg too (no audio format to select)."""
    url = serve_dash(media, streams, "/mute", sound=False)
    cfg = attrs.evolve(config(), limit_bytes=10 * 2**20, ffmpeg=ffmpeg)
    async with YtdlpJob(url, tmp_path, cfg, audio=True) as job:
        info = await job.extract()
    assert not info.sound
    assert not {p for p, n in media.hits.items() if n and p.endswith(".mp4")}, "no download"
