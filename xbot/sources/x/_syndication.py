"""X posts through X's own syndication endpoint (the one embedded posts use), the third source.

``GET {base}/tweet-result?id={id}&token={t}`` answers X's JSON: ``id_str``,
``text`` (HTML-escaped, the media's t.co link at the end), ``user{name, screen_name}``,
``possibly_sensitive``, ``entities.urls[]``, ``mediaDetails[]`` (``type``
photo|video|animated_gif, ``media_url_https``, ``original_info{width,height}``,
``video_info{duration_millis, variants[]{bitrate, content_type, url}}``) and
``quoted_tweet`` in the same shape. A post that is gone is a 404 (vercel/react-tweet's
``fetchTweet`` reads it so); one withheld or from a suspended account is
``{"__typename": "TweetTombstone", ...}``.

The token is what the public embed code computes:
``((Number(id) / 1e15) * Math.PI).toString(36).replace(/(0+|\\.)/g, "")``.
`js_radix36` reproduces JavaScript's ``Number.prototype.toString(36)`` for the
fraction digits (V8's shortest-digits loop), so the token is the browser's.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from typing import Any

import attrs
import httpx

from xbot.errors import FetchError, PostUnavailable, UnsupportedLink
from xbot.i18n import N_
from xbot.links import Link
from xbot.media.models import MediaItem, MediaKind, Post, Variant
from xbot.sources.jsonget import count as _int
from xbot.sources.jsonget import objs as _dicts
from xbot.sources.jsonget import source_timeout
from xbot.sources.jsonget import text as _str
from xbot.sources.jsonget import web_url as _http_url
from xbot.sources.x._fallback import (
    get_fallback_json,
    orig_photo,
    with_alt_text,
    with_quote,
    x_post,
)
from xbot.sources.x._status import MIME_CONTAINERS, POST_ID, UNAVAILABLE, post_id_of

NAME = "syndication"
MALFORMED = N_("X's embed service sent an answer I could not read.")
_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"
_KINDS: dict[str, MediaKind] = {"photo": "photo", "video": "video", "animated_gif": "gif"}


# -- the token ----------------------------------------------------------------------


def js_radix36(value: float) -> str:
    """JavaScript's ``value.toString(36)`` for a finite, non-negative double.

    The fraction gets digits only while they still say something about the
    double (V8's `DoubleToRadixCString`: stop once the remainder is under half
    an ulp, round half to even, carry back into written digits).
    """
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"not a finite non-negative number: {value!r}")
    integer = math.floor(value)
    fraction = value - integer
    delta = max(0.5 * (math.nextafter(value, math.inf) - value), math.nextafter(0.0, 1.0))
    digits: list[int] = []
    if fraction >= delta:
        while True:
            fraction *= 36
            delta *= 36
            digit = int(fraction)
            digits.append(digit)
            fraction -= digit
            if (fraction > 0.5 or (fraction == 0.5 and digit & 1)) and fraction + delta > 1:
                while True:  # round up, carrying into the digits already written
                    if not digits:
                        integer += 1
                        break
                    last = digits.pop()
                    if last + 1 < 36:
                        digits.append(last + 1)
                        break
                break
            if fraction < delta:
                break
    whole = ""
    n = int(integer)
    while True:
        n, rest = divmod(n, 36)
        whole = _DIGITS[rest] + whole
        if n == 0:
            break
    return whole + ("." + "".join(_DIGITS[d] for d in digits) if digits else "")


def token(post_id: str) -> str:
    """The ``token`` query parameter for `post_id`, as the embed code derives it."""
    raw = js_radix36(float(int(post_id)) / 1e15 * math.pi)
    return raw.replace("0", "").replace(".", "")


# -- parsing --------------------------------------------------------------------------


def _container(url: str) -> str:
    """For a variant without a content type: what its path ends in, if it is a file we know."""
    ending = url.split("?", 1)[0].rsplit(".", 1)[-1].lower()
    return ending if ending in ("mp4", "m3u8", "webm", "mov") else ""


def _variants(video_info: Mapping[str, Any]) -> tuple[Variant, ...]:
    out = []
    for raw in _dicts(video_info.get("variants")):
        url = _http_url(raw.get("url"))
        if not url:
            continue
        mime = _str(raw.get("content_type")).lower()
        container = MIME_CONTAINERS.get(mime) or _container(url)
        # X names HEVC encodings in the path (BetterTwitFix skips "/hevc/" the same way).
        codec = "hevc" if "/hevc/" in url or "/hvc1/" in url else ""
        bitrate = _int(raw.get("bitrate")) or 0
        out.append(Variant(url=url, container=container, codec=codec, bitrate=bitrate))
    return tuple(out)


def _item(raw: Mapping[str, Any]) -> MediaItem | None:
    kind = _KINDS.get(_str(raw.get("type")).lower())
    still = _http_url(raw.get("media_url_https"))
    info = raw.get("original_info")
    info = info if isinstance(info, dict) else {}
    width, height = _int(info.get("width")), _int(info.get("height"))
    if kind is None:
        return None
    if kind == "photo":
        if not still:
            return None
        photo = MediaItem(kind="photo", url=orig_photo(still), width=width, height=height)
        return with_alt_text(photo, _str(raw.get("ext_alt_text")))
    video_info = raw.get("video_info")
    video_info = video_info if isinstance(video_info, dict) else {}
    millis = _int(video_info.get("duration_millis"))
    variants = _variants(video_info)
    if millis:
        # X gives no sizes here. Bitrate × duration (plus a tenth for audio and the
        # container) keeps `choose_variant` from picking a 1080p file that cannot fit,
        # where fxtwitter's own sizes would have led it to the 720p one.
        variants = tuple(
            attrs.evolve(v, size=int(v.bitrate * millis / 8000 * 1.1)) if v.bitrate else v
            for v in variants
        )
    files = [v for v in variants if v.container == "mp4" and v.codec != "hevc"] or [
        v for v in variants if v.container != "m3u8"
    ]
    best = max(files, key=lambda v: v.bitrate, default=None)
    if best is None:
        return None
    return MediaItem(
        kind=kind,
        url=best.url,
        variants=variants,
        width=width,
        height=height,
        duration=millis / 1000 if millis else None,
        thumbnail_url=still or None,
    )


def _text(data: Mapping[str, Any]) -> str:
    """The post's text as people read it: the media's t.co link cut, links expanded, unescaped.

    The media link is cut by value, not by ``display_text_range``: whether X counts
    that range over the escaped or the unescaped text is not something to bet on.
    """
    text = _str(data.get("text"))
    for raw in _dicts(data.get("mediaDetails")):
        short = _str(raw.get("url"))
        if short.startswith("https://t.co/"):
            text = text.replace(short, "")
    entities = data.get("entities")
    for raw in _dicts(entities.get("urls") if isinstance(entities, dict) else None):
        short, long = _str(raw.get("url")), _str(raw.get("expanded_url"))
        if short and long:
            text = text.replace(short, long)
    return html.unescape(text).strip()


def parse_syndication(data: object, *, post_id: str, _depth: int = 0) -> Post:
    """A `Post` from a decoded ``tweet-result`` answer for `post_id`.

    Raises:
        PostUnavailable: a tombstone (withheld, suspended account, age-gated).
        FetchError: anything that is not a post we can read.
    """
    if not isinstance(data, dict):
        raise FetchError(MALFORMED)
    if data.get("__typename") == "TweetTombstone":
        raise PostUnavailable(UNAVAILABLE)
    if not POST_ID.fullmatch(_str(data.get("id_str"))):
        raise FetchError(MALFORMED)
    user = data.get("user")
    user = user if isinstance(user, dict) else {}
    media = tuple(i for i in (_item(r) for r in _dicts(data.get("mediaDetails"))) if i)
    post = x_post(
        data,
        post_id=post_id,
        handle=_str(user.get("screen_name")),
        author_name=_str(user.get("name")),
        text=_text(data),
        media=media,
    )
    quote = None
    quoted = data.get("quoted_tweet")
    if _depth == 0 and isinstance(quoted, dict):
        try:
            quote = parse_syndication(quoted, post_id=_str(quoted.get("id_str")), _depth=1)
        except FetchError:
            quote = None
    return with_quote(post, quote)


@attrs.define
class Syndication:
    """X's syndication endpoint (`XBOT_X_SYNDICATION_URL`).

    Attributes:
        base_url: trusted as configured (not SSRF-guarded).
        timeout: per request.
    """

    _client: httpx.AsyncClient
    base_url: str
    timeout: httpx.Timeout = attrs.field(factory=source_timeout)
    name: str = NAME

    def request(self, post_id: str) -> tuple[str, dict[str, str]]:
        if not POST_ID.fullmatch(post_id):
            raise UnsupportedLink(N_("That is not a link to a post."))
        url = f"{self.base_url.rstrip('/')}/tweet-result"
        return url, {"id": post_id, "lang": "en", "token": token(post_id)}

    async def fetch(self, link: Link) -> Post:
        post_id = post_id_of(link)
        url, params = self.request(post_id)
        answer = await get_fallback_json(
            self._client, url, who=N_("X's embed service"), timeout=self.timeout, params=params
        )
        return parse_syndication(answer.body, post_id=post_id)
