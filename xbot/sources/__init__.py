"""Post sources: each turns a `Link` into a `Post` (`PostSource`), composed in `xbot.app`.

- `xbot.sources.base`: the protocol and what a source may raise.
- `xbot.sources.x`: the fxtwitter-compatible API.
- `xbot.sources.ytdlp`: other sites through yt-dlp (extraction here; the
  download is a job `xbot.tasks.other_sites` drives, behind the same outbox).
- `xbot.sources.router`: which source serves a post link, by its kind.
- `xbot.sources.x.chain`: X as a chain of sources (fxtwitter, then `vx_api`, then
  `syndication`), each behind its circuit breaker (`breaker`).
"""

from __future__ import annotations

from xbot.sources.base import PostSource
from xbot.sources.router import SourceRouter
from xbot.sources.x.fxtwitter import XApiSource
from xbot.sources.ytdlp import YtdlpSource

__all__ = ["PostSource", "SourceRouter", "XApiSource", "YtdlpSource"]
