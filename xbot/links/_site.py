"""What xbot knows of a site it serves natively: one value, every room reads it.

Pure, no I/O. Each site's module of this package (`_x`, `_bsky`, `_pixiv`) holds
its recogniser and its `Site`; `_sites.SITES` lists them. The value lives here,
in the lowest layer, so every room may read it: links (`classify`), the router's
table in `xbot.app` (keyed by `Site.name`), captions, inline mode, the metrics,
the canary's settings. What serves a site (its `PostSource`) sits higher up and
is chosen at the composition root, by the site's name.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable

import attrs

from xbot.links._url import Link

__all__ = ["Site"]


def _no_parameter(key: str) -> str | None:
    return None


def _no_url(parameter: str) -> str | None:
    return None


@attrs.frozen
class Site:
    """One site the bot reads posts of itself (not through yt-dlp or gallery-dl).

    Attributes:
        name: the kind of its links and the name of its posts' source (``x``): the
            router's key, the metrics' ``site`` label, the cache keys' prefix.
        label: its name as people write it (``X``), for operators' messages.
        owns: whether a host (lower case, no trailing dot) is the site's or a mirror's;
            a link to an owned host is the site's to answer, or no link we act on.
        recognise: the post link behind a URL on an owned host (its split parts), or
            None for a profile, a search, junk.
        hosts: the hosts the help names (`xbot.handlers.commands`; a test holds it).
        inline: inline mode answers its links: a fetch fits the ~10 s an answer has.
        canary: the canary may watch one of its posts (``XBOT_CANARY_POSTS``).
        handles: its authors' handles are @handles a caption shows after the name.
        album_parameter: a post's cache key as the album button's ``/start``
            parameter (Telegram's rule: 1-64 of ``A-Za-z0-9_-``), None when it has none.
        album_url: the way back: the link a parameter names, None when not the site's.
    """

    name: str
    label: str
    owns: Callable[[str], bool]
    recognise: Callable[[str, urllib.parse.SplitResult], Link | None]
    hosts: tuple[str, ...]
    inline: bool = True
    canary: bool = True
    handles: bool = True
    album_parameter: Callable[[str], str | None] = _no_parameter
    album_url: Callable[[str], str | None] = _no_url
