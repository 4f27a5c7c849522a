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

Signed in: `add_session` makes a ``PHPSESSID`` one pixiv knows. A request
that carries it (``Cookie: PHPSESSID=…``) gets R-18 and R-18G works whole, as
pixiv answers a signed-in adult whose account shows them (Danbooru's ajax
client: "You must authenticate by passing a PHPSESSID cookie, otherwise the
API will return nothing for R-18 works"); any other cookie, or an ended
session, is answered as a visitor (or 401, `invalid_status`).
``/touch/ajax/user/self/status`` answers ``body.user_status{is_logged_in,
user_id, user_name, user_x_restrict}`` (the last a string), signed out just
``is_logged_in: false``. Ugoira (`add_ugoira`) answer
``/ajax/illust/{id}/ugoira_meta`` with ``src`` and ``originalSrc`` (zips
under ``/img-zip-ugoira/``), ``mime_type`` and ``frames[]{file, delay}``
(shapes in ``tests/data/pixiv/``).

Images live under ``/img-original/…``, ``/img-master/…`` and
``/img-zip-ugoira/…`` and, like ``i.pximg.net``, answer 403 to any request
without ``Referer: https://www.pixiv.net/``. `refused` counts those.
`cookies` counts, by host role (``ajax``, ``image``), the requests that
carried a cookie at all: the session must never reach the image host.
"""

from __future__ import annotations

import collections
import io
import threading
import zipfile
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
    ugoira: JSON | None = None


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
        self._sessions: dict[str, int] = {}
        self.invalid_status = 200
        self.refused = 0
        self.hits: collections.Counter[str] = collections.Counter()
        self.cookies: collections.Counter[str] = collections.Counter()
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
        body: JSON = {
            "illustId": work_id, "illustTitle": title, "illustComment": "", "id": work_id,
            "title": title, "description": "", "illustType": illust_type,
            "createDate": "2024-11-20T10:00:00+00:00", "uploadDate": "2024-11-20T10:00:00+00:00",
            "restrict": restrict, "xRestrict": x_restrict, "sl": 6 if x_restrict else 2,
            "urls": {
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
            self._works[work_id] = _Work(body, page_list)
        return body

    def add_session(self, session: str, *, x_restrict: int = 2) -> None:
        """A PHPSESSID pixiv knows, of an account that shows R-18 (1) and R-18G (2) works."""
        with self._lock:
            self._sessions[session] = x_restrict

    def end_session(self, session: str) -> None:
        """The session expired or was signed out: answered as a visitor from now on."""
        with self._lock:
            self._sessions.pop(session, None)

    def add_ugoira(
        self,
        work_id: str | int,
        delays: Sequence[int],
        *,
        size: tuple[int, int] = (64, 48),
        x_restrict: int = 0,
        archive: bytes | None = None,
        frames: Sequence[JSON] | None = None,
        small_archive: bytes | None = None,
        **work: Any,
    ) -> JSON:
        """An animation: one JPEG frame per delay (ms) in a zip, and its ``ugoira_meta``.

        `archive` replaces the zip's bytes (a broken or huge one), `frames` the meta's
        frame list (one that names missing files, absurd delays); `small_archive` is the
        600px zip (default: the same bytes).
        """
        work_id = str(work_id)
        width, height = size
        names = [f"{n:06d}.jpg" for n in range(len(delays))]
        if archive is None:
            buffer = io.BytesIO()
            with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as zf:
                for n, name in enumerate(names):
                    shade = (40 * n % 256, 120, 200)
                    zf.writestr(name, tiny_jpeg(width, height, shade))
            archive = buffer.getvalue()
        stamp = f"/img-zip-ugoira/img/{_STAMP}/{work_id}"
        original = self._image(f"{stamp}_ugoira1920x1080.zip", archive)
        small = self._image(f"{stamp}_ugoira600x600.zip", small_archive or archive)
        body = self.add_work(work_id, illust_type=2, x_restrict=x_restrict, size=size, **work)
        meta: JSON = {
            "src": small, "originalSrc": original, "mime_type": "image/jpeg",
            "frames": list(frames) if frames is not None
            else [{"file": n, "delay": d} for n, d in zip(names, delays, strict=True)],
        }  # fmt: skip
        with self._lock:
            self._works[work_id].ugoira = meta
        return body

    def remove_work(self, work_id: str | int) -> None:
        with self._lock:
            self._works.pop(str(work_id), None)

    def fail_next(self, n: int) -> None:
        """Answer the next `n` ajax requests 503."""
        with self._lock:
            self._fail = n

    # ------------------------------------------------------------------ HTTP

    def _signed_in(self, request: Request) -> int | None:
        """The account's x_restrict when the request's PHPSESSID is a live session."""
        for part in (request.header("cookie") or "").split(";"):
            name, _, value = part.strip().partition("=")
            if name == "PHPSESSID":
                with self._lock:
                    return self._sessions.get(value)
        return None

    async def _handle(self, request: Request) -> Response:
        path = request.path
        image = path.startswith(("/img-original/", "/img-master/", "/img-zip-ugoira/"))
        with self._lock:
            self.hits[path] += 1
            if request.header("cookie"):
                self.cookies["image" if image else "ajax"] += 1
        if image:
            if request.header("referer") != REFERER:
                with self._lock:
                    self.refused += 1
                return Response(403, b"403 Forbidden", {"content-type": "text/html"})
            with self._lock:
                data = self._images.get(path)
            if data is None:
                return Response(404, b"404 Not Found", {"content-type": "text/html"})
            kind = "application/zip" if path.endswith(".zip") else "image/jpeg"
            return Response(200, data, {"content-type": kind})
        account = self._signed_in(request)
        if account is None and request.header("cookie") and self.invalid_status != 200:
            return _json(
                self.invalid_status, {"error": True, "message": "Unauthorized", "body": []}
            )
        if path == "/touch/ajax/user/self/status":
            return _json(
                200, {"error": False, "message": "", "body": {"user_status": _status(account)}}
            )
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
        rating = work.body["xRestrict"] or 0
        # pixiv shows a rated work to an account that chose to see its rating; My pixiv
        # works (`restrict`) only to the artist's friends, whom the stand-in has none of.
        hidden = bool(work.body["restrict"]) or (rating > 0 and (account or 0) < rating)
        if rest == "pages":
            pages = [] if hidden else work.pages
            return _json(200, {"error": False, "message": "", "body": pages})
        if rest == "ugoira_meta":
            if work.ugoira is None:
                return _json(400, {"error": True, "message": "", "body": []})
            if hidden:
                return _json(403, {"error": True, "message": "", "body": []})
            return _json(200, {"error": False, "message": "", "body": work.ugoira})
        if rest:
            return _json(404, {"error": True, "message": "", "body": []})
        body = work.body
        if hidden:
            body = {**body, "urls": dict.fromkeys(body["urls"])}
        return _json(200, {"error": False, "message": "", "body": body})


def _status(account: int | None) -> JSON:
    """``user_status`` as pixiv's touch ajax sends it (stamps and emoji lists trimmed)."""
    status: JSON = {"is_logged_in": account is not None, "stamp_series": [], "emoji_series": []}
    if account is not None:
        status.update(user_id="31415926", user_name="operator", user_account="operator",
                      user_premium="0", user_x_restrict=str(account))  # fmt: skip
    return status


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
