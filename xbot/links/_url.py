"""A recognised link, and the URL hygiene every recogniser of the package shares.

Pure, no I/O. `clean` trims what copy and paste leaves around a URL and refuses
one with invisible characters inside; `split` parses it (``https://`` supplied
when missing, userinfo and other schemes refused); `host_of` gives its host in
ASCII lower case. The sites' recognisers (`xbot.links._x`, `_bsky`, `_pixiv`) and
`xbot.links.classify` build on these names.
"""

from __future__ import annotations

import re
import unicodedata
import urllib.parse
from typing import TypeAlias

import attrs

# A site's name (`xbot.links.SITES`: a new site adds none here), or "tco", "other" or
# "gallery". "gallery" is never classified: it is an "other" link on its way to
# gallery-dl (`xbot.tasks.delivery`), under its own cache key.
LinkKind: TypeAlias = str

# Longer URLs are junk or an attack; browsers and yt-dlp's sites stay far below.
MAX_URL_LENGTH = 2048
DEFAULT_PORTS = {"http": 80, "https": 443}
SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


@attrs.frozen
class Link:
    """A recognised link.

    Attributes:
        url: the canonical spelling (what captions show and fetchers use).
        key: the cache/dedup key: ``{site}:{its id}`` (``x:{id}``, ``bsky:{actor}/{rkey}``,
            ``pixiv:{id}``), ``tco:{code}`` or ``url:{url}``.
        kind: a site's name, ``tco``, ``other`` or ``gallery`` (`LinkKind`).
        post_id: the post's id on its site (X status id, Bluesky rkey, pixiv work id).
        handle: the author as written in the link (an X handle, a Bluesky handle or
            DID), None when it named none.
    """

    url: str
    key: str
    kind: LinkKind
    post_id: str | None = None
    handle: str | None = None


def clean(url: str) -> str | None:
    """Trim what surrounds a pasted URL; refuse invisible or control characters inside it.

    Zero-width and direction marks hide what a link really is, so inside a
    URL they make it junk; around it they are noise from copy and paste.
    """
    url = _strip_edges(url)
    if not url or len(url) > MAX_URL_LENGTH:
        return None
    for ch in url:
        if ch.isspace() or unicodedata.category(ch) in {"Cc", "Cf", "Cs", "Zl", "Zp"}:
            return None
    return url


def _strip_edges(url: str) -> str:
    def invisible(ch: str) -> bool:
        return ch.isspace() or unicodedata.category(ch) in {"Cc", "Cf"}

    start, end = 0, len(url)
    while start < end and invisible(url[start]):
        start += 1
    while end > start and invisible(url[end - 1]):
        end -= 1
    return url[start:end]


def split(url: str) -> urllib.parse.SplitResult | None:
    """Split a cleaned URL, supplying ``https://`` when it has no scheme."""
    if not SCHEME.match(url):
        if ":" in url.split("/", 1)[0] and not re.match(r"[^:/]+:[0-9]+(/|$)", url):
            return None  # "javascript:...", "data:..." and other scheme-only forms
        url = "https://" + url
    try:
        parts = urllib.parse.urlsplit(url)
        # .port raises on junk ports; touch it here so later reads are safe.
        _ = parts.port
    except ValueError:
        return None
    if parts.scheme.lower() not in DEFAULT_PORTS:
        return None  # only http(s)
    if "@" in parts.netloc:
        return None  # userinfo ("https://x.com@evil.com/...") is a disguise
    return parts


def host_of(parts: urllib.parse.SplitResult) -> str | None:
    """The host in ASCII lower case, without a trailing dot; None when absent or not IDNA.

    Non-ASCII names go through IDNA, which also folds look-alikes such as a
    fullwidth ``ｘ.com`` to ``x.com`` (as browsers do), so they cannot slip
    past the X check as an "other" site.
    """
    host = parts.hostname  # already lower case
    if not host:
        return None
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii").lower()
        except UnicodeError:
            return None
    host = host.removesuffix(".")
    return host or None


def default_port(parts: urllib.parse.SplitResult) -> bool:
    port = parts.port
    return port is None or port == DEFAULT_PORTS[parts.scheme.lower()]


def base_host(host: str, hosts: frozenset[str], prefixes: frozenset[str]) -> str | None:
    """The one of ``hosts`` that ``host`` is, itself or under one of ``prefixes``
    (``www.``, ``m.``, …: one label), else None. The sites' recognisers ask it too."""
    if host in hosts:
        return host
    prefix, _, rest = host.partition(".")
    return rest if prefix in prefixes and rest in hosts else None
