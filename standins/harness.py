"""The real bot wired to the local stand-ins: one object for tests, the demo and benchmarks.

Everything runs on 127.0.0.1: the Bot API stand-in (PTB talks real HTTP to
it), the fxtwitter-compatible API and a media server. The bot is the real
`xbot.runtime.Runtime`; only its endpoints point here.
"""

from __future__ import annotations

import asyncio
import html
import json
import struct
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from standins._mediabytes import fake_mp4, tiny_jpeg
from standins.botapi import BotApiServer
from standins.bskyapi import BskyApiServer
from standins.fxapi import FxApiServer
from standins.media_server import MediaServer
from standins.pixivapi import PixivServer
from standins.syndication import SyndicationServer
from standins.vxapi import VxApiServer
from xbot.config import Settings
from xbot.runtime import Runtime
from xbot.sending.pacing import Pacer
from xbot.services import Services


@attrs.define
class Harness:
    """Stand-ins plus one running bot on a data dir that survives `restart`.

    Attributes:
        api: the Bot API stand-in (records every call).
        fx: the fxtwitter-compatible API (a registry of posts).
        media: serves photos and videos, counting hits.
        vx, syn: the vxtwitter-compatible and syndication stand-ins, started with
            ``x_sources=True`` (else None, and the bot knows only fxtwitter).
        bsky: the Bluesky AppView, PLC directory and PDS stand-in.
        pixiv: the pixiv ajax and image host stand-in (with its Referer rule).
    """

    data_dir: Path
    api: BotApiServer
    fx: FxApiServer
    media: MediaServer
    settings: Settings
    pacer_enabled: bool = False
    clock: Callable[[], float] = time.time
    bot: Runtime | None = None
    # `Runtime` keywords beyond the settings (a scaled `TelegramHealth`, `telegram_budget`,
    # `read_timeout`): the outage tests make Telegram's hold take seconds.
    bot_options: dict[str, Any] = attrs.Factory(dict)
    vx: VxApiServer | None = None
    syn: SyndicationServer | None = None
    bsky: BskyApiServer = attrs.field(factory=BskyApiServer)
    pixiv: PixivServer = attrs.field(factory=PixivServer)

    @classmethod
    async def start(
        cls,
        data_dir: Path,
        *,
        allow_url_fetch: bool = True,
        pacer: bool = False,
        start_bot: bool = True,
        x_sources: bool = False,
        bot_options: Mapping[str, Any] | None = None,
        privacy_mode: bool = False,
        **overrides: Any,
    ) -> Harness:
        media = await MediaServer().start()
        fx = await FxApiServer().start()
        vx = await VxApiServer().start() if x_sources else None
        syn = await SyndicationServer().start() if x_sources else None
        bsky = await BskyApiServer().start()
        pixiv = await PixivServer().start()
        # Above the cloud's 50 MB the stand-in plays a local Bot API server (up to 2000 MB).
        limit_mb = max(50, int(overrides.get("upload_limit_mb", 50)))
        api = await BotApiServer(
            allow_url_fetch_from_loopback=allow_url_fetch,
            upload_limit=limit_mb * 1024 * 1024,
            privacy_mode=privacy_mode,
        ).start()
        values: dict[str, Any] = {
            "token": api.token,
            "bot_api_url": f"{api.url}/bot",
            "bot_api_file_url": f"{api.url}/file/bot",
            "x_api_url": fx.url,
            # Without x_sources the fallbacks are off: nothing leaves 127.0.0.1.
            "vx_api_url": vx.url if vx else "",
            "x_syndication_url": syn.url if syn else "",
            "bsky_api_url": bsky.url,
            "bsky_plc_url": bsky.plc_url,
            "pixiv_api_url": pixiv.url,
            "data_dir": data_dir,
            "allow_private_networks": True,
            "workers": 4,
        }
        values.update(overrides)
        harness = cls(data_dir, api, fx, media, Settings(**values), pacer_enabled=pacer,
                      vx=vx, syn=syn, bsky=bsky, pixiv=pixiv,
                      bot_options=dict(bot_options or {}))  # fmt: skip
        if start_bot:
            await harness.start_bot()
        return harness

    async def start_bot(self, **overrides: Any) -> Services:
        if overrides:
            self.settings = attrs.evolve(self.settings, **overrides)
        self.bot = Runtime(
            self.settings,
            clock=self.clock,
            pacer=Pacer(enabled=self.pacer_enabled),
            poll_timeout=1,
            **self.bot_options,
        )
        return await self.bot.start()

    @property
    def services(self) -> Services:
        assert self.bot is not None
        assert self.bot.services is not None
        return self.bot.services

    async def stop_bot(self) -> None:
        if self.bot is not None:
            await self.bot.stop()
            self.bot = None

    async def restart(self, **overrides: Any) -> Services:
        await self.stop_bot()
        return await self.start_bot(**overrides)

    async def stop(self) -> None:
        await self.stop_bot()
        await self.api.stop()
        await self.fx.stop()
        await self.media.stop()
        for source in (self.vx, self.syn):
            if source is not None:
                await source.stop()
        await self.bsky.stop()
        await self.pixiv.stop()

    # -- content ------------------------------------------------------------

    def add_post(self, post_id: str | int, **fx_arguments: Any) -> None:
        """One post on every X source stand-in that runs (the fxtwitter one's arguments)."""
        status = self.fx.add_post(post_id, **fx_arguments)
        for source in (self.vx, self.syn):
            if source is not None:
                source.add_status(status, post_id)

    def photo(self, name: str, *, data: bytes | None = None, **route: Any) -> str:
        """Serve a photo; returns its URL."""
        return self.media.add(f"/media/{name}.jpg", data or tiny_jpeg(), "image/jpeg", **route)

    def video(self, name: str, size: int = 64 * 1024, **route: Any) -> str:
        """Serve an mp4 of `size` bytes; returns its URL."""
        return self.media.add(f"/media/{name}.mp4", fake_mp4(size), "video/mp4", **route)

    def video_page(
        self,
        name: str,
        video_url: str,
        *,
        title: str = "A clip",
        json_ld: Mapping[str, Any] | None = None,
        **route: Any,
    ) -> str:
        """Serve an HTML page that embeds `video_url` (``<video src>``, or JSON-LD
        metadata with ``json_ld``), as sites do; returns the page's URL."""
        head = f"<title>{html.escape(title)}</title>"
        if json_ld is not None:
            head += f'<script type="application/ld+json">{json.dumps(json_ld)}</script>'
            body = "<p>a page about a video</p>"
        else:
            body = f'<video controls src="{html.escape(video_url, quote=True)}"></video>'
        page = f"<!doctype html><html><head>{head}</head><body>{body}</body></html>"
        return self.media.add(f"/pages/{name}.html", page.encode(), "text/html", **route)

    def media_hits(self) -> int:
        return sum(n for path, n in self.media.hits.items() if path.startswith("/media/"))

    def sent(self, chat_id: int) -> list[dict[str, Any]]:
        return self.api.sent_messages(chat_id)

    async def wait_idle(self, within: float = 10.0) -> None:
        """Wait until the queue has nothing pending or running (TimeoutError after `within`)."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            stats = await self.services.queue.stats(self.clock())
            busy = stats.counts_by_state.get("pending", 0) + stats.counts_by_state.get("running", 0)
            if busy == 0:
                return
            await asyncio.sleep(0.02)
        raise TimeoutError(f"queue not idle within {within}s")


def _box(kind: bytes, payload: bytes) -> bytes:
    return struct.pack(">I4s", 8 + len(payload), kind) + payload


def mp4_with_header(
    size: int,
    *,
    width: int = 640,
    height: int = 360,
    duration: float = 12.0,
    rotated: bool = False,
    moov_last: bool = False,
) -> bytes:
    """`size` bytes of an MP4 whose header names its duration and picture size
    (``moov/mvhd`` and ``moov/trak/tkhd``), like a real file; `rotated` stores it
    sideways with a 90-degree matrix, as phones do; `moov_last` puts the header
    after the media data, as a file written without "fast start" has it."""
    ticks = round(duration * 1000)
    mvhd = _box(b"mvhd", b"\0\0\0\0" + struct.pack(">IIII", 0, 0, 1000, ticks) + bytes(80))
    a, b, c, d = (0, 65536, -65536, 0) if rotated else (65536, 0, 0, 65536)
    matrix = struct.pack(">9i", a, b, 0, c, d, 0, 0, 0, 0x40000000)
    stored = (height, width) if rotated else (width, height)
    tkhd = _box(
        b"tkhd",
        b"\0\0\0\x03" + struct.pack(">IIIII", 0, 0, 1, 0, ticks) + bytes(8) + bytes(8)
        + matrix + struct.pack(">II", stored[0] << 16, stored[1] << 16),
    )  # fmt: skip
    moov = _box(b"moov", mvhd + _box(b"trak", tkhd))
    ftyp = _box(b"ftyp", b"isom\0\0\x02\0isomiso2avc1mp41")
    filler = size - len(ftyp) - len(moov) - 8
    if filler < 0:
        raise ValueError(f"an MP4 with a header needs at least {size - filler} bytes")
    mdat = _box(b"mdat", bytes(filler))
    return ftyp + (mdat + moov if moov_last else moov + mdat)
