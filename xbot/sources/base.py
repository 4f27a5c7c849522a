"""What a post source is: something that turns a `Link` into a `Post`.

    class PostSource(Protocol):
        name: str
        async def fetch(self, link: Link) -> Post

A source raises xbot's own errors, and only these:

- `PostUnavailable`: a definite answer (private, deleted, never there); its
  ``reason`` is the sentence the chat reads. Another source would say the same.
- `TransientFetch`: the source is down or flaky (timeouts, 5xx, 429); the
  next source of a chain may be asked, and the task is retried.
- `UnsupportedLink`: this source does not serve this link.
- any other `FetchError`: junk (an answer that is not a post); permanent.

Sources are composed in `xbot.app` through constructors; single-flight and
the link cache sit in front of them (`xbot.tasks.outbox`), never inside one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from xbot.links import Link
    from xbot.media.models import Post

__all__ = ["PostSource"]


@runtime_checkable
class PostSource(Protocol):
    """Fetches the post a link names. See the module docstring for what it raises."""

    name: str

    async def fetch(self, link: Link) -> Post: ...
