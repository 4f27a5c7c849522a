"""The post registry the X fallback stand-ins (vxtwitter, syndication) share: they
serve, each in its own shape, the posts the fxtwitter stand-in describes.

A subclass says how an fxtwitter status object looks in its shape (`_convert`)
and answers requests (`_handle`); registering posts, with the fxtwitter
stand-in's `add_post` arguments or its status objects, is done here once.
"""

from __future__ import annotations

import collections
import threading
from typing import Any

from standins._http import HttpServer, Request, Response
from standins._outage import DEFAULT_503, Outages
from standins.fxapi import build_status

JSON = dict[str, Any]
# The fxtwitter stand-in's switches, which the other shapes have no use for.
_FX_ONLY = ("fault", "fault_count", "delay")


class FxMirror(Outages):
    """An X source stand-in serving the fxtwitter stand-in's posts in its own shape. Thread-safe.

    Attributes:
        hits: requests per path.
    """

    def __init__(
        self,
        *,
        name: str,
        host: str = "127.0.0.1",
        port: int = 0,
        body_503: bytes = DEFAULT_503,
    ) -> None:
        super().__init__(
            HttpServer(self._handle, host=host, port=port, name=name), body_503=body_503
        )
        self._lock = threading.Lock()
        self._posts: dict[str, JSON] = {}
        self.hits: collections.Counter[str] = collections.Counter()

    def _convert(self, status: JSON) -> JSON:
        """The answer for the post the fxtwitter status object `status` describes."""
        raise NotImplementedError

    async def _handle(self, request: Request) -> Response:
        raise NotImplementedError

    def hit(self, path: str) -> None:
        """Count a request (`hits`)."""
        with self._lock:
            self.hits[path] += 1

    def post(self, post_id: str) -> JSON | None:
        """What is served for `post_id`, if anything."""
        with self._lock:
            return self._posts.get(post_id)

    def add_raw(self, post_id: str | int, body: JSON) -> None:
        """Serve `body` for `post_id` as it is."""
        with self._lock:
            self._posts[str(post_id)] = body

    def add_post(self, post_id: str | int, **fx_arguments: Any) -> None:
        """Register a post with the fxtwitter stand-in's `add_post` arguments."""
        if fx_arguments.pop("private", False) or fx_arguments.pop("deleted", False):
            self.remove_post(post_id)
            return
        for fx_only in _FX_ONLY:
            fx_arguments.pop(fx_only, None)
        media = fx_arguments.pop("media", None)
        if media is None:
            media = [
                *(("photo", p) for p in fx_arguments.pop("photos", ())),
                *(("video", v) for v in fx_arguments.pop("videos", ())),
                *(("gif", g) for g in fx_arguments.pop("gifs", ())),
            ]
        self.add_status(build_status(str(post_id), media=media, **fx_arguments))

    def add_status(self, status: JSON | None, post_id: str | int | None = None) -> None:
        """Serve the post an fxtwitter status object describes (None: a post it cannot show)."""
        if status is None:
            if post_id is not None:
                self.remove_post(post_id)
            return
        with self._lock:
            self._posts[str(status["id"])] = self._convert(status)

    def remove_post(self, post_id: str | int) -> None:
        with self._lock:
            self._posts.pop(str(post_id), None)
