"""A local stand-in for X's syndication endpoint (``/tweet-result``), serving the same posts.

    with SyndicationServer() as syn:
        syn.add_post("100", author=("Alice", "alice"), photos=[photo_url])  # fxapi's arguments
        syn.add_status(fx.add_post(...))
        # GET {syn.url}/tweet-result?id=100&token=...

Answers X's own JSON (``__typename: Tweet``, ``id_str``, ``text`` HTML-escaped
with the media's t.co link and ``display_text_range``, ``user``,
``mediaDetails[]`` with ``video_info.variants[]``, ``quoted_tweet``), converted
from the fxtwitter stand-in's status object; 404 for a post it does not have
(vercel/react-tweet reads a 404 as "not found"); a tombstone for a post
registered with `add_tombstone`. `tokens` records the token of every request.
Outages: see `standins._outage`.
"""

from __future__ import annotations

import html
import threading
import zlib
from datetime import UTC, datetime
from typing import Any

from standins._fxmirror import FxMirror
from standins._http import Request, Response, json_response, serve_forever_main

__all__ = ["SyndicationServer", "syndication_from_fx"]

JSON = dict[str, Any]


def _tco(seed: str) -> str:
    return f"https://t.co/{zlib.crc32(seed.encode()):010d}"


def _variants(item: JSON) -> list[JSON]:
    out: list[JSON] = []
    for f in item.get("formats") or []:
        if f.get("container") == "m3u8":
            out.append({"content_type": "application/x-mpegURL", "url": f["url"]})
        else:
            rate = int(f.get("bitrate") or 0)
            out.append({"bitrate": rate, "content_type": "video/mp4", "url": f["url"]})
    for v in item.get("variants") or []:
        out.append(dict(v))
    if not out:
        out.append({"bitrate": 2176000, "content_type": "video/mp4", "url": item["url"]})
    return out


def _detail(item: JSON, short: str) -> JSON:
    still = str(item.get("thumbnail_url") or item["url"]).split("?name=", 1)[0]
    if item.get("type") == "photo":
        still = str(item["url"]).split("?name=", 1)[0]
    detail: JSON = {
        "display_url": "pic.x.com/abc",
        "expanded_url": "https://x.com/i/status/1/photo/1",
        "ext_media_availability": {"status": "Available"},
        "indices": [0, 0],
        "media_url_https": still,
        "original_info": {"height": item.get("height", 0), "width": item.get("width", 0)},
        "sizes": {},
        "type": {"photo": "photo", "gif": "animated_gif"}.get(str(item.get("type")), "video"),
        "url": short,
    }
    if item.get("type") != "photo":
        detail["video_info"] = {
            "aspect_ratio": [16, 9],
            "duration_millis": round(float(item.get("duration") or 0) * 1000),
            "variants": _variants(item),
        }
    return detail


def syndication_from_fx(status: JSON, *, with_quote: bool = True) -> JSON:
    """X's ``tweet-result`` object for the post an fxtwitter status object describes."""
    post_id = str(status.get("id", ""))
    author = status.get("author") or {}
    text = str(status.get("text", ""))
    media = (status.get("media") or {}).get("all", [])
    short = _tco(post_id)
    shown = len(text)
    full = html.escape(text, quote=False) + (f" {short}" if media else "")
    created = datetime.fromtimestamp(int(status.get("created_timestamp") or 0), tz=UTC)
    out: JSON = {
        "__typename": "Tweet",
        "lang": status.get("lang", "en"),
        "favorite_count": status.get("likes", 0),
        "possibly_sensitive": bool(status.get("possibly_sensitive", False)),
        "created_at": created.strftime("%Y-%m-%dT%H:%M:%S.000Z"),
        # Code points, over the escaped text as X sends it (escapes count as written).
        "display_text_range": [0, len(html.escape(text, quote=False)) if shown else 0],
        "entities": {"hashtags": [], "urls": [], "user_mentions": [], "symbols": []},
        "id_str": post_id,
        "text": full,
        "user": {
            "id_str": str(author.get("id", "")),
            "name": author.get("name", ""),
            "profile_image_url_https": author.get("avatar_url", ""),
            "screen_name": author.get("screen_name", ""),
            "verified": False,
            "is_blue_verified": False,
        },
        "edit_control": {"edit_tweet_ids": [post_id], "editable_until_msecs": "0"},
        "mediaDetails": [_detail(m, short) for m in media],
        "conversation_count": status.get("replies", 0),
        "news_action_type": "conversation",
        "isEdited": False,
        "isStaleEdit": False,
    }
    if not media:
        del out["mediaDetails"]
    quote = status.get("quote") if with_quote else None
    if isinstance(quote, dict) and quote.get("type") != "tombstone":
        out["quoted_tweet"] = syndication_from_fx(quote, with_quote=False)
    return out


class SyndicationServer(FxMirror):
    """The syndication endpoint stand-in. Thread-safe.

    Attributes:
        hits: requests per path; tokens: the ``token`` of every request, in order.
    """

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(
            name="syndication-standin",
            host=host,
            port=port,
            body_503=b'{"errors":[{"code":130,"message":"Over capacity"}]}',
        )
        self._tokens_lock = threading.Lock()
        self.tokens: list[tuple[str, str]] = []

    def _convert(self, status: JSON) -> JSON:
        return syndication_from_fx(status)

    def add_tombstone(self, post_id: str | int, text: str = "This Post is unavailable.") -> None:
        self.add_raw(
            post_id,
            {
                "__typename": "TweetTombstone",
                "tombstone": {"text": {"text": text, "entities": [], "rtl": False}},
            },
        )

    async def _handle(self, request: Request) -> Response:
        post_id = (request.query.get("id") or [""])[0]
        self.hit(request.path)
        with self._tokens_lock:
            self.tokens.append((post_id, (request.query.get("token") or [""])[0]))
        outage = await self.outage_answer()
        if outage is not None:
            return outage
        post = self.post(post_id) if request.path == "/tweet-result" else None
        if post is None:
            return Response(404, b"", {"content-type": "application/json"})
        return json_response(200, post)


def main(argv: list[str] | None = None) -> None:
    """``python -m standins.syndication [--port N]``: one sample post."""
    import argparse

    parser = argparse.ArgumentParser(description="Local X syndication endpoint stand-in")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    server = SyndicationServer(port=args.port)
    server.add_post("20", author=("jack", "jack"), text="just setting up my twttr")
    serve_forever_main(server, "syndication-standin")


if __name__ == "__main__":
    main()
