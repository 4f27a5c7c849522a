"""An animation made of still frames (pixiv's ugoira) turned into an H.264 MP4.

pixiv serves an ugoira as a zip of JPEG or PNG frames and, beside it, the list
of the frames with each one's delay in milliseconds (``ugoira_meta``). Telegram
plays an MP4 as an animation, so the frames become one, every frame shown for
its own delay: ffmpeg's concat demuxer reads a script of ``file``/``duration``
lines (the last file is named twice, since the demuxer drops the duration of
the last entry), ``-fps_mode vfr`` keeps those times instead of a fixed frame
rate, a timescale of 1000 keeps milliseconds exact, and ``yuv420p`` at even
dimensions is what every player (and libx264) takes.

The archive comes from the network, so nothing in it is trusted: the frame
list and its delays are checked before the download (`check_frames`), the
archive is read with the standard library's ``zipfile`` member by member, in
bounded steps counted against a cap on the unpacked size (a zip bomb stops
after at most the cap's worth of work, the pattern of `xbot.media.decoding`),
each frame is written under a name of ours (never a path from the archive),
and ffmpeg refuses a frame of absurd dimensions (``-max_pixels``). ffmpeg runs
as a child process with a time bound, killed when the task is cancelled.

Every failure is a `FetchError` whose reason is one sentence for the chat.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import threading
import zipfile
from collections.abc import Sequence
from pathlib import Path

from xbot.errors import FetchError
from xbot.i18n import N_
from xbot.logs import kv
from xbot.media.decoding import STEP
from xbot.media.ffmpeg import ffmpeg_path
from xbot.media.models import Frame
from xbot.media.tempfiles import room

log = logging.getLogger(__name__)

__all__ = [
    "BAD_FRAMES",
    "MAX_DELAY_MS",
    "MAX_FRAMES",
    "MAX_UNPACKED",
    "MISSING_FRAMES",
    "NOT_AN_ARCHIVE",
    "NOT_CONVERTED",
    "TOO_BIG",
    "available",
    "check_frames",
    "concat_script",
    "encode",
    "to_mp4",
    "unpack",
]

# pixiv allows a few hundred frames; far more is no ugoira we should spend a CPU on.
MAX_FRAMES = 1000
MIN_DELAY_MS = 1
MAX_DELAY_MS = 60_000
MAX_TOTAL_MS = 10 * 60 * 1000
# What the frames may unpack to on disk (a 1920x1080 ugoira of 150 JPEGs is a tenth of it).
MAX_UNPACKED = 512 * 1024 * 1024
# A frame's decoded size: 4K and some; a "frame" of 60000x60000 pixels is an attack.
MAX_PIXELS = 4096 * 4096
ENCODE_TIMEOUT = 300.0

NOT_AN_ARCHIVE = N_("pixiv sent this animation as a file I could not open.")
MISSING_FRAMES = N_("pixiv's file for this animation is missing some of its frames.")
BAD_FRAMES = N_("This pixiv animation has an impossible number of frames or frame delays.")
TOO_BIG = N_("This pixiv animation is too large to turn into a video.")
NOT_CONVERTED = N_("I could not turn this pixiv animation into a video.")


def available() -> bool:
    """Whether there is an ffmpeg (without it an ugoira stays one sentence); where it is
    is `xbot.media.ffmpeg`'s to say, as for the yt-dlp merge."""
    return ffmpeg_path() is not None


def check_frames(frames: Sequence[Frame]) -> None:
    """Refuse a frame list no real ugoira has: none, too many, a delay out of range,
    or a running time of more than ten minutes. Pure.

    Raises:
        FetchError: `BAD_FRAMES`.
    """
    if not 1 <= len(frames) <= MAX_FRAMES:
        raise FetchError(BAD_FRAMES)
    if any(not MIN_DELAY_MS <= f.delay_ms <= MAX_DELAY_MS for f in frames):
        raise FetchError(BAD_FRAMES)
    if sum(f.delay_ms for f in frames) > MAX_TOTAL_MS:
        raise FetchError(BAD_FRAMES)
    if any(not f.file or "\n" in f.file or "\r" in f.file for f in frames):
        raise FetchError(BAD_FRAMES)


# Each still is read by ffmpeg's image demuxer, whose clock ticks at its frame rate
# (25 by default): at that rate every start is rounded to 40 ms. A tick of 1 ms keeps them.
_MS_CLOCK = "option framerate 1000"


def concat_script(names: Sequence[str], delays_ms: Sequence[int]) -> str:
    """ffmpeg's concat script showing each file for its delay. Pure.

    The demuxer ignores the ``duration`` of the last entry (nothing follows it to
    end it), so the last file is listed once more without one: the last real frame
    then lasts its delay, and the extra entry adds one frame at the very end.
    Names are ours (``000001.jpg``): nothing to quote.
    """
    lines = ["ffconcat version 1.0"]
    for name, delay in zip(names, delays_ms, strict=True):
        lines += [f"file {name}", _MS_CLOCK, f"duration {delay / 1000:.3f}"]
    if names:
        lines += [f"file {names[-1]}", _MS_CLOCK]
    return "\n".join(lines) + "\n"


def unpack(
    archive: Path,
    folder: Path,
    frames: Sequence[Frame],
    *,
    max_bytes: int,
    stop: threading.Event | None = None,
) -> list[Path]:
    """Write each frame of `frames` from the zip `archive` into `folder`, in order,
    under names of ours; at most `max_bytes` unpacked in all. Blocking: run it in a
    thread; `stop` set (the task was cancelled) ends it at the next step.

    Raises:
        FetchError: not a zip (`NOT_AN_ARCHIVE`), a frame missing (`MISSING_FRAMES`),
            more than `max_bytes` unpacked (`TOO_BIG`).
    """
    try:
        with zipfile.ZipFile(archive) as zf:
            members = {info.filename: info for info in zf.infolist() if not info.is_dir()}
            if any(f.file not in members for f in frames):
                raise FetchError(MISSING_FRAMES)
            total = 0
            out: list[Path] = []
            with room(folder, min(max_bytes, sum(i.file_size for i in members.values()))):
                for n, frame in enumerate(frames):
                    suffix = ".png" if frame.file.lower().endswith(".png") else ".jpg"
                    path = folder / f"{n:06d}{suffix}"
                    # The header's size is the archive's claim; the count is what inflates.
                    with zf.open(members[frame.file]) as src, path.open("wb") as dst:
                        while piece := src.read(STEP):
                            if stop is not None and stop.is_set():
                                raise FetchError(NOT_CONVERTED)
                            total += len(piece)
                            if total > max_bytes:
                                raise FetchError(TOO_BIG)
                            dst.write(piece)
                    out.append(path)
            return out
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, EOFError) as exc:
        # Corrupt, truncated, encrypted (NotImplementedError: a method zipfile lacks) ...
        raise FetchError(NOT_AN_ARCHIVE) from exc
    except RuntimeError as exc:  # an encrypted member asks for a password
        raise FetchError(NOT_AN_ARCHIVE) from exc
    except OSError as exc:  # the disk, not the archive
        raise FetchError(NOT_CONVERTED) from exc


def ffmpeg_arguments(script: Path, dest: Path, ffmpeg: str = "ffmpeg") -> list[str]:
    """The command line that turns the concat `script` into the MP4 `dest`. Pure."""
    return [
        ffmpeg, "-nostdin", "-hide_banner", "-loglevel", "error", "-y",
        "-max_pixels", str(MAX_PIXELS),
        "-f", "concat", "-safe", "0", "-i", str(script),
        # Even dimensions (yuv420p halves the chroma planes) with square pixels (no
        # stretched display size), no sound, times as given.
        "-vf", "scale=trunc(iw/2)*2:trunc(ih/2)*2,setsar=1,format=yuv420p",
        "-c:v", "libx264", "-preset", "veryfast", "-crf", "20",
        "-fps_mode", "vfr", "-enc_time_base", "1:1000", "-video_track_timescale", "1000",
        "-an", "-movflags", "+faststart", "-f", "mp4", str(dest),
    ]  # fmt: skip


async def encode(
    paths: Sequence[Path],
    delays_ms: Sequence[int],
    dest: Path,
    *,
    ffmpeg: str = "ffmpeg",
    within: float = ENCODE_TIMEOUT,
) -> None:
    """Run ffmpeg over the frames at `paths`; the MP4 lands at `dest`.

    ffmpeg is a child process: killed (and waited for) when this is cancelled or
    runs past `within` seconds, and a partial `dest` is removed.

    Raises:
        FetchError: ffmpeg failed, ran too long or is missing (`NOT_CONVERTED`).
    """
    # Absolute: the concat demuxer reads the names in the script relative to the script.
    dest = dest.absolute()  # noqa: ASYNC240 - no I/O: the working directory is in memory
    script = dest.with_suffix(".ffconcat")
    text = concat_script([p.name for p in paths], delays_ms)
    await asyncio.to_thread(script.write_text, text, encoding="utf-8")
    try:
        proc = await asyncio.create_subprocess_exec(
            *ffmpeg_arguments(script, dest, ffmpeg),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError as exc:
        script.unlink(missing_ok=True)
        raise FetchError(NOT_CONVERTED) from exc
    ok = False
    try:
        async with asyncio.timeout(within):
            _, err = await proc.communicate()
        ok = proc.returncode == 0 and dest.is_file() and dest.stat().st_size > 0
        if not ok:
            # ffmpeg's own words about the frames (no URL, no secret is in its input).
            lines = err.decode("utf-8", "replace").strip().splitlines()
            log.info(
                "ffmpeg failed %s",
                kv(status=proc.returncode, error=lines[-1][:300] if lines else ""),
            )
    except TimeoutError:
        pass
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            # Shielded: a cancelled task still reaps its child, leaving no zombie behind.
            await asyncio.shield(proc.wait())
        script.unlink(missing_ok=True)
        if not ok:
            dest.unlink(missing_ok=True)
    if not ok:
        raise FetchError(NOT_CONVERTED)


async def to_mp4(
    archive: Path,
    frames: Sequence[Frame],
    dest: Path,
    *,
    max_unpacked: int | None = None,
    ffmpeg: str = "ffmpeg",
) -> None:
    """The zip `archive` of `frames` as the MP4 `dest`; the unpacked frames are removed.
    At most `max_unpacked` bytes unpacked (default `MAX_UNPACKED`).

    Raises:
        FetchError: the archive, its frames or the conversion failed (one sentence each).
    """
    check_frames(frames)
    folder = dest.parent / f"{dest.stem}.frames"
    folder.mkdir()
    # A cancelled await leaves its thread running: the flag ends it within one step.
    stop = threading.Event()
    try:
        cap = MAX_UNPACKED if max_unpacked is None else max_unpacked
        paths = await asyncio.to_thread(unpack, archive, folder, frames, max_bytes=cap, stop=stop)
        await encode(paths, [f.delay_ms for f in frames], folder / dest.name, ffmpeg=ffmpeg)
        (folder / dest.name).replace(dest)
    finally:
        stop.set()
        shutil.rmtree(folder, ignore_errors=True)
