"""X posts: the fallback chain of X sources and its parts."""

from __future__ import annotations

from xbot.sources.x.fxtwitter import XApiSource

__all__ = ["XApiSource"]
