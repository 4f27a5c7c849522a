"""What one yt-dlp job asks for: the sites, the format, the options; and the cache key.

Pure: nothing here imports yt-dlp (`_api` does, and runs the
jobs). The rules kept here: `format_selector` (with ffmpeg, the best picture
plus the best sound whose sizes together fit the upload limit, merged into one
MP4; without it, the best single file that fits; ``<?`` admits formats of
unknown size, which the job's hook caps), `FORMAT_SORT` (H.264 and AAC first),
`allowed_extractors` (``known`` or ``all``), `GUARDED_OPTIONS` (what keeps
yt-dlp inside the connect-time guard), `OUTTMPL` (never a name
from the site) and `cache_key` (two spellings of one video share an entry).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from xbot.media.speed_floor import DEFAULT_FLOOR, SpeedFloor
from xbot.sources.ytdlp._cookies import Cookies

log = logging.getLogger(__name__)

SITES = ("known", "all")
# Their ids are file names or page slugs, not ids of a video on a site: two
# hosts' "video.mp4" must not share a cache entry, so their key is the URL.
GENERIC_EXTRACTORS = frozenset({"generic", "html5mediaembed"})
OUTTMPL = "media.%(ext)s"  # never a name from the site: titles are user input


class _Logger:
    """yt-dlp's messages go to our log, never to stderr. Its errors are raised as well
    (and logged once with the task), so they stay below WARNING here."""

    def debug(self, msg: str) -> None:
        log.debug("yt-dlp %s", msg)

    def info(self, msg: str) -> None:
        log.debug("yt-dlp %s", msg)

    def warning(self, msg: str) -> None:
        log.debug("yt-dlp warning %s", msg)

    def error(self, msg: str) -> None:
        log.info("yt-dlp %s", msg)


# Extractors whose URL pattern takes any host: the generic one, and Mediasite's
# three (``https?://[^/]+/Mediasite/...``, a product many universities host). With
# ``known`` they would fetch from wherever a user points them, so they are
# excluded by name; a test re-hosts every extractor's own test URLs on a foreign
# host and fails when yt-dlp gains another such extractor.
ANY_HOST_EXTRACTORS = ("generic", "mediasite.*")

# The connect-time guard (`xbot.media.connguard`) sees the job's own thread only:
# no fragment threads, no external downloader (ffmpeg, aria2c: a child process
# fetching a stream), and no proxy from the environment (it would resolve and
# connect for us). They come after the overrides: nothing may turn them off.
GUARDED_OPTIONS: Mapping[str, Any] = {
    "concurrent_fragment_downloads": 1,
    "external_downloader": {"default": "native"},
    "proxy": "",
}


def allowed_extractors(sites: str) -> list[str]:
    """``known``: every extractor but those that take any host; ``all``: those too."""
    if sites == "all":
        return ["default"]
    if sites == "known":
        return ["default", *(f"-{name}" for name in ANY_HOST_EXTRACTORS)]
    raise ValueError(f"XBOT_YTDLP_SITES must be one of {SITES}, got {sites!r}")


# H.264 and AAC first, at any resolution: Telegram plays them inline on every client,
# where VP9 and AV1 play on some only. A source with nothing else (VP9/AV1 only) is
# sent as it is, remuxed into MP4: re-encoding would cost minutes of both cores of a
# small VPS per video (docs/large-media.md). Then MP4/M4A over other containers.
FORMAT_SORT = ("vcodec:h264", "acodec:aac", "ext:mp4:m4a")
# The merge: picture and sound copied (never re-encoded) into one MP4, its index at
# the front (Telegram starts playing before the whole file is there). ffmpeg reads
# only local files: a downloaded "video" that is really a playlist must not make it
# fetch the addresses inside (beyond the connect-time guard).
MERGE_OPTIONS: Mapping[str, Any] = {
    "merge_output_format": "mp4",
    "postprocessor_args": {
        "merger+ffmpeg_i": ["-protocol_whitelist", "file"],
        "merger+ffmpeg_o": ["-movflags", "+faststart"],
    },
}
# A manifest (DASH, HLS) states bitrates, not sizes; yt-dlp estimates the size of
# such a format (bitrate x duration) only with this switch on.
ESTIMATE_MANIFEST_SIZES = "manifest-filesize-approx"
# What yt-dlp picks at extraction: the real choice is made before the download
# (`format_selector`), once the formats (and the sound's size) are known.
EXTRACT_FORMAT = "bv*+ba/b/b*"


def _fits(limit: int) -> str:
    return f"[filesize<?{limit}][filesize_approx<?{limit}]"


def format_selector(
    limit_bytes: int,
    *,
    merge: bool = False,
    audio_bytes: int = 0,
    max_height: int | None = None,
    below: tuple[str, ...] = (),
) -> str:
    """The best format under the limit, in yt-dlp's own selection language.

    With `merge` (ffmpeg is there): the best picture-only format that fits
    beside `audio_bytes` of sound, plus the best sound; else (nothing to
    merge, or nothing fits that way) the best single file. `max_height` is a
    chat's quality cap (a site with nothing under it: its smallest rendition);
    `below` are filters that step down from a rendition
    that turned out too big (``[height<1080]``).

    ``<?`` admits a format whose size the site does not give (a direct link
    never says); the download hook caps those. Both sizes in *one* filter: as
    two alternatives (``best[filesize<?N]/best[filesize_approx<?N]``) the
    second admits a format whose exact size is known to be too big (its
    approximate size is unknown), and the first admits one whose approximate
    size is too big, picking it over a smaller one that fits.
    """
    if limit_bytes <= 0:
        raise ValueError(f"limit must be positive, got {limit_bytes}")
    # RTMP is fetched by a child program (rtmpdump), beyond the connect-time guard.
    no_rtmp = "[protocol!*=?rtmp]"
    cap = f"[height<=?{max_height}]" if max_height else ""
    steps = "".join(below)
    single = f"best{cap}{_fits(limit_bytes)}{no_rtmp}{steps}"
    # Nothing at or under a chat's cap (a site with 1080p only): its smallest rendition.
    smallest = f"worst{_fits(limit_bytes)}{no_rtmp}{steps}"
    video_room = limit_bytes - audio_bytes
    if not merge or video_room <= 0:
        return f"{single}/{smallest}" if cap else single
    merged = f"bv{cap}{_fits(video_room)}{no_rtmp}{steps}+ba{no_rtmp}/{single}"
    if not cap:
        return merged
    return f"{merged}/wv{_fits(video_room)}{no_rtmp}{steps}+ba{no_rtmp}/{smallest}"


def disk_need(limit_bytes: int, merge: bool) -> int:
    """What a download may write: a merge holds the parts and the result at once."""
    return 2 * limit_bytes if merge else limit_bytes


def cache_key(extractor_key: str, video_id: str, webpage_url: str) -> str:
    """``yt:{extractor}:{id}``: two spellings of one video share it. Generic: by URL."""
    extractor = extractor_key.lower() or "generic"
    if extractor in GENERIC_EXTRACTORS or not video_id:
        return f"yt:generic:{webpage_url}"
    return f"yt:{extractor}:{video_id}"


@attrs.frozen
class YtdlpConfig:
    """How jobs run; one per bot.

    Attributes:
        limit_bytes: the upload limit, and so the download cap.
        sites: ``known`` or ``all`` (`allowed_extractors`).
        allow_private: let yt-dlp reach loopback/private addresses (tests, demo).
        socket_timeout: yt-dlp's per-socket timeout, seconds.
        cancel_grace: how long a cancelled job waits for its thread to stop.
        floor: the speed floor its download is held to (`xbot.media.speed_floor`).
        extract_limit: seconds yt-dlp may take to say what a link is (no bytes to
            measure a speed on then; gallery-dl's runs have the same kind of limit).
        overrides: extra yt-dlp options (tests: ``ratelimit``); they win.
        ffmpeg: the ffmpeg program that merges picture and sound; None: no merge,
            the best single file (as before ffmpeg was a dependency).
        max_height: the chat's quality cap (`xbot.storage.chat_state.VIDEO_QUALITIES`).
        cookies: the operator's (``XBOT_YTDLP_COOKIES``), put in each job's jar.
    """

    limit_bytes: int
    sites: str = "known"
    allow_private: bool = False
    socket_timeout: float = 20.0
    cancel_grace: float = 1.0
    floor: SpeedFloor = DEFAULT_FLOOR
    extract_limit: float = 120.0
    overrides: Mapping[str, Any] = attrs.field(factory=dict)
    ffmpeg: str | None = None
    max_height: int | None = None

    @property
    def merge(self) -> bool:
        return self.ffmpeg is not None

    cookies: Cookies = attrs.field(factory=Cookies)


def build_options(
    config: YtdlpConfig,
    folder: Path,
    hook: Callable[[dict[str, Any]], None],
    pp_hook: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """The ``YoutubeDL`` parameters of one job. Pure (the test reads them).

    ``format`` is what extraction picks; the job sets the real choice
    (`format_selector`) before it downloads.
    """
    options: dict[str, Any] = {
        "quiet": True,
        "no_warnings": True,
        "noprogress": True,
        "logger": _Logger(),  # otherwise errors are printed to stderr as well
        "noplaylist": True,
        "playlist_items": "1",  # a playlist-only link: its first video, never all of them
        "socket_timeout": config.socket_timeout,
        "retries": 2,
        "fragment_retries": 2,
        "extractor_retries": 1,  # the queue retries with backoff; yt-dlp need not
        "restrictfilenames": True,
        "cachedir": False,  # the system is read-only under systemd
        "paths": {"home": str(folder), "temp": str(folder)},
        "outtmpl": {"default": OUTTMPL},
        "overwrites": True,
        "allowed_extractors": allowed_extractors(config.sites),
        "format": EXTRACT_FORMAT,
        "format_sort": list(FORMAT_SORT),
        "compat_opts": [ESTIMATE_MANIFEST_SIZES],
        "progress_hooks": [hook],
        "postprocessor_hooks": [pp_hook] if pp_hook is not None else [],
        "writethumbnail": False,
        "color": {"stdout": "no_color", "stderr": "no_color"},
    }
    if config.ffmpeg is not None:
        options.update(MERGE_OPTIONS)
        options["ffmpeg_location"] = config.ffmpeg
    options.update(config.overrides)
    options.update(GUARDED_OPTIONS)
    return options


# The sound alone, as Telegram plays it in an audio message (M4A or MP3): AAC is put
# in an M4A as it is (no re-encoding), anything else becomes an MP3 (FFmpegExtractAudio's
# mapping: source extension > target, the last entry for every other source).
AUDIO_CODECS = "m4a>m4a/mp4>m4a/aac>m4a/mp3"


def audio_options(limit_bytes: int, *, convert: bool) -> dict[str, Any]:
    """What a job for the sound alone asks for, on top of `build_options`. Pure.

    AAC first (no conversion), then any audio, then the best file with a picture
    (a site that serves only whole videos: its sound is taken out). Without ffmpeg
    (`convert` False) only what needs no conversion: M4A, else MP3.
    """
    if limit_bytes <= 0:
        raise ValueError(f"limit must be positive, got {limit_bytes}")
    fits = f"[filesize<?{limit_bytes}][filesize_approx<?{limit_bytes}][protocol!*=?rtmp]"
    if not convert:
        return {"format": f"bestaudio[ext=m4a]{fits}/bestaudio[ext=mp3]{fits}"}
    return {
        "format": f"bestaudio[acodec^=mp4a]{fits}/bestaudio{fits}/best{fits}",
        "postprocessors": [{"key": "FFmpegExtractAudio", "preferredcodec": AUDIO_CODECS}],
        # As for the merge: ffmpeg reads local files, never a URL.
        "postprocessor_args": {"extractaudio+ffmpeg_i": ["-protocol_whitelist", "file"]},
    }
