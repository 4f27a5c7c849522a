"""Local stand-ins for what xbot talks to, for the tests, the demo, bench/ and the soak.

This is their face: the tests and bench/ import from here, never from a ``_private``
module (tests/test_layers.py holds that). It lives beside `xbot`, not in it: the bot
never imports it; only `xbot demo` does.

The servers, each speaking real HTTP on 127.0.0.1:

- `BotApiServer`: the Telegram Bot API as PTB 22 uses it (records every call; floods,
  outages and privacy modes on request).
- `FxApiServer`: the fxtwitter-compatible status API, with fault injection.
- `VxApiServer`, `SyndicationServer`: the two X fallbacks, mirroring the fxtwitter
  stand-in's posts in their own shapes.
- `MediaServer`: a media host that can also stall, reset, lie and redirect.
- `BskyApiServer`: Bluesky's public AppView, PLC directory and a PDS's blobs.
- `PixivServer`: pixiv's ajax API and image host, which refuses a missing Referer.
- `MastodonServer`, `BooruServer`: sites gallery-dl reads (the bot runs it as a process).

Each runs on its own thread and event loop, starts from sync code
(``with Server() as s``) or async code (``async with Server() as s``), binds
127.0.0.1 on a free port by default (``s.url``, ``s.port``), and closes every
connection when stopped. Each also runs as ``python -m standins.<module>``.

Beside them: `Harness` (the real bot wired to all of them), `SyncQueue` (the task
queue for sync code and other processes), the bytes of media (`tiny_jpeg`,
`fake_mp4`, `big`, ...), Telegram's text rules (`parse_html`, `utf16_len`,
`auto_entities`, ...), its flood limits (`TelegramLimits`) and what the Bot API's
wire format needs (`decode_params`, `form_params`, `MultipartReader`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from standins._mediabytes import (
        Blob,
        big,
        bomb,
        fake_mp4,
        image_size,
        looks_like_mp4,
        tiny_jpeg,
    )
    from standins._outage import OUTAGES, Outages
    from standins._tgtext import (
        EntityParseError,
        auto_entities,
        parse_html,
        rendered_text,
        utf16_len,
    )
    from standins.botapi import (
        COUNTED_METHODS,
        DEFAULT_TOKEN,
        SEND_METHODS,
        Admission,
        ApiError,
        BotApiServer,
        Call,
        ChatInfo,
        EarlyRequest,
        InlineAnswer,
        MultipartReader,
        StoredFile,
        TelegramLimits,
        decode_params,
        form_params,
        ideal_makespan,
        retry_after_seconds,
        text_of,
        topic_of,
    )
    from standins.bskyapi import BskyApiServer
    from standins.fxapi import FAULTS, FxApiServer, build_status
    from standins.gallery_sites import BooruServer, MastodonServer
    from standins.harness import Harness
    from standins.media_server import MediaServer
    from standins.pixivapi import PixivServer
    from standins.queue_sync import SyncQueue
    from standins.syndication import SyndicationServer
    from standins.vxapi import VxApiServer

# Loaded on first use, so that ``python -m standins.fxapi`` does not import its own
# module twice (once through this package, once as __main__), and a test that needs
# only a JPEG's bytes does not load a server.
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
    "InlineAnswer": "botapi",
    "COUNTED_METHODS": "botapi",
    "Admission": "botapi",
    "TelegramLimits": "botapi",
    "ideal_makespan": "botapi",
    "topic_of": "botapi",
    "decode_params": "botapi",
    "form_params": "botapi",
    "text_of": "botapi",
    "MultipartReader": "botapi",
    "EntityParseError": "_tgtext",
    "auto_entities": "_tgtext",
    "parse_html": "_tgtext",
    "rendered_text": "_tgtext",
    "utf16_len": "_tgtext",
    "OUTAGES": "_outage",
    "Outages": "_outage",
    "FAULTS": "fxapi",
    "FxApiServer": "fxapi",
    "build_status": "fxapi",
    "VxApiServer": "vxapi",
    "SyndicationServer": "syndication",
    "MediaServer": "media_server",
    "Blob": "_mediabytes",
    "big": "_mediabytes",
    "bomb": "_mediabytes",
    "fake_mp4": "_mediabytes",
    "image_size": "_mediabytes",
    "looks_like_mp4": "_mediabytes",
    "tiny_jpeg": "_mediabytes",
    "BskyApiServer": "bskyapi",
    "PixivServer": "pixivapi",
    "MastodonServer": "gallery_sites",
    "BooruServer": "gallery_sites",
    "Harness": "harness",
    "SyncQueue": "queue_sync",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'standins' has no attribute {name!r}")
    return getattr(importlib.import_module(f"standins.{home}"), name)


__all__ = [
    "COUNTED_METHODS",
    "DEFAULT_TOKEN",
    "FAULTS",
    "OUTAGES",
    "SEND_METHODS",
    "Admission",
    "ApiError",
    "Blob",
    "BooruServer",
    "BotApiServer",
    "BskyApiServer",
    "Call",
    "ChatInfo",
    "EarlyRequest",
    "EntityParseError",
    "FxApiServer",
    "Harness",
    "InlineAnswer",
    "MastodonServer",
    "MediaServer",
    "MultipartReader",
    "Outages",
    "PixivServer",
    "StoredFile",
    "SyncQueue",
    "SyndicationServer",
    "TelegramLimits",
    "VxApiServer",
    "auto_entities",
    "big",
    "bomb",
    "build_status",
    "decode_params",
    "fake_mp4",
    "form_params",
    "ideal_makespan",
    "image_size",
    "looks_like_mp4",
    "parse_html",
    "rendered_text",
    "retry_after_seconds",
    "text_of",
    "tiny_jpeg",
    "topic_of",
    "utf16_len",
]
