"""A small HTTP/1.1 server for the local stand-ins, on its own event loop in a thread.

Why not `http.server`: the stand-ins must hold requests open (long polling,
hangs), stream bodies without holding them (chunked, stalls, resets) and
close every connection on stop; all of that is natural on asyncio and
awkward on threads. Why its own thread: the server then answers while the
code under test blocks its own loop, it can be used from sync code (the
demo, a soak harness) as well as from async tests, and stopping it cannot
deadlock on the caller's loop.

Only what the stand-ins need: keep-alive, Content-Length and chunked request
bodies (read whole, or streamed to a handler that asks), bytes or streamed
responses, HEAD. Everything is bounded: header
size, body size, idle keep-alive time.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import struct
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from http import HTTPStatus
from typing import Any, Self
from urllib.parse import parse_qs, unquote, urlsplit

import attrs

_log = logging.getLogger(__name__)

MAX_HEADER_BYTES = 64 * 1024
STREAM_CHUNK = 1024 * 1024  # a streamed request body arrives in pieces of at most this
KEEPALIVE_IDLE_S = 60.0
START_TIMEOUT_S = 10.0


class AbortConnection(Exception):
    """Raised by a streamed body to drop the connection with a TCP reset."""


class BodyStream:
    """A request body read as it arrives, for a handler that must not hold it (an upload).

    Iterate it once; whatever the handler leaves unread is drained before the
    answer goes out, so the connection stays in step.
    """

    def __init__(self, reader: asyncio.StreamReader, length: int | None, max_body: int) -> None:
        self._reader = reader
        self._left = length  # None: chunked
        self._max_body = max_body
        self._total = 0
        self._done = length == 0

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[bytes]:
        while not self._done:
            chunk = await (self._next_sized() if self._left is not None else self._next_chunked())
            if chunk:
                yield chunk

    async def _next_sized(self) -> bytes:
        assert self._left is not None
        chunk = await self._reader.read(min(self._left, STREAM_CHUNK))
        if not chunk:
            raise asyncio.IncompleteReadError(b"", self._left)
        self._left -= len(chunk)
        self._done = self._left == 0
        return chunk

    async def _next_chunked(self) -> bytes:
        line = await self._reader.readuntil(b"\r\n")
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise BadRequestError(400) from None
        if size == 0:
            while (await self._reader.readuntil(b"\r\n")) != b"\r\n":
                pass
            self._done = True
            return b""
        self._total += size
        if self._total > self._max_body:
            raise BadRequestError(413)
        chunk = await self._reader.readexactly(size)
        await self._reader.readexactly(2)
        return chunk

    async def drain(self) -> None:
        async for _ in self._chunks():
            pass


@attrs.frozen
class Request:
    """One parsed HTTP request.

    Attributes:
        method: upper-case method.
        path: the percent-decoded path, without the query.
        query: parsed query string (every value a list).
        headers: header names in lower case; repeated headers joined with ", ".
        body: the whole request body (empty when it is streamed).
        stream: the body as it arrives, for requests the server was told to stream.
    """

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    stream: BodyStream | None = None

    def header(self, name: str, default: str = "") -> str:
        return self.headers.get(name.lower(), default)


Body = bytes | AsyncIterator[bytes]


@attrs.define
class Response:
    """What a handler answers.

    A `bytes` body gets a Content-Length; a streamed body is sent chunked unless
    the handler set a Content-Length header itself (then it is written as-is and
    the connection closes after, because the length may be a lie on purpose).
    """

    status: int
    body: Body = b""
    headers: dict[str, str] = attrs.Factory(dict)
    close: bool = False


Handler = Callable[[Request], Awaitable[Response]]


def json_response(status: int, body: object, *, content_type: str = "application/json") -> Response:
    """`body` as JSON (UTF-8, not ASCII-escaped, as the real servers send it)."""
    return Response(
        status, json.dumps(body, ensure_ascii=False).encode(), {"content-type": content_type}
    )


class BadRequestError(Exception):
    """The request could not be parsed; answer `status` and close."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


async def _read_chunked(reader: asyncio.StreamReader, max_body: int) -> bytes:
    parts: list[bytes] = []
    total = 0
    while True:
        line = await reader.readuntil(b"\r\n")
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise BadRequestError(400) from None
        if size == 0:
            # Trailers, if any, end with an empty line.
            while (await reader.readuntil(b"\r\n")) != b"\r\n":
                pass
            return b"".join(parts)
        total += size
        if total > max_body:
            raise BadRequestError(413)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)


def _parse_head(head: bytes) -> tuple[str, str, str, dict[str, str]]:
    try:
        text = head.decode("latin-1")
        request_line, *header_lines = text.split("\r\n")
        method, target, version = request_line.split(" ")
    except ValueError:
        raise BadRequestError(400) from None
    headers: dict[str, str] = {}
    for line in header_lines:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep:
            raise BadRequestError(400)
        key = name.strip().lower()
        value = value.strip()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return method.upper(), target, version, headers


class HttpServer:
    """Serves `handler` on 127.0.0.1 in a background thread with its own loop.

    Attributes:
        host, port: where it listens once started (port 0 picks a free one).
        loop: the server's loop while running (for call_soon_threadsafe).
    """

    def __init__(
        self,
        handler: Handler,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        name: str = "standin",
        max_body: int = 64 * 1024 * 1024,
        on_stop: Callable[[], Awaitable[None]] | None = None,
        stream_body: Callable[[dict[str, str]], bool] | None = None,
    ) -> None:
        """`stream_body(headers)` true: that request's body is not read up front
        but handed over as `Request.stream`."""
        self._handler = handler
        self._stream_body = stream_body
        self.host = host
        self.port = port
        self._name = name
        self.max_body = max_body
        self._on_stop = on_stop
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._conns: set[asyncio.Task[None]] = set()
        self._ready = threading.Event()
        self._startup_errors: list[BaseException] = []
        self._stopping: asyncio.Event | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # -- lifecycle -------------------------------------------------------------

    def start_sync(self) -> None:
        if self.running:
            return
        self._ready.clear()
        self._startup_errors.clear()
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()
        if not self._ready.wait(START_TIMEOUT_S):
            raise RuntimeError(f"{self._name}: did not start within {START_TIMEOUT_S}s")
        if self._startup_errors:
            self._thread.join()
            self._thread = None
            raise self._startup_errors[0]

    def stop_sync(self, timeout: float = 10.0) -> None:
        thread, loop, stopping = self._thread, self.loop, self._stopping
        if thread is None:
            return
        if loop is not None and stopping is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop finished on its own
                loop.call_soon_threadsafe(stopping.set)
        thread.join(timeout)
        if thread.is_alive():
            raise RuntimeError(f"{self._name}: did not stop within {timeout}s")
        self._thread = None

    async def start(self) -> None:
        await asyncio.to_thread(self.start_sync)

    async def stop(self) -> None:
        await asyncio.to_thread(self.stop_sync)

    def call(self, fn: Callable[[], None]) -> None:
        """Run `fn` on the server loop soon (thread-safe); a no-op when stopped."""
        loop = self.loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(fn)

    def pause_listening_sync(self, timeout: float = 5.0) -> None:
        """Stop listening and drop every open connection: new connections are refused.

        What a client sees when the host is down or its front end restarts: an
        in-flight request loses its connection, the next one gets ECONNREFUSED.
        """
        self._on_loop(self._pause(), timeout)

    def resume_listening_sync(self, timeout: float = 5.0) -> None:
        """Listen on the same port again (after `pause_listening_sync`)."""
        self._on_loop(self._resume(), timeout)

    def _on_loop(self, coro: Coroutine[Any, Any, None], timeout: float) -> None:
        loop = self.loop
        if loop is None or threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError(f"{self._name}: not running, or called from its own loop")
        asyncio.run_coroutine_threadsafe(coro, loop).result(timeout)

    async def _pause(self) -> None:
        if self._server is not None and self._server.is_serving():
            self._server.close()
        await _let_accepted_start()
        conns = list(self._conns)
        for task in conns:
            task.cancel()
        if conns:  # closed before the caller goes on: its next request finds them gone
            await asyncio.wait(conns, timeout=2)

    async def _resume(self) -> None:
        if self._server is not None and self._server.is_serving():
            return
        self._server = await asyncio.start_server(
            self._on_connection, self.host, self.port, limit=MAX_HEADER_BYTES
        )

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self.loop = loop
        try:
            loop.run_until_complete(self._serve())
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
            self.loop = None
            self._ready.set()  # never leave start_sync waiting

    async def _serve(self) -> None:
        self._stopping = asyncio.Event()
        try:
            self._server = await asyncio.start_server(
                self._on_connection, self.host, self.port, limit=MAX_HEADER_BYTES
            )
        except OSError as exc:
            self._startup_errors.append(exc)
            self._ready.set()
            return
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        await self._stopping.wait()
        self._server.close()
        await _let_accepted_start()
        for task in list(self._conns):
            task.cancel()
        if self._conns:
            await asyncio.wait(list(self._conns), timeout=5)
        if self._on_stop is not None:
            await self._on_stop()
        await self._server.wait_closed()

    # -- connections -----------------------------------------------------------

    async def _on_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._conns.add(task)
        try:
            await self._serve_connection(reader, writer)
        except AbortConnection:
            _reset(writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            self._conns.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 1)

    async def _serve_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        while True:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), KEEPALIVE_IDLE_S)
            except (asyncio.IncompleteReadError, TimeoutError):
                return
            except asyncio.LimitOverrunError:
                await self._write_simple(writer, 431)
                return
            try:
                request, keep_alive = await self._read_request(head, reader, writer)
            except BadRequestError as exc:
                await self._write_simple(writer, exc.status)
                return
            try:
                response = await self._handler(request)
                if request.stream is not None:
                    await request.stream.drain()
            except BadRequestError as exc:
                await self._write_simple(writer, exc.status)
                return
            except (ConnectionError, asyncio.IncompleteReadError):
                raise  # the client went away in the middle of its body: no one to answer
            except AbortConnection:
                raise  # the handler asks for a reset before any answer: `_on_connection` does it
            except Exception:
                # A bug in a stand-in must show up as a 500, not as a silent hang-up.
                _log.exception(
                    "%s: handler failed for %s %s", self._name, request.method, request.path
                )
                response = Response(500, b"Internal Server Error", close=True)
            keep_alive = keep_alive and not response.close
            keep_alive = await self._write_response(writer, request, response, keep_alive)
            if not keep_alive:
                return

    async def _read_request(
        self, head: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> tuple[Request, bool]:
        method, target, version, headers = _parse_head(head[:-4])
        keep_alive = version == "HTTP/1.1" and "close" not in headers.get("connection", "").lower()
        if headers.get("expect", "").lower() == "100-continue":
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        stream: BodyStream | None = None
        body = b""
        chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        if chunked and self._stream_body is not None and self._stream_body(headers):
            stream = BodyStream(reader, None, self.max_body)
        elif chunked:
            body = await _read_chunked(reader, self.max_body)
        else:
            try:
                length = int(headers.get("content-length", "0"))
            except ValueError:
                raise BadRequestError(400) from None
            if length < 0:
                raise BadRequestError(400)
            if length > self.max_body:
                # Read and drop it so the client sees the 413 rather than a broken pipe.
                remaining = length
                while remaining > 0:
                    chunk = await reader.read(min(remaining, 1 << 20))
                    if not chunk:
                        break
                    remaining -= len(chunk)
                raise BadRequestError(413)
            if self._stream_body is not None and self._stream_body(headers):
                stream = BodyStream(reader, length, self.max_body)
            elif length:
                body = await reader.readexactly(length)
        parts = urlsplit(target)
        request = Request(
            method=method,
            path=unquote(parts.path),
            query=parse_qs(parts.query, keep_blank_values=True),
            headers=headers,
            body=body,
            stream=stream,
        )
        return request, keep_alive

    async def _write_simple(self, writer: asyncio.StreamWriter, status: int) -> None:
        reason = HTTPStatus(status).phrase
        body = reason.encode()
        writer.write(
            f"HTTP/1.1 {status} {reason}\r\nContent-Length: {len(body)}\r\n"
            f"Connection: close\r\n\r\n".encode()
            + body
        )
        with contextlib.suppress(ConnectionError):
            await writer.drain()

    async def _write_response(
        self,
        writer: asyncio.StreamWriter,
        request: Request,
        response: Response,
        keep_alive: bool,
    ) -> bool:
        headers = {k.lower(): v for k, v in response.headers.items()}
        body = response.body
        streamed = not isinstance(body, bytes)
        raw_stream = streamed and "content-length" in headers
        if isinstance(body, bytes):
            headers.setdefault("content-length", str(len(body)))
        elif not raw_stream:
            headers["transfer-encoding"] = "chunked"
        if raw_stream or (isinstance(body, bytes) and int(headers["content-length"]) != len(body)):
            keep_alive = False  # the length may be a deliberate lie: do not reuse
        headers["connection"] = "keep-alive" if keep_alive else "close"
        try:
            reason = HTTPStatus(response.status).phrase
        except ValueError:
            reason = "Unknown"
        lines = [f"HTTP/1.1 {response.status} {reason}"]
        lines += [f"{_title(k)}: {v}" for k, v in headers.items()]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        if request.method == "HEAD":
            if not isinstance(body, bytes):
                await _aclose(body)
            await writer.drain()
            return keep_alive
        if isinstance(body, bytes):
            writer.write(body)
            await writer.drain()
            return keep_alive
        try:
            async for chunk in body:
                if not chunk:
                    continue
                if raw_stream:
                    writer.write(chunk)
                else:
                    writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                await writer.drain()
            if not raw_stream:
                writer.write(b"0\r\n\r\n")
            await writer.drain()
        finally:
            await _aclose(body)
        return keep_alive


async def _aclose(body: AsyncIterator[bytes]) -> None:
    close = getattr(body, "aclose", None)
    if close is not None:
        with contextlib.suppress(Exception):
            await close()


def _title(name: str) -> str:
    return "-".join(part.capitalize() for part in name.split("-"))


async def _let_accepted_start() -> None:
    """Let connections accepted just before the listener closed start their task.

    A task cancelled before its first step never runs its body, so its ``finally``
    would never close the writer: the transport is left open (a ResourceWarning when
    it is collected, in whatever test runs then). Each accepted connection's task is
    scheduled with ``call_soon``; a few loop turns put it inside its ``try``.
    """
    for _ in range(3):
        await asyncio.sleep(0)


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with RST instead of FIN: SO_LINGER on with a zero timeout."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport = writer.transport
    transport.abort()


class ServerBase:
    """Lifecycle shared by the stand-ins: sync and async start/stop, both context managers."""

    _http: HttpServer

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:40123`` (valid once started)."""
        return self._http.url

    @property
    def port(self) -> int:
        return self._http.port

    def start_sync(self) -> Self:
        self._http.start_sync()
        return self

    def stop_sync(self) -> None:
        self._http.stop_sync()

    async def start(self) -> Self:
        await self._http.start()
        return self

    async def stop(self) -> None:
        await self._http.stop()

    def __enter__(self) -> Self:
        return self.start_sync()

    def __exit__(self, *exc: object) -> None:
        self.stop_sync()

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


def serve_forever_main(server: ServerBase, name: str) -> None:
    """Body of each stand-in's `main()`: start, print the port, run until SIGINT/SIGTERM."""
    import signal

    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    server.start_sync()
    # One line a parent can read to learn the port; flush so a pipe sees it at once.
    print(f"{name} listening on {server.url} port {server.port}", flush=True)
    try:
        while not done.wait(0.5):
            pass
    finally:
        server.stop_sync()
