"""Bluesky post links: ``bsky.app/profile/{handle or did}/post/{rkey}`` and its mirrors.

Pure, no I/O; `xbot.links.classify` asks `recognise` about every host. The
embed-fixing mirrors people share (FxEmbed's ``fxbsky.app``, ``bskx.app``,
``bsyy.app``, ``xbsky.app``, ``vxbsky.app``, ``cbsky.app``, ``bskye.app``)
serve the same ``/profile/.../post/...`` paths. The key names the actor as
written (a handle, lower-cased, or a DID); the source resolves a handle to
its DID before the link cache is asked, so ``bsky:{did}/{rkey}`` is the one
key every spelling of a post ends up under (`post_key`).
"""

from __future__ import annotations

import re
import urllib.parse

from xbot.links._site import Site
from xbot.links._url import Link, base_host

__all__ = ["BSKY_HOSTS", "SITE", "owns", "post_key", "post_url", "recognise"]

BSKY_HOSTS = frozenset(
    {
        "bsky.app",
        "fxbsky.app",
        "bskx.app",
        "bsyy.app",
        "xbsky.app",
        "vxbsky.app",
        "cbsky.app",
        "bskye.app",
    }
)
# www, and the mirrors' mode switches (d direct media, g gallery, r raw, m mosaic).
_PREFIXES = frozenset({"www", "d", "g", "r", "m"})
# A handle is a domain name (atproto handle syntax), at most 253 characters.
_HANDLE = re.compile(
    r"(?=.{3,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?"
)
# did:plc is 24 base32 characters; did:web names a host. Other methods are not in use.
_DID = re.compile(r"did:plc:[a-z2-7]{24}|did:web:[a-z0-9.-]{1,253}")
# Record keys of posts are TIDs (13 base32-sortable characters); allow any
# record-key spelling short enough to be sane, never "." or "..".
_RKEY = re.compile(r"[A-Za-z0-9._~:-]{1,64}")


def owns(host: str) -> bool:
    """Whether ``host`` (lower case, no trailing dot) is Bluesky or one of its mirrors."""
    return base_host(host, BSKY_HOSTS, _PREFIXES) is not None


def post_url(actor: str, rkey: str) -> str:
    """The canonical link: ``https://bsky.app/profile/{actor}/post/{rkey}``."""
    return f"https://bsky.app/profile/{actor}/post/{rkey}"


def post_key(actor: str, rkey: str) -> str:
    """The cache key; final once ``actor`` is a DID."""
    return f"bsky:{actor}/{rkey}"


def _actor(segment: str) -> str | None:
    actor = urllib.parse.unquote(segment).lower().removeprefix("@")
    if actor.startswith("did:"):
        return actor if _DID.fullmatch(actor) else None
    return actor if _HANDLE.fullmatch(actor) else None


def recognise(host: str, parts: urllib.parse.SplitResult) -> Link | None:
    """The post link behind ``parts`` on a host `owns` accepted; None for profiles, feeds, junk.

    The query (``?ref_src=…`` and other tracking) and the fragment are dropped.
    """
    if not owns(host):
        return None
    segs = [s for s in parts.path.split("/") if s]
    if len(segs) < 4 or segs[0] != "profile" or segs[2] != "post":
        return None
    actor, rkey = _actor(segs[1]), segs[3]
    if actor is None or not _RKEY.fullmatch(rkey) or rkey in {".", ".."}:
        return None
    return Link(
        url=post_url(actor, rkey),
        key=post_key(actor, rkey),
        kind="bsky",
        post_id=rkey,
        handle=actor,
    )


# The album button, from the cache key so nothing is stored and an old button keeps
# working: bsky:did:plc:{24 base32}/{rkey} -> b{24}{rkey}; a handle or did:web (both
# domain names, never an underscore) -> h/w{13-char TID rkey}{name with "." as "_"}.
_PLC_PARAMETER = re.compile(r"b([a-z2-7]{24})([A-Za-z0-9]{1,39})")
_NAMED_PARAMETER = re.compile(r"([hw])([2-7a-z]{13})([a-z0-9_-]{3,50})")
_PLC_KEY = re.compile(r"bsky:did:plc:([a-z2-7]{24})/([A-Za-z0-9]{1,39})")
_NAMED_KEY = re.compile(r"bsky:(did:web:)?([a-z0-9.-]{3,50})/([2-7a-z]{13})")


def album_parameter(key: str) -> str | None:
    if m := _PLC_KEY.fullmatch(key):
        return f"b{m.group(1)}{m.group(2)}"
    if m := _NAMED_KEY.fullmatch(key):
        kind = "w" if m.group(1) else "h"
        return f"{kind}{m.group(3)}{m.group(2).replace('.', '_')}"
    return None


def album_url(parameter: str) -> str | None:
    if m := _PLC_PARAMETER.fullmatch(parameter):
        return post_url(f"did:plc:{m.group(1)}", m.group(2))
    if m := _NAMED_PARAMETER.fullmatch(parameter):
        name = m.group(3).replace("_", ".")
        return post_url(f"did:web:{name}" if m.group(1) == "w" else name, m.group(2))
    return None


SITE = Site(
    name="bsky",
    label="Bluesky",
    owns=owns,
    recognise=recognise,
    hosts=("bsky.app", "fxbsky.app", "bskx.app"),
    album_parameter=album_parameter,
    album_url=album_url,
)
