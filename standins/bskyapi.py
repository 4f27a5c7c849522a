"""A local stand-in for Bluesky: the public AppView, the PLC directory and a PDS's blobs.

    with BskyApiServer() as bsky:
        bsky.add_post("alice.bsky.social", "3l4omssdl632g", text="hi", images=[photo_url])
        # GET {bsky.url}/xrpc/app.bsky.feed.getPostThread?uri=at://{did}/app.bsky.feed.post/{rkey}

One server, three roles, each on its own path prefix so the bot sees them
as it would the real ones:

- ``/xrpc/com.atproto.identity.resolveHandle`` and ``/xrpc/app.bsky.feed.getPostThread``
  as ``public.api.bsky.app`` answers them (shapes: the atproto lexicons
  ``app.bsky.feed.defs#threadViewPost``/``#notFoundPost``/``#blockedPost``,
  ``app.bsky.embed.images#view``, ``video#view``, ``record#view``,
  ``recordWithMedia#view``, ``external#view``; errors ``400 {"error": "NotFound"}`` and
  ``400 {"error": "InvalidRequest", "message": "Unable to resolve handle"}``);
- ``/plc/{did}``: the DID document, as ``plc.directory`` serves it, naming this
  server's ``/pds`` as the account's PDS (``XBOT_BSKY_PLC_URL`` = ``{url}/plc``);
- ``/pds/xrpc/com.atproto.sync.getBlob?did=…&cid=…``: a video's file; and
  ``/watch/{did}/{cid}/playlist.m3u8`` and ``thumbnail.jpg`` as ``video.bsky.app``.

`fail_next(n)` answers the next `n` AppView requests 503. `hits[path]` counts requests.
"""

from __future__ import annotations

import base64
import collections
import hashlib
import threading
from collections.abc import Iterable, Sequence
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

__all__ = ["BskyApiServer", "did_for", "fake_cid", "main"]

JSON = dict[str, Any]
CREATED = "2024-11-20T10:00:00.000Z"


def did_for(handle: str) -> str:
    """A stable did:plc for a handle: 24 base32 characters, like the real ones."""
    digest = hashlib.sha256(handle.encode()).digest()
    return "did:plc:" + base64.b32encode(digest).decode().lower()[:24]


def fake_cid(seed: str) -> str:
    """A CIDv1-looking string (``bafkrei`` + base32), stable per seed."""
    digest = hashlib.sha256(seed.encode()).digest()
    return "bafkrei" + base64.b32encode(digest).decode().lower().rstrip("=")[:52]


@attrs.define
class _Blob:
    data: bytes
    mime: str


def _author(did: str, handle: str, name: str, labels: Sequence[str] = ()) -> JSON:
    return {
        "did": did,
        "handle": handle,
        "displayName": name,
        "avatar": f"https://cdn.bsky.app/img/avatar/plain/{did}/{fake_cid(did)}@jpeg",
        "associated": {"chat": {"allowIncoming": "following"}},
        "labels": [{"src": did, "uri": f"at://{did}/app.bsky.actor.profile/self",
                    "cid": fake_cid(did + "p"), "val": v, "cts": CREATED} for v in labels],
        "createdAt": "2023-04-01T00:00:00.000Z",
    }  # fmt: skip


def _blob_ref(cid: str, mime: str, size: int) -> JSON:
    return {"$type": "blob", "ref": {"$link": cid}, "mimeType": mime, "size": size}


class BskyApiServer(ServerBase):
    """The Bluesky stand-in. Thread-safe; usable from sync and async code.

    Attributes:
        hits: requests per path.
    """

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self._lock = threading.Lock()
        self._handles: dict[str, str] = {}
        self._threads: dict[tuple[str, str], tuple[int, JSON]] = {}
        self._docs: set[str] = set()
        self._blobs: dict[tuple[str, str], _Blob] = {}
        self._fail = 0
        self.hits: collections.Counter[str] = collections.Counter()
        self._http = HttpServer(self._handle, host=host, port=port, name="bskyapi-standin")

    @property
    def plc_url(self) -> str:
        return f"{self.url}/plc"

    # ------------------------------------------------------------------ registry

    def add_account(self, handle: str, did: str | None = None) -> str:
        did = did or did_for(handle)
        with self._lock:
            self._handles[handle.lower()] = did
            self._docs.add(did)
        return did

    def video_blob(self, did: str, data: bytes, mime: str = "video/mp4") -> JSON:
        """Store a video file on the PDS; returns its view and its record embed."""
        cid = fake_cid(hashlib.sha256(data).hexdigest())
        with self._lock:
            self._blobs[(did, cid)] = _Blob(data, mime)
        watch = f"{self.url}/watch/{did.replace(':', '%3A')}/{cid}"
        return {
            "view": {"$type": "app.bsky.embed.video#view", "cid": cid,
                     "playlist": f"{watch}/playlist.m3u8", "thumbnail": f"{watch}/thumbnail.jpg",
                     "aspectRatio": {"width": 1280, "height": 720}},
            "record": {"$type": "app.bsky.embed.video", "video": _blob_ref(cid, mime, len(data)),
                       "aspectRatio": {"width": 1280, "height": 720}},
        }  # fmt: skip

    def build_post(
        self,
        handle: str,
        rkey: str,
        *,
        name: str = "Alice",
        text: str = "",
        facets: Sequence[JSON] = (),
        images: Iterable[str | JSON] = (),
        video: bytes | None = None,
        external: str | None = None,
        quote: JSON | None = None,
        labels: Sequence[str] = (),
        author_labels: Sequence[str] = (),
    ) -> JSON:
        """A ``postView`` (what ``thread.post`` holds) for the account `handle`.

        `images` are fullsize URLs (or dicts with url, alt, width, height), in
        order; `video` the bytes of a video file; `quote` another `build_post`
        result to quote (with the media, if any, as ``recordWithMedia``).
        """
        did = self.add_account(handle)
        uri = f"at://{did}/app.bsky.feed.post/{rkey}"
        record: JSON = {"$type": "app.bsky.feed.post", "createdAt": CREATED, "langs": ["en"],
                        "text": text}  # fmt: skip
        if facets:
            record["facets"] = list(facets)
        view: JSON | None = None
        embed: JSON | None = None
        shown = [{"url": i} if isinstance(i, str) else i for i in images]
        if shown:
            view = {"$type": "app.bsky.embed.images#view", "images": [
                {"thumb": i["url"], "fullsize": i["url"], "alt": i.get("alt", ""),
                 "aspectRatio": {"width": i.get("width", 1200), "height": i.get("height", 900)}}
                for i in shown]}  # fmt: skip
            embed = {"$type": "app.bsky.embed.images", "images": [
                {"alt": i.get("alt", ""),
                 "image": _blob_ref(fake_cid(i["url"]), "image/jpeg", 4096),
                 "aspectRatio": {"width": i.get("width", 1200), "height": i.get("height", 900)}}
                for i in shown]}  # fmt: skip
        elif video is not None:
            parts = self.video_blob(did, video)
            view, embed = parts["view"], parts["record"]
        elif external is not None:
            card = {"uri": external, "title": "A page", "description": "About it"}
            view = {"$type": "app.bsky.embed.external#view",
                    "external": {**card, "thumb": f"https://cdn.bsky.app/img/feed_thumbnail/plain/{did}/{fake_cid(external)}@jpeg"}}  # fmt: skip  # noqa: E501
            embed = {"$type": "app.bsky.embed.external",
                     "external": {**card, "thumb": _blob_ref(fake_cid(external), "image/jpeg", 900)}}  # fmt: skip  # noqa: E501
        if quote is not None:
            quoted = {"$type": "app.bsky.embed.record#viewRecord", "uri": quote["uri"],
                      "cid": quote["cid"], "author": quote["author"], "value": quote["record"],
                      "labels": quote.get("labels", []), "likeCount": 0, "replyCount": 0,
                      "repostCount": 0, "quoteCount": 0, "indexedAt": CREATED,
                      "embeds": [quote["embed"]] if "embed" in quote else []}  # fmt: skip
            strong = {"uri": quote["uri"], "cid": quote["cid"]}
            if view is not None and embed is not None:
                view = {"$type": "app.bsky.embed.recordWithMedia#view",
                        "record": {"record": quoted}, "media": view}  # fmt: skip
                embed = {"$type": "app.bsky.embed.recordWithMedia",
                         "record": {"$type": "app.bsky.embed.record", "record": strong},
                         "media": embed}  # fmt: skip
            else:
                view = {"$type": "app.bsky.embed.record#view", "record": quoted}
                embed = {"$type": "app.bsky.embed.record", "record": strong}
        if embed is not None:
            record["embed"] = embed
        post: JSON = {
            "uri": uri,
            "cid": fake_cid(uri),
            "author": _author(did, handle, name, author_labels),
            "record": record,
            "replyCount": 0, "repostCount": 2, "likeCount": 10, "quoteCount": 0,
            "indexedAt": CREATED,
            "viewer": {"threadMuted": False, "embeddingDisabled": False},
            "labels": [{"src": "did:plc:ar7c4by46qjdydhdevvrndac", "uri": uri, "cid": fake_cid(uri),
                        "val": v, "cts": CREATED} for v in labels],
        }  # fmt: skip
        if view is not None:
            post["embed"] = view
        return post

    def add_post(self, handle: str, rkey: str, **fields: Any) -> JSON:
        """Register a post (see `build_post`); returns its postView."""
        post = self.build_post(handle, rkey, **fields)
        thread = {"$type": "app.bsky.feed.defs#threadViewPost", "post": post, "replies": []}
        self._put(post["author"]["did"], rkey, 200, {"thread": thread})
        return post

    def add_deleted(self, handle: str, rkey: str) -> None:
        did = self.add_account(handle)
        uri = f"at://{did}/app.bsky.feed.post/{rkey}"
        self._put(did, rkey, 400, {"error": "NotFound", "message": f"Post not found: {uri}"})

    def add_blocked(self, handle: str, rkey: str) -> None:
        did = self.add_account(handle)
        uri = f"at://{did}/app.bsky.feed.post/{rkey}"
        thread = {"$type": "app.bsky.feed.defs#blockedPost", "uri": uri, "blocked": True,
                  "author": {"did": did, "viewer": {"blockedBy": False}}}  # fmt: skip
        self._put(did, rkey, 200, {"thread": thread})

    def add_raw(self, handle: str, rkey: str, body: JSON, *, status: int = 200) -> None:
        self._put(self.add_account(handle), rkey, status, body)

    def _put(self, did: str, rkey: str, status: int, body: JSON) -> None:
        with self._lock:
            self._threads[(did, rkey)] = (status, body)

    def fail_next(self, n: int) -> None:
        with self._lock:
            self._fail = n

    # ------------------------------------------------------------------ HTTP

    async def _handle(self, request: Request) -> Response:
        with self._lock:
            self.hits[request.path] += 1
        path = request.path
        if path.startswith("/xrpc/"):
            with self._lock:
                failing = self._fail > 0
                self._fail = max(0, self._fail - 1)
            if failing:
                return _json(503, {"error": "InternalServerError", "message": "upstream down"})
            if path == "/xrpc/com.atproto.identity.resolveHandle":
                return self._resolve(_arg(request, "handle"))
            if path == "/xrpc/app.bsky.feed.getPostThread":
                return self._thread(_arg(request, "uri"))
            return _json(
                501, {"error": "MethodNotImplemented", "message": "Method Not Implemented"}
            )
        if path.startswith("/plc/"):
            return self._doc(path.removeprefix("/plc/"))
        if path == "/pds/xrpc/com.atproto.sync.getBlob":
            with self._lock:
                blob = self._blobs.get((_arg(request, "did"), _arg(request, "cid")))
            if blob is None:
                return _json(400, {"error": "BlobNotFound", "message": "Blob not found"})
            return Response(200, blob.data, {"content-type": blob.mime})
        if path.startswith("/watch/") and path.endswith("/playlist.m3u8"):
            body = b"#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1000000\n360p/video.m3u8\n"
            return Response(200, body, {"content-type": "application/vnd.apple.mpegurl"})
        if path.startswith("/watch/") and path.endswith("/thumbnail.jpg"):
            return Response(200, tiny_jpeg(320, 180), {"content-type": "image/jpeg"})
        return _json(404, {"error": "NotFound", "message": "Not Found"})

    def _resolve(self, handle: str) -> Response:
        with self._lock:
            did = self._handles.get(handle.lower())
        if did is None:
            return _json(400, {"error": "InvalidRequest", "message": "Unable to resolve handle"})
        return _json(200, {"did": did})

    def _thread(self, uri: str) -> Response:
        actor, _, rest = uri.removeprefix("at://").partition("/app.bsky.feed.post/")
        with self._lock:
            did = actor if actor.startswith("did:") else self._handles.get(actor.lower(), "")
            found = self._threads.get((did, rest))
        if found is None:
            return _json(400, {"error": "NotFound", "message": f"Post not found: {uri}"})
        status, body = found
        return _json(status, body)

    def _doc(self, did: str) -> Response:
        with self._lock:
            known = did in self._docs
        if not known:
            return _json(404, {"message": f"DID not registered: {did}"})
        return _json(200, {
            "@context": ["https://www.w3.org/ns/did/v1", "https://w3id.org/security/multikey/v1"],
            "id": did,
            "alsoKnownAs": [f"at://{h}" for h, d in self._handles.items() if d == did],
            "verificationMethod": [{"id": f"{did}#atproto", "type": "Multikey",
                                    "controller": did, "publicKeyMultibase": "zQ3sh" + "x" * 44}],
            "service": [{"id": "#atproto_pds", "type": "AtprotoPersonalDataServer",
                         "serviceEndpoint": f"{self.url}/pds"}],
        })  # fmt: skip


def _arg(request: Request, name: str) -> str:
    values = request.query.get(name) or [""]
    return values[0]


def _json(status: int, body: JSON) -> Response:
    return json_response(status, body, content_type="application/json; charset=utf-8")


def main(argv: list[str] | None = None) -> None:
    """``python -m standins.bskyapi [--port N]``: one sample account with a text post."""
    import argparse

    parser = argparse.ArgumentParser(description="Local Bluesky AppView/PLC/PDS stand-in")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    server = BskyApiServer(port=args.port)
    server.add_post("alice.bsky.social", "3l4omssdl632g", text="hello from the stand-in")
    serve_forever_main(server, "bskyapi-standin")


if __name__ == "__main__":
    main()
