"""A merge of picture and sound: the memory and CPU of the bot's process and of ffmpeg.

    .venv/bin/python bench/merge_bench.py                  # a 10-minute 1080p video
    .venv/bin/python bench/merge_bench.py --minutes 2 --kbps 2500

The clip is made here with ffmpeg (10 s of 1080p H.264 at a constant bitrate,
repeated by stream copy to the length asked for, and an AAC sound of the same
length), and served as a DASH manifest (picture and sound apart, as YouTube and
most sites serve them) by ``python -m http.server`` in a process of its own.
The job runs in a child Python process that is the bot's side: the real
`xbot.sources.ytdlp.YtdlpJob` (yt-dlp extracts, downloads both parts, and has
ffmpeg merge them into one MP4, copied, not re-encoded), with the upload limit
of a local Bot API server (2000 MB). It prints its own peak RSS and CPU seconds
and those of its children (the merge's ffmpeg: ``RUSAGE_CHILDREN``), the
download's and the merge's wall time apart. docs/benchmarks.md has the table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

MB = 1024 * 1024


def _ffmpeg(*args: str) -> None:
    ffmpeg = shutil.which("ffmpeg")
    if ffmpeg is None:
        sys.exit("ffmpeg is not installed")
    subprocess.run(
        [ffmpeg, "-nostdin", "-hide_banner", "-loglevel", "error", "-y", *args],
        check=True,
    )


def make_media(folder: Path, minutes: float, kbps: int) -> tuple[Path, Path]:
    """A `minutes`-long 1080p H.264 picture at `kbps` and its AAC sound, in `folder`."""
    seg = folder / "seg.mp4"
    rate = f"{kbps}k"
    _ffmpeg("-f", "lavfi", "-i", "testsrc2=size=1920x1080:rate=30:duration=10",
            "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", "-g", "60",
            "-b:v", rate, "-minrate", rate, "-maxrate", rate, "-bufsize", f"{kbps}k",
            "-x264-params", "nal-hrd=cbr", "-an", str(seg))  # fmt: skip
    loops = max(1, round(minutes * 6)) - 1
    video = folder / "video.mp4"
    _ffmpeg("-stream_loop", str(loops), "-i", str(seg), "-c", "copy", "-movflags", "+faststart",
            str(video))  # fmt: skip
    seg.unlink()
    audio = folder / "audio.m4a"
    _ffmpeg("-f", "lavfi", "-i", f"sine=frequency=440:duration={minutes * 60:g}",
            "-c:a", "aac", "-b:a", "128k", str(audio))  # fmt: skip
    mpd = (
        '<?xml version="1.0"?>\n<MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static"'
        ' profiles="urn:mpeg:dash:profile:isoff-on-demand:2011" minBufferTime="PT2S"><Period>'
        f'<AdaptationSet mimeType="video/mp4"><Representation id="v" bandwidth="{kbps * 1000}"'
        ' width="1920" height="1080" codecs="avc1.640028"><BaseURL>video.mp4</BaseURL>'
        "</Representation></AdaptationSet>"
        '<AdaptationSet mimeType="audio/mp4"><Representation id="a" bandwidth="128000"'
        ' codecs="mp4a.40.2"><BaseURL>audio.m4a</BaseURL></Representation></AdaptationSet>'
        "</Period></MPD>"
    )
    (folder / "manifest.mpd").write_text(mpd)
    return video, audio


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_job(url: str, folder: Path) -> dict[str, float]:
    """The bot's side, in this (child) process: one job, measured."""
    from xbot.sending.progress import Snapshot
    from xbot.sources.ytdlp import YtdlpConfig, YtdlpJob

    marks: dict[str, float] = {}

    def progress(snapshot: Snapshot) -> None:
        if snapshot.phase == "merge" and "merge" not in marks:
            marks["merge"] = time.monotonic()

    config = YtdlpConfig(
        limit_bytes=2000 * MB, sites="all", allow_private=True, ffmpeg=shutil.which("ffmpeg")
    )

    async def job() -> Path:
        async with YtdlpJob(url, folder, config, on_progress=progress) as running:
            await running.extract()
            return await running.download()

    import yt_dlp  # noqa: F401 - imported before the baseline: the bot has it once a link came

    base_rss = _rss_mb()
    stop, peaks = threading.Event(), dict[int, float]()
    poller = threading.Thread(target=_merge_peaks, args=(stop, peaks), daemon=True)
    poller.start()
    started, cpu0 = time.monotonic(), time.process_time()
    path = asyncio.run(job())
    ended = time.monotonic()
    stop.set()
    poller.join()
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    merge_at = marks.get("merge", ended)
    return {
        "size_mb": path.stat().st_size / MB,
        "download_s": merge_at - started,
        "merge_s": ended - merge_at,
        "bot_rss_before_mb": base_rss,
        "bot_rss_peak_mb": me.ru_maxrss / 1024,
        "bot_cpu_total_s": time.process_time() - cpu0 - peaks.pop(0, 0.0),
        "ffmpeg_rss_peak_mb": max(peaks.values(), default=0.0),
        "ffmpeg_cpu_s": kids.ru_utime + kids.ru_stime,
    }


def _merge_peaks(stop: threading.Event, peaks: dict[int, float]) -> None:
    """Poll this process's ffmpeg children: the peak resident memory (VmHWM) of each.
    (``RUSAGE_CHILDREN`` would report the parent's size: a child is forked from it.)"""
    me = str(os.getpid())
    while not stop.wait(0.02):
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if stat[1] != me or b"ffmpeg" not in (entry / "cmdline").read_bytes():
                    continue
                for line in (entry / "status").read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        peak = int(line.split()[1]) / 1024
                        peaks[int(entry.name)] = max(peaks.get(int(entry.name), 0.0), peak)
            except (OSError, IndexError, ValueError):
                continue
    peaks[0] = time.thread_time()  # this thread's own CPU: not the bot's


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--kbps", type=int, default=4000, help="the picture's bitrate")
    parser.add_argument("--job", nargs=2, metavar=("URL", "FOLDER"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.job:
        print(json.dumps(run_job(args.job[0], Path(args.job[1]))))
        return
    with tempfile.TemporaryDirectory(prefix="xbot-merge-bench-") as tmp:
        served, work = Path(tmp) / "served", Path(tmp) / "job"
        served.mkdir()
        work.mkdir()
        t0 = time.monotonic()
        video, audio = make_media(served, args.minutes, args.kbps)
        made = time.monotonic() - t0
        picture, sound = video.stat().st_size / MB, audio.stat().st_size / MB
        print(f"made {picture:.0f} MB of picture and {sound:.1f} MB of sound in {made:.0f} s")
        port = _free_port()
        server = subprocess.Popen(
            [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
             "--directory", str(served)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            for _ in range(100):
                with socket.socket() as s:
                    if s.connect_ex(("127.0.0.1", port)) == 0:
                        break
                time.sleep(0.05)
            url = f"http://127.0.0.1:{port}/manifest.mpd"
            out = subprocess.run(
                [sys.executable, __file__, "--job", url, str(work)],
                check=True, capture_output=True, text=True,
                env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
            ).stdout  # fmt: skip
        finally:
            server.terminate()
            server.wait(10)
    figures = json.loads(out.strip().splitlines()[-1])
    print(f"{args.minutes:g} min 1080p at {args.kbps} kbit/s + 128 kbit/s AAC, DASH on 127.0.0.1")
    for key, value in figures.items():
        print(f"  {key:22} {value:8.1f}")


if __name__ == "__main__":
    main()
