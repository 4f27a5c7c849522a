"""Which library a link to another site goes to first: gallery-dl or yt-dlp. Pure.

    engines("https://mastodon.social/@a/1")   -> ("gallerydl", "ytdlp")
    engines("https://youtu.be/abc")           -> ("ytdlp", "gallerydl")
    engines("https://example.com/clip.mp4")   -> ("ytdlp",)

The rule, and why:

- **Video sites → yt-dlp first.** It is the field's library for video;
  gallery-dl hands most video to yt-dlp anyway (its ``ytdl:`` URLs). `VIDEO_HOSTS`
  names the sites whose posts are videos; asking gallery-dl first there would
  cost a process start for nothing.
- **Everything else → gallery-dl first.** Its "do I know this link" is answered
  by the process itself without a request (pattern match, exit status 64), so
  a site it does not know costs one process start (~0.4 s; docs/benchmarks.md)
  and goes on to yt-dlp.
- **The other one when the first does not know the link or finds no media**
  (`UnsupportedLink`, gallery-dl's `NoMedia`): a Reddit video post read by
  gallery-dl has no file it can send, yt-dlp has the video. A definite
  answer (missing, private, login-only) or a failure is the answer: the
  other library would read the same site.
- **A direct link to a media file → yt-dlp only**, as before gallery-dl came:
  whether the bot fetches bare files is ``XBOT_YTDLP_SITES`` (its generic
  extractor). A file whose extension is not listed here (``.bmp``, ``.avif``)
  goes to gallery-dl first, whose ``directlink`` answers it only with ``all``
  (`xbot.sources.gallerydl.ANY_HOST_CATEGORIES`).
"""

from __future__ import annotations

import urllib.parse
from typing import Literal

__all__ = ["VIDEO_HOSTS", "Engine", "engines"]

Engine = Literal["gallerydl", "ytdlp"]

# Sites whose posts are videos (a host and every host under it).
VIDEO_HOSTS = frozenset({
    "youtube.com", "youtu.be", "youtube-nocookie.com", "vimeo.com", "dailymotion.com",
    "dai.ly", "twitch.tv", "streamable.com", "rumble.com", "bilibili.com", "b23.tv",
    "nicovideo.jp", "odysee.com", "vk.com", "vkvideo.ru", "ok.ru", "rutube.ru",
    "soundcloud.com", "bandcamp.com", "kick.com", "loom.com", "coub.com",
    "v.redd.it", "vm.tiktok.com",
})  # fmt: skip
MEDIA_EXTENSIONS = frozenset({
    "mp4", "m4v", "mov", "webm", "mkv", "m3u8", "mpd", "mp3", "m4a", "ogg", "opus",
    "wav", "flac", "jpg", "jpeg", "png", "gif", "webp",
})  # fmt: skip


def _under(host: str, base: str) -> bool:
    return host == base or host.endswith("." + base)


def engines(url: str) -> tuple[Engine, ...]:
    """The libraries to ask for `url`, in order (see the module docstring for the rule)."""
    parts = urllib.parse.urlsplit(url)
    host = (parts.hostname or "").lower().rstrip(".")
    last = parts.path.rpartition("/")[2]
    if "." in last and last.rpartition(".")[2].lower() in MEDIA_EXTENSIONS:
        return ("ytdlp",)
    if any(_under(host, base) for base in VIDEO_HOSTS):
        return ("ytdlp", "gallerydl")
    return ("gallerydl", "ytdlp")
