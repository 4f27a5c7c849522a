"""A local stand-in for a vxtwitter-compatible API (BetterTwitFix), serving the same posts.

    with VxApiServer() as vx:
        vx.add_post("100", author=("Alice", "alice"), photos=[photo_url])  # fxapi's arguments
        vx.add_status(fx.add_post(...))   # or mirror what the fxtwitter stand-in serves
        # GET {vx.url}/{any handle}/status/100

The answer is the object BetterTwitFix's ``vxApi.getApiResponse`` builds
(``tweetID``, ``text``, ``user_name``, ``user_screen_name``, ``media_extended[]``,
``qrt``, …), converted from the fxtwitter stand-in's status object so both
describe one post. A post it cannot show (private, deleted, unknown) is what
BetterTwitFix answers then: an HTML "failed to scan" page with status 200.
Outages: see `standins._outage` (``set_outage``, ``refuse``/``accept``).
"""

from __future__ import annotations

import re
from typing import Any

from standins._fxmirror import FxMirror
from standins._http import Request, Response, json_response, serve_forever_main
from standins._outage import HTML_PAGE

__all__ = ["VxApiServer", "vx_from_fx"]

JSON = dict[str, Any]
_STATUS_RE = re.compile(r"^/(?:[A-Za-z0-9_]{1,15}/)?status/(?P<id>\d{1,25})/?$")


def _best_mp4(item: JSON) -> str:
    """BetterTwitFix's getBestMediaUrl: the highest-bitrate non-HEVC mp4, ``?tag=`` cut."""
    best, rate = str(item.get("url", "")), -1
    for f in item.get("formats") or item.get("variants") or []:
        mp4 = f.get("container") == "mp4" or f.get("content_type") == "video/mp4"
        hevc = f.get("codec") == "hevc" or "/hevc/" in str(f.get("url", ""))
        if mp4 and not hevc and int(f.get("bitrate") or 0) > rate:
            best, rate = str(f["url"]), int(f.get("bitrate") or 0)
    return best.split("?tag=", 1)[0]


def _media_entry(item: JSON) -> JSON:
    size = {"width": item.get("width", 0), "height": item.get("height", 0)}
    if item.get("type") == "photo":
        url = str(item["url"]).split("?name=", 1)[0]
        return {"url": url, "type": "image", "size": size, "thumbnail_url": url,
                "altText": item.get("altText") or None, "id_str": None}  # fmt: skip
    return {
        "url": _best_mp4(item),
        "type": "gif" if item.get("type") == "gif" else "video",
        "size": size,
        "duration_millis": round(float(item.get("duration") or 0) * 1000),
        "thumbnail_url": item.get("thumbnail_url"),
        "altText": None,
        "id_str": None,
    }


def vx_from_fx(status: JSON, *, with_quote: bool = True) -> JSON:
    """The vxtwitter object for the post an fxtwitter status object describes."""
    author = status.get("author") or {}
    handle = str(author.get("screen_name", ""))
    media = [_media_entry(m) for m in (status.get("media") or {}).get("all", [])]
    quote = status.get("quote") if with_quote else None
    kinds = {m["type"] for m in media}
    out: JSON = {
        "text": status.get("text", ""),
        "likes": status.get("likes", 0),
        "retweets": status.get("retweets", 0),
        "replies": status.get("replies", 0),
        "date": status.get("created_at", ""),
        "date_epoch": status.get("created_timestamp", 0),
        "user_screen_name": handle,
        "user_name": author.get("name", ""),
        "user_profile_image_url": author.get("avatar_url", ""),
        "tweetURL": f"https://twitter.com/{handle}/status/{status.get('id', '')}",
        "tweetID": str(status.get("id", "")),
        "conversationID": str(status.get("id", "")),
        "mediaURLs": [m["url"] for m in media],
        "media_extended": media,
        "possibly_sensitive": bool(status.get("possibly_sensitive", False)),
        "hashtags": [],
        "qrtURL": f"https://twitter.com/i/status/{quote['id']}"
        if isinstance(quote, dict)
        else None,
        "communityNote": None,
        "allSameType": len(kinds) <= 1,
        "hasMedia": bool(media),
        "combinedMediaUrl": None,
        "pollData": None,
        "article": None,
        "lang": status.get("lang"),
        "replyingTo": status.get("replying_to"),
        "replyingToID": None,
        "fetched_on": status.get("created_timestamp", 0),
        "retweetURL": None,
        "translation": None,
        "qrt": None,
        "retweet": None,
    }
    if isinstance(quote, dict) and quote.get("type") != "tombstone":
        out["qrt"] = vx_from_fx(quote, with_quote=False)
    return out


class VxApiServer(FxMirror):
    """The vxtwitter-compatible API stand-in. Thread-safe."""

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(name="vxapi-standin", host=host, port=port)

    def _convert(self, status: JSON) -> JSON:
        return vx_from_fx(status)

    async def _handle(self, request: Request) -> Response:
        self.hit(request.path)
        outage = await self.outage_answer()
        if outage is not None:
            return outage
        m = _STATUS_RE.match(request.path)
        post = self.post(m.group("id")) if m else None
        if post is None:
            # BetterTwitFix: getTweetData() is None → message(msgs.failedToScan), status 200.
            return Response(200, HTML_PAGE, {"content-type": "text/html; charset=utf-8"})
        return json_response(200, post)


def main(argv: list[str] | None = None) -> None:
    """``python -m standins.vxapi [--port N]``: one sample post."""
    import argparse

    parser = argparse.ArgumentParser(description="Local vxtwitter-compatible API stand-in")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    server = VxApiServer(port=args.port)
    server.add_post("20", author=("jack", "jack"), text="just setting up my twttr")
    serve_forever_main(server, "vxapi-standin")


if __name__ == "__main__":
    main()
