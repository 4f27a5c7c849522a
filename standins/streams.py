"""A clip as sites serve it: H.264 video-only renditions and one AAC audio, as DASH and HLS.

    streams = make_streams(folder)              # ffmpeg, once per test session
    mpd = serve_dash(media, streams)            # a DASH manifest on the media server
    m3u8 = serve_hls(media, streams)            # an HLS master playlist

The clip (`DURATION` seconds) is encoded at a constant bitrate per rendition
(`RENDITIONS`), so the sizes are known in advance: with a 2 MB upload limit
720p plus the sound fits and 1080p does not (`LIMIT_MB`). The DASH manifest also
offers a 240p file with both picture and sound (as YouTube serves its low
version) and states no size and no duration; the HLS playlist states its
bitrates (`BANDWIDTH`), which `understate` can make wrong on purpose.

Made with the ``ffmpeg`` on the PATH (`have_ffmpeg`); small and quick on purpose:
a few frames a second, ultrafast presets.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

import attrs

from standins.media_server import MediaServer

__all__ = [
    "AUDIO_KBPS",
    "DURATION",
    "LIMIT_MB",
    "RENDITIONS",
    "Streams",
    "have_ffmpeg",
    "make_streams",
    "probe_streams",
    "serve_dash",
    "serve_hls",
]

DURATION = 6
# height -> (width, video kbit/s): 720p + audio is about 1.6 MB, 1080p alone about 2.6 MB.
RENDITIONS: Mapping[int, tuple[int, int]] = {
    240: (426, 250),
    480: (854, 700),
    720: (1280, 2000),
    1080: (1920, 3500),
}
AUDIO_KBPS = 128
LIMIT_MB = 2  # the upload limit the tests run these streams under


def have_ffmpeg() -> bool:
    return shutil.which("ffmpeg") is not None and shutil.which("ffprobe") is not None


@attrs.frozen
class Streams:
    """The generated files.

    Attributes:
        videos: height -> an MP4 with the picture only.
        audio: an M4A with the sound only.
        muxed: the 240p picture with the sound, in one MP4.
        hls: height (0 for the sound) -> the folder of that rendition's playlist and segments.
    """

    folder: Path
    videos: Mapping[int, Path]
    audio: Path
    muxed: Path
    hls: Mapping[int, Path]


def _program(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise FileNotFoundError(f"{name} is not installed")
    return path


def _ffmpeg(*args: str) -> None:
    subprocess.run(  # noqa: S603 - ffmpeg from the PATH, arguments of our own
        [_program("ffmpeg"), "-nostdin", "-hide_banner", "-loglevel", "error", "-y", *args],
        check=True,
        timeout=120,
    )


def _cbr(kbps: int) -> list[str]:
    # Filler to the bitrate, so a rendition's size is its bitrate times the duration.
    rate = f"{kbps}k"
    return ["-b:v", rate, "-minrate", rate, "-maxrate", rate, "-bufsize", f"{kbps // 2}k",
            "-x264-params", "nal-hrd=cbr:force-cfr=1"]  # fmt: skip


def _hls(source: Path, folder: Path) -> Path:
    folder.mkdir()
    _ffmpeg("-i", str(source), "-c", "copy", "-f", "hls", "-hls_time", "2",
            "-hls_playlist_type", "vod", "-hls_segment_filename", str(folder / "seg%d.ts"),
            str(folder / "index.m3u8"))  # fmt: skip
    return folder


def make_streams(folder: Path) -> Streams:
    """Encode the clip's renditions into `folder` (a few seconds of CPU)."""
    folder.mkdir(parents=True, exist_ok=True)
    videos: dict[int, Path] = {}
    for height, (width, kbps) in RENDITIONS.items():
        out = folder / f"video{height}.mp4"
        _ffmpeg("-f", "lavfi", "-i", f"testsrc2=size={width}x{height}:rate=5:duration={DURATION}",
                "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p",
                "-g", "10", *_cbr(kbps), "-an", "-movflags", "+faststart", str(out))  # fmt: skip
        videos[height] = out
    audio = folder / "audio.m4a"
    _ffmpeg("-f", "lavfi", "-i", f"sine=frequency=440:duration={DURATION}",
            "-c:a", "aac", "-b:a", f"{AUDIO_KBPS}k", "-vn", str(audio))  # fmt: skip
    muxed = folder / "muxed240.mp4"
    _ffmpeg("-i", str(videos[240]), "-i", str(audio), "-c", "copy", "-map", "0:v:0",
            "-map", "1:a:0", "-movflags", "+faststart", str(muxed))  # fmt: skip
    hls = {h: _hls(path, folder / f"hls{h}") for h, path in videos.items()}
    hls[0] = _hls(audio, folder / "hls-audio")
    return Streams(folder=folder, videos=videos, audio=audio, muxed=muxed, hls=hls)


def probe_streams(path: Path) -> list[dict[str, object]]:
    """ffprobe's streams of a file: ``codec_type``, ``codec_name``, ``width``, ``height``, …"""

    out = subprocess.run(  # noqa: S603 - ffprobe from the PATH, a path of our own
        [
            _program("ffprobe"),
            "-v",
            "error",
            "-show_streams",
            "-show_format",
            "-of",
            "json",
            str(path),
        ],
        check=True,
        capture_output=True,
        timeout=30,
    ).stdout
    streams: list[dict[str, object]] = json.loads(out).get("streams", [])
    return streams


def _kbps(height: int) -> int:
    return RENDITIONS[height][1]


def serve_dash(
    media: MediaServer, streams: Streams, prefix: str = "/dash", *, sound: bool = True
) -> str:
    """A DASH manifest (no sizes, no duration) over the files; returns its URL.

    Without `sound`: the picture-only renditions alone (a video that has no sound).
    """
    reps = []
    for height, path in streams.videos.items():
        width, kbps = RENDITIONS[height]
        media.add(f"{prefix}/v{height}.mp4", path.read_bytes(), "video/mp4")
        reps.append(
            f'<Representation id="v{height}" bandwidth="{kbps * 1000}" width="{width}"'
            f' height="{height}" codecs="avc1.64001f"><BaseURL>v{height}.mp4</BaseURL>'
            "</Representation>"
        )
    sets = ""
    if sound:
        media.add(f"{prefix}/a.m4a", streams.audio.read_bytes(), "audio/mp4")
        media.add(f"{prefix}/muxed.mp4", streams.muxed.read_bytes(), "video/mp4")
        sets = (
            '<AdaptationSet mimeType="audio/mp4" lang="en">'
            f'<Representation id="a" bandwidth="{AUDIO_KBPS * 1000}" codecs="mp4a.40.2"'
            ' audioSamplingRate="44100"><BaseURL>a.m4a</BaseURL></Representation>'
            "</AdaptationSet>"
            '<AdaptationSet mimeType="video/mp4">'
            f'<Representation id="muxed" bandwidth="{(_kbps(240) + AUDIO_KBPS) * 1000}"'
            ' width="426" height="240" codecs="avc1.64001f,mp4a.40.2">'
            "<BaseURL>muxed.mp4</BaseURL></Representation>"
            "</AdaptationSet>"
        )
    mpd = (
        '<?xml version="1.0"?>\n'
        '<MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static"'
        ' profiles="urn:mpeg:dash:profile:isoff-on-demand:2011" minBufferTime="PT2S">'
        "<Period>"
        '<AdaptationSet mimeType="video/mp4">'
        + "".join(reps)
        + "</AdaptationSet>"
        + sets
        + "</Period></MPD>"
    )
    return media.add(f"{prefix}/manifest.mpd", mpd.encode(), "application/dash+xml")


def serve_hls(
    media: MediaServer,
    streams: Streams,
    prefix: str = "/hls",
    *,
    understate: Mapping[int, float] | None = None,
) -> str:
    """An HLS master playlist over the renditions; returns its URL.

    `understate` maps a height to a factor its stated bitrate is multiplied by
    (a site's estimate that is wrong).
    """
    for key, folder in streams.hls.items():
        name = "audio" if key == 0 else f"v{key}"
        for file in sorted(folder.iterdir()):
            kind = "application/vnd.apple.mpegurl" if file.suffix == ".m3u8" else "video/mp2t"
            media.add(f"{prefix}/{name}/{file.name}", file.read_bytes(), kind)
    lines = [
        "#EXTM3U",
        "#EXT-X-VERSION:3",
        '#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aac",NAME="English",LANGUAGE="en",DEFAULT=YES,'
        'AUTOSELECT=YES,URI="audio/index.m3u8"',
    ]
    for height in streams.videos:
        width, kbps = RENDITIONS[height]
        factor = (understate or {}).get(height, 1.0)
        # The muxed stream's bitrate (picture and sound), as sites state it.
        bandwidth = int((kbps * factor + AUDIO_KBPS) * 1000)
        lines.append(
            f"#EXT-X-STREAM-INF:BANDWIDTH={bandwidth},RESOLUTION={width}x{height},"
            f'CODECS="avc1.64001f,mp4a.40.2",AUDIO="aac"'
        )
        lines.append(f"v{height}/index.m3u8")
    body = "\n".join(lines) + "\n"
    return media.add(f"{prefix}/master.m3u8", body.encode(), "application/vnd.apple.mpegurl")
