"""t.co short links, expanded by asking t.co itself where one leads."""

from __future__ import annotations

import httpx

from xbot.errors import TransientFetch, UnsupportedLink
from xbot.i18n import N_
from xbot.media.download import http_error

__all__ = ["expand_tco"]

_REDIRECTS = (301, 302, 303, 307, 308)


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
