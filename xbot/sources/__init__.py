"""Post sources: each turns a `Link` into a `Post` (`PostSource`), composed in `xbot.app`.

- `xbot.sources.base`: the protocol and what a source may raise.
- `xbot.sources.x`: X posts, from a chain of X sources (fxtwitter, then
  vxtwitter, then syndication), each behind its circuit breaker; a package
  whose `__init__` is all the rest of xbot uses of it.
- `xbot.sources.ytdlp`: other sites through yt-dlp (extraction here; the
  download is a job `xbot.tasks.other_sites` drives, behind the same outbox).
- `xbot.sources.router`: which source serves a post link, by its kind.
"""

from __future__ import annotations

from xbot.sources.base import PostSource
from xbot.sources.router import SourceRouter
from xbot.sources.x import XApiSource
from xbot.sources.ytdlp import YtdlpSource

__all__ = ["PostSource", "SourceRouter", "XApiSource", "YtdlpSource"]
