"""The native sites beyond X, for `xbot.links.classify`: one entry per site's recogniser.

A host a site owns is that site's to answer: a Bluesky profile or a pixiv
user page is no link we act on (None), never an "other" link for yt-dlp,
which fetches no images from either.
"""

from __future__ import annotations

import urllib.parse

from xbot.links import _bsky, _pixiv
from xbot.links._url import Link

_SITES = (_bsky, _pixiv)


def recognise(host: str, parts: urllib.parse.SplitResult) -> tuple[bool, Link | None]:
    """(whether a native site owns ``host``, its post link or None)."""
    for site in _SITES:
        if site.owns(host):
            return True, site.recognise(host, parts)
    return False, None
