"""Links in chat messages: find them, recognise them, give each one key.

Pure functions, no I/O. The handlers call `extract_links` on a message's text
and entities, then `plan_links` on the result; each `Link` carries the cache
key under which the same post is known whatever spelling a user pasted
(``x.com``, ``twitter.com``, ``fxtwitter.com``, ``d.fixupx.com``, ...).

- ``kind="x"``: a post on X; ``url`` is ``https://x.com/{handle}/status/{id}``
  (handle ``i`` when the link did not name one), ``key`` is ``x:{id}``.
- ``kind="tco"``: a ``t.co`` short link. Expanding it takes one guarded HTTP
  request, which is the fetcher's job; its result goes through `classify`
  again.
- ``kind="bsky"``, ``kind="pixiv"``: a Bluesky post or a pixiv work, recognised
  by `xbot.sources.bsky_links` and `xbot.sources.pixiv_links`.
- ``kind="other"``: any other http(s) URL on a public-looking host, for
  yt-dlp; ``url`` is minimally normalised and ``key`` is ``url:{url}``.

Anything else (profiles and searches on X, ``javascript:``, IP literals,
``localhost``, userinfo tricks) is not a link we act on: `classify` returns
None and `plan_links` reports it as unsupported.

X post links and t.co are `xbot.links_x`'s (issue 11: no module over ~500
lines); its public names stay importable from here.
"""

from __future__ import annotations

import ipaddress
import re
import unicodedata
import urllib.parse
from collections.abc import Iterable, Sequence
from typing import Literal, Protocol

import attrs

__all__ = [
    "MAX_URL_LENGTH",
    "Entity",
    "EntityLike",
    "Link",
    "LinkKind",
    "LinkPlan",
    "classify",
    "extract_links",
    "plan_links",
]

# "gallery" is never classified: it is an "other" link on its way to gallery-dl
# (`xbot.tasks.delivery`), under its own cache key.
LinkKind = Literal["x", "tco", "other", "bsky", "pixiv", "gallery"]

# Longer URLs are junk or an attack; browsers and yt-dlp's sites stay far below.
MAX_URL_LENGTH = 2048
_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")
# A real top-level domain is letters (or punycode); this refuses IPv4 in all
# its spellings (127.1, 0x7f.1, 1.2.3.4) without parsing them.
_TLD = re.compile(r"[a-z]{2,63}|xn--[a-z0-9-]{1,59}")
# Names that never reach the public internet.
_PRIVATE_TLDS = frozenset(
    {"localhost", "local", "localdomain", "internal", "lan", "home", "arpa", "test", "invalid"}
)
_DEFAULT_PORTS = {"http": 80, "https": 443}
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


@attrs.frozen
class Link:
    """A recognised link.

    Attributes:
        url: the canonical spelling (what captions show and fetchers use).
        key: the cache/dedup key: ``x:{id}``, ``tco:{code}`` or ``url:{url}``.
        kind: ``x``, ``tco`` or ``other``.
        post_id: the X status id (``x`` links only).
        handle: the X handle as written in the link, None when it named none.
    """

    url: str
    key: str
    kind: LinkKind
    post_id: str | None = None
    handle: str | None = None


@attrs.frozen
class LinkPlan:
    """What to do with the links of one message.

    Attributes:
        links: distinct links (by key) in order of appearance, at most the limit.
        skipped: distinct supported links beyond the limit.
        unsupported: the raw strings that are no link we act on (deduplicated);
            X pages that are no post (profiles, searches, lists, Spaces) are
            left out: the sender hears nothing for them.
    """

    links: tuple[Link, ...]
    skipped: int
    unsupported: tuple[str, ...]


class EntityLike(Protocol):
    """The part of a Telegram message entity we read (PTB's `MessageEntity` fits)."""

    @property
    def type(self) -> str: ...
    @property
    def offset(self) -> int: ...
    @property
    def length(self) -> int: ...
    @property
    def url(self) -> str | None: ...


@attrs.frozen
class Entity:
    """A plain `EntityLike`, for tests and for callers without PTB objects."""

    type: str
    offset: int
    length: int
    url: str | None = None


def _clean(url: str) -> str | None:
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


def _split(url: str) -> urllib.parse.SplitResult | None:
    """Split a cleaned URL, supplying ``https://`` when it has no scheme."""
    if not _SCHEME.match(url):
        if ":" in url.split("/", 1)[0] and not re.match(r"[^:/]+:[0-9]+(/|$)", url):
            return None  # "javascript:...", "data:..." and other scheme-only forms
        url = "https://" + url
    try:
        parts = urllib.parse.urlsplit(url)
        # .port raises on junk ports; touch it here so later reads are safe.
        _ = parts.port
    except ValueError:
        return None
    if parts.scheme.lower() not in _DEFAULT_PORTS:
        return None  # only http(s)
    if "@" in parts.netloc:
        return None  # userinfo ("https://x.com@evil.com/...") is a disguise
    return parts


def _host(parts: urllib.parse.SplitResult) -> str | None:
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


def _default_port(parts: urllib.parse.SplitResult) -> bool:
    port = parts.port
    return port is None or port == _DEFAULT_PORTS[parts.scheme.lower()]


def base_host(host: str, hosts: frozenset[str], prefixes: frozenset[str]) -> str | None:
    """The one of ``hosts`` that ``host`` is, itself or under one of ``prefixes``
    (``www.``, ``m.``, …: one label), else None. The sites' recognisers ask it too."""
    if host in hosts:
        return host
    prefix, _, rest = host.partition(".")
    return rest if prefix in prefixes and rest in hosts else None


def _public_host(host: str) -> str | None:
    """``host`` (ASCII, from `_host`) when it looks like a public name, else None."""
    if len(host) > 253:
        return None
    labels = host.split(".")
    if len(labels) < 2 or not all(_LABEL.fullmatch(label) for label in labels):
        return None
    tld = labels[-1]
    if not _TLD.fullmatch(tld) or tld in _PRIVATE_TLDS:
        return None
    return host


def _private_host(host: str) -> str | None:
    """An IP literal or a plain ASCII name (``localhost``), for `allow_private` only."""
    try:
        return ipaddress.ip_address(host).compressed
    except ValueError:
        pass
    if all(_LABEL.fullmatch(label) for label in host.split(".")):
        return host
    return None


def _other(parts: urllib.parse.SplitResult, *, allow_private: bool) -> Link | None:
    raw_host = _host(parts)
    if raw_host is None:
        return None
    host = _public_host(raw_host)
    if host is None and allow_private:
        host = _private_host(raw_host)
    if host is None:
        return None
    if ":" in host:
        host = f"[{host}]"  # an IPv6 literal, allowed only with allow_private
    scheme = parts.scheme.lower()
    netloc = host if _default_port(parts) else f"{host}:{parts.port}"
    normal = urllib.parse.urlunsplit((scheme, netloc, parts.path or "/", parts.query, ""))
    if len(normal) > MAX_URL_LENGTH:
        return None
    return Link(url=normal, key=f"url:{normal}", kind="other")


def classify(url: str, *, allow_private: bool = False) -> Link | None:
    """Recognise one URL: an X post, a t.co link, another public http(s) URL, or None.

    A host of the X family that is not a post (a profile, a search) is None,
    not ``other``: no fetcher can answer it. ``other`` needs an explicit
    http(s) scheme, so a bare ``notes.py`` in a chat never becomes a
    download. ``allow_private`` (the operator's `XBOT_ALLOW_PRIVATE_NETWORKS`,
    for tests and the demo) lets IP literals and single-label hosts through;
    the SSRF guard of the fetcher still decides what it connects to.
    """
    cleaned = _clean(url)
    if cleaned is None:
        return None
    parts = _split(cleaned)
    if parts is None:
        return None
    host = _host(parts)
    if host is None:
        return None
    from xbot import links_x  # imported here: it builds on this module

    if links_x._x_base(host) is not None:
        return links_x.canonicalize_x(cleaned)
    if host == "t.co":
        return links_x._tco(parts)
    from xbot.sources import site_links  # Bluesky, Pixiv; imported here: they import Link

    owned, site_link = site_links.recognise(host, parts)
    if owned:
        return site_link if _default_port(parts) else None
    if not _SCHEME.match(cleaned):
        return None
    return _other(parts, allow_private=allow_private)


def extract_links(text: str, entities: Sequence[EntityLike]) -> list[str]:
    """The URLs a message's entities mark, in order of appearance.

    ``url`` entities take their slice of the text, ``text_link`` entities
    their hidden ``url``. Telegram counts offsets and lengths in UTF-16 code
    units (an emoji before a URL shifts it by 2), so the slice is taken on
    the UTF-16 form. Entities that point outside the text or have no length
    are ignored.
    """
    units = text.encode("utf-16-le", "surrogatepass")
    size = len(units) // 2
    found: list[tuple[int, str]] = []
    for entity in entities:
        kind = str(entity.type)
        offset, length = entity.offset, entity.length
        if kind not in {"url", "text_link"}:
            continue
        if offset < 0 or length <= 0 or offset + length > size:
            continue
        if kind == "url":
            chunk = units[2 * offset : 2 * (offset + length)]
            found.append((offset, chunk.decode("utf-16-le", "surrogatepass")))
        elif entity.url:
            found.append((offset, entity.url))
    # Telegram sends entities sorted, but a forged update need not be.
    found.sort(key=lambda item: item[0])
    return [url for _, url in found]


def plan_links(
    raw_urls: Iterable[str], limit: int = 10, *, allow_private: bool = False
) -> LinkPlan:
    """Classify, deduplicate by key and cap the links of one message.

    The same post under two mirror spellings counts once. The first
    ``limit`` distinct links are kept; the other distinct ones are counted
    in ``skipped`` so the reply can say so.
    """
    from xbot.links_x import is_x_non_post  # imported here: it builds on this module

    if limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    links: list[Link] = []
    seen: set[str] = set()
    skipped = 0
    unsupported: dict[str, None] = {}
    for raw in raw_urls:
        link = classify(raw, allow_private=allow_private)
        if link is None:
            if not is_x_non_post(raw):
                unsupported.setdefault(raw)
            continue
        if link.key in seen:
            continue
        seen.add(link.key)
        if len(links) < limit:
            links.append(link)
        else:
            skipped += 1
    return LinkPlan(links=tuple(links), skipped=skipped, unsupported=tuple(unsupported))
