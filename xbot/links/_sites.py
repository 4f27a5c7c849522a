"""The registry of sites: every site xbot reads posts of itself, one `Site` each.

A new site is a module of this package (its recogniser and its `Site`, as
`_bsky` is) and one entry in `SITES`; its source (a module of `xbot.sources`)
goes into the router's table in `xbot.app` under the site's name. Nothing else
lists sites: links, captions, inline mode, the metrics and the canary's
settings read this tuple. A host a site owns is that site's to answer: a
Bluesky profile or a pixiv user page is no link we act on (None), never an
"other" link for yt-dlp, which fetches no images from either.
"""

from __future__ import annotations

from xbot.links import _bsky, _pixiv, _x
from xbot.links._site import Site

__all__ = ["OTHER_SITE", "SITES", "owner", "shows_handles", "site_named"]

SITES: tuple[Site, ...] = (_x.SITE, _bsky.SITE, _pixiv.SITE)

# Everything else (yt-dlp's and gallery-dl's sites), as one value of the metrics' label.
OTHER_SITE = "other"
# The posts of other sites whose handles are @handles: gallery-dl names one where the
# site has it (Mastodon's acct); yt-dlp's uploader ids are none.
_HANDLE_ENGINES = frozenset({"gallerydl"})
_BY_NAME = {site.name: site for site in SITES}


def site_named(name: str) -> Site | None:
    """The site whose links are of kind (or whose posts come from source) ``name``."""
    return _BY_NAME.get(name)


def owner(host: str) -> Site | None:
    """The site that owns ``host`` (lower case, no trailing dot), if any."""
    for site in SITES:
        if site.owns(host):
            return site
    return None


def shows_handles(source: str) -> bool:
    """Whether a caption shows the author of a post from ``source`` as an @handle."""
    site = _BY_NAME.get(source)
    return site.handles if site is not None else source in _HANDLE_ENGINES
