"""The operator's HTTP listener (`XBOT_METRICS_ADDR`): a few GET paths on the bot's own loop.

Why not prometheus_client's `start_http_server`: it serves the global
registry from a thread of its own, and readiness must be answered by the
event loop it vouches for. Why not tornado (PTB's webhook server): long
polling needs no web server, and a scrape is one small request. So: a
minimal HTTP/1.1 answer per connection on asyncio, bounded in header size
and time, ``Connection: close``; GET and HEAD only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from http import HTTPStatus

from xbot.logs import kv

log = logging.getLogger(__name__)

Answer = tuple[int, str, bytes]
Route = Callable[[], Awaitable[Answer]]

MAX_HEAD = 8 * 1024  # a scrape's request line and headers are a few hundred bytes
READ_WITHIN = 5.0  # a client that sends nothing for this long is dropped
TEXT = "text/plain; charset=utf-8"
# A client that went away, or never finished asking (too long, too slow): no answer.
_GONE = (ConnectionError, TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError)


class Listener:
    """Serves `routes` (path -> answer) on host:port until `stop`.

    Args:
        port: 0 picks a free port (tests); `port` then tells which.
    """

    def __init__(self, host: str, port: int, routes: Mapping[str, Route]) -> None:
        self._host = host
        self._port = port
        self._routes = dict(routes)
        self._server: asyncio.Server | None = None
        self._clients: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        assert self._server is not None, "not started"
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        self._server = await asyncio.start_server(
            self._serve, self._host, self._port, limit=MAX_HEAD
        )
        log.info("ops listener %s", kv(listen=f"{self._host}:{self.port}"))

    async def stop(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for task in list(self._clients):
            task.cancel()
        await asyncio.gather(*self._clients, return_exceptions=True)
        await self._server.wait_closed()
        self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        me = asyncio.current_task()
        if me is not None:
            self._clients.add(me)
        try:
            await self._answer(reader, writer)
        except (
            ConnectionError,
            TimeoutError,
            asyncio.IncompleteReadError,
            asyncio.LimitOverrunError,
        ):
            pass
        finally:
            if me is not None:
                self._clients.discard(me)
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async with asyncio.timeout(READ_WITHIN):
            head = await reader.readuntil(b"\r\n\r\n")
        parts = head.split(b"\r\n", 1)[0].decode("latin-1").split()
        if len(parts) != 3:
            await _write(writer, 400, TEXT, b"bad request\n", head=False)
            return
        method, target, _version = parts
        path = target.split("?", 1)[0]
        if method not in ("GET", "HEAD"):
            await _write(writer, 405, TEXT, b"only GET and HEAD\n", head=False)
            return
        route = self._routes.get(path)
        if route is None:
            known = " ".join(sorted(self._routes))
            await _write(writer, 404, TEXT, f"not found; try {known}\n".encode(), head=False)
            return
        status, content_type, body = await route()
        await _write(writer, status, content_type, body, head=method == "HEAD")


async def _write(
    writer: asyncio.StreamWriter, status: int, content_type: str, body: bytes, *, head: bool
) -> None:
    reason = HTTPStatus(status).phrase
    writer.write(
        (
            f"HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n"
        ).encode("latin-1")
        + (b"" if head else body)
    )
    await writer.drain()
