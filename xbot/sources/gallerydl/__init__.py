"""Image posts of the sites gallery-dl knows: the package's one public face.

Import every name from here. Inside, each private module owns one thing and
reaches the others by their public names only:

- `_source`: gallery-dl as a `PostSource`: one separate process per link
  (gallery-dl is GPL-2.0 and never imported), bounded in time, output, memory
  and connections; the operator's config and its cookies.
- `_dump`: its JSON dump of one link as the bot's `Post` (pure; untrusted
  input, every field checked).
"""

from __future__ import annotations

from xbot.sources.gallerydl._dump import (
    GONE,
    JUNK,
    LOGIN,
    MAX_FILES,
    NO_MEDIA,
    NOT_KNOWN,
    REFUSED,
    SITE_FAILED,
    WHOLE_GALLERY,
    NoMedia,
    author_of,
    gallery_key,
    headers_of,
    kind_of,
    parse_dump,
    plain_text,
    sensitive_of,
    text_of,
)
from xbot.sources.gallerydl._source import (
    ANY_HOST_CATEGORIES,
    CRASHED,
    DATA_LIMIT,
    MAX_OUTPUT,
    MEMORY_LIMIT,
    RUNS_AT_ONCE,
    TIME_LIMIT,
    TOO_BIG,
    TOO_SLOW,
    GalleryDlSource,
    GalleryOutputTooLarge,
    GalleryTimeout,
    RunResult,
    config_cookies,
    cookie_header,
    gallerydl_command,
    has_global_cookie_dict,
    run_gallerydl,
)

__all__ = [
    "ANY_HOST_CATEGORIES",
    "CRASHED",
    "DATA_LIMIT",
    "GONE",
    "JUNK",
    "LOGIN",
    "MAX_FILES",
    "MAX_OUTPUT",
    "MEMORY_LIMIT",
    "NOT_KNOWN",
    "NO_MEDIA",
    "REFUSED",
    "RUNS_AT_ONCE",
    "SITE_FAILED",
    "TIME_LIMIT",
    "TOO_BIG",
    "TOO_SLOW",
    "WHOLE_GALLERY",
    "GalleryDlSource",
    "GalleryOutputTooLarge",
    "GalleryTimeout",
    "NoMedia",
    "RunResult",
    "author_of",
    "config_cookies",
    "cookie_header",
    "gallery_key",
    "gallerydl_command",
    "has_global_cookie_dict",
    "headers_of",
    "kind_of",
    "parse_dump",
    "plain_text",
    "run_gallerydl",
    "sensitive_of",
    "text_of",
]
