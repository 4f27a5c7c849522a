"""Local stand-ins for two sites gallery-dl knows and whose root its config can set.

    with MastodonServer() as masto:
        masto.add_status("109000000000000001", photos=3, name="Alice", acct="alice")
        # gallery-dl, with config extractor.mastodon.<name>.root = masto.url, reads
        # GET {masto.url}/api/v1/statuses/109000000000000001 for {masto.url}/@alice/1090…

    with BooruServer() as booru:
        booru.add_post(4242, artist="mitsuki_art", rating="g")
        # extractor.Danbooru.<name>.root = booru.url: GET {booru.url}/posts/4242.json

Shapes as the real services answer an anonymous client:

- **Mastodon** (docs.joinmastodon.org, ``GET /api/v1/statuses/:id``): the
  Status entity (``id``, ``created_at``, ``in_reply_to_id``, ``sensitive``,
  ``spoiler_text``, ``visibility``, ``language``, ``uri``, ``url``,
  ``content`` as HTML, ``reblog``, ``account`` {``id``, ``username``, ``acct``,
  ``display_name``, ``url``, …}, ``media_attachments`` [{``id``, ``type``
  image/gifv/video, ``url``, ``preview_url``, ``remote_url``, ``meta``
  {original {width, height, size, aspect}}, ``description``, ``blurhash``}],
  ``mentions``, ``tags`` [{name, url}], ``emojis``, ``card``, ``poll``).
  A missing or private status is ``404 {"error": "Record not found"}``; an
  instance that shows nothing to visitors answers ``401 {"error": "This API
  requires an authenticated user"}``. Files under ``/system/media_attachments/``.
- **Danbooru** (``GET /posts/:id.json``): ``id``, ``created_at``,
  ``uploader_id``, ``rating`` (g/s/q/e), ``image_width``, ``image_height``,
  ``tag_string`` and its ``_general``/``_artist``/``_character``/
  ``_copyright``/``_meta`` parts, ``file_ext``, ``file_size``, ``md5``,
  ``file_url``, ``large_file_url``, ``preview_file_url``, ``source``; a
  missing post is ``404 {"success": false, "error": "ActiveRecord::RecordNotFound",
  "message": "That record was not found."}``.

Both can misbehave on purpose for the tests: `hang` (the API never answers)
and `junk` (a 200 page that is not JSON); `file_cookie` makes the files want a
session cookie (`refused` counts the 403s). `hits` counts requests per path.
"""

from __future__ import annotations

import asyncio
import collections
import threading
from typing import Any

from standins._http import (
    HttpServer,
    Request,
    Response,
    ServerBase,
    json_response,
    serve_forever_main,
)
from standins._mediabytes import fake_mp4, tiny_jpeg

__all__ = ["BooruServer", "MastodonServer", "main"]

JSON = dict[str, Any]
_CREATED = "2024-11-20T10:00:00.000Z"
HANG_FOR = 60.0  # longer than any test's time limit; the server's stop cancels it


class _Site(ServerBase):
    """What both stand-ins share: files, misbehaviour, hit counts."""

    def __init__(self, name: str, host: str, port: int) -> None:
        self._lock = threading.Lock()
        self._files: dict[str, tuple[bytes, str]] = {}
        self.hits: collections.Counter[str] = collections.Counter()
        self.hang = False
        self.junk = False
        # A file is refused (403) without this "name=value" in its Cookie header, as a
        # site that serves its files to signed-in sessions only does.
        self.file_cookie: str | None = None
        self.refused = 0
        self._http = HttpServer(self._handle, host=host, port=port, name=name)

    def add_file(self, path: str, data: bytes, content_type: str = "image/jpeg") -> str:
        with self._lock:
            self._files[path] = (data, content_type)
        return f"{self.url}{path}"

    def file_bytes(self, url: str) -> bytes:
        """What the file at `url` (one of ours) holds."""
        with self._lock:
            return self._files[url.removeprefix(self.url)][0]

    def file_hits(self, prefix: str) -> int:
        with self._lock:
            return sum(n for path, n in self.hits.items() if path.startswith(prefix))

    async def _handle(self, request: Request) -> Response:
        with self._lock:
            self.hits[request.path] += 1
            file = self._files.get(request.path)
        if file is not None:
            cookies = [c.strip() for c in request.header("cookie").split(";")]
            if self.file_cookie is not None and self.file_cookie not in cookies:
                with self._lock:
                    self.refused += 1
                return Response(403, b"403 Forbidden", {"content-type": "text/html"})
            return Response(200, file[0], {"content-type": file[1]})
        if self.hang:
            await asyncio.sleep(HANG_FOR)
        if self.junk:
            return Response(200, b"<html><body>Just a moment...</body></html>",
                            {"content-type": "text/html"})  # fmt: skip
        return self._api(request)

    def _api(self, request: Request) -> Response:
        raise NotImplementedError


class MastodonServer(_Site):
    """A Mastodon instance's public API (statuses) and its media files."""

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__("mastodon-standin", host, port)
        self._statuses: dict[str, JSON] = {}
        self.login_only = False

    def add_status(
        self,
        status_id: str,
        *,
        photos: int = 1,
        name: str = "Alice",
        acct: str = "alice",
        content: str = "<p>Three pictures</p>",
        sensitive: bool = False,
        gifv: int = 0,
    ) -> JSON:
        """Register a public status with `photos` images (then `gifv` silent loops);
        returns it. The server must be started: the URLs name it."""
        attachments: list[JSON] = []
        for n in range(photos + gifv):
            media_id = f"{status_id}{n:03d}"
            is_gif = n >= photos
            ext, ctype = ("mp4", "video/mp4") if is_gif else ("jpg", "image/jpeg")
            stamp = f"/system/media_attachments/files/{media_id[:3]}/{media_id[3:]}"
            data = fake_mp4(32 * 1024) if is_gif else tiny_jpeg(40 + n, 30, (40 * n % 255, 90, 160))
            url = self.add_file(f"{stamp}/original/{media_id}.{ext}", data, ctype)
            attachments.append({
                "id": media_id, "type": "gifv" if is_gif else "image", "url": url,
                "preview_url": url.replace("/original/", "/small/"), "remote_url": None,
                "preview_remote_url": None, "text_url": None,
                "meta": {"original": {"width": 40 + n, "height": 30, "size": f"{40 + n}x30",
                                      "aspect": (40 + n) / 30}},
                "description": f"picture {n + 1}",
                "blurhash": "UBL_:rOpGG-oBUNG,qRj2so|=eE1w^n4S5NH",
            })  # fmt: skip
        status: JSON = {
            "id": status_id, "created_at": _CREATED, "in_reply_to_id": None,
            "in_reply_to_account_id": None, "sensitive": sensitive,
            "spoiler_text": "nsfw" if sensitive else "", "visibility": "public",
            "language": "en", "uri": f"{self.url}/users/{acct}/statuses/{status_id}",
            "url": f"{self.url}/@{acct}/{status_id}", "replies_count": 0,
            "reblogs_count": 0, "favourites_count": 0, "edited_at": None,
            "content": content, "reblog": None, "application": None,
            "account": {
                "id": "1", "username": acct, "acct": acct, "display_name": name,
                "locked": False, "bot": False, "discoverable": True, "group": False,
                "created_at": "2022-01-01T00:00:00.000Z", "note": "", "url": f"{self.url}/@{acct}",
                "uri": f"{self.url}/users/{acct}",
                "avatar": f"{self.url}/avatars/original/missing.png",
                "avatar_static": f"{self.url}/avatars/original/missing.png",
                "header": f"{self.url}/headers/original/missing.png",
                "header_static": f"{self.url}/headers/original/missing.png",
                "followers_count": 3, "following_count": 2, "statuses_count": 1,
                "last_status_at": "2024-11-20", "emojis": [], "fields": [],
            },
            "media_attachments": attachments, "mentions": [],
            "tags": [{"name": "art", "url": f"{self.url}/tags/art"}], "emojis": [],
            "card": None, "poll": None,
        }  # fmt: skip
        with self._lock:
            self._statuses[status_id] = status
        return status

    def status_url(self, status_id: str, acct: str = "alice") -> str:
        return f"{self.url}/@{acct}/{status_id}"

    def _api(self, request: Request) -> Response:
        if not request.path.startswith("/api/v1/statuses/"):
            return json_response(404, {"error": "Record not found"})
        if self.login_only:
            return json_response(401, {"error": "This API requires an authenticated user"})
        status_id = request.path.removeprefix("/api/v1/statuses/")
        with self._lock:
            status = self._statuses.get(status_id)
        if status is None:
            return json_response(404, {"error": "Record not found"})
        return json_response(200, status, content_type="application/json; charset=utf-8")


class BooruServer(_Site):
    """A Danbooru instance's post API and its files."""

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__("booru-standin", host, port)
        self._posts: dict[int, JSON] = {}

    def add_post(
        self, post_id: int, *, artist: str = "mitsuki_art", rating: str = "g", tags: str = "1girl"
    ) -> JSON:
        data = tiny_jpeg(48, 64)
        md5 = f"{post_id:032x}"
        url = self.add_file(f"/data/original/{md5[:2]}/{md5[2:4]}/{md5}.jpg", data)
        post: JSON = {
            "id": post_id, "created_at": "2024-11-20T10:00:00.000-05:00", "uploader_id": 7,
            "score": 12, "source": "", "md5": md5, "last_comment_bumped_at": None,
            "rating": rating, "image_width": 48, "image_height": 64,
            "tag_string": f"{tags} {artist} original", "fav_count": 3, "file_ext": "jpg",
            "last_noted_at": None, "parent_id": None, "has_children": False,
            "approver_id": None, "tag_count_general": 1, "tag_count_artist": 1,
            "tag_count_character": 0, "tag_count_copyright": 1, "file_size": len(data),
            "up_score": 12, "down_score": 0, "is_pending": False, "is_flagged": False,
            "is_deleted": False, "tag_count": 3, "updated_at": "2024-11-20T10:00:00.000-05:00",
            "is_banned": False, "pixiv_id": None, "last_commented_at": None,
            "has_active_children": False, "bit_flags": 0, "tag_count_meta": 0,
            "has_large": False, "has_visible_children": False, "media_asset": {},
            "tag_string_general": tags, "tag_string_character": "",
            "tag_string_copyright": "original", "tag_string_artist": artist,
            "tag_string_meta": "", "file_url": url, "large_file_url": url,
            "preview_file_url": url.replace("/original/", "/preview/"),
        }  # fmt: skip
        with self._lock:
            self._posts[post_id] = post
        return post

    def post_url(self, post_id: int) -> str:
        return f"{self.url}/posts/{post_id}"

    def _api(self, request: Request) -> Response:
        path = request.path
        if path.startswith("/posts/") and path.endswith(".json"):
            raw = path.removeprefix("/posts/").removesuffix(".json")
            with self._lock:
                post = self._posts.get(int(raw)) if raw.isdigit() else None
            if post is not None:
                return json_response(200, post, content_type="application/json; charset=utf-8")
        return json_response(404, {"success": False, "error": "ActiveRecord::RecordNotFound",
                                   "message": "That record was not found."})  # fmt: skip


def gallerydl_config(
    mastodon: MastodonServer | None = None,
    booru: BooruServer | None = None,
    *,
    cookies: dict[str, str] | None = None,
) -> JSON:
    """A gallery-dl config that knows the stand-ins as instances of their sites
    (``standin``, ``standbooru``); `cookies` for the Mastodon one."""
    extractor: JSON = {}
    if mastodon is not None:
        extractor["mastodon"] = {"standin": {"root": mastodon.url}}
        if cookies is not None:
            extractor["standin"] = {"cookies": cookies}
    if booru is not None:
        extractor["Danbooru"] = {"standbooru": {"root": booru.url}}
    return {"extractor": extractor}


def main(argv: list[str] | None = None) -> None:
    """``python -m standins.gallery_sites mastodon|booru [--port N]``."""
    import argparse

    parser = argparse.ArgumentParser(description="Local Mastodon / Danbooru stand-in")
    parser.add_argument("site", choices=("mastodon", "booru"))
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    server: ServerBase = (
        MastodonServer(port=args.port) if args.site == "mastodon" else BooruServer(port=args.port)
    )
    serve_forever_main(server, f"{args.site}-standin")


if __name__ == "__main__":
    main()
