"""What the two X fallback sources (vxtwitter, syndication) share: how they read a
status code, over `xbot.sources.jsonget.get_json` (the one JSON GET), and how their
answer becomes the `Post` the fxtwitter parser builds.

The sources' base URLs are the operator's (trusted, as `XBOT_X_API_URL` is), so
their client does not go through the SSRF guard; the media URLs they return do.

    404, 410              → PostUnavailable(DELETED)   (the caller may read the body first)
    401, 403, 408, 429,   → TransientFetch             (down, overloaded, rate-limited,
    5xx                                                  or a firewall refusing our address:
                                                         neither source says "private" so)
    200 but not JSON      → TransientFetch             (an HTML error page: the way
                                                         vxtwitter and CDNs fail)
    other codes           → FetchError                 (junk)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import httpx

from xbot.errors import FetchError, PostUnavailable, TransientFetch
from xbot.i18n import N_, reason_template
from xbot.media.models import MediaItem, Post
from xbot.sources.jsonget import USER_AGENT, JsonAnswer, get_json
from xbot.sources.x._status import DELETED, HANDLE, canonical_url, with_quote_media

_HEADERS = {"User-Agent": USER_AGENT, "Accept": "application/json"}
_MAX_BODY = 2 * 1024 * 1024
# `who` (a source's name, a msgid where it is not a name) fills these; translated with them.
TOO_LARGE = reason_template(N_("{who} sent an answer far too large for a post."))
A_PAGE = reason_template(N_("{who} answered with a page instead of data."))
TROUBLE = reason_template(N_("{who} is having trouble."))
UNREADABLE = reason_template(N_("{who} answered in a way I could not read (HTTP {status})."))


async def get_fallback_json(
    client: httpx.AsyncClient,
    url: str,
    *,
    who: str,
    timeout: httpx.Timeout,  # noqa: ASYNC109 - httpx's per-request timeouts, not a deadline
    params: dict[str, str] | None = None,
    read_statuses: tuple[int, ...] = (),
) -> JsonAnswer:
    """GET `url` and decode its JSON; `read_statuses` are returned (decoded) instead of raised.

    Raises:
        PostUnavailable, TransientFetch, FetchError: as the table above says.
    """

    def check(status: int) -> bool:
        if status not in read_statuses:
            _raise_for(status, who)
        return True

    # A 200 that is not the JSON promised: an error page, a captcha, a half-
    # deployed server. It says nothing about the post; it says the source is unwell.
    return await get_json(
        client, url, who=who, params=params, headers=_HEADERS, per_request=timeout,
        max_body=_MAX_BODY, check=check,
        too_large=TOO_LARGE.format(who=_cap(who)),
        not_json=TransientFetch(A_PAGE.format(who=_cap(who))),
    )  # fmt: skip


def _cap(who: str) -> str:
    return who[:1].upper() + who[1:]


def _raise_for(status: int, who: str) -> None:
    if status == 200:
        return
    if status in (404, 410):
        raise PostUnavailable(DELETED)
    if status in (401, 403, 408, 429) or status >= 500:
        raise TransientFetch(TROUBLE.format(who=_cap(who)))
    raise FetchError(UNREADABLE.format(who=_cap(who), status=status))


# -- the post ----------------------------------------------------------------------


def orig_photo(url: str) -> str:
    """X's photo URL at its original size, as fxtwitter gives it.

    BetterTwitFix does the same before embedding (``?name=orig`` on a bare
    pbs.twimg.com URL), so the link cache keeps one spelling per photo.
    """
    if url.startswith("https://pbs.twimg.com/media/") and "?" not in url:
        return f"{url}?name=orig"
    return url


def with_alt_text(item: MediaItem, text: str) -> MediaItem:
    """A photo with its description."""
    return attrs.evolve(item, alt_text=text) if text else item


def with_quote(post: Post, quote: Post | None) -> Post:
    """The post with the post it quotes, joined by the fxtwitter parser's rule for the
    quoted post's media (`with_quote_media`: the post's own media first, the
    quote's only when all fit one album); the quote's sensitivity counts when its
    media does."""
    if quote is None:
        return post
    media, own = with_quote_media(post.media, quote.media)
    sensitive = post.sensitive or (own is not None and quote.sensitive)
    return attrs.evolve(post, quote=quote, media=media, own_media=own, sensitive=sensitive)


def x_post(
    data: Mapping[str, Any],
    *,
    post_id: str,
    handle: str,
    author_name: str,
    text: str,
    media: tuple[MediaItem, ...],
) -> Post:
    """The `Post` an X fallback's answer `data` becomes, keyed and linked by the id the
    user linked (as `parse_status` does); a handle that is no handle is dropped."""
    handle = handle if HANDLE.fullmatch(handle) else ""
    return Post(
        key=f"x:{post_id}",
        url=canonical_url(post_id, handle),
        author_name=author_name,
        author_handle=handle,
        text=text,
        media=media,
        sensitive=data.get("possibly_sensitive") is True,
        source="x",
    )
