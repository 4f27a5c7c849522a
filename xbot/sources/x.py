"""The fxtwitter-compatible API (`xbot.sources.x_api.XApi`) as a `PostSource`."""

from __future__ import annotations

import attrs

from xbot.errors import UnsupportedLink
from xbot.i18n import N_
from xbot.links import Link
from xbot.media.models import Post
from xbot.sources.x_api import XApi

__all__ = ["XApiSource"]


@attrs.define
class XApiSource:
    """X posts through an fxtwitter-compatible JSON API.

    Attributes:
        api: the client (its base URL is the operator's ``XBOT_X_API_URL``).
        name: for logs and /debug.
    """

    api: XApi
    name: str = "fxtwitter"

    async def fetch(self, link: Link) -> Post:
        if link.post_id is None:
            raise UnsupportedLink(N_("That is not a link to a post."))
        return await self.api.fetch(link.post_id, link.handle)
