"""X posts through an fxtwitter-compatible JSON API, and t.co expansion.

`parse_status` and `choose_variant` are pure: the first reads whatever JSON
came back (v1 ``{"code", "tweet"}`` or v2 ``{"code", "status"}``, tombstones,
legacy ``variants``) and raises nothing but `FetchError` and its subclasses;
the second picks the video encoding to send. `XApi` is the thin shell that
does the HTTP. Its base URL is the operator's ``XBOT_X_API_URL``: trusted as
configured, so its client does not go through the SSRF guard. The media URLs
it returns are untrusted and are downloaded through the guarded client.

Callers treat a bare `FetchError` as permanent and `TransientFetch` as worth
a retry.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

import attrs
import httpx

from xbot import __version__
from xbot.errors import FetchError, PostUnavailable, TransientFetch, UnsupportedLink
from xbot.links import x_status_url
from xbot.media.download import http_error
from xbot.media.models import MediaItem, MediaKind, Post, Variant

MALFORMED = "The X API sent an answer I could not read."
PRIVATE = "This post is private: only its author's approved followers can see it."
DELETED = "This post was deleted or does not exist."
SUSPENDED = "The account that posted this is suspended."
BLOCKED = "The author of this post does not let me see it."
UNAVAILABLE = "This post is unavailable."
API_TROUBLE = "The X API is having trouble; I will try again."

_TOMBSTONES = {
    "deleted": DELETED,
    "not_found": DELETED,
    "suspended": SUSPENDED,
    "private": PRIVATE,
    "protected": PRIVATE,
    "blocked": BLOCKED,
    "unavailable": UNAVAILABLE,
}
_HANDLE = re.compile(r"[A-Za-z0-9_]{1,50}")
_POST_ID = re.compile(r"[0-9]{1,25}")
_HEVC = frozenset({"hevc", "h265", "hvc1", "hev1"})
_MIME_CONTAINERS = {
    "video/mp4": "mp4",
    "video/webm": "webm",
    "video/quicktime": "mov",
    "application/x-mpegurl": "m3u8",
    "application/vnd.apple.mpegurl": "m3u8",
}
_EXTENSIONS = ("mp4", "m3u8", "webm", "mov", "m4v")
_MAX_INT = 2**63


# -- reading loose JSON ---------------------------------------------------------


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _int(value: object) -> int | None:
    """A non-negative int from JSON, or None (bools, strings, NaN, absurd sizes)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 0 <= value < _MAX_INT else None
    if isinstance(value, float) and math.isfinite(value) and 0 <= value < _MAX_INT:
        return int(value)
    return None


def _seconds(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return float(value) if 0 <= value < _MAX_INT else None
    if isinstance(value, float) and math.isfinite(value) and 0 <= value < _MAX_INT:
        return value
    return None


def _http_url(value: object) -> str:
    # Only web URLs: a payload could name file:, data: or javascript: "media".
    url = _str(value)
    return url if url.startswith(("https://", "http://")) else ""


def _dicts(value: object) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def container_from_url(url: str) -> str:
    path = url.split("?", 1)[0].split("#", 1)[0].lower()
    extension = path.rsplit(".", 1)[-1] if "." in path.rsplit("/", 1)[-1] else ""
    return extension if extension in _EXTENSIONS else ""


# -- parsing ---------------------------------------------------------------------


def _format_variant(raw: Mapping[str, Any]) -> Variant | None:
    url = _http_url(raw.get("url"))
    if not url:
        return None
    return Variant(
        url=url,
        container=_str(raw.get("container")).lower() or container_from_url(url),
        codec=_str(raw.get("codec")).lower(),
        bitrate=_int(raw.get("bitrate")) or 0,
        size=_int(raw.get("size")),
    )


def _legacy_variant(raw: Mapping[str, Any]) -> Variant | None:
    url = _http_url(raw.get("url"))
    if not url:
        return None
    mime = _str(raw.get("content_type")).lower()
    return Variant(
        url=url,
        container=_MIME_CONTAINERS.get(mime) or container_from_url(url),
        codec="",
        bitrate=_int(raw.get("bitrate")) or 0,
    )


def _variants(raw: Mapping[str, Any]) -> tuple[Variant, ...]:
    formats = [_format_variant(f) for f in _dicts(raw.get("formats"))]
    if not formats:
        formats = [_legacy_variant(v) for v in _dicts(raw.get("variants"))]
    return tuple(v for v in formats if v is not None)


def _item(raw: object) -> MediaItem | None:
    """One entry of photos[], videos[] or all[]; None for what cannot be sent."""
    if not isinstance(raw, dict):
        return None
    kind_name = _str(raw.get("type")).lower()
    url = _http_url(raw.get("url"))
    width, height = _int(raw.get("width")), _int(raw.get("height"))
    if kind_name in ("photo", "image"):
        return MediaItem(kind="photo", url=url, width=width, height=height) if url else None
    if kind_name not in ("video", "gif", "animated_gif"):
        return None
    kind: MediaKind = "video" if kind_name == "video" else "gif"
    size = _int(raw.get("filesize"))
    variants = _variants(raw)
    if not variants and url:
        container = _MIME_CONTAINERS.get(_str(raw.get("format")).lower())
        variants = (Variant(url=url, container=container or container_from_url(url), size=size),)
    if not url:
        best = max(variants, key=lambda v: v.bitrate, default=None)
        if best is None:
            return None
        url = best.url
    thumbnail = _http_url(raw.get("thumbnail_url")) or None
    return MediaItem(
        kind=kind,
        url=url,
        variants=variants,
        width=width,
        height=height,
        duration=_seconds(raw.get("duration")),
        thumbnail_url=thumbnail,
        size=size,
    )


def _media(status: Mapping[str, Any]) -> tuple[MediaItem, ...]:
    media = status.get("media")
    if not isinstance(media, dict):
        return ()
    everything = media.get("all")
    if isinstance(everything, list) and everything:
        raw: list[object] = list(everything)  # post order, photos and videos interleaved
    else:
        raw = []
        for key in ("photos", "videos"):
            value = media.get(key)
            if isinstance(value, list):
                raw.extend(value)
    return tuple(item for item in (_item(r) for r in raw) if item is not None)


def _code_error(code: int) -> FetchError:
    if code == 401:
        return PostUnavailable(PRIVATE)
    if code in (404, 410):
        return PostUnavailable(DELETED)
    if code == 429 or code >= 500:
        return TransientFetch(API_TROUBLE)
    return FetchError(MALFORMED)


def _tombstone(reason: object) -> PostUnavailable:
    return PostUnavailable(_TOMBSTONES.get(_str(reason).lower(), UNAVAILABLE))


def canonical_url(post_id: str, handle: str) -> str:
    return x_status_url(post_id, handle)


def parse_status(data: object, *, post_id: str) -> Post:
    """A `Post` from a decoded API answer for `post_id`.

    The key and link are built from `post_id` (the id the user linked) so
    that the link cache finds the post again whatever the API echoes.

    Raises:
        PostUnavailable: private, deleted, suspended, tombstoned.
        TransientFetch: the answer itself reports an upstream failure (5xx code).
        FetchError: anything that is not a status we can read.
    """
    if not isinstance(data, dict):
        raise FetchError(MALFORMED)
    status = data.get("tweet", data.get("status"))
    if isinstance(status, dict) and status.get("type") == "tombstone":
        raise _tombstone(status.get("reason"))
    code = data.get("code", 200)
    if isinstance(code, bool) or not isinstance(code, int):
        raise FetchError(MALFORMED)
    if code != 200:
        raise _code_error(code)
    if not isinstance(status, dict):
        raise FetchError(MALFORMED)
    author = status.get("author")
    author = author if isinstance(author, dict) else {}
    handle = _str(author.get("screen_name"))
    if not _HANDLE.fullmatch(handle):
        handle = ""
    return Post(
        key=f"x:{post_id}",
        url=canonical_url(post_id, handle),
        author_name=_str(author.get("name")),
        author_handle=handle,
        text=_str(status.get("text")),
        media=_media(status),
        sensitive=status.get("possibly_sensitive") is True,
        source="x",
    )


# -- choosing a video encoding ----------------------------------------------------


def _best_fitting(variants: list[Variant], max_bytes: int) -> Variant | None:
    fitting = [v for v in variants if v.size is None or v.size <= max_bytes]
    return max(fitting, key=lambda v: (v.bitrate, v.size is not None), default=None)


def _prefer_mp4(variants: list[Variant]) -> list[Variant]:
    mp4 = [v for v in variants if v.container == "mp4"]
    return mp4 or variants


def choose_variant(item: MediaItem, max_bytes: int) -> Variant | None:
    """The encoding to send: the highest-bitrate mp4 that fits `max_bytes`, or None.

    - HLS playlists (m3u8) are never chosen: they are not a file.
    - Non-mp4 containers only when there is no mp4 at all.
    - A variant of unknown size is admitted (the download cap still holds).
    - HEVC only when nothing else fits: Telegram clients often fail to play
      it, but a video that plays on some clients beats none.
    """
    candidates = list(item.variants) or [
        Variant(url=item.url, container=container_from_url(item.url), size=item.size)
    ]
    files = [v for v in candidates if v.container != "m3u8"]
    plain = _prefer_mp4([v for v in files if v.codec not in _HEVC])
    hevc = _prefer_mp4([v for v in files if v.codec in _HEVC])
    return _best_fitting(plain, max_bytes) or _best_fitting(hevc, max_bytes)


# -- the HTTP shell ------------------------------------------------------------------

DEFAULT_USER_AGENT = f"xbot/{__version__} (Telegram bot)"
_REDIRECTS = (301, 302, 303, 307, 308)


def _default_timeout() -> httpx.Timeout:
    return httpx.Timeout(15.0, connect=5.0)


@attrs.define
class XApi:
    """The fxtwitter-compatible status API.

    Attributes:
        base_url: the operator's ``XBOT_X_API_URL`` (trusted; not SSRF-guarded).
        user_agent: sent with every request (the API answers 401 without one).
        timeout: per request.
        max_body: the largest answer read; a status is a few KiB.
    """

    _client: httpx.AsyncClient
    base_url: str
    user_agent: str = DEFAULT_USER_AGENT
    timeout: httpx.Timeout = attrs.field(factory=_default_timeout)
    max_body: int = 2 * 1024 * 1024

    def status_url(self, post_id: str, handle: str | None) -> str:
        if not _POST_ID.fullmatch(post_id):
            raise UnsupportedLink("That is not a link to a post.")
        # The handle goes into the path: anything but a plain handle becomes "i".
        path_handle = handle if handle and _HANDLE.fullmatch(handle) else "i"
        return f"{self.base_url.rstrip('/')}/{path_handle}/status/{post_id}"

    async def fetch(self, post_id: str, handle: str | None = None) -> Post:
        """The post `post_id`, parsed.

        Raises:
            PostUnavailable: private (401), deleted or missing (404), tombstoned.
            TransientFetch: 5xx, 429, timeouts, connection failures.
            UnsupportedLink: `post_id` is not a post id.
            FetchError: an answer that is not a readable status (HTML, garbage, too big).
        """
        url = self.status_url(post_id, handle)
        try:
            body = await self._get(url)
        except PostUnavailable as exc:
            # fxtwitter serves both /{handle}/status/{id} and /status/{id}; a
            # compatible API may route only the second. One more request, and
            # only for a 404: a post that is really gone costs two.
            if exc.reason != DELETED:
                raise
            body = await self._get(f"{self.base_url.rstrip('/')}/status/{post_id}")
        try:
            data = json.loads(body)
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
            raise FetchError(MALFORMED) from exc
        return parse_status(data, post_id=post_id)

    async def _get(self, url: str) -> bytes:
        """One status request; the status code is classified here, once."""
        headers = {"User-Agent": self.user_agent, "Accept": "application/json"}
        try:
            async with self._client.stream(
                "GET", url, headers=headers, timeout=self.timeout
            ) as response:
                status = response.status_code
                if status in (401, 403):
                    # fxtwitter: 401 PRIVATE_TWEET. A 403 is the same refusal in other words.
                    raise PostUnavailable(PRIVATE)
                if status in (404, 410):
                    raise PostUnavailable(DELETED)
                if status in (408, 429) or status >= 500:
                    raise TransientFetch(API_TROUBLE)
                if status != 200:
                    raise FetchError(MALFORMED)
                return await self._read_capped(response)
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise http_error(exc, "the X API") from exc

    async def _read_capped(self, response: httpx.Response) -> bytes:
        body = bytearray()
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > self.max_body:
                raise FetchError(MALFORMED)
        return bytes(body)


async def expand_tco(client: httpx.AsyncClient, url: str) -> str:
    """Where a t.co short link leads, by one HEAD (a GET if HEAD is refused), no redirects followed.

    `client` is the SSRF-guarded one (netguard.make_client): t.co is a link a user sent.

    Raises:
        UnsupportedLink: not a t.co link, or it leads nowhere we can follow.
        TransientFetch: timeouts, connection failures, 5xx.
        BlockedAddress: the guard refused (t.co resolving to a private address).
    """
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise UnsupportedLink("That is not a t.co short link.") from exc
    if parsed.scheme not in ("http", "https") or parsed.host != "t.co" or parsed.userinfo:
        raise UnsupportedLink("That is not a t.co short link.")
    try:
        response = await client.head(parsed, follow_redirects=False)
        if response.status_code not in _REDIRECTS and response.status_code < 500:
            # Some servers refuse HEAD (405); ask again with GET and read only the head.
            async with client.stream("GET", parsed, follow_redirects=False) as response:
                pass
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        raise http_error(exc, "t.co") from exc
    if response.status_code >= 500 or response.status_code == 429:
        raise TransientFetch("t.co is having trouble; I will try again.")
    location = response.headers.get("Location", "")
    if response.status_code not in _REDIRECTS or not location:
        raise UnsupportedLink("This short link leads nowhere I can follow.")
    try:
        target = parsed.join(location)
    except httpx.InvalidURL as exc:
        raise UnsupportedLink("This short link leads nowhere I can follow.") from exc
    if target.scheme not in ("http", "https") or not target.host:
        raise UnsupportedLink("This short link leads nowhere I can follow.")
    return str(target)
