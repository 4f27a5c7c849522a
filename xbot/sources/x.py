"""The fxtwitter-compatible API (`xbot.sources.x_api.XApi`) as a `PostSource`."""

from __future__ import annotations

import attrs

from xbot.links import Link
from xbot.media.models import Post
from xbot.sources.x_api import XApi, post_id_of

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
        return await self.api.fetch(post_id_of(link), link.handle)
