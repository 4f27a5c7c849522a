"""Which encoding of a video to send, and by which path: pure decisions, no I/O.

fxtwitter's ``formats`` (and the legacy ``variants``) carry a bitrate but
usually no size, so a variant's size is *estimated* from bitrate × duration
with a margin (`estimate`). Variants are ranked best first (`ranked`):
H.264 (or unknown codec) before HEVC, mp4 before other containers, then by
bitrate; HLS playlists are never a candidate (they are not a file).

`choose` takes the first ranked variant that fits the limit of the path it
would take: Telegram's fetch by URL (20 MB for videos) when its estimate
fits that, else an upload (`XBOT_UPLOAD_LIMIT_MB`). So a 45 s 1080p video
whose 60 MB do not fit a 50 MB upload limit is sent as its 720p version, not
dropped; and with an upload limit below 20 MB a variant too big to upload
still goes by URL.

When a download turns out larger than the limit (Content-Length or the body
says more than the estimate), `step_down` names the next smaller variant,
with the remaining estimates scaled by how wrong the failed one was. Only
when it answers None is the video really too large.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import attrs

from xbot.media.models import MediaItem, Variant

__all__ = [
    "MARGIN",
    "URL_VIDEO_LIMIT",
    "Pick",
    "best_for",
    "candidates",
    "choose",
    "container_from_url",
    "estimate",
    "fits",
    "ranked",
    "step_down",
]

URL_VIDEO_LIMIT = 20 * 1024 * 1024  # Telegram fetches videos and GIFs by URL up to 20 MB
# X's bitrates are nominal: real files run a few percent over, plus the
# container's index. 15 % and a fixed 64 KiB keep the estimate on the safe side.
MARGIN = 1.15
OVERHEAD = 64 * 1024
HEVC = frozenset({"hevc", "h265", "hvc1", "hev1"})
_PLAYLISTS = frozenset({"m3u8"})
_EXTENSIONS = ("mp4", "m3u8", "webm", "mov", "m4v")

Path = Literal["url", "upload"]


@attrs.frozen
class Pick:
    """A variant and the path it takes.

    Attributes:
        variant: the encoding to send.
        path: ``url`` (Telegram fetches it) or ``upload`` (we download and upload it).
        estimate: its size in bytes as known or estimated, None when neither.
    """

    variant: Variant
    path: Path
    estimate: int | None


def estimate(variant: Variant, duration: float | None) -> int | None:
    """Bytes: the size the source names, else bitrate × duration with a margin, else None."""
    if variant.size is not None:
        return variant.size
    if variant.bitrate > 0 and duration is not None and duration > 0:
        return int(variant.bitrate * duration / 8 * MARGIN) + OVERHEAD
    return None


def container_from_url(url: str) -> str:
    """``mp4``, ``m3u8``, ``webm`` … from a URL's extension, or "" when it names none."""
    path = url.split("?", 1)[0].split("#", 1)[0].lower()
    extension = path.rsplit(".", 1)[-1] if "." in path.rsplit("/", 1)[-1] else ""
    return extension if extension in _EXTENSIONS else ""


def candidates(item: MediaItem) -> list[Variant]:
    """The item's file variants (no playlists); its own URL when it lists none."""
    own = Variant(url=item.url, container=container_from_url(item.url), size=item.size)
    listed = list(item.variants) or [own]
    return [v for v in listed if v.container not in _PLAYLISTS]


def ranked(item: MediaItem) -> list[Variant]:
    """Best first: H.264 before HEVC, then higher bitrate first; within a codec class
    only mp4s when it has any (Telegram plays mp4; a webm would arrive as a file).

    HEVC comes last because Telegram clients often fail to play it; a video
    that plays on some clients still beats none. A known size breaks ties.
    """
    files = candidates(item)
    out: list[Variant] = []
    for hevc in (False, True):
        same = [v for v in files if (v.codec in HEVC) == hevc]
        mp4 = [v for v in same if v.container == "mp4"]
        out.extend(sorted(mp4 or same, key=lambda v: (-v.bitrate, v.size is None)))
    return out


def fits(size: int | None, limit: int) -> bool:
    """Whether a size (None: unknown, admitted; the download cap still holds) fits."""
    return size is None or size <= limit


def choose(item: MediaItem, *, upload_limit: int, url_limit: int = URL_VIDEO_LIMIT) -> Pick | None:
    """The best variant that fits the path it will take, or None when none fits either.

    By URL when its estimate fits `url_limit` (no download at all), else by
    upload when it fits `upload_limit`.
    """
    for variant in ranked(item):
        size = estimate(variant, item.duration)
        if fits(size, url_limit):
            return Pick(variant, "url", size)
        if fits(size, upload_limit):
            return Pick(variant, "upload", size)
    return None


def best_for(item: MediaItem, limit: int) -> Pick | None:
    """The best variant whose estimate fits one path's `limit` (the upload after a refused URL)."""
    for variant in ranked(item):
        size = estimate(variant, item.duration)
        if fits(size, limit):
            return Pick(variant, "upload", size)
    return None


def step_down(
    item: MediaItem, limit: int, tried: Sequence[Variant], *, observed: int | None = None
) -> Pick | None:
    """The next variant to try after ``tried[-1]`` turned out larger than `limit`.

    Only variants ranked below the failed one, and not tried yet, qualify.
    The failed one was at least `limit` (or `observed`, when the server
    said): the estimates of the rest are scaled by how far off its own was,
    so one wrong guess does not send us through every variant of the same
    bitrate family.
    """
    if not tried:
        return best_for(item, limit)
    order = ranked(item)
    failed = tried[-1]
    try:
        start = order.index(failed) + 1
    except ValueError:
        start = 0
    guessed = estimate(failed, item.duration)
    actual = max(observed or 0, limit + 1)
    scale = actual / guessed if guessed and failed.size is None and actual > guessed else 1.0
    tried_urls = {v.url for v in tried}
    for variant in order[start:]:
        if variant.url in tried_urls:
            continue
        size = estimate(variant, item.duration)
        if size is not None and variant.size is None:
            size = int(size * scale)
        if fits(size, limit):
            return Pick(variant, "upload", size)
    return None
