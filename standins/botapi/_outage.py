"""The Bot API stand-in's outage modes: Telegram unreachable, the ways a client sees it.

    502         Telegram's nginx front end answers ``502 Bad Gateway`` with its HTML page
                (``text/html``), the method never runs. PTB cannot parse the body and
                raises `NetworkError("Bad Gateway (502). Parsing the server response ...")`.
    reset       the request is read, then the connection drops with a TCP reset before
                any answer; the method never runs (httpx `ReadError`/`RemoteProtocolError`,
                PTB `NetworkError`).
    hang        the request is read and never answered (until the outage is cleared, at
                most `MAX_HANG_S`); the method never runs. The client's read timeout fires
                (PTB `TimedOut`).
    hang_after  the method runs (the message is in the chat) and then the answer never
                comes: the ambiguous case, a `TimedOut` for a send that did reach the chat.
    refuse      nothing listens on the port: open connections drop, new ones are refused
                (httpx `ConnectError`, PTB `NetworkError`). Only for every method: a refusal
                happens before a request, so it cannot choose one.

Scope (`methods`): ``"send"`` is every method but getUpdates, with file downloads
still served (the issue's "sends fail, polling works"); ``"all"`` is every method,
getUpdates and ``/file/`` downloads included; or an iterable of method names.
A mode holds until `set_outage(None)` or for `count` requests.

Each request an outage answers is recorded in `calls` with the status the client
got (502, or 0 where it got no answer) and the description ``outage:<mode>``; for
``hang_after`` the method's own record (status 200) comes first.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterable

import attrs

from standins._http import AbortConnection, HttpServer, Response

__all__ = ["MAX_HANG_S", "NGINX_502", "OUTAGE_MODES", "OutageSwitch"]

OUTAGE_MODES = frozenset({"502", "reset", "hang", "hang_after", "refuse"})
MAX_HANG_S = 300.0
# nginx's own 502 page (ngx_http_special_response.c, CRLF line ends), as Telegram's front
# end sends it with server_tokens off: "nginx", no version.
NGINX_502 = (
    b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
    b"<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n"
    b"</body>\r\n</html>\r\n"
)
FILE_DOWNLOAD = "/file/"  # the pseudo-method name of a file download, for the scope


@attrs.frozen
class _Outage:
    mode: str
    methods: frozenset[str] | None  # None: all but getUpdates and downloads
    every: bool  # every method, getUpdates and downloads included


def nginx_502() -> Response:
    return Response(502, NGINX_502, {"content-type": "text/html"})


class OutageSwitch:
    """The switch, its scope and its count; thread-safe (tests flip it from their loop)."""

    def __init__(self, http: HttpServer) -> None:
        self._http = http
        self._lock = threading.Lock()
        self._outage: _Outage | None = None
        self._left: int | None = None
        self._refusing = False
        self._generation = 0  # bumped at each `set`: a hang ends when its outage is changed
        self._hang_ended: asyncio.Event | None = None
        self.hits = 0

    def set(
        self,
        mode: str | None,
        *,
        methods: str | Iterable[str] = "send",
        count: int | None = None,
    ) -> None:
        """Make Telegram unreachable (the module docstring says each mode); None ends it.

        `methods`: ``"send"`` (every method but getUpdates; downloads served), ``"all"``,
        or method names. `count`: only the next `count` calls in scope. ``"refuse"``
        closes the port (``methods="all"`` only); blocks a few ms while it does.
        """
        if mode is not None and mode not in OUTAGE_MODES:
            raise ValueError(f"unknown outage {mode!r}; one of {sorted(OUTAGE_MODES)}")
        every = methods == "all"
        scope: frozenset[str] | None = None
        if isinstance(methods, str):
            if methods not in ("send", "all"):
                raise ValueError(f'methods is "send", "all" or method names, not {methods!r}')
        else:
            scope = frozenset(methods)
        if mode == "refuse" and not every:
            raise ValueError('a refused connection cannot pick a method: use methods="all"')
        with self._lock:
            self._outage = None if mode is None else _Outage(mode, scope, every)
            self._left = count
            self._generation += 1
            ended, self._hang_ended = self._hang_ended, None
            refuse = mode == "refuse"
            changed, self._refusing = refuse != self._refusing, refuse
        if ended is not None:
            self._http.call(ended.set)  # a hang lasts until the next `set`
        if changed and refuse:
            self._http.pause_listening_sync()
        elif changed:
            self._http.resume_listening_sync()

    @property
    def mode(self) -> str | None:
        with self._lock:
            return None if self._outage is None else self._outage.mode

    def take(self, method: str) -> tuple[str, int] | None:
        """The outage mode that answers this call (and its generation), or None."""
        with self._lock:
            outage = self._outage
            if outage is None or outage.mode == "refuse" or not _in_scope(outage, method):
                return None
            self.hits += 1
            if self._left is not None:
                self._left -= 1
                if self._left <= 0:
                    self._outage, self._left = None, None
            return outage.mode, self._generation

    async def answer(self, mode: str, generation: int) -> Response:
        """What the client gets for a call taken by a 502/reset/hang outage."""
        if mode == "502":
            return nginx_502()
        if mode == "reset":
            raise AbortConnection
        await self.hang(generation)
        return Response(504, b"", close=True)  # the client has long given up

    async def hang(self, generation: int) -> None:
        """Hold the connection until this outage is changed (at most `MAX_HANG_S`).

        Runs on the server's loop; `set` wakes it through that loop. Stopping the
        server cancels it with the connection.
        """
        with self._lock:
            if self._generation != generation:
                return
            if self._hang_ended is None:
                self._hang_ended = asyncio.Event()
            ended = self._hang_ended
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(ended.wait(), MAX_HANG_S)


def _in_scope(outage: _Outage, method: str) -> bool:
    if outage.every:
        return True
    if outage.methods is not None:
        return method in outage.methods
    return method not in ("getUpdates", FILE_DOWNLOAD)
