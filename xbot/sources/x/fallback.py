"""How the X fallback sources (vxtwitter, syndication) read a status code, over
`xbot.sources.jsonget.get_json`, the one JSON GET.

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

import httpx

from xbot.errors import FetchError, PostUnavailable, TransientFetch
from xbot.i18n import N_, reason_template
from xbot.sources.jsonget import USER_AGENT, JsonAnswer, get_json
from xbot.sources.x.fxtwitter import DELETED

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
