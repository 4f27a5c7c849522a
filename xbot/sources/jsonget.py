"""The one capped JSON GET every source of JSON uses (the X sources, each other
site's); httpx's errors become ours here, through
`xbot.media.download.http_error`, once.

The status code is handed back with the decoded body rather than judged here:
each API says "not found" or "needs a login" in its own words, and its source
module reads them. What is decided here, for all of them: a `check` of the
status before the body is read (the default: 408, 429 and 5xx are
`TransientFetch`), the cap on the body, and what a body that is not JSON means.

The cap counts decoded bytes as they are produced: the body is read raw and
decoded in bounded steps (`xbot.media.decoding`; httpx would inflate each
network read whole first), so a gzip bomb posing as an answer is refused
after `MAX_BODY` bytes of work. JSON compresses well: gzip and deflate are
asked for, and nothing else is accepted.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import httpx

from xbot import __version__
from xbot.errors import FetchError, TransientFetch, XbotError
from xbot.i18n import N_, reason_template
from xbot.media.decoding import ACCEPT_JSON
from xbot.media.download import decoded, http_error

MAX_BODY = 4 * 1024 * 1024  # a post or a work is a few KiB; a 200-page work some 100 KiB
# Who we are, to every source and media host (the app's clients send it); pixiv's
# ajax wants it inside a browser's shape (`xbot.sources.pixiv`).
USER_AGENT = f"xbot/{__version__} (Telegram bot)"
_MAX_INT = 2**63


def source_timeout() -> httpx.Timeout:
    """The one timeout policy of the sources: 5 s to connect, 15 s for each read, write
    and pool wait. The X chain cuts each of its sources off sooner, at its `deadline`."""
    return httpx.Timeout(15.0, connect=5.0)


StatusCheck = Callable[[int], bool]
"""Told the status before the body is read: may raise, else says whether to read the body."""

TROUBLE = reason_template(N_("{who} is having trouble; I will try again."))
UNREADABLE = reason_template(N_("{who} sent an answer I could not read."))


@attrs.frozen
class JsonAnswer:
    """What came back: the HTTP status and the decoded body (None when it was not JSON)."""

    status: int
    body: object


def transient_on_trouble(who: str) -> StatusCheck:
    """The default check: 408, 429 and 5xx are `TransientFetch`; every body is read."""

    def check(status: int) -> bool:
        if status in (408, 429) or status >= 500:
            raise TransientFetch(TROUBLE.format(who=who))
        return True

    return check


async def get_json(
    client: httpx.AsyncClient,
    url: str,
    *,
    who: str,
    params: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
    per_request: httpx.Timeout | None = None,
    max_body: int = MAX_BODY,
    check: StatusCheck | None = None,
    too_large: str | None = None,
    not_json: XbotError | None = None,
) -> JsonAnswer:
    """GET `url`; `check` (default `transient_on_trouble`) judges the status first.

    `who` names the other side in the sentence a user may read ("Bluesky").
    A body `check` declines to read comes back as None. A body over `max_body`
    is a `FetchError` (`too_large`, by default "{who} sent an answer I could not
    read."); a 200 whose body is not JSON raises `not_json` when given, else its
    body is None.
    """
    judge = check if check is not None else transient_on_trouble(who)
    sent = httpx.Headers(headers)
    sent["Accept-Encoding"] = ACCEPT_JSON
    try:
        async with client.stream(
            "GET", url, params=params, headers=sent,
            timeout=per_request if per_request is not None else httpx.USE_CLIENT_DEFAULT,
        ) as response:  # fmt: skip
            status = response.status_code
            if not judge(status):
                return JsonAnswer(status, None)
            raw = bytearray()
            async with contextlib.aclosing(decoded(response, who=who)) as pieces:
                async for piece in pieces:
                    raw += piece
                    if len(raw) > max_body:
                        raise FetchError(too_large or UNREADABLE.format(who=who))
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        raise http_error(exc, who) from exc
    try:
        body: object = json.loads(bytes(raw))
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        if status == 200 and not_json is not None:
            raise not_json from exc
        body = None
    return JsonAnswer(status, body)


# -- reading loose JSON -------------------------------------------------------------


def text(value: object) -> str:
    return value if isinstance(value, str) else ""


def count(value: object) -> int | None:
    """A non-negative int from JSON, or None (bools, strings, NaN, absurd sizes)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 0 <= value < _MAX_INT else None
    if isinstance(value, float) and math.isfinite(value) and 0 <= value < _MAX_INT:
        return int(value)
    return None


def obj(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def objs(value: object) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def web_url(value: object) -> str:
    """An http(s) URL, else "": a payload could name file:, data: or javascript: "media"."""
    url = text(value)
    return url if url.startswith(("https://", "http://")) else ""
