"""X posts, from an ordered chain of X sources: what the rest of xbot uses of them.

The parts, each owning one thing (they import each other's public names only):

- `chain`: the chain's decisions: which source is asked, when the next one is
  asked as well, what a failure says about the post or about the source.
- `breaker`: each source's circuit breaker and the health record `/stats` reads.
- `fxtwitter` (the client), `fxtwitter_status` and `fxtwitter_article` (its
  parser): the first source, an fxtwitter-compatible API.
- `vxtwitter`, `syndication`: the two fallback sources, each its client and its
  parser; `fallback`: what those two share (reading a status code, building the post).
- `status`: what every X source answers with: the reasons a post cannot be had,
  ids, handles and links, and the rules a post's media follow.
- `tco`: where a t.co short link leads.
"""

from __future__ import annotations

from xbot.sources.x.breaker import BreakerPolicy
from xbot.sources.x.chain import DOWN, PROBE_POST, SourceChain, probe, x_sources
from xbot.sources.x.fxtwitter import XApi, XApiSource
from xbot.sources.x.status import (
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
from xbot.sources.x.syndication import Syndication
from xbot.sources.x.tco import expand_tco
from xbot.sources.x.vxtwitter import VxApi

__all__ = [
    "AGE_GATED",
    "BLOCKED",
    "DELETED",
    "DOWN",
    "PRIVATE",
    "PROBE_POST",
    "SUSPENDED",
    "UNAVAILABLE",
    "WITHHELD",
    "BreakerPolicy",
    "SourceChain",
    "Syndication",
    "VxApi",
    "XApi",
    "XApiSource",
    "card_link",
    "choose_variant",
    "expand_tco",
    "probe",
    "with_quote_media",
    "x_sources",
]
