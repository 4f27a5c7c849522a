"""X posts through a vxtwitter-compatible API (BetterTwitFix), the second source.

``GET {base}/{handle}/status/{id}`` (any handle works) answers the object
BetterTwitFix's ``vxApi.getApiResponse`` builds: ``tweetID``, ``text``,
``user_name``, ``user_screen_name``, ``possibly_sensitive``, ``media_extended[]``
(``type`` image|video|gif, ``url``, ``thumbnail_url``, ``size{width,height}``,
``duration_millis``, ``altText``) and ``qrt``, the quoted post in the same shape.

How it fails, from the same code: a post it could not fetch (deleted, private,
or X refusing it) is an HTML page with status 200 (``message(msgs.failedToScan)``),
so for this source an HTML answer is never "not found", only "unwell"; some
routes answer ``{"error": msg}`` with 404 or 500.

`parse_vx` is pure and turns the JSON into the same `Post` the fxtwitter parser
builds; `VxApi` is the HTTP shell.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import httpx

from xbot.errors import FetchError, PostUnavailable, TransientFetch
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
from xbot.sources.x._status import DELETED, POST_ID, post_id_of, status_url

NAME = "vxtwitter"
MALFORMED = N_("The vxtwitter API sent an answer I could not read.")
_KINDS: dict[str, MediaKind] = {"image": "photo", "photo": "photo", "video": "video", "gif": "gif"}


def _item(raw: Mapping[str, Any]) -> MediaItem | None:
    kind = _KINDS.get(_str(raw.get("type")).lower())
    url = _http_url(raw.get("url"))
    if kind is None or not url:
        return None  # "txt"/"rtf" pseudo-media, or nothing to send
    size = raw.get("size")
    size = size if isinstance(size, dict) else {}
    width, height = _int(size.get("width")), _int(size.get("height"))
    if kind == "photo":
        photo = MediaItem(kind="photo", url=orig_photo(url), width=width, height=height)
        return with_alt_text(photo, _str(raw.get("altText")))
    millis = _int(raw.get("duration_millis"))
    return MediaItem(
        kind=kind,
        url=url,
        # One encoding: BetterTwitFix already picked the best non-HEVC mp4.
        variants=(Variant(url=url, container="mp4"),),
        width=width,
        height=height,
        duration=millis / 1000 if millis else None,
        thumbnail_url=_http_url(raw.get("thumbnail_url")) or None,
    )


def parse_vx(data: object, *, post_id: str, _depth: int = 0) -> Post:
    """A `Post` from a decoded vxtwitter answer for `post_id`.

    Raises:
        PostUnavailable: the API said the post is not there (``{"error": ...}`` naming it).
        TransientFetch: an error envelope that is not about the post.
        FetchError: anything that is not a status we can read.
    """
    if not isinstance(data, dict):
        raise FetchError(MALFORMED)
    if "error" in data and "tweetID" not in data:
        message = _str(data.get("error")).lower()
        if "not found" in message or "deleted" in message:
            raise PostUnavailable(DELETED)
        raise TransientFetch(N_("The vxtwitter API could not fetch the post."))
    echoed = data.get("tweetID")
    if not isinstance(echoed, str | int) or not POST_ID.fullmatch(str(echoed)):
        raise FetchError(MALFORMED)
    media = tuple(i for i in (_item(r) for r in _dicts(data.get("media_extended"))) if i)
    post = x_post(
        data,
        post_id=post_id,
        handle=_str(data.get("user_screen_name")),
        author_name=_str(data.get("user_name")),
        text=_str(data.get("text")),
        media=media,
    )
    quote = None
    qrt = data.get("qrt")
    if _depth == 0 and isinstance(qrt, dict) and POST_ID.fullmatch(str(qrt.get("tweetID", ""))):
        try:
            quote = parse_vx(qrt, post_id=str(qrt["tweetID"]), _depth=1)
        except FetchError:
            quote = None  # a quote we cannot read does not spoil the post
    return with_quote(post, quote)


@attrs.define
class VxApi:
    """The vxtwitter-compatible status API (`XBOT_VX_API_URL`).

    Attributes:
        base_url: trusted as configured (not SSRF-guarded).
        timeout: per request.
    """

    _client: httpx.AsyncClient
    base_url: str
    timeout: httpx.Timeout = attrs.field(factory=source_timeout)
    name: str = NAME

    def status_url(self, post_id: str, handle: str | None) -> str:
        return status_url(self.base_url, post_id, handle)

    async def fetch(self, link: Link) -> Post:
        post_id = post_id_of(link)
        url = self.status_url(post_id, link.handle)
        answer = await get_fallback_json(
            self._client,
            url,
            who=N_("the vxtwitter API"),
            timeout=self.timeout,
            read_statuses=(404,),
        )
        if answer.status == 404 and not (isinstance(answer.body, dict) and "error" in answer.body):
            # Its posts that are gone come as an HTML page with 200; a bare 404 is a
            # route this server does not have (a wrong base URL), not an answer.
            raise TransientFetch(N_("The vxtwitter API does not know that address."))
        return parse_vx(answer.body, post_id=post_id)
