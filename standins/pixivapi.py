"""A local stand-in for pixiv: the ajax API and the image host, with its Referer rule.

    with PixivServer() as pixiv:
        pixiv.add_work("120000001", title="Sea", pages=3)
        # GET {pixiv.url}/ajax/illust/120000001 and /ajax/illust/120000001/pages

Shapes as www.pixiv.net answers them without a login (the fields public
clients read: PixivNow's and danbooru's pixiv ajax clients, the phixiv
proxy): ``{"error": false, "message": "", "body": {...}}`` for a work with
``illustId``, ``illustTitle``, ``illustType``, ``xRestrict``, ``restrict``,
``urls{mini, thumb, small, regular, original}``, ``tags{tags[]{tag, translation}}``,
``userId``, ``userName``, ``userAccount``, ``width``, ``height``, ``pageCount``;
``body[]{urls{thumb_mini, small, regular, original}, width, height}`` for
``/pages``; ``404 {"error": true, "message": "…", "body": []}`` for a missing work.
Restricted works (R-18, My pixiv only) come back as pixiv sends them to a
visitor who is not signed in: the work with ``urls`` all null.

Images live under ``/img-original/…`` and ``/img-master/…`` and, like
``i.pximg.net``, answer 403 to any request without
``Referer: https://www.pixiv.net/``. `refused` counts those.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Sequence
from typing import Any

import attrs

from standins._http import (
    HttpServer,
    Request,
    Response,
    ServerBase,
    json_response,
    serve_forever_main,
)
from standins._mediabytes import tiny_jpeg

__all__ = ["REFERER", "PixivServer", "main"]

JSON = dict[str, Any]
REFERER = "https://www.pixiv.net/"
_STAMP = "2024/11/20/10/00/00"
NOT_FOUND = "該当作品は削除されたか、存在しない作品IDです。"


@attrs.define
class _Work:
    body: JSON
    pages: list[JSON]


class PixivServer(ServerBase):
    """The pixiv stand-in. Thread-safe; usable from sync and async code.

    Attributes:
        hits: requests per path.
        refused: image requests refused for a missing or wrong Referer.
    """

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self._lock = threading.Lock()
        self._works: dict[str, _Work] = {}
        self._images: dict[str, bytes] = {}
        self._fail = 0
        self.refused = 0
        self.hits: collections.Counter[str] = collections.Counter()
        self._http = HttpServer(self._handle, host=host, port=port, name="pixiv-standin")

    # ------------------------------------------------------------------ registry

    def _image(self, path: str, data: bytes) -> str:
        with self._lock:
            self._images[path] = data
        return f"{self.url}{path}"

    def add_work(
        self,
        work_id: str | int,
        *,
        title: str = "Untitled",
        user: tuple[str, str, str] = ("Artist", "11111", "artist"),
        tags: Sequence[str | tuple[str, str]] = ("オリジナル",),
        pages: int | Sequence[bytes] = 1,
        size: tuple[int, int] = (1200, 900),
        illust_type: int = 0,
        x_restrict: int = 0,
        restrict: int = 0,
        big_originals: bool = False,
    ) -> JSON:
        """Register a work (the server must be started: its URLs name it); returns its body.

        `pages` is a count (each a small JPEG of `size`) or the bytes of each
        original; `tags` are tags or (tag, English translation); `user` is
        (name, id, account). `big_originals` pads each original past Telegram's
        10 MB photo limit (the regular rendition stays small).
        """
        work_id = str(work_id)
        name, user_id, account = user
        width, height = size
        restricted = bool(x_restrict or restrict)
        originals = (
            [tiny_jpeg(min(width, 64), min(height, 64)) for _ in range(pages)]
            if isinstance(pages, int)
            else list(pages)
        )
        page_list: list[JSON] = []
        pad = bytes(11 * 1024 * 1024) if big_originals else b""  # after the JPEG's end
        for n, data in enumerate(originals):
            original = self._image(f"/img-original/img/{_STAMP}/{work_id}_p{n}.jpg", data + pad)
            regular = self._image(
                f"/img-master/img/{_STAMP}/{work_id}_p{n}_master1200.jpg", tiny_jpeg(48, 36)
            )
            small = f"{self.url}/c/540x540_70/img-master/img/{_STAMP}/{work_id}_p{n}_master1200.jpg"
            page_list.append({
                "urls": {"thumb_mini": small, "small": small, "regular": regular,
                         "original": original},
                "width": width, "height": height,
            })  # fmt: skip
        first = page_list[0]["urls"] if page_list else {}
        tag_list = []
        for tag in tags:
            text, english = (tag, None) if isinstance(tag, str) else tag
            entry: JSON = {"tag": text, "locked": True, "deletable": False,
                           "userId": user_id, "userName": name}  # fmt: skip
            if english:
                entry["translation"] = {"en": english}
            tag_list.append(entry)
        null_urls = dict.fromkeys(("mini", "thumb", "small", "regular", "original"))
        body: JSON = {
            "illustId": work_id, "illustTitle": title, "illustComment": "", "id": work_id,
            "title": title, "description": "", "illustType": illust_type,
            "createDate": "2024-11-20T10:00:00+00:00", "uploadDate": "2024-11-20T10:00:00+00:00",
            "restrict": restrict, "xRestrict": x_restrict, "sl": 6 if x_restrict else 2,
            "urls": null_urls if restricted else {
                "mini": first.get("small"), "thumb": first.get("small"),
                "small": first.get("small"), "regular": first.get("regular"),
                "original": first.get("original"),
            },
            "tags": {"authorId": user_id, "isLocked": False, "tags": tag_list, "writable": True},
            "alt": f"#{tags[0] if tags and isinstance(tags[0], str) else 'art'} {title}",
            "userId": user_id, "userName": name, "userAccount": account,
            "width": width, "height": height, "pageCount": len(page_list),
            "bookmarkCount": 12, "likeCount": 10, "commentCount": 0, "viewCount": 200,
            "isOriginal": True, "aiType": 1,
        }  # fmt: skip
        with self._lock:
            self._works[work_id] = _Work(body, [] if restricted else page_list)
        return body

    def remove_work(self, work_id: str | int) -> None:
        with self._lock:
            self._works.pop(str(work_id), None)

    def fail_next(self, n: int) -> None:
        """Answer the next `n` ajax requests 503."""
        with self._lock:
            self._fail = n

    # ------------------------------------------------------------------ HTTP

    async def _handle(self, request: Request) -> Response:
        path = request.path
        with self._lock:
            self.hits[path] += 1
        if path.startswith(("/img-original/", "/img-master/")):
            if request.header("referer") != REFERER:
                with self._lock:
                    self.refused += 1
                return Response(403, b"403 Forbidden", {"content-type": "text/html"})
            with self._lock:
                data = self._images.get(path)
            if data is None:
                return Response(404, b"404 Not Found", {"content-type": "text/html"})
            return Response(200, data, {"content-type": "image/jpeg"})
        if not path.startswith("/ajax/illust/"):
            return Response(404, b"<html>not found</html>", {"content-type": "text/html"})
        with self._lock:
            failing = self._fail > 0
            self._fail = max(0, self._fail - 1)
        if failing:
            return Response(503, b"<html>Service Unavailable</html>", {"content-type": "text/html"})
        work_id, _, rest = path.removeprefix("/ajax/illust/").partition("/")
        with self._lock:
            work = self._works.get(work_id)
        if work is None:
            return _json(404, {"error": True, "message": NOT_FOUND, "body": []})
        if rest == "pages":
            return _json(200, {"error": False, "message": "", "body": work.pages})
        if rest:
            return _json(404, {"error": True, "message": "", "body": []})
        return _json(200, {"error": False, "message": "", "body": work.body})


def _json(status: int, body: JSON) -> Response:
    return json_response(status, body, content_type="application/json; charset=utf-8")


def main(argv: list[str] | None = None) -> None:
    """``python -m standins.pixivapi [--port N]``: an empty registry."""
    import argparse

    parser = argparse.ArgumentParser(description="Local pixiv ajax/image stand-in")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    serve_forever_main(PixivServer(port=args.port), "pixiv-standin")


if __name__ == "__main__":
    main()
