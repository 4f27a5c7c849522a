"""PTB's request class for the bot, with uploads streamed from the file on disk.

Why a class of our own. What PTB does with a file depends on what `InputFile` holds:

- bytes (what xbot passed before, and what `InputFile` makes of a file handle
  unless told ``read_file_handle=False``): the whole file is in memory, and
  `HTTPXRequest` gives it to httpx as one piece; h11 frames it whole. A 300 MB
  upload cost +921 MB of resident memory (docs/benchmarks.md, "Uploads").
- a file handle with ``read_file_handle=False``: `HTTPXRequest` passes it on and
  httpx's multipart encoder streams it, but it reads the file synchronously on
  the event loop (64 KiB reads that block the heartbeats, polling and the
  other workers whenever the disk is slow), and its write timeout covers each
  socket write alone, so nothing bounds the upload as a whole.

So: every call that carries no file goes through PTB's own `HTTPXRequest`
unchanged. A call with files gets its multipart body produced here, in
`CHUNK`-sized pieces read off the loop (`os.pread` in a thread) from the
handles `InputFile` holds, with the Content-Length known before the first byte,
through an httpx client of its own. Either way the answer is parsed by PTB
(`BaseRequest.post`, which calls `do_request`), so Telegram's refusals reach
the sender as the same `telegram.error` types; transport failures become
`TimedOut`/`NetworkError` exactly as `HTTPXRequest` maps them.

Timeouts for an upload: ``write_timeout`` (the sender scales it with the size,
`write_timeout_for`) bounds sending the whole body, which is what it bounded
when the body went out as one write; a single write that makes no progress for
`STALL_S` is a stalled server; ``read_timeout`` waits for the answer after the
body (a local server passes the file on to Telegram before it answers).
Cancelling the calling task (a lost lease, shutdown) stops the body at the next
read or write and closes the connection.
"""

from __future__ import annotations

import asyncio
import binascii
import os
import re
from collections.abc import AsyncIterator, Mapping
from typing import IO

import attrs
import httpx
from telegram.error import NetworkError, TimedOut
from telegram.request import BaseRequest, HTTPXRequest, RequestData

from xbot.tls import client_context

__all__ = ["CHUNK", "STALL_S", "MultipartBody", "StreamingRequest"]

CHUNK = 1024 * 1024  # bytes read and written at a time: the memory an upload in flight holds
STALL_S = 60.0  # a write of one chunk that makes no progress this long: the server stopped reading

# How httpx (and browsers, per HTML5) escape a name or filename inside a form header.
_FORM_ESCAPES = {'"': "%22", "\\": "\\\\"} | {chr(c): f"%{c:02X}" for c in range(0x20) if c != 0x1B}
_FORM_ESCAPE_RE = re.compile("|".join(re.escape(c) for c in _FORM_ESCAPES))


def _form_param(name: str, value: str) -> bytes:
    escaped = _FORM_ESCAPE_RE.sub(lambda m: _FORM_ESCAPES[m.group(0)], value)
    return f'{name}="{escaped}"'.encode()


@attrs.frozen
class _Part:
    head: bytes
    content: bytes | IO[bytes]
    size: int


def _content_size(content: bytes | IO[bytes]) -> int:
    if isinstance(content, bytes):
        return len(content)
    try:
        return os.fstat(content.fileno()).st_size
    except (AttributeError, OSError, ValueError):  # no descriptor (BytesIO): measure by seeking
        end = content.seek(0, os.SEEK_END)
        content.seek(0)
        return end


class MultipartBody:
    """A multipart/form-data body, its length known up front, produced in chunks.

    The parts are laid out as httpx lays them out (fields first, then files, each
    ``--boundary`` then headers then content). File content is read from the
    handle at absolute offsets, so the handle's position does not matter and the
    body can be produced again for a second attempt.

    Attributes:
        content_type: the header value, with the boundary.
        length: the exact number of bytes `chunks` yields.
    """

    def __init__(
        self,
        fields: Mapping[str, str],
        files: Mapping[str, tuple[str, bytes | IO[bytes], str]],
        boundary: bytes | None = None,
    ) -> None:
        self._boundary = boundary or binascii.hexlify(os.urandom(16))
        parts: list[_Part] = []
        for name, value in fields.items():
            head = b"Content-Disposition: form-data; " + _form_param("name", name) + b"\r\n\r\n"
            data = value.encode()
            parts.append(_Part(head, data, len(data)))
        for name, (filename, content, mimetype) in files.items():
            head = (
                b"Content-Disposition: form-data; "
                + _form_param("name", name)
                + b"; "
                + _form_param("filename", filename)
                + f"\r\nContent-Type: {mimetype}\r\n\r\n".encode()
            )
            parts.append(_Part(head, content, _content_size(content)))
        self._parts = tuple(parts)
        self.content_type = f"multipart/form-data; boundary={self._boundary.decode()}"
        opener = len(b"--%s\r\n" % self._boundary)
        closer = len(b"--%s--\r\n" % self._boundary)
        self.length = sum(opener + len(p.head) + p.size + 2 for p in self._parts) + closer

    async def chunks(self, deadline: float | None = None) -> AsyncIterator[bytes]:
        """The body; `TimedOut` at a chunk boundary once the loop's clock is past `deadline`."""
        loop = asyncio.get_running_loop()
        for part in self._parts:
            yield b"--%s\r\n%s" % (self._boundary, part.head)
            if isinstance(part.content, bytes):
                for start in range(0, part.size, CHUNK):
                    yield part.content[start : start + CHUNK]
            else:
                sent = 0
                while sent < part.size:
                    if deadline is not None and loop.time() > deadline:
                        raise TimedOut("the upload did not finish within its write timeout")
                    chunk = await asyncio.to_thread(
                        _read_at, part.content, sent, min(CHUNK, part.size - sent)
                    )
                    if not chunk:
                        # The length went out in the headers: a file that shrank cannot be sent.
                        raise NetworkError("the file being uploaded got shorter while it was sent")
                    sent += len(chunk)
                    yield chunk
            yield b"\r\n"
        yield b"--%s--\r\n" % self._boundary


def _read_at(handle: IO[bytes], offset: int, size: int) -> bytes:
    try:
        fd = handle.fileno()
    except (AttributeError, OSError, ValueError):
        handle.seek(offset)
        return handle.read(size)
    return os.pread(fd, size, offset)


def _seconds(value: object, default: float | None) -> float | None:
    """A timeout PTB passed: a number, None (no limit), or DEFAULT_NONE (use ours)."""
    if isinstance(value, type(BaseRequest.DEFAULT_NONE)):  # PTB's DefaultValue
        return default
    if value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    raise TypeError(f"not a timeout: {value!r}")


class StreamingRequest(BaseRequest):
    """`HTTPXRequest` for calls without files; uploads streamed (see the module docstring).

    The arguments are `HTTPXRequest`'s; `media_write_timeout` is the default
    for a whole upload's body when the caller gives no ``write_timeout``.
    """

    def __init__(
        self,
        *,
        connection_pool_size: int = 64,
        read_timeout: float = 30.0,
        write_timeout: float = 30.0,
        connect_timeout: float = 10.0,
        pool_timeout: float = 1.0,
        media_write_timeout: float = 120.0,
        httpx_kwargs: Mapping[str, object] | None = None,
    ) -> None:
        self._plain = HTTPXRequest(
            connection_pool_size=connection_pool_size,
            read_timeout=read_timeout,
            write_timeout=write_timeout,
            connect_timeout=connect_timeout,
            pool_timeout=pool_timeout,
            media_write_timeout=media_write_timeout,
            httpx_kwargs={"verify": client_context(trust_env=True), **(httpx_kwargs or {})},
        )
        self._read = read_timeout
        self._connect = connect_timeout
        self._pool = pool_timeout
        self._media_write = media_write_timeout
        self._client_kwargs: dict[str, object] = {
            "limits": httpx.Limits(max_connections=connection_pool_size),
            "trust_env": False,
            "verify": client_context(trust_env=False),
            **(httpx_kwargs or {}),
        }
        self._uploads = self._build_client()

    def _build_client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(**self._client_kwargs)  # type: ignore[arg-type]

    @property
    def read_timeout(self) -> float | None:
        return self._read

    async def initialize(self) -> None:
        await self._plain.initialize()
        if self._uploads.is_closed:
            self._uploads = self._build_client()

    async def shutdown(self) -> None:
        await self._plain.shutdown()
        if not self._uploads.is_closed:
            await self._uploads.aclose()

    async def do_request(  # noqa: PLR0917 - BaseRequest's signature, called positionally
        self,
        url: str,
        method: str,
        request_data: RequestData | None = None,
        read_timeout: object = BaseRequest.DEFAULT_NONE,
        write_timeout: object = BaseRequest.DEFAULT_NONE,
        connect_timeout: object = BaseRequest.DEFAULT_NONE,
        pool_timeout: object = BaseRequest.DEFAULT_NONE,
    ) -> tuple[int, bytes]:
        if request_data is None or not request_data.contains_files:
            return await self._plain.do_request(
                url,
                method,
                request_data,
                read_timeout,  # type: ignore[arg-type]
                write_timeout,  # type: ignore[arg-type]
                connect_timeout,  # type: ignore[arg-type]
                pool_timeout,  # type: ignore[arg-type]
            )
        if self._uploads.is_closed:
            raise RuntimeError("This StreamingRequest is not initialized!")
        body = MultipartBody(request_data.json_parameters, request_data.multipart_data)
        whole = _seconds(write_timeout, self._media_write)
        deadline = None if whole is None else asyncio.get_running_loop().time() + whole
        timeout = httpx.Timeout(
            connect=_seconds(connect_timeout, self._connect),
            read=_seconds(read_timeout, self._read),
            write=STALL_S if whole is None else min(STALL_S, whole),
            pool=_seconds(pool_timeout, self._pool),
        )
        try:
            response = await self._uploads.request(
                method,
                url,
                content=body.chunks(deadline),
                headers={
                    "User-Agent": self.USER_AGENT,
                    "Content-Type": body.content_type,
                    "Content-Length": str(body.length),
                },
                timeout=timeout,
            )
        except httpx.TimeoutException as exc:  # the same translation as HTTPXRequest's
            if isinstance(exc, httpx.PoolTimeout):
                raise TimedOut(
                    "Pool timeout: All connections in the connection pool are occupied. "
                    "Request was *not* sent to Telegram."
                ) from exc
            raise TimedOut from exc
        except httpx.HTTPError as exc:
            raise NetworkError(f"httpx.{exc.__class__.__name__}: {exc}") from exc
        except OSError as exc:  # reading the file failed
            raise NetworkError(f"reading the upload failed: {exc}") from exc
        return response.status_code, response.content
