"""Other sites through yt-dlp: the package's one public face.

Import every name from here. Inside, each private module owns one thing and
reaches the others by their public names only:

- `_source`: yt-dlp as a `PostSource` (extraction answers a `Post`), and the
  job it opens for `xbot.tasks.other_sites` to download with.
- `_api`: the one module that imports yt-dlp (lazily, in a job's thread), runs
  a job under the guard, the cap and the speed floor, and translates its errors
  into xbot's tree.
- `_cookies`: the operator's cookies file, read and checked once at start.
- `_options`: what a job asks for (pure): the sites, the format, the options,
  the cache key.

Nothing here imports yt-dlp when the package is imported (a test pins that
`xbot.app` does not).
"""

from __future__ import annotations

from xbot.sources.ytdlp._api import (
    BOT_CHECK,
    GEO_BLOCKED,
    GONE,
    LIVE,
    LOGIN_REQUIRED,
    MAX_PAGE,
    MAX_STEPS,
    NO_FORMAT_FITS,
    NO_SINGLE_FILE,
    NO_SOUND,
    OVER_LIMIT,
    PAGE_STEP,
    PAGE_TOO_LARGE,
    REFUSED,
    REPORT_EVERY,
    SITE_FAILED,
    SITE_FAILED_HTTP,
    UNSUPPORTED,
    VideoInfo,
    YtdlpJob,
    bound_whole_reads,
    first_video,
    has_sound,
    host_guard,
    no_format_error,
    select,
    size_of,
    step_below,
    translate,
    video_info,
    video_selector,
)
from xbot.sources.ytdlp._cookies import Cookies, load_cookies, over_broad
from xbot.sources.ytdlp._options import (
    ANY_HOST_EXTRACTORS,
    AUDIO_CODECS,
    EXTRACT_FORMAT,
    FORMAT_SORT,
    GENERIC_EXTRACTORS,
    GUARDED_OPTIONS,
    MERGE_OPTIONS,
    OUTTMPL,
    SITES,
    YtdlpConfig,
    allowed_extractors,
    audio_options,
    build_options,
    cache_key,
    disk_need,
    format_selector,
)
from xbot.sources.ytdlp._source import YtdlpSource, post_of_info

__all__ = [
    "ANY_HOST_EXTRACTORS",
    "AUDIO_CODECS",
    "BOT_CHECK",
    "EXTRACT_FORMAT",
    "FORMAT_SORT",
    "GENERIC_EXTRACTORS",
    "GEO_BLOCKED",
    "GONE",
    "GUARDED_OPTIONS",
    "LIVE",
    "LOGIN_REQUIRED",
    "MAX_PAGE",
    "MAX_STEPS",
    "MERGE_OPTIONS",
    "NO_FORMAT_FITS",
    "NO_SINGLE_FILE",
    "NO_SOUND",
    "OUTTMPL",
    "OVER_LIMIT",
    "PAGE_STEP",
    "PAGE_TOO_LARGE",
    "REFUSED",
    "REPORT_EVERY",
    "SITES",
    "SITE_FAILED",
    "SITE_FAILED_HTTP",
    "UNSUPPORTED",
    "Cookies",
    "VideoInfo",
    "YtdlpConfig",
    "YtdlpJob",
    "YtdlpSource",
    "allowed_extractors",
    "audio_options",
    "bound_whole_reads",
    "build_options",
    "cache_key",
    "disk_need",
    "first_video",
    "format_selector",
    "has_sound",
    "host_guard",
    "load_cookies",
    "no_format_error",
    "over_broad",
    "post_of_info",
    "select",
    "size_of",
    "step_below",
    "translate",
    "video_info",
    "video_selector",
]
