"""X posts through an fxtwitter-compatible JSON API: the client and its `PostSource`.

`XApi` is the thin shell that does the HTTP; what it reads out of an answer is
`xbot.sources.x._fxtwitter_status.parse_status` (pure). The API's base URL is the
operator's ``XBOT_X_API_URL``: trusted as configured, so its client does not go
through the SSRF guard. The media URLs it returns are untrusted and are
downloaded through the guarded client.

Callers treat a bare `FetchError` as permanent and `TransientFetch` as worth
a retry.
"""

from __future__ import annotations

import attrs
import httpx

from xbot.errors import FetchError, PostUnavailable, TransientFetch
from xbot.i18n import N_
from xbot.links import Link
from xbot.media.models import Post
from xbot.sources.jsonget import USER_AGENT, get_json, source_timeout
from xbot.sources.x._fxtwitter_status import API_TROUBLE, MALFORMED, NOT_ANSWERING, parse_status
from xbot.sources.x._status import DELETED, PRIVATE, post_id_of, status_url

__all__ = ["XApi", "XApiSource"]


class _NotRouted(Exception):
    """The API has no such route (a 404 whose body is no status answer)."""


# The statuses whose body may name the reason; any other is judged by its code alone.
_READ = frozenset({200, 401, 403, 404, 410, 500, 503})


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
