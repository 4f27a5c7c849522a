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
- ``kind=site.name`` for a site of `SITES` beyond X: a Bluesky post, a pixiv work.
- ``kind="other"``: any other http(s) URL on a public-looking host, for
  yt-dlp; ``url`` is minimally normalised and ``key`` is ``url:{url}``.

Anything else (profiles and searches on X, ``javascript:``, IP literals,
``localhost``, userinfo tricks) is not a link we act on: `classify` returns
None and `plan_links` reports it as unsupported.

`SITES` is the registry of the sites xbot reads posts of itself, one `Site`
value each (recogniser, name, label, inline, canary and caption rules): every
room that asks something of a site reads it there.

The package's public face is this module; import every name from here. Inside
it: `_url` (the `Link` value and the URL hygiene every recogniser shares),
`_site` (the `Site` value), `_x` (X posts in any spelling, t.co), `_bsky` and
`_pixiv` (their sites' posts and entries), and `_sites` (the registry).
"""

from __future__ import annotations

import ipaddress
import re
import urllib.parse
from collections.abc import Iterable, Sequence
from typing import Protocol

import attrs

from xbot.links._bsky import post_key as bsky_post_key
from xbot.links._bsky import post_url as bsky_post_url
from xbot.links._pixiv import work_url as pixiv_work_url
from xbot.links._site import Site
from xbot.links._sites import OTHER_SITE, SITES, owner, shows_handles, site_named
from xbot.links._url import (
    MAX_URL_LENGTH,
    SCHEME,
    Link,
    LinkKind,
    base_host,
    clean,
    default_port,
    host_of,
    split,
)
from xbot.links._x import canonicalize_x, is_tco, is_x_non_post, tco_link, x_status_url

__all__ = [
    "MAX_URL_LENGTH",
    "OTHER_SITE",
    "SITES",
    "Entity",
    "EntityLike",
    "Link",
    "LinkKind",
    "LinkPlan",
    "Site",
    "base_host",
    "bsky_post_key",
    "bsky_post_url",
    "canonicalize_x",
    "classify",
    "extract_links",
    "is_tco",
    "pixiv_work_url",
    "plan_links",
    "shows_handles",
    "site_named",
    "x_status_url",
]


_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")
# A real top-level domain is letters (or punycode); this refuses IPv4 in all
# its spellings (127.1, 0x7f.1, 1.2.3.4) without parsing them.
_TLD = re.compile(r"[a-z]{2,63}|xn--[a-z0-9-]{1,59}")
# Names that never reach the public internet.
_PRIVATE_TLDS = frozenset(
    {"localhost", "local", "localdomain", "internal", "lan", "home", "arpa", "test", "invalid"}
)


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


def _public_host(host: str) -> str | None:
    """``host`` (ASCII, from `host_of`) when it looks like a public name, else None."""
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
    raw_host = host_of(parts)
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
    netloc = host if default_port(parts) else f"{host}:{parts.port}"
    normal = urllib.parse.urlunsplit((scheme, netloc, parts.path or "/", parts.query, ""))
    if len(normal) > MAX_URL_LENGTH:
        return None
    return Link(url=normal, key=f"url:{normal}", kind="other")


def classify(url: str, *, allow_private: bool = False) -> Link | None:
    """Recognise one URL: a post of a site of `SITES`, a t.co link, another public
    http(s) URL, or None.

    A host a site owns that is not a post (an X profile, a search) is None,
    not ``other``: no fetcher can answer it. ``other`` needs an explicit
    http(s) scheme, so a bare ``notes.py`` in a chat never becomes a
    download. ``allow_private`` (the operator's `XBOT_ALLOW_PRIVATE_NETWORKS`,
    for tests and the demo) lets IP literals and single-label hosts through;
    the SSRF guard of the fetcher still decides what it connects to.
    """
    cleaned = clean(url)
    if cleaned is None:
        return None
    parts = split(cleaned)
    if parts is None:
        return None
    host = host_of(parts)
    if host is None:
        return None
    site = owner(host)
    if site is not None:
        return site.recognise(host, parts) if default_port(parts) else None
    if host == "t.co":
        return tco_link(parts)
    if not SCHEME.match(cleaned):
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
