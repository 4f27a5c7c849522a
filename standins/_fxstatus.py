"""What the fxtwitter stand-ins answer with: FxEmbed's status object and its tombstone.

Pure builders of JSON, shared by `standins.fxapi` (which serves them) and
the X mirrors (`standins._fxmirror`): `build_status` (text and raw_text
with UTF-16 ranges, author, counts, ``media`` with photos[], videos[] carrying
``formats[]`` or, for older payloads, ``variants[]``, and all[] in post order),
`x_formats` along X's bitrate ladder, and `tombstone_body` (v2's answer for a
post that is gone).
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from standins._tgtext import utf16_len

JSON = dict[str, Any]
_TWITTER_EPOCH_MS = 1288834974657
# FxEmbed's tombstone reasons (APITombstoneReasonSchema) and the messages of its
# English fallback; `add_post(tombstone=..., tombstone_message=...)` may say more.
TOMBSTONE_REASONS = frozenset({"deleted", "suspended", "private", "blocked", "unavailable"})
_TOMBSTONE_MESSAGES = {
    "deleted": "This post was deleted by its author.",
    "suspended": "This post is from a suspended account.",
    "private": "This post is from an account that limits who can view their posts.",
    "blocked": "The author of this post has limited who can see it.",
    "unavailable": "This post is unavailable.",
}


def _created(post_id: str) -> tuple[str, int]:
    """created_at / created_timestamp; from the snowflake id when it is one, like X's own."""
    ms = (int(post_id) >> 22) + _TWITTER_EPOCH_MS if int(post_id) > 2**32 else 1_700_000_000_000
    when = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return when.strftime("%a %b %d %H:%M:%S +0000 %Y"), ms // 1000


def _photo(item: str | JSON) -> JSON:
    if isinstance(item, str):
        item = {"url": item}
    return {
        "type": "photo",
        "url": item["url"],
        "width": item.get("width", 1200),
        "height": item.get("height", 900),
        "altText": item.get("altText", ""),
    }


def _video(item: str | JSON, kind: str, legacy: bool) -> JSON:
    if isinstance(item, str):
        item = {"url": item}
    url = item["url"]
    bitrate = 0 if kind == "gif" else item.get("bitrate", 2_176_000)
    out: JSON = {
        "type": kind,
        "url": url,
        "thumbnail_url": item.get("thumbnail_url", url.rsplit(".", 1)[0] + ".jpg"),
        "width": item.get("width", 1280 if kind == "video" else 480),
        "height": item.get("height", 720 if kind == "video" else 270),
        "duration": item.get("duration", 12.5 if kind == "video" else 4.0),
        "format": "video/mp4",
    }
    if "size" in item:
        out["filesize"] = item["size"]
    if legacy:
        variants = item.get("variants")
        if variants is None:
            variants = [{"bitrate": bitrate, "content_type": "video/mp4", "url": url}]
            if kind == "video":
                # Real payloads list the HLS playlist too; a client must skip it.
                variants.insert(0, {"content_type": "application/x-mpegURL", "url": url + ".m3u8"})
        out["variants"] = variants
        return out
    formats = item.get("formats")
    if formats is None:
        one: JSON = {"container": "mp4", "codec": "h264", "bitrate": bitrate, "url": url}
        if "size" in item:
            one["size"] = item["size"]
        formats = [one]
        if kind == "video":
            formats.insert(0, {"container": "m3u8", "codec": "h264", "url": url + ".m3u8"})
    out["formats"] = formats
    return out


# X's bitrate ladder for a 1080p upload (video_info.variants), smallest first.
X_LADDER = ((256_000, "480x270"), (832_000, "640x360"), (2_176_000, "1280x720"),
            (10_368_000, "1920x1080"))  # fmt: skip


def x_formats(urls: Sequence[str], *, hls: str | None = None) -> list[JSON]:
    """A video's ``formats`` as fxtwitter serves them: url, container, codec, bitrate and
    no size (FxEmbed's convertVariantToFormat), one per URL along `X_LADDER`, the HLS
    playlist first when given."""
    out: list[JSON] = []
    if hls is not None:
        out.append({"url": hls, "container": "m3u8"})
    for url, (bitrate, _) in zip(urls, X_LADDER, strict=False):
        out.append({"url": url, "container": "mp4", "codec": "h264", "bitrate": bitrate})
    return out


def build_status(
    post_id: str,
    *,
    author: tuple[str, str] = ("Alice", "alice"),
    text: str = "",
    media: Sequence[tuple[str, str | JSON]] = (),
    sensitive: bool = False,
    variants_legacy: bool = False,
    lang: str = "en",
    replying_to: str | None = None,
    quote: JSON | None = None,
) -> JSON:
    """A v1 status object as api.fxtwitter.com returns it; `media`: (kind, url or dict) in order."""
    name, handle = author
    created_at, created_ts = _created(post_id)
    status: JSON = {
        "url": f"https://x.com/{handle}/status/{post_id}",
        "id": post_id,
        "text": text,
        "raw_text": {"text": text, "display_text_range": [0, utf16_len(text)], "facets": []},
        "author": {
            "id": str(zlib.crc32(handle.encode())),
            "name": name,
            "screen_name": handle,
            "avatar_url": f"https://pbs.twimg.com/profile_images/1/{handle}_200x200.jpg",
            "banner_url": f"https://pbs.twimg.com/profile_banners/1/{handle}",
            "description": "",
            "location": "",
            "url": f"https://x.com/{handle}",
            "followers": 1200,
            "following": 300,
            "joined": "Mon Jan 01 00:00:00 +0000 2018",
            "likes": 5000,
            "protected": False,
            "tweets": 4200,
            "website": None,
        },
        "replies": 3,
        # v1 says "retweets"; later payloads also carry "reposts". Both, like the live API.
        "retweets": 10,
        "reposts": 10,
        "likes": 120,
        "bookmarks": 4,
        "views": 5000,
        "created_at": created_at,
        "created_timestamp": created_ts,
        "possibly_sensitive": sensitive,
        "lang": lang,
        "replying_to": replying_to,
        "replying_to_status": None,
        "source": "Twitter for iPhone",
        "twitter_card": "tweet",
        "color": None,
        "provider": "twitter",
    }
    if quote is not None:
        status["quote"] = quote
    if media:
        photos, videos, everything = [], [], []
        for kind, item in media:
            if kind == "photo":
                entry = _photo(item)
                photos.append(entry)
            elif kind in ("video", "gif"):
                entry = _video(item, kind, variants_legacy)
                videos.append(entry)
            else:
                raise ValueError(f"unknown media kind {kind!r}")
            everything.append(entry)
        block: JSON = {"all": everything}
        if photos:
            block["photos"] = photos
        if videos:
            block["videos"] = videos
        if len(photos) > 1:
            block["mosaic"] = {
                "type": "mosaic_photo",
                "formats": {
                    "jpeg": f"https://mosaic.fxtwitter.com/jpeg/{post_id}",
                    "webp": f"https://mosaic.fxtwitter.com/webp/{post_id}",
                },
            }
        status["media"] = block
        status["twitter_card"] = "player" if videos else "summary_large_image"
    return status


def tombstone_body(post_id: str, reason: str, message: str | None = None) -> JSON:
    """FxEmbed's APIStatusTombstone for a post."""
    return {
        "type": "tombstone",
        "provider": "twitter",
        "reason": reason,
        "message": message or _TOMBSTONE_MESSAGES[reason],
        "id": post_id,
        "url": f"https://x.com/i/status/{post_id}",
    }
