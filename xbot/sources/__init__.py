"""Post sources: each turns a `Link` into a `Post` (`PostSource`), composed in `xbot.app`.

- `xbot.sources.base`: the protocol and what a source may raise.
- `xbot.sources.router`: which source serves a post link, by its kind (a site's
  name, `xbot.links.SITES`); its table is built in `xbot.app.source_table`.
- One source per site: `xbot.sources.x` (X posts, from a chain of X sources,
  each behind its circuit breaker), `xbot.sources.bsky`, `xbot.sources.pixiv`.
- Other sites: `xbot.sources.gallerydl` (image posts, gallery-dl as a process)
  and `xbot.sources.ytdlp` (video, yt-dlp in a thread; the download is a job
  `xbot.tasks.other_sites` drives), in the order `xbot.sources.other_route` picks.
- Shared: `xbot.sources.jsonget` (the one JSON GET), `xbot.sources.canary`.

A package (`x`, `ytdlp`, `gallerydl`) is used through its `__init__` only.
"""

from __future__ import annotations

from xbot.sources.base import PostSource
from xbot.sources.router import SourceRouter
from xbot.sources.x import XApiSource
from xbot.sources.ytdlp import YtdlpSource

__all__ = ["PostSource", "SourceRouter", "XApiSource", "YtdlpSource"]
