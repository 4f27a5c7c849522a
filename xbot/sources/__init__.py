"""Post sources: each turns a `Link` into a `Post` (`PostSource`), composed in `xbot.app`.

- `xbot.sources.base`: the protocol and what a source may raise.
- `xbot.sources.x`: the fxtwitter-compatible API.
- `xbot.sources.router`: which source serves a link, by its kind.
"""

from __future__ import annotations

from xbot.sources.base import PostSource
from xbot.sources.router import SourceRouter
from xbot.sources.x import XApiSource

__all__ = ["PostSource", "SourceRouter", "XApiSource"]
