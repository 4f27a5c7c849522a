"""Pixiv works through pixiv's own ajax API (no login), as the same `Post` as X's.

``GET {XBOT_PIXIV_API_URL}/ajax/illust/{id}`` describes the work
(``{error, message, body}``; ``illustType`` 0 illustration, 1 manga, 2 ugoira;
``xRestrict`` 0 all ages, 1 R-18, 2 R-18G; ``restrict`` non-zero for works
shown only to the artist's My pixiv friends), and for a work of several pages
``/ajax/illust/{id}/pages`` lists every page (``body[]{urls, width, height}``).
`parse_work` and `parse_pages` are pure and raise nothing but `FetchError`
and its subclasses.

pixiv's image host answers 403 without ``Referer: https://www.pixiv.net/``,
so Telegram cannot fetch a page by URL: each page is a `MediaItem` that
carries that header and says it must be uploaded; the delivery downloads it
through the SSRF guard. The original goes when it fits Telegram's photo
limits, else the ``regular`` rendition (`MediaItem.fallback_url`), else the
original as a document. Ugoira and works that need a login get one sentence.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import httpx

from xbot.config import DEFAULT_PIXIV_API_URL
from xbot.errors import FetchError, PostUnavailable, UnsupportedLink
from xbot.i18n import N_
from xbot.links import Link, pixiv_work_url
from xbot.media.models import MediaItem, Post
from xbot.sources import jsonget
from xbot.sources.jsonget import (
    JsonAnswer,
    count,
    get_json,
    obj,
    objs,
    source_timeout,
    text,
    web_url,
)

REFERER = "https://www.pixiv.net/"
IMAGE_HEADERS = (("Referer", REFERER),)

MALFORMED = N_("pixiv sent an answer I could not read.")
DELETED = N_("This pixiv work was deleted or does not exist.")
UGOIRA = N_("This pixiv work is an animation (ugoira), which pixiv serves only as loose frames.")
R18 = N_("This pixiv work is marked R-18, and pixiv shows it only to signed-in users.")
R18G = N_("This pixiv work is marked R-18G, and pixiv shows it only to signed-in users.")
MY_PIXIV = N_("The artist shows this pixiv work only to their My pixiv friends.")
LOGIN = N_("pixiv shows this work only to signed-in users.")

# pixiv's ajax refuses clients that do not look like a browser; say who we are inside one.
USER_AGENT = f"Mozilla/5.0 (compatible; {jsonget.USER_AGENT})"


@attrs.frozen
class Work:
    """What ``/ajax/illust/{id}`` says about a work (pages beyond the first come separately)."""

    work_id: str
    title: str
    user_name: str
    user_account: str
    tags: tuple[str, ...]
    page_count: int
    first: MediaItem | None


def _page(urls: Mapping[str, Any], width: object, height: object) -> MediaItem | None:
    original = web_url(urls.get("original"))
    if not original:
        return None
    return MediaItem(
        kind="photo", url=original, width=count(width) or None, height=count(height) or None,
        headers=IMAGE_HEADERS, upload_only=True,
        fallback_url=web_url(urls.get("regular")) or None,
    )  # fmt: skip


def _refusal(body: Mapping[str, Any]) -> PostUnavailable | None:
    if count(body.get("illustType")) == 2:
        return PostUnavailable(UGOIRA)
    x_restrict = count(body.get("xRestrict")) or 0
    if x_restrict >= 2:
        return PostUnavailable(R18G)
    if x_restrict == 1:
        return PostUnavailable(R18)
    if count(body.get("restrict")):
        return PostUnavailable(MY_PIXIV)
    return None


def _answer_error(answer: JsonAnswer) -> FetchError | None:
    """What a non-200 or ``error: true`` answer means; None when it is a work."""
    data = obj(answer.body)
    if answer.status == 200 and data.get("error") is False:
        return None
    if answer.status in (404, 410):
        return PostUnavailable(DELETED)
    if answer.status in (401, 403):
        return PostUnavailable(LOGIN)
    if data.get("error") is True:
        # 200 or 400 with an error: pixiv says "deleted or never existed" in words
        # that vary by language; a work that needs a login says nothing we can rely on.
        return PostUnavailable(DELETED)
    return FetchError(MALFORMED)


def parse_work(answer: JsonAnswer, *, work_id: str) -> Work:
    """The work in an ``/ajax/illust/{id}`` answer.

    Raises:
        PostUnavailable: deleted or missing, an ugoira, R-18/R-18G, My pixiv only,
            or no image URLs (the work needs a login).
        FetchError: anything that is not a work we can read.
    """
    error = _answer_error(answer)
    if error is not None:
        raise error
    body = obj(obj(answer.body).get("body"))
    if not body:
        raise FetchError(MALFORMED)
    refusal = _refusal(body)
    if refusal is not None:
        raise refusal
    tags = tuple(t for t in (text(tag.get("tag")).strip()
                 for tag in objs(obj(body.get("tags")).get("tags"))) if t)  # fmt: skip
    first = _page(obj(body.get("urls")), body.get("width"), body.get("height"))
    if first is None:
        raise PostUnavailable(LOGIN)  # the ajax answers a restricted work with null urls
    return Work(
        work_id=work_id,
        title=text(body.get("illustTitle")) or text(body.get("title")),
        user_name=text(body.get("userName")),
        user_account=text(body.get("userAccount")),
        tags=tags,
        page_count=max(1, count(body.get("pageCount")) or 1),
        first=first,
    )


def parse_pages(answer: JsonAnswer) -> tuple[MediaItem, ...]:
    """Every page of an ``/ajax/illust/{id}/pages`` answer, in page order."""
    error = _answer_error(answer)
    if error is not None:
        raise error
    pages = [_page(obj(p.get("urls")), p.get("width"), p.get("height"))
             for p in objs(obj(answer.body).get("body"))]  # fmt: skip
    items = tuple(p for p in pages if p is not None)
    if not items:
        raise PostUnavailable(LOGIN)
    return items


def hashtag(tag: str) -> str:
    """A tag as a Telegram hashtag: its spaces become underscores."""
    return "#" + "_".join(tag.split())


def to_post(work: Work, media: tuple[MediaItem, ...]) -> Post:
    """The caption's parts: the title first, ``Artist (@pixiv id)``, the tags as text."""
    return Post(
        key=f"pixiv:{work.work_id}",
        url=pixiv_work_url(work.work_id),
        author_name=work.user_name or work.user_account,
        author_handle=work.user_account,
        text=" ".join(hashtag(t) for t in work.tags),
        media=media,
        source="pixiv",
        title=work.title,
    )


# -- the HTTP shell -------------------------------------------------------------------


@attrs.define
class PixivSource:
    """Works from pixiv's ajax API.

    Attributes:
        base_url: the operator's ``XBOT_PIXIV_API_URL`` (trusted; not SSRF-guarded).
    """

    _client: httpx.AsyncClient
    base_url: str = DEFAULT_PIXIV_API_URL
    name: str = "pixiv"
    timeout: httpx.Timeout = attrs.field(factory=source_timeout)

    async def fetch(self, link: Link) -> Post:
        """The work behind `link`, every page in order.

        Raises:
            PostUnavailable: deleted, ugoira, R-18, My pixiv only, needs a login.
            TransientFetch: pixiv is down or slow.
            FetchError: an answer we cannot read.
        """
        work_id = link.post_id or ""
        if not work_id.isdigit():
            raise UnsupportedLink(N_("That is not a link to a pixiv work."))
        base = f"{self.base_url.rstrip('/')}/ajax/illust/{work_id}"
        work = parse_work(await self._get(base), work_id=work_id)
        media: tuple[MediaItem, ...] = (work.first,) if work.first is not None else ()
        if work.page_count > 1:
            media = parse_pages(await self._get(f"{base}/pages"))
        return to_post(work, media)

    async def _get(self, url: str) -> JsonAnswer:
        headers = {"User-Agent": USER_AGENT, "Referer": REFERER, "Accept": "application/json"}
        return await get_json(self._client, url, who="pixiv", headers=headers,
                              per_request=self.timeout)  # fmt: skip
