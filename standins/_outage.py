"""Whole-service failures for the X source stand-ins: fail the way real sources fail.

    503      the source's own "upstream unavailable" error envelope
    html     an HTML error page with status 200 (CDNs, BetterTwitFix's failure page)
    hang     accept the request, answer nothing (until stopped, at most `MAX_HANG_S`)
    reset    drop the connection with a TCP reset before answering
    429      rate limited, with Retry-After

and `refuse()` / `accept()`: stop listening on the port (connections refused)
and listen on it again. Each switch holds for every request until cleared
(`set_outage(None)`), or `count` requests.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Self

from standins._http import AbortConnection, HttpServer, Response, ServerBase

OUTAGES = frozenset({"503", "html", "hang", "reset", "429"})
MAX_HANG_S = 300.0
DEFAULT_503 = b'{"error": "upstream unavailable"}'
HTML_PAGE = (
    b"<!DOCTYPE html><html><head><title>Error</title></head>"
    b"<body><h1>Failed to scan your link!</h1></body></html>"
)


async def _reset_body() -> AsyncIterator[bytes]:
    yield b"{"  # one byte of the body, then the connection drops
    raise AbortConnection


class Outages(ServerBase):
    """A stand-in that can be switched into an outage.

    Its switch is its own: a subclass hands its server and what its 503 says to
    ``__init__`` and asks `outage_answer` for each request.
    """

    def __init__(self, http: HttpServer, *, body_503: bytes = DEFAULT_503) -> None:
        self._http = http
        self._outage_lock = threading.Lock()
        self._outage: str | None = None
        self._outage_left: int | None = None
        self._outage_hits = 0
        self._body_503 = body_503

    @property
    def outage_hits(self) -> int:
        """Requests an outage answered since the start."""
        with self._outage_lock:
            return self._outage_hits

    def set_outage(self, mode: str | None, *, count: int | None = None) -> None:
        if mode is not None and mode not in OUTAGES:
            raise ValueError(f"unknown outage {mode!r}; one of {sorted(OUTAGES)}")
        with self._outage_lock:
            self._outage, self._outage_left = mode, count

    async def refuse(self) -> Self:
        """Nothing listens on the port any more: every connection is refused."""
        await self.stop()
        return self

    async def accept(self) -> Self:
        """Listen on the same port again."""
        await self.start()
        return self

    async def outage_answer(self) -> Response | None:
        """The outage's answer for this request, or None to answer normally."""
        with self._outage_lock:
            mode = self._outage
            if mode is None:
                return None
            self._outage_hits += 1
            if self._outage_left is not None:
                self._outage_left -= 1
                if self._outage_left <= 0:
                    self._outage, self._outage_left = None, None
        if mode == "hang":
            await asyncio.sleep(MAX_HANG_S)  # ended sooner by stop(): the connection is cancelled
            return Response(504, b"", close=True)
        if mode == "reset":
            return Response(200, _reset_body(), {"content-type": "application/json"})
        if mode == "html":
            return Response(200, HTML_PAGE, {"content-type": "text/html; charset=utf-8"})
        if mode == "429":
            return Response(
                429, b'{"error": "rate limited"}',
                {"content-type": "application/json", "retry-after": "1"},
            )  # fmt: skip
        return Response(503, self._body_503, {"content-type": "application/json"})
