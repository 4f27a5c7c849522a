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
original as a document.

With the operator's login (``XBOT_PIXIV_SESSION``, pixiv's ``PHPSESSID``
cookie) the ajax answers R-18 and R-18G works with their URLs, as it does a
signed-in browser; without it, or when the session has expired (pixiv then
answers as to a visitor: ``urls`` null, or 401), they stay one sentence. The
cookie goes on the ajax requests only: never to the image host, whose
requests carry the item's `MediaItem.headers` (the Referer). Whether a chat
may see such a work is the delivery's question (`Post.rating`).

An ugoira (``illustType`` 2) is asked for its ``ugoira_meta`` (``src``, the
600px zip, ``originalSrc``, the full-size zip, ``mime_type``, and
``frames[]{file, delay}`` in milliseconds) and becomes one ``gif`` item whose
`MediaItem.frames` the delivery turns into an MP4 (`xbot.media.ugoira`);
without ffmpeg it stays one sentence.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import attrs
import httpx

from xbot.config import DEFAULT_PIXIV_API_URL
from xbot.errors import FetchError, PostUnavailable, UnsupportedLink
from xbot.i18n import N_
from xbot.links import Link, pixiv_work_url
from xbot.media import ugoira
from xbot.media.models import ALL_AGES, R18G, Frame, MediaItem, Post
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

log = logging.getLogger(__name__)

REFERER = "https://www.pixiv.net/"
IMAGE_HEADERS = (("Referer", REFERER),)

MALFORMED = N_("pixiv sent an answer I could not read.")
DELETED = N_("This pixiv work was deleted or does not exist.")
UGOIRA = N_("This pixiv work is an animation (ugoira), which pixiv serves only as loose frames.")
R18 = N_("This pixiv work is marked R-18, and pixiv shows it only to signed-in users.")
R18G_SENTENCE = N_("This pixiv work is marked R-18G, and pixiv shows it only to signed-in users.")
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
    rating: int = ALL_AGES
    animation: bool = False


def _page(urls: Mapping[str, Any], width: object, height: object) -> MediaItem | None:
    original = web_url(urls.get("original"))
    if not original:
        return None
    return MediaItem(
        kind="photo", url=original, width=count(width) or None, height=count(height) or None,
        headers=IMAGE_HEADERS, upload_only=True,
        fallback_url=web_url(urls.get("regular")) or None,
    )  # fmt: skip


def rating_of(body: Mapping[str, Any]) -> int:
    """``xRestrict`` as a `Post.rating`; anything but 0, 1 or 2 counts as R-18G."""
    x_restrict = body.get("xRestrict", 0)
    if x_restrict in (0, 1, 2) and not isinstance(x_restrict, bool):
        return int(x_restrict)
    return R18G


def _refusal(body: Mapping[str, Any]) -> PostUnavailable:
    """Why a work came without its URLs: pixiv shows it only to someone signed in."""
    rating = rating_of(body)
    if rating == R18G:
        return PostUnavailable(R18G_SENTENCE)
    if rating:
        return PostUnavailable(R18)
    if count(body.get("restrict")):
        return PostUnavailable(MY_PIXIV)
    return PostUnavailable(LOGIN)


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
        PostUnavailable: deleted or missing, or no image URLs: the work needs a login
            (R-18/R-18G, My pixiv only) and the request had none that pixiv took.
        FetchError: anything that is not a work we can read.
    """
    error = _answer_error(answer)
    if error is not None:
        raise error
    body = obj(obj(answer.body).get("body"))
    if not body:
        raise FetchError(MALFORMED)
    tags = tuple(t for t in (text(tag.get("tag")).strip()
                 for tag in objs(obj(body.get("tags")).get("tags"))) if t)  # fmt: skip
    first = _page(obj(body.get("urls")), body.get("width"), body.get("height"))
    if first is None:
        raise _refusal(body)  # the ajax answers a restricted work with null urls
    return Work(
        work_id=work_id,
        title=text(body.get("illustTitle")) or text(body.get("title")),
        user_name=text(body.get("userName")),
        user_account=text(body.get("userAccount")),
        tags=tags,
        page_count=max(1, count(body.get("pageCount")) or 1),
        first=first,
        rating=rating_of(body),
        animation=count(body.get("illustType")) == 2,
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


def parse_ugoira(answer: JsonAnswer, work: Work) -> MediaItem:
    """The animation of an ``/ajax/illust/{id}/ugoira_meta`` answer: the full-size zip
    (the 600px one as its fallback) and its frames.

    Raises:
        PostUnavailable: an impossible frame list (`xbot.media.ugoira.check_frames`),
            or no zip (the work needs a login).
        FetchError: anything that is not a frame list we can read.
    """
    error = _answer_error(answer)
    if error is not None:
        raise error
    body = obj(obj(answer.body).get("body"))
    if not body:
        raise FetchError(MALFORMED)
    original, small = web_url(body.get("originalSrc")), web_url(body.get("src"))
    if not (original or small):
        raise PostUnavailable(LOGIN)
    frames = tuple(
        Frame(text(f.get("file")), d if (d := count(f.get("delay"))) is not None else -1)
        for f in objs(body.get("frames"))
    )
    try:
        ugoira.check_frames(frames)
    except FetchError as exc:
        raise PostUnavailable(exc.reason) from exc
    first = work.first
    return MediaItem(
        kind="gif", url=original or small, headers=IMAGE_HEADERS, upload_only=True,
        fallback_url=small if original and small and small != original else None,
        width=first.width if first else None, height=first.height if first else None,
        duration=sum(f.delay_ms for f in frames) / 1000, frames=frames,
    )  # fmt: skip


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
        rating=work.rating,
    )


# -- the HTTP shell -------------------------------------------------------------------


@attrs.define
class PixivSource:
    """Works from pixiv's ajax API.

    Attributes:
        base_url: the operator's ``XBOT_PIXIV_API_URL`` (trusted; not SSRF-guarded).
        session: the operator's ``PHPSESSID`` ("" signed out); sent to `base_url` only.
        animations: an ugoira can become an MP4 (ffmpeg is here); else one sentence.
    """

    _client: httpx.AsyncClient
    base_url: str = DEFAULT_PIXIV_API_URL
    name: str = "pixiv"
    timeout: httpx.Timeout = attrs.field(factory=source_timeout)
    session: str = attrs.field(default="", repr=False)
    animations: bool = attrs.field(factory=ugoira.available)
    _warned: bool = attrs.field(default=False, init=False)

    async def fetch(self, link: Link) -> Post:
        """The work behind `link`, every page in order (an ugoira: its animation).

        Raises:
            PostUnavailable: deleted, R-18 or My pixiv without a login that pixiv
                took, an ugoira without ffmpeg, needs a login.
            TransientFetch: pixiv is down or slow.
            FetchError: an answer we cannot read.
        """
        work_id = link.post_id or ""
        if not work_id.isdigit():
            raise UnsupportedLink(N_("That is not a link to a pixiv work."))
        base = f"{self.base_url.rstrip('/')}/ajax/illust/{work_id}"
        try:
            work = parse_work(await self._get(base), work_id=work_id)
        except PostUnavailable as exc:
            if exc.reason in (R18, R18G_SENTENCE, LOGIN):
                self._signed_out()
            raise
        if work.animation:
            if not self.animations:
                raise PostUnavailable(UGOIRA)
            media: tuple[MediaItem, ...] = (
                parse_ugoira(await self._get(f"{base}/ugoira_meta"), work),
            )
        else:
            media = (work.first,) if work.first is not None else ()
            if work.page_count > 1:
                media = parse_pages(await self._get(f"{base}/pages"))
        if work.rating:
            self._warned = False  # the session works (again)
        return to_post(work, media)

    def _signed_out(self) -> None:
        """pixiv answered as to a visitor although the operator gave a session: one
        warning line (not one per link), naming the setting, never its value."""
        if not self.session or self._warned:
            return
        self._warned = True
        log.warning(
            "pixiv answered as if signed out although XBOT_PIXIV_SESSION is set: the "
            "session expired or was signed out, or the account hides R-18 works; "
            "`xbot doctor` checks it"
        )

    async def _get(self, url: str) -> JsonAnswer:
        headers = {"User-Agent": USER_AGENT, "Referer": REFERER, "Accept": "application/json"}
        if self.session:
            headers["Cookie"] = f"PHPSESSID={self.session}"
        return await get_json(self._client, url, who="pixiv", headers=headers,
                              per_request=self.timeout)  # fmt: skip


# -- the operator's login ---------------------------------------------------------------

STATUS_PATH = "/touch/ajax/user/self/status"


@attrs.frozen
class SessionStatus:
    """What pixiv says of the operator's session (``/touch/ajax/user/self/status``).

    Attributes:
        signed_in: pixiv took the session (``is_logged_in``).
        x_restrict: what the account chose to see (``user_x_restrict``): 0 all ages
            only, 1 R-18 too, 2 R-18G too (pixiv's account setting; 0 when signed out).
    """

    signed_in: bool
    x_restrict: int = 0


def parse_status(answer: JsonAnswer) -> SessionStatus:
    """The session's status; a 401/403 or a signed-out answer is not signed in.

    Raises:
        FetchError: an answer we cannot read.
    """
    if answer.status in (401, 403):
        return SessionStatus(signed_in=False)
    status = obj(obj(obj(answer.body).get("body")).get("user_status"))
    if answer.status != 200 or "is_logged_in" not in status:
        raise FetchError(MALFORMED)
    if status.get("is_logged_in") is not True:
        return SessionStatus(signed_in=False)
    # A string ("0", "1", "2") as pixiv sends it; a number is read as well.
    raw = status.get("user_x_restrict", "0")
    restrict = count(int(raw) if isinstance(raw, str) and raw.isdigit() else raw) or 0
    return SessionStatus(signed_in=True, x_restrict=min(restrict, 2))


async def session_status(client: httpx.AsyncClient, base_url: str, session: str) -> SessionStatus:
    """Ask pixiv whether `session` is signed in and what it may see (the doctor's check).

    Raises:
        TransientFetch: pixiv is down or slow.
        FetchError: an answer we cannot read.
    """
    headers = {"User-Agent": USER_AGENT, "Referer": REFERER, "Accept": "application/json",
               "Cookie": f"PHPSESSID={session}"}  # fmt: skip
    url = f"{base_url.rstrip('/')}{STATUS_PATH}"
    answer = await get_json(client, url, who="pixiv", headers=headers,
                            per_request=source_timeout())  # fmt: skip
    return parse_status(answer)
