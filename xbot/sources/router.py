"""Which source serves a link: one table, by the link's kind, built in `xbot.app`.

    SourceRouter({"x": x_chain, "bsky": bluesky, ...})

The kinds are the names of the sites in `xbot.links.SITES` (and ``gallery``, for
gallery-dl). A new site is its entry there (its recogniser and `Site` value, in a
module of `xbot.links`), its `PostSource` (a module here), and that source in
`xbot.app.source_table` under the site's name; README, "Adding a site". A kind
with no source is `UnsupportedLink`, the same answer as a link nothing can fetch.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from xbot.errors import UnsupportedLink
from xbot.i18n import N_
from xbot.links import Link
from xbot.media.models import Post
from xbot.sources.base import PostSource

__all__ = ["SourceRouter"]


@attrs.define
class SourceRouter:
    """A `PostSource` that hands each link to the source of its kind.

    Attributes:
        by_kind: link kind (a site's name: ``x``, ...) → the source that serves it.
    """

    by_kind: Mapping[str, PostSource]
    name: str = "router"

    def source_for(self, link: Link) -> PostSource | None:
        return self.by_kind.get(link.kind)

    def serves(self, link: Link) -> bool:
        return link.kind in self.by_kind

    async def resolve(self, link: Link) -> Link:
        """`link` under its final cache key, when its source knows a better one
        (Bluesky: a handle becomes its DID, so every spelling shares one key)."""
        resolve = getattr(self.source_for(link), "resolve", None)
        return link if resolve is None else await resolve(link)

    async def fetch(self, link: Link) -> Post:
        source = self.source_for(link)
        if source is None:
            raise UnsupportedLink(N_("I cannot fetch anything from that link."))
        return await source.fetch(link)
