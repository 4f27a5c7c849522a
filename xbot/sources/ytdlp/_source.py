"""Other sites through yt-dlp (`_api`) as a `PostSource`.

`fetch(link)` extracts and answers the `Post` (one video: its page, title,
uploader, size and picture) without downloading anything. A delivery needs
more than a Post: the file itself, progress for the status message, and a
second single-flight key that only extraction reveals (``yt:{extractor}:{id}``).
So the source also opens the `YtdlpJob` that `xbot.tasks.other_sites` drives
(`open_job`): extraction and download stay one job, one `YoutubeDL`, while
which options, which sites and the SSRF pre-check are decided here once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
import httpx

from xbot.config import Settings
from xbot.links import Link
from xbot.media import netguard
from xbot.media.ffmpeg import ffmpeg_path
from xbot.media.models import MediaItem, Post
from xbot.media.speed_floor import SpeedFloor
from xbot.media.tempfiles import temp_folder
from xbot.sending.progress import Snapshot
from xbot.sources.ytdlp._api import VideoInfo, YtdlpJob
from xbot.sources.ytdlp._cookies import Cookies, load_cookies
from xbot.sources.ytdlp._options import YtdlpConfig

__all__ = ["YtdlpSource", "post_of_info"]


def post_of_info(info: VideoInfo) -> Post:
    """What extraction found, as a `Post` with its one video."""
    item = MediaItem(
        kind="video",
        url=info.url,
        width=info.width,
        height=info.height,
        duration=info.duration,
        thumbnail_url=info.thumbnail,
        size=info.size,
    )
    return Post(
        key=info.key,
        url=info.url,
        author_name=info.uploader,
        author_handle="",
        text=info.title,
        media=(item,),
        sensitive=info.adult,
        source="ytdlp",
    )


@attrs.define
class YtdlpSource:
    """yt-dlp for every site it knows (``XBOT_YTDLP_SITES``), behind the SSRF guard.

    Attributes:
        overrides: extra yt-dlp options (tests: ``ratelimit`` for a slow download).
        resolver: name resolution for the SSRF pre-check (tests inject one).
        ffmpeg: the ffmpeg that merges picture and sound (the PATH's); None: the
            best single file only.
        cookies: ``XBOT_YTDLP_COOKIES``, read and checked when the source is built (at
            start: a bad file stops the bot with one line, not a link later).
    """

    settings: Settings
    overrides: Mapping[str, Any] = attrs.field(factory=dict)
    resolver: netguard.Resolver = netguard.system_resolver
    name: str = "ytdlp"
    ffmpeg: str | None = attrs.field(factory=ffmpeg_path)

    def config_for(self, max_height: int | None = None) -> YtdlpConfig:
        """The jobs' configuration, with a chat's quality cap."""
        return attrs.evolve(self.config, max_height=max_height)

    cookies: Cookies = attrs.field(
        default=attrs.Factory(lambda self: load_cookies(self.settings.ytdlp_cookies), True)
    )

    @property
    def config(self) -> YtdlpConfig:
        return YtdlpConfig(
            limit_bytes=self.settings.upload_limit,
            sites=self.settings.ytdlp_sites,
            allow_private=self.settings.allow_private_networks,
            floor=SpeedFloor.configured(self.settings),
            overrides=dict(self.overrides),
            ffmpeg=self.ffmpeg,
            cookies=self.cookies,
        )

    async def precheck(self, url: str) -> None:
        """The host of the link, resolved and checked before yt-dlp opens anything.

        Raises:
            BlockedAddress: loopback, private, link-local, … (unless allowed).
            UnsupportedLink: not a URL a fetch can start from.
        """
        allow = self.settings.allow_private_networks
        netguard.check_url(url, allow)
        parsed = httpx.URL(url)
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        await netguard.resolve_and_check(parsed.host, port, allow, resolver=self.resolver)

    def open_job(
        self,
        url: str,
        folder: Path,
        on_progress: Callable[[Snapshot], None] | None = None,
        *,
        max_height: int | None = None,
        audio: bool = False,
    ) -> YtdlpJob:
        """One link's job (``async with``): `extract`, then `download` into ``folder``;
        `max_height` is the chat's quality cap; `audio`: the sound alone (M4A or MP3)."""
        return YtdlpJob(
            url, folder, self.config_for(max_height), on_progress=on_progress, audio=audio
        )

    async def fetch(self, link: Link) -> Post:
        await self.precheck(link.url)
        with temp_folder(self.settings.data_dir) as folder:
            async with self.open_job(link.url, folder) as job:
                return post_of_info(await job.extract())
