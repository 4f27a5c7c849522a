"""Pixiv work links: ``/artworks/{id}``, ``/{lang}/artworks/{id}``, the old
``member_illust.php?illust_id={id}``, the ``/i/{id}`` short form, and the
embed-fixing mirror ``phixiv.net`` (same paths, plus ``/artworks/{id}/{page}``).

Pure, no I/O; `xbot.links.classify` asks `recognise` about every host. One
work has one key, ``pixiv:{id}``, and one link, ``https://www.pixiv.net/artworks/{id}``.
"""

from __future__ import annotations

import re
import urllib.parse

from xbot.links._site import Site
from xbot.links._url import Link, base_host

__all__ = ["PIXIV_HOSTS", "SITE", "owns", "recognise", "work_url"]

PIXIV_HOSTS = frozenset({"pixiv.net", "phixiv.net"})
_PREFIXES = frozenset({"www", "touch", "m"})
# Work ids are decimal, about 9 digits today.
_ID = re.compile(r"[0-9]{1,12}")
# pixiv's interface languages in paths: en, ja, ko, zh, zh-tw, ...
_LANG = re.compile(r"[a-z]{2}(?:-[a-z]{2,4})?")


def owns(host: str) -> bool:
    """Whether ``host`` (lower case, no trailing dot) is pixiv or phixiv."""
    return base_host(host, PIXIV_HOSTS, _PREFIXES) is not None


def work_url(work_id: str) -> str:
    return f"https://www.pixiv.net/artworks/{work_id}"


def _work_id(parts: urllib.parse.SplitResult) -> str | None:
    segs = [s for s in parts.path.split("/") if s]
    if segs and _LANG.fullmatch(segs[0]) and len(segs) >= 3 and segs[1] == "artworks":
        segs = segs[1:]
    if len(segs) >= 2 and segs[0] in {"artworks", "i"}:
        return segs[1]
    if segs == ["member_illust.php"]:
        found = urllib.parse.parse_qs(parts.query).get("illust_id")
        return found[0] if found else None
    return None


def recognise(host: str, parts: urllib.parse.SplitResult) -> Link | None:
    """The work link behind ``parts`` on a host `owns` accepted; None for users, tags, junk."""
    if not owns(host):
        return None
    raw = _work_id(parts)
    if raw is None or not _ID.fullmatch(raw):
        return None
    work_id = raw.lstrip("0")
    if not work_id:
        return None
    return Link(url=work_url(work_id), key=f"pixiv:{work_id}", kind="pixiv", post_id=work_id)


# The album button: pixiv:{id} <-> p{id}.
_PARAMETER = re.compile(r"p([1-9][0-9]{0,11})")
_KEY = re.compile(r"pixiv:([1-9][0-9]{0,11})")


def album_parameter(key: str) -> str | None:
    m = _KEY.fullmatch(key)
    return f"p{m.group(1)}" if m else None


def album_url(parameter: str) -> str | None:
    m = _PARAMETER.fullmatch(parameter)
    return work_url(m.group(1)) if m else None


SITE = Site(
    name="pixiv",
    label="pixiv",
    owns=owns,
    recognise=recognise,
    hosts=("pixiv.net", "phixiv.net"),
    album_parameter=album_parameter,
    album_url=album_url,
)
