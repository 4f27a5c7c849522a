"""Local stand-ins for what xbot talks to, for tests, the demo and the soak harness.

- `BotApiServer`: the Telegram Bot API as PTB 22 uses it (real HTTP on 127.0.0.1).
- `FxApiServer`: the fxtwitter-compatible status API, with fault injection.
- `MediaServer`: a media host that can also stall, reset, lie and redirect.
- `BskyApiServer`: Bluesky's public AppView, PLC directory and a PDS's blobs.
- `PixivServer`: pixiv's ajax API and image host, which refuses a missing Referer.

Each runs on its own thread and event loop, starts from sync code
(``with Server() as s``) or async code (``async with Server() as s``), binds
127.0.0.1 on a free port by default (``s.url``, ``s.port``), and closes every
connection when stopped. Each also runs as ``python -m standins.<module>``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from standins.botapi import (
        DEFAULT_TOKEN,
        SEND_METHODS,
        ApiError,
        BotApiServer,
        Call,
        ChatInfo,
        EarlyRequest,
        StoredFile,
        retry_after_seconds,
    )
    from standins.bskyapi import BskyApiServer
    from standins.fxapi import FAULTS, FxApiServer, build_status
    from standins.media_server import (
        Blob,
        MediaServer,
        big,
        fake_mp4,
        image_size,
        looks_like_mp4,
        tiny_jpeg,
    )
    from standins.pixivapi import PixivServer

# Loaded on first use, so that ``python -m standins.botapi`` does not import its
# own module twice (once through this package, once as __main__).
_HOMES = {
    "DEFAULT_TOKEN": "botapi",
    "SEND_METHODS": "botapi",
    "ApiError": "botapi",
    "BotApiServer": "botapi",
    "Call": "botapi",
    "ChatInfo": "botapi",
    "EarlyRequest": "botapi",
    "StoredFile": "botapi",
    "retry_after_seconds": "botapi",
    "BskyApiServer": "bskyapi",
    "PixivServer": "pixivapi",
    "FAULTS": "fxapi",
    "FxApiServer": "fxapi",
    "build_status": "fxapi",
    "Blob": "media_server",
    "MediaServer": "media_server",
    "big": "media_server",
    "fake_mp4": "media_server",
    "image_size": "media_server",
    "looks_like_mp4": "media_server",
    "tiny_jpeg": "media_server",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'standins' has no attribute {name!r}")
    return getattr(importlib.import_module(f"standins.{home}"), name)


__all__ = [
    "DEFAULT_TOKEN",
    "FAULTS",
    "SEND_METHODS",
    "ApiError",
    "Blob",
    "BotApiServer",
    "BskyApiServer",
    "Call",
    "ChatInfo",
    "EarlyRequest",
    "FxApiServer",
    "MediaServer",
    "PixivServer",
    "StoredFile",
    "big",
    "build_status",
    "fake_mp4",
    "image_size",
    "looks_like_mp4",
    "retry_after_seconds",
    "tiny_jpeg",
]
