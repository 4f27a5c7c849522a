"""A local stand-in for the fxtwitter-compatible status API (v1), with fault injection.

    with FxApiServer() as fx:
        fx.add_post("100", author=("Alice", "alice"), text="hi", photos=[photo_url])
        # GET {fx.url}/status/100 or {fx.url}/alice/status/100 (with a User-Agent)

Answers like api.fxtwitter.com: ``{"code": 200, "message": "OK", "tweet": {...}}``
with the status object documented by FxEmbed (text and raw_text with UTF-16
ranges, author, counts, `media` with photos[], videos[] carrying `formats[]`
or, for older payloads, `variants[]`, and all[] in post order), 401
PRIVATE_TWEET, 404 NOT_FOUND, 500 API_FAIL, 503 UPSTREAM_UNAVAILABLE with
``"tweet": null``, and 401 without a User-Agent. ``/2/status/{id}`` answers
the v2 shape ``{code, status, thread, author}``, and for a post that is gone
a 404 whose ``status`` is a tombstone naming the reason.

Faults, per post or for every request: ``garbage`` (bytes that are not JSON),
``html`` (an HTML page with status 200, as a CDN challenge answers), ``huge``
(a 20 MB JSON body, streamed), ``hang`` (no answer until stopped, at most
`MAX_HANG_S`), ``truncated`` (the connection closes mid-body),
``429``/``500``/``502``/``503``, and a `delay` before any answer. With
`set_capacity` it is overloaded as a real API is: past that many requests in
flight, each further one is answered 429 at once (``max_in_flight`` records the
most seen).
`hits[path]` counts requests. The whole service failing as real sources do
(its 503 envelope, HTML with 200, a hang, a reset, refused connections) is
`set_outage` / `refuse` / `accept`, shared with the other X source stand-ins
(`standins._outage`). The JSON itself is built in `standins._fxstatus`.
"""

from __future__ import annotations

import asyncio
import collections
import json
import re
import threading
from collections.abc import AsyncIterator, Iterable, Sequence
from datetime import UTC, datetime
from email.utils import format_datetime
from typing import Any

import attrs

from standins._fxstatus import (
    TOMBSTONE_REASONS,
    X_LADDER,
    build_status,
    tombstone_body,
    x_formats,
)
from standins._http import HttpServer, Request, Response, serve_forever_main
from standins._outage import Outages

__all__ = [
    "FAULTS",
    "TOMBSTONE_REASONS",
    "X_LADDER",
    "FxApiServer",
    "build_status",
    "main",
    "tombstone_body",
    "x_formats",
]

JSON = dict[str, Any]
FAULTS = frozenset({"garbage", "html", "huge", "hang", "truncated", "429", "500", "502", "503"})
MAX_HANG_S = 300.0
HUGE_BYTES = 20 * 1024 * 1024
_STATUS_RE = re.compile(r"^/(?:(?P<handle>[A-Za-z0-9_]{1,15})/)?status(?:es)?/(?P<id>\d{1,25})/?$")
_V2_STATUS_RE = re.compile(r"^/2/status/(?P<id>\d{1,25})/?$")
_HTML_PAGE = (
    b"<!DOCTYPE html><html><head><title>Just a moment...</title></head>"
    b"<body><h1>Checking your browser</h1></body></html>"
)


@attrs.define
class _Post:
    status: JSON | None  # None: there is no status to show (private/deleted)
    code: int = 200
    tombstone: JSON | None = None  # what v2 answers (with a 404) when status is None
    fault: str | None = None
    fault_count: int | None = None
    delay: float = 0.0


@attrs.define
class _Fault:
    mode: str
    remaining: int | None


def _error_body(code: int, message: str) -> JSON:
    return {"code": code, "message": message, "tweet": None}


_ERRORS = {
    401: "PRIVATE_TWEET",
    404: "NOT_FOUND",
    500: "API_FAIL",
    503: "UPSTREAM_UNAVAILABLE",
}


class FxApiServer(Outages):
    """The fxtwitter-compatible API stand-in. Thread-safe; usable from sync and async code.

    Attributes:
        hits: requests per path (whatever the answer).
        require_user_agent: answer 401 to requests without a User-Agent (the real one does).
    """

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(
            HttpServer(self._handle, host=host, port=port, name="fxapi-standin"),
            body_503=json.dumps(_error_body(503, "UPSTREAM_UNAVAILABLE")).encode(),
        )
        self._lock = threading.Lock()
        self._posts: dict[str, _Post] = {}
        self._global_fault: _Fault | None = None
        self._delay = 0.0
        self._capacity: int | None = None
        self._in_flight = 0
        self.max_in_flight = 0
        self.overloaded = 0  # requests refused for the capacity
        self.require_user_agent = True
        self.hits: collections.Counter[str] = collections.Counter()
        self.user_agents: list[str] = []
        self._raw: dict[str, bytes] = {}

    # ------------------------------------------------------------------ registry

    def add_post(
        self,
        post_id: str | int,
        *,
        author: tuple[str, str] = ("Alice", "alice"),
        text: str = "",
        photos: Iterable[str | JSON] = (),
        videos: Iterable[str | JSON] = (),
        gifs: Iterable[str | JSON] = (),
        media: Sequence[tuple[str, str | JSON]] | None = None,
        sensitive: bool = False,
        private: bool = False,
        deleted: bool = False,
        variants_legacy: bool = False,
        lang: str = "en",
        replying_to: str | None = None,
        quote: JSON | None = None,
        fault: str | None = None,
        fault_count: int | None = None,
        delay: float = 0.0,
        tombstone: str | None = None,
        tombstone_message: str | None = None,
        extra: JSON | None = None,
    ) -> JSON | None:
        """Register a post; returns its status object (None for private/deleted ones).

        Media go into all[] as photos, then videos, then gifs, unless `media`
        gives the post order as ``[("photo", url), ("video", {...}), ...]``.
        A video or gif given as a dict may carry width, height, duration, size,
        bitrate, thumbnail_url, or its own `formats`/`variants` list.
        `fault` (see FAULTS) applies to this post, `fault_count` times or always.
        `tombstone` (one of TOMBSTONE_REASONS) makes the post unavailable: v1
        answers 401 PRIVATE_TWEET for ``private`` and 404 NOT_FOUND for the
        rest (v1 cannot say more), v2 a 404 with the tombstone, as FxEmbed's
        test/tombstones.test.ts shows; `tombstone_message` replaces its text.
        `extra` is merged into the status object (``poll``, ``community_note``,
        ``article``, ``card``, ``media.external`` …, in FxEmbed's shapes).
        """
        post_id = str(post_id)
        if fault is not None and fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r}; one of {sorted(FAULTS)}")
        if private:
            tombstone = "private"
        elif deleted:
            tombstone = "deleted"
        if tombstone is not None:
            if tombstone not in TOMBSTONE_REASONS:
                raise ValueError(f"unknown tombstone {tombstone!r}")
            post = _Post(
                None,
                code=401 if tombstone == "private" else 404,
                tombstone=tombstone_body(post_id, tombstone, tombstone_message),
            )
        else:
            ordered = (
                list(media)
                if media is not None
                else [
                    *(("photo", p) for p in photos),
                    *(("video", v) for v in videos),
                    *(("gif", g) for g in gifs),
                ]
            )
            status = build_status(
                post_id,
                author=author,
                text=text,
                media=ordered,
                sensitive=sensitive,
                variants_legacy=variants_legacy,
                lang=lang,
                replying_to=replying_to,
                quote=quote,
            )
            for key, value in (extra or {}).items():
                if key == "media" and isinstance(value, dict):
                    status.setdefault("media", {}).update(value)
                else:
                    status[key] = value
            post = _Post(status)
        post.fault, post.fault_count, post.delay = fault, fault_count, delay
        with self._lock:
            self._posts[post_id] = post
        return post.status

    def add_raw(self, post_id: str | int, body: JSON | bytes, *, code: int = 200) -> None:
        """Answer `body` (a dict as JSON, or raw bytes) with HTTP `code` for this post."""
        if isinstance(body, dict):
            status = body.get("tweet")
            post = _Post(status if isinstance(status, dict) else None, code=code)
            post.fault = None
            with self._lock:
                self._posts[str(post_id)] = post
                self._raw[str(post_id)] = json.dumps(body).encode()
        else:
            with self._lock:
                self._posts[str(post_id)] = _Post(None, code=code)
                self._raw[str(post_id)] = body

    def remove_post(self, post_id: str | int) -> None:
        with self._lock:
            self._posts.pop(str(post_id), None)
            self._raw.pop(str(post_id), None)

    def set_fault(self, mode: str | None, *, count: int | None = None) -> None:
        """Misbehave on every status request (`count` times, or until cleared with None)."""
        if mode is not None and mode not in FAULTS:
            raise ValueError(f"unknown fault {mode!r}; one of {sorted(FAULTS)}")
        with self._lock:
            self._global_fault = _Fault(mode, count) if mode is not None else None

    def set_delay(self, seconds: float) -> None:
        with self._lock:
            self._delay = max(0.0, seconds)

    def set_capacity(self, requests: int | None) -> None:
        """Answer 429 to a request that finds `requests` others in flight (None: no limit)."""
        with self._lock:
            self._capacity = requests

    # ------------------------------------------------------------------ HTTP

    def _take_fault(self, post: _Post | None) -> str | None:
        with self._lock:
            fault = self._global_fault
            if fault is not None:
                if fault.remaining is not None:
                    fault.remaining -= 1
                    if fault.remaining <= 0:
                        self._global_fault = None
                return fault.mode
            if post is not None and post.fault is not None:
                mode = post.fault
                if post.fault_count is not None:
                    post.fault_count -= 1
                    if post.fault_count <= 0:
                        post.fault = None
                return mode
        return None

    async def _handle(self, request: Request) -> Response:
        with self._lock:
            self.hits[request.path] += 1
            full = self._capacity is not None and self._in_flight >= self._capacity
            if full:
                self.overloaded += 1
            else:
                self._in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self._in_flight)
        if full:
            return _json(429, _error_body(429, "TOO_MANY_REQUESTS"))
        try:
            return await self._answer(request)
        finally:
            with self._lock:
                self._in_flight -= 1

    async def _answer(self, request: Request) -> Response:
        with self._lock:
            delay = self._delay
        outage = await self.outage_answer()  # the whole service down (standins._outage)
        if outage is not None:
            return outage
        if request.method not in ("GET", "HEAD"):
            return _json(405, {"code": 405, "message": "METHOD_NOT_ALLOWED", "tweet": None})
        if self.require_user_agent and not request.header("user-agent").strip():
            return _json(401, {"code": 401, "message": "USER_AGENT_REQUIRED", "tweet": None})
        with self._lock:
            self.user_agents.append(request.header("user-agent"))
        v2 = _V2_STATUS_RE.match(request.path)
        m = v2 or _STATUS_RE.match(request.path)
        if m is None:
            return _json(404, _error_body(404, "NOT_FOUND"))
        post_id = m.group("id")
        with self._lock:
            post = self._posts.get(post_id)
            raw = self._raw.get(post_id)
        delay += post.delay if post is not None else 0.0
        if delay:
            await asyncio.sleep(delay)
        fault = self._take_fault(post)
        if fault is not None:
            return await _faulty(fault, post_id)
        if raw is not None:
            assert post is not None
            return Response(post.code, raw, {"content-type": "application/json"})
        if v2 is not None:
            return _v2_answer(post, post_id)
        if post is None:
            return _json(404, _error_body(404, "NOT_FOUND"))
        if post.status is None:
            return _json(post.code, _error_body(post.code, _ERRORS.get(post.code, "API_FAIL")))
        return _json(200, {"code": 200, "message": "OK", "tweet": post.status})


def _v2_answer(post: _Post | None, post_id: str) -> Response:
    """``/2/status/{id}``: ``{code, status, thread, author}``; a 404 tombstone when gone."""
    if post is None:
        body = tombstone_body(post_id, "deleted")
        return _json(404, {"code": 404, "status": body, "thread": None, "author": None})
    if post.status is None:
        body = post.tombstone or tombstone_body(post_id, "unavailable")
        return _json(404, {"code": 404, "status": body, "thread": None, "author": None})
    status = {"type": "status", **post.status}
    author = status.get("author")
    return _json(200, {"code": 200, "status": status, "thread": None, "author": author})


def _json(status: int, body: JSON) -> Response:
    return Response(
        status,
        json.dumps(body, ensure_ascii=False).encode(),
        {
            "content-type": "application/json",
            "cache-control": "max-age=60",
            "date": format_datetime(datetime.now(tz=UTC), usegmt=True),
        },
    )


async def _once(data: bytes) -> AsyncIterator[bytes]:
    yield data


async def _huge_body(post_id: str) -> AsyncIterator[bytes]:
    head = json.dumps({"code": 200, "message": "OK", "tweet": {"id": post_id, "text": ""}})
    head = head[: head.rindex('""')] + '"'
    yield head.encode()
    chunk = b"a" * (1024 * 1024)
    for _ in range(HUGE_BYTES // len(chunk)):
        yield chunk
        await asyncio.sleep(0)
    yield b'"}}'


async def _faulty(mode: str, post_id: str) -> Response:
    if mode == "hang":
        await asyncio.sleep(MAX_HANG_S)  # ended sooner by stop(): the connection is cancelled
        return Response(504, b"", close=True)
    if mode == "garbage":
        return Response(200, bytes(range(256)) * 4, {"content-type": "application/json"})
    if mode == "html":
        return Response(200, _HTML_PAGE, {"content-type": "text/html; charset=UTF-8"})
    if mode == "truncated":
        # The connection closes after half the announced body: a transport error, not bad JSON.
        body = json.dumps({"code": 200, "message": "OK", "tweet": {"id": post_id}}).encode()
        return Response(
            200,
            _once(body[: len(body) // 2]),
            {"content-type": "application/json", "content-length": str(len(body))},
        )
    if mode == "huge":
        return Response(200, _huge_body(post_id), {"content-type": "application/json"})
    if mode == "429":
        return Response(
            429,
            b'{"code":429,"message":"RATE_LIMITED","tweet":null}',
            {"content-type": "application/json", "retry-after": "1"},
        )
    code = int(mode)
    message = _ERRORS.get(code, "API_FAIL")
    return _json(code, _error_body(code, message))


def main(argv: list[str] | None = None) -> None:
    """``python -m standins.fxapi [--port N]``: an empty registry, plus one sample post."""
    import argparse

    parser = argparse.ArgumentParser(description="Local fxtwitter-compatible API stand-in")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    server = FxApiServer(port=args.port)
    server.add_post("1", text="hello from the stand-in")
    serve_forever_main(server, "fxapi-standin")


if __name__ == "__main__":
    main()
