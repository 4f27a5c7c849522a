"""One JSON GET for the fallback sources, its status code classified once.

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

import json

import attrs
import httpx

from xbot import __version__
from xbot.errors import FetchError, PostUnavailable, TransientFetch
from xbot.i18n import N_, reason_template
from xbot.media.download import http_error
from xbot.sources.x_api import DELETED

USER_AGENT = f"xbot/{__version__} (Telegram bot)"
# `who` (a source's name, a msgid where it is not a name) fills these; translated with them.
TOO_LARGE = reason_template(N_("{who} sent an answer far too large for a post."))
A_PAGE = reason_template(N_("{who} answered with a page instead of data."))
TROUBLE = reason_template(N_("{who} is having trouble."))
UNREADABLE = reason_template(N_("{who} answered in a way I could not read (HTTP {status})."))


def default_timeout() -> httpx.Timeout:
    return httpx.Timeout(10.0, connect=5.0)


@attrs.frozen
class JsonAnswer:
    """A decoded answer and its status (a 404 may carry a JSON reason worth reading)."""

    status: int
    data: object


async def get_json(
    client: httpx.AsyncClient,
    url: str,
    *,
    who: str,
    timeout: httpx.Timeout,  # noqa: ASYNC109 - httpx's per-request timeouts, not a deadline
    max_body: int = 2 * 1024 * 1024,
    params: dict[str, str] | None = None,
    read_statuses: tuple[int, ...] = (),
) -> JsonAnswer:
    """GET `url` and decode its JSON; `read_statuses` are returned (decoded) instead of raised.

    Raises:
        PostUnavailable, TransientFetch, FetchError: as the table above says.
    """
    headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
    try:
        async with client.stream(
            "GET", url, params=params, headers=headers, timeout=timeout
        ) as response:
            status = response.status_code
            if status not in read_statuses:
                _raise_for(status, who)
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > max_body:
                    raise FetchError(TOO_LARGE.format(who=_cap(who)))
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        raise http_error(exc, who) from exc
    try:
        data = json.loads(bytes(body))
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        if status in read_statuses:
            return JsonAnswer(status, None)
        # A 200 that is not the JSON promised: an error page, a captcha, a half-
        # deployed server. It says nothing about the post; it says the source is unwell.
        raise TransientFetch(A_PAGE.format(who=_cap(who))) from exc
    return JsonAnswer(status, data)


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
