"""X posts, from an ordered chain of X sources: the package's one public face.

Import every name from here. Inside, each private module owns one thing and
reaches the others by their public names only:

- `_chain`: the chain's decisions: which source is asked, when the next one is
  asked as well, what a failure says about the post or about the source.
- `_breaker`: each source's circuit breaker (pure), and the health record
  `/stats` and `xbot doctor` read.
- `_fxtwitter` (the client, and it as a `PostSource`), `_fxtwitter_status` and
  `_fxtwitter_article` (its parser): the first source, an fxtwitter-compatible API.
- `_vxtwitter`, `_syndication`: the two fallback sources, each its client and
  its parser; `_fallback`: what those two share (reading a status code,
  building the post).
- `_status`: what every X source answers with: the reasons a post cannot be
  had, ids, handles and links, and the rules a post's media follow.
- `_tco`: where a t.co short link leads.

The chain's log lines (a breaker opened or closed) come from the logger
``xbot.sources.x``.
"""

from __future__ import annotations

from xbot.sources.x._breaker import (
    BreakerPolicy,
    BreakerState,
    SourceHealth,
    Verdict,
    admit,
    failed,
    succeeded,
)
from xbot.sources.x._chain import (
    DOWN,
    PROBE_POST,
    ProbeResult,
    SourceChain,
    SourceReport,
    probe,
    snowflake_time,
    x_sources,
)
from xbot.sources.x._fallback import orig_photo
from xbot.sources.x._fxtwitter import XApi, XApiSource
from xbot.sources.x._fxtwitter_article import article_body
from xbot.sources.x._fxtwitter_status import API_TROUBLE, MALFORMED, NOT_ANSWERING, parse_status
from xbot.sources.x._status import (
    AGE_GATED,
    BLOCKED,
    DELETED,
    PRIVATE,
    SUSPENDED,
    UNAVAILABLE,
    WITHHELD,
    card_link,
    choose_variant,
    with_quote_media,
)
from xbot.sources.x._syndication import Syndication, js_radix36, parse_syndication, token
from xbot.sources.x._tco import expand_tco
from xbot.sources.x._vxtwitter import VxApi, parse_vx

__all__ = [
    "AGE_GATED",
    "API_TROUBLE",
    "BLOCKED",
    "DELETED",
    "DOWN",
    "MALFORMED",
    "NOT_ANSWERING",
    "PRIVATE",
    "PROBE_POST",
    "SUSPENDED",
    "UNAVAILABLE",
    "WITHHELD",
    "BreakerPolicy",
    "BreakerState",
    "ProbeResult",
    "SourceChain",
    "SourceHealth",
    "SourceReport",
    "Syndication",
    "Verdict",
    "VxApi",
    "XApi",
    "XApiSource",
    "admit",
    "article_body",
    "card_link",
    "choose_variant",
    "expand_tco",
    "failed",
    "js_radix36",
    "orig_photo",
    "parse_status",
    "parse_syndication",
    "parse_vx",
    "probe",
    "snowflake_time",
    "succeeded",
    "token",
    "with_quote_media",
    "x_sources",
]
