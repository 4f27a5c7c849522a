"""The one interface every source of posts implements.

A source answers a `Link` with a `Post`, or raises from `xbot.errors`:

- `PostUnavailable`: a definite answer (private, deleted, suspended, not found);
- `TransientFetch`: the source is down or flaky; the next source may answer;
- any other `FetchError`: the answer was junk.
"""

from __future__ import annotations

from typing import Protocol

from xbot.links import Link
from xbot.media.models import Post


class PostSource(Protocol):
    """Something that turns a link into a post.

    Attributes:
        name: a short word for logs, ``/stats`` and ``xbot doctor`` (``fxtwitter``).
    """

    name: str

    async def fetch(self, link: Link) -> Post: ...
