"""X posts through an fxtwitter-compatible JSON API, and t.co expansion.

`XApi` is the thin shell that does the HTTP; what it reads out of an answer is
`xbot.sources.x.fxtwitter_status.parse_status` (pure, re-exported here with the reasons it
gives). `choose_variant` is pure too: it picks the video encoding to send (the
ranking and the size estimate live in `xbot.sending.video_choice`). The API's
base URL is the operator's ``XBOT_X_API_URL``: trusted as configured, so its
client does not go through the SSRF guard. The media URLs it returns are
untrusted and are downloaded through the guarded client.

Callers treat a bare `FetchError` as permanent and `TransientFetch` as worth
a retry.
"""

from __future__ import annotations

import attrs
import httpx

from xbot.errors import FetchError, PostUnavailable, TransientFetch, UnsupportedLink
from xbot.i18n import N_
from xbot.links import Link, classify
from xbot.media.download import http_error
from xbot.media.models import MediaItem, Post, Variant
from xbot.sending import video_choice
from xbot.sources.jsonget import USER_AGENT, get_json, source_timeout
from xbot.sources.x.fxtwitter_status import (
    AGE_GATED,
    API_TROUBLE,
    BLOCKED,
    DELETED,
    HANDLE,
    MALFORMED,
    MAX_ALBUM,
    NOT_ANSWERING,
    POST_ID,
    PRIVATE,
    PROTECTED,
    SUSPENDED,
    UNAVAILABLE,
    WITHHELD,
    album_kinds,
    canonical_url,
    parse_status,
    tombstone_reason,
    with_quote_media,
)

# The parsing's names, with the client: what callers of the X API use, from one place.
__all__ = [
    "AGE_GATED",
    "API_TROUBLE",
    "BLOCKED",
    "DELETED",
    "MALFORMED",
    "MAX_ALBUM",
    "NOT_ANSWERING",
    "PRIVATE",
    "PROTECTED",
    "SUSPENDED",
    "UNAVAILABLE",
    "WITHHELD",
    "XApi",
    "XApiSource",
    "album_kinds",
    "canonical_url",
    "card_link",
    "choose_variant",
    "expand_tco",
    "parse_status",
    "post_id_of",
    "status_url",
    "tombstone_reason",
    "with_quote_media",
]


def card_link(post: Post) -> Link | None:
    """The post's external card (a YouTube video, say) as a link for the other-sites path.

    None without a card, or when the card leads back to X (a quoted post's card).
    """
    if not post.card_url:
        return None
    link = classify(post.card_url)
    return link if link is not None and link.kind == "other" else None


# -- choosing a video encoding ----------------------------------------------------


def choose_variant(item: MediaItem, max_bytes: int) -> Variant | None:
    """The highest-ranked encoding whose size (known or estimated) fits `max_bytes`, or None.

    The ranking and the estimate are `xbot.sending.video_choice`'s: H.264 before
    HEVC, mp4 before other containers, never an HLS playlist; a variant of
    unknown size is admitted (the download cap still holds).
    """
    pick = video_choice.best_for(item, max_bytes)
    return None if pick is None else pick.variant


# -- the HTTP shell ------------------------------------------------------------------


class _NotRouted(Exception):
    """The API has no such route (a 404 whose body is no status answer)."""


# The statuses whose body may name the reason; any other is judged by its code alone.
_READ = frozenset({200, 401, 403, 404, 410, 500, 503})
_REDIRECTS = (301, 302, 303, 307, 308)


def post_id_of(link: Link) -> str:
    """The id of the post `link` names, for the X sources; a profile link is refused."""
    if link.post_id is None:
        raise UnsupportedLink(N_("That is not a link to a post."))
    return link.post_id


def status_url(base_url: str, post_id: str, handle: str | None) -> str:
    """``{base}/{handle}/status/{id}``: the route fxtwitter and vxtwitter answer alike."""
    if not POST_ID.fullmatch(post_id):
        raise UnsupportedLink(N_("That is not a link to a post."))
    # The handle goes into the path: anything but a plain handle becomes "i".
    path_handle = handle if handle and HANDLE.fullmatch(handle) else "i"
    return f"{base_url.rstrip('/')}/{path_handle}/status/{post_id}"


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
    user_agent: str = USER_AGENT
    timeout: httpx.Timeout = attrs.field(factory=source_timeout)
    max_body: int = 2 * 1024 * 1024

    def status_url(self, post_id: str, handle: str | None) -> str:
        return status_url(self.base_url, post_id, handle)

    async def fetch(self, post_id: str, handle: str | None = None) -> Post:
        """The post `post_id`, parsed.

        A 404 from v1 asks v2 (``/2/status/{id}``) once: v1 cannot say why a
        post is gone, v2 answers a tombstone with the reason (suspended,
        private, …) or the post itself. When v2 is not routed either (a
        compatible API without it), ``/status/{id}`` is the last try: some
        route only that form.

        Raises:
            PostUnavailable: private (401), deleted or missing (404), tombstoned.
            TransientFetch: 5xx, 429, timeouts, connection failures.
            UnsupportedLink: `post_id` is not a post id.
            FetchError: an answer that is not a readable status (HTML, garbage, too big).
        """
        url = self.status_url(post_id, handle)
        base = self.base_url.rstrip("/")
        try:
            return await self._status(url, post_id)
        except PostUnavailable as exc:
            if exc.reason != DELETED:
                raise
            first = exc
        try:
            return await self._status(f"{base}/2/status/{post_id}", post_id, v2=True)
        except PostUnavailable as exc:
            if exc.reason != DELETED:
                raise
        except _NotRouted:
            pass
        except TransientFetch:
            raise first from None  # v1 said deleted; a v2 hiccup does not change that
        try:
            return await self._status(f"{base}/status/{post_id}", post_id)
        except TransientFetch:
            raise first from None

    async def _status(self, url: str, post_id: str, *, v2: bool = False) -> Post:
        """One status request, classified by its HTTP status and, when JSON, its body."""
        answer = await get_json(
            self._client, url, who=N_("the X API"), per_request=self.timeout,
            headers={"User-Agent": self.user_agent, "Accept": "application/json"},
            max_body=self.max_body, check=_READ.__contains__, too_large=MALFORMED,
            not_json=FetchError(MALFORMED),
        )  # fmt: skip
        status, data = answer.status, answer.body
        readable = isinstance(data, dict) and ("tweet" in data or "status" in data)
        if v2 and status == 404 and not readable:
            raise _NotRouted
        if status == 200:
            return parse_status(data, post_id=post_id)
        if readable:
            assert isinstance(data, dict)
            if data.get("code") in (None, 200):
                data = {**data, "code": status}
            return parse_status(data, post_id=post_id)  # raises: the body names the reason
        if status in (401, 403):
            # fxtwitter: 401 PRIVATE_TWEET. A 403 is the same refusal in other words.
            raise PostUnavailable(PRIVATE)
        if status in (404, 410):
            raise PostUnavailable(DELETED)
        if status == 503:
            raise TransientFetch(NOT_ANSWERING)
        if status in (408, 429) or status >= 500:
            raise TransientFetch(API_TROUBLE)
        raise FetchError(MALFORMED)


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
        raise UnsupportedLink(N_("That is not a t.co short link.")) from exc
    if parsed.scheme not in ("http", "https") or parsed.host != "t.co" or parsed.userinfo:
        raise UnsupportedLink(N_("That is not a t.co short link."))
    try:
        response = await client.head(parsed, follow_redirects=False)
        if response.status_code not in _REDIRECTS and response.status_code < 500:
            # Some servers refuse HEAD (405); ask again with GET and read only the head.
            async with client.stream("GET", parsed, follow_redirects=False) as response:
                pass
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        raise http_error(exc, "t.co") from exc
    if response.status_code >= 500 or response.status_code == 429:
        raise TransientFetch(N_("t.co is having trouble; I will try again."))
    location = response.headers.get("Location", "")
    if response.status_code not in _REDIRECTS or not location:
        raise UnsupportedLink(N_("This short link leads nowhere I can follow."))
    try:
        target = parsed.join(location)
    except httpx.InvalidURL as exc:
        raise UnsupportedLink(N_("This short link leads nowhere I can follow.")) from exc
    if target.scheme not in ("http", "https") or not target.host:
        raise UnsupportedLink(N_("This short link leads nowhere I can follow."))
    return str(target)


@attrs.define
class XApiSource:
    """X posts through an fxtwitter-compatible JSON API: `XApi` as a `PostSource`.

    Attributes:
        api: the client (its base URL is the operator's ``XBOT_X_API_URL``).
        name: for logs and /debug.
    """

    api: XApi
    name: str = "fxtwitter"

    async def fetch(self, link: Link) -> Post:
        return await self.api.fetch(post_id_of(link), link.handle)
