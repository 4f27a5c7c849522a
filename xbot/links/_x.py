"""X post links in any spelling, made canonical; t.co short links recognised.

Pure functions, no I/O, for `xbot.links.classify`; the package re-exports the
names callers use. Every spelling of a post
(``x.com``, ``twitter.com``, ``fxtwitter.com``, ``d.fixupx.com``, nitter front
ends, FxEmbed's direct-media suffixes, the old web client's ``#!/``) becomes
``https://x.com/{handle}/status/{id}`` keyed ``x:{id}``.
"""

from __future__ import annotations

import re
import urllib.parse

from xbot.links._site import Site
from xbot.links._url import Link, base_host, clean, default_port, host_of, split

__all__ = [
    "SITE",
    "canonicalize_x",
    "is_tco",
    "is_x_non_post",
    "tco_link",
    "x_base",
    "x_status_url",
]

# The hosts that serve X posts under the same /{handle}/status/{id} paths:
# X itself and the embed-fixing mirrors (FxEmbed: fxtwitter, fixupx, xfixup,
# twittpr; BetterTwitFix: vxtwitter, fixvx).
_X_HOSTS = frozenset(
    {
        "x.com",
        "twitter.com",
        "fxtwitter.com",
        "fixupx.com",
        "xfixup.com",
        "twittpr.com",
        "vxtwitter.com",
        "fixvx.com",
    }
)
# One-label prefixes seen on those hosts: www/mobile/m for X, and FxEmbed's
# mode switches (d/dl direct media, g gallery, t text only, i instant view,
# m mosaic, o old embed). api., pbs., video. ... are not post links.
_X_PREFIXES = frozenset({"www", "mobile", "m", "d", "dl", "g", "t", "i", "o"})
# Front ends that show X posts under X's own paths: nitter (nitter.net and its
# instances, spelled nitter.<name>[.<tld>] as the zedeus/nitter wiki lists
# them) and the named ones people share (the yt-dlp NitterRedirect plugin's
# list). Their post links map to the X post; anything else on them is no post.
_FRONTEND_HOSTS = frozenset({"xcancel.com", "nuku.trabun.org", "lightbrd.com", "twiiit.com"})
_NITTER_HOST = re.compile(r"nitter(?:\.[a-z0-9-]+){1,2}")
# FxEmbed's direct-media switches on the id (/status/ID.mp4, .jpg:orig …;
# src/realms/twitter/routes/status.ts) and pbs-style size names (:orig, :large).
_ID_SUFFIX = re.compile(r"(?:\.(?:mp4|jpe?g|png|gifv?|webp))?(?::[a-z]{1,10})?", re.IGNORECASE)
# Status paths without a handle, longest first where one starts another.
_HANDLELESS: tuple[tuple[str, ...], ...] = (
    ("status",),
    ("statuses",),
    ("i", "status"),
    ("i", "statuses"),
    ("i", "web", "status"),
    ("i", "web", "statuses"),
    ("i", "videos", "tweet"),
    ("i", "videos"),
    ("i", "cards", "tfw", "v1"),
)
# FxEmbed's path modes in front of a status path: /dl/… (direct media), /dir/… (redirect).
_PATH_MODES = frozenset({"dl", "dir"})

# X handles are 1-15 characters of [A-Za-z0-9_]; a few legacy accounts are a
# little longer, so allow some slack rather than refuse a real post.
_HANDLE = re.compile(r"[A-Za-z0-9_]{1,20}")
# Status ids are snowflakes (19 digits today); anything much longer is junk.
_STATUS_ID = re.compile(r"[0-9]{1,25}")
_TCO_CODE = re.compile(r"[A-Za-z0-9]{1,32}")


def x_base(host: str) -> str | None:
    """The X host behind ``host`` (``d.fxtwitter.com`` -> ``fxtwitter.com``), else None.

    A nitter-style front end counts: its post links are X posts.
    """
    if host in _FRONTEND_HOSTS or _NITTER_HOST.fullmatch(host):
        return host
    return base_host(host, _X_HOSTS, _X_PREFIXES)


def _post_id(raw: str) -> str | None:
    """The status id from a path segment, direct-media suffixes (``.mp4``, ``:orig``) dropped."""
    end = len(raw) - len(raw.lstrip("0123456789"))
    if end and _ID_SUFFIX.fullmatch(raw[end:]) is None:
        return None
    digits = raw[:end] if end else raw
    if not _STATUS_ID.fullmatch(digits):
        return None
    sid = digits.lstrip("0")
    return sid or None  # there is no post 0


def _status_path(path: str) -> tuple[str | None, str] | None:
    """(handle or None, id) from a status path; anything after the id is ignored.

    The forms: ``/{handle}/status(es)/{id}`` (the handle may be written
    ``@alice``), ``/status(es)/{id}`` and ``/i/status/{id}`` without one,
    ``/i/web/status/{id}``, X's card links ``/i/videos/tweet/{id}``,
    ``/i/videos/{id}`` and ``/i/cards/tfw/v1/{id}`` (yt-dlp's TwitterCardIE),
    and FxEmbed's ``/dl/…`` and ``/dir/…`` in front of any of them.
    """
    segs = [s for s in path.split("/") if s]
    if segs and segs[0] in _PATH_MODES:
        segs = segs[1:]
    for prefix in _HANDLELESS:
        if len(segs) > len(prefix) and tuple(segs[: len(prefix)]) == prefix:
            handle, sid = None, segs[len(prefix)]
            break
    else:
        if len(segs) < 3 or segs[1] not in {"status", "statuses"}:
            return None
        handle, sid = segs[0].removeprefix("@"), segs[2]
        if not _HANDLE.fullmatch(handle):
            return None
    found = _post_id(sid)
    return None if found is None else (handle, found)


def x_status_url(post_id: str, handle: str | None) -> str:
    """The canonical link of a post: ``https://x.com/{handle}/status/{id}``.

    A handle that a link could not carry (too long, odd characters) becomes
    ``i``, so the link always classifies back to the same key.
    """
    shown = handle if handle and _HANDLE.fullmatch(handle) else "i"
    return f"https://x.com/{shown}/status/{post_id}"


def canonicalize_x(url: str) -> Link | None:
    """The canonical X link for any spelling of a post link, else None.

    ``https://x.com/{handle}/status/{id}`` (handle ``i`` when the link named
    none) keyed ``x:{id}``. Idempotent: canonicalising the result's ``url``
    gives the same `Link`.
    """
    cleaned = clean(url)
    if cleaned is None:
        return None
    parts = split(cleaned)
    if parts is None or not default_port(parts):
        return None
    host = host_of(parts)
    return None if host is None else recognise(host, parts)


def owns(host: str) -> bool:
    """Whether ``host`` is X, one of its mirrors or a front end showing its posts."""
    return x_base(host) is not None


def recognise(host: str, parts: urllib.parse.SplitResult) -> Link | None:
    """The post link behind ``parts`` on a host `owns` accepted; None for profiles, junk."""
    if not owns(host):
        return None
    path = parts.path
    # Links from the old web client: twitter.com/#!/alice/status/1
    if path in {"", "/"} and parts.fragment.startswith("!/"):
        path = parts.fragment[1:].split("?", 1)[0]
    found = _status_path(path)
    if found is None:
        return None
    handle, sid = found
    return Link(
        url=x_status_url(sid, handle),
        key=f"x:{sid}",
        kind="x",
        post_id=sid,
        handle=handle,
    )


# The album button: x:{id} <-> a{id} (the first spelling; old buttons keep working).
_ALBUM = re.compile(r"a([0-9]{1,20})")
_KEY = re.compile(r"x:([0-9]{1,20})")


def album_parameter(key: str) -> str | None:
    m = _KEY.fullmatch(key)
    return f"a{m.group(1)}" if m else None


def album_url(parameter: str) -> str | None:
    m = _ALBUM.fullmatch(parameter)
    return x_status_url(m.group(1), None) if m else None


def tco_link(parts: urllib.parse.SplitResult) -> Link | None:
    """The link of a ``t.co`` short link (``parts`` from `split`), else None."""
    if host_of(parts) != "t.co" or not default_port(parts):
        return None
    code = parts.path.removeprefix("/").removesuffix("/")
    if not _TCO_CODE.fullmatch(code):
        return None
    return Link(url=f"https://t.co/{code}", key=f"tco:{code}", kind="tco")


def is_tco(url: str) -> bool:
    """Whether ``url`` is a ``t.co`` short link (``https://t.co/<code>``)."""
    cleaned = clean(url)
    parts = split(cleaned) if cleaned is not None else None
    return parts is not None and tco_link(parts) is not None


def is_x_non_post(url: str) -> bool:
    """Whether ``url`` is on X (or a mirror or front end) but is no post: a profile,
    a search, a list, a Space. People paste those in passing; the bot says nothing."""
    cleaned = clean(url)
    parts = split(cleaned) if cleaned is not None else None
    if parts is None or not default_port(parts):
        return False
    host = host_of(parts)
    if host is None or x_base(host) is None or canonicalize_x(cleaned or "") is not None:
        return False
    # A broken post link (junk where the handle or id goes) still gets its answer.
    return not {"status", "statuses"} & set(parts.path.split("/"))


SITE = Site(
    name="x",
    label="X",
    owns=owns,
    recognise=recognise,
    hosts=("x.com", "twitter.com", "fxtwitter.com", "vxtwitter.com", "fixupx.com"),
    album_parameter=album_parameter,
    album_url=album_url,
)
