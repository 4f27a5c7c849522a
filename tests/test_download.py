"""Capped streaming downloads: real misbehaving servers on 127.0.0.1, and MockTransport."""

from __future__ import annotations

import asyncio
import gzip
import socket
import struct
import tracemalloc
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from standins.media_server import MediaServer as StandinMedia
from standins.media_server import bomb
from xbot.errors import (
    BlockedAddress,
    FetchError,
    PostUnavailable,
    TooLarge,
    TransientFetch,
    UnsupportedLink,
)
from xbot.media.download import CHUNK_SIZE, download, http_error, status_error, too_large
from xbot.media.netguard import make_client

KB = 1024
CAP = 256 * KB

Route = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class MediaServer:
    """Raw HTTP on 127.0.0.1, one scripted behaviour per path, so servers can misbehave."""

    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.release = asyncio.Event()  # stalled handlers wait on this until teardown
        self.port = 0
        self._server: asyncio.Server | None = None

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            path = head.split(b" ", 2)[1].decode()
            await self.routes[path](reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        self.release.set()
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()


def head(status: str = "200 OK", **headers: str) -> bytes:
    lines = [f"HTTP/1.1 {status}", "Connection: close"]
    lines += [f"{k.replace('_', '-')}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


BODY = bytes(range(256)) * 400  # 100 KiB


@pytest.fixture
async def server() -> AsyncIterator[MediaServer]:
    srv = MediaServer()

    async def ok(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        w.write(head(Content_Length=str(len(BODY)), Content_Type="video/mp4; codecs=avc1") + BODY)
        await w.drain()

    async def endless_chunked(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        # No Content-Length; would send 64 MiB if the client kept reading.
        w.write(head(Transfer_Encoding="chunked"))
        for _ in range(1024):
            w.write(chunk(b"x" * 64 * KB))
            await w.drain()

    async def announces_huge(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        w.write(head(Content_Length=str(10**9)) + b"x" * KB)
        await w.drain()

    async def truncated(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        w.write(head(Content_Length="100000") + b"x" * 50000)
        await w.drain()

    async def announces_little(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        w.write(head(Content_Length="10") + b"y" * (4 * CAP))
        await w.drain()

    async def reset(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        w.write(head(Transfer_Encoding="chunked") + chunk(b"z" * 10 * KB))
        await w.drain()
        sock = w.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        w.transport.abort()

    async def stall(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        # More than one read chunk first, so the client has written something.
        w.write(head(Content_Length=str(CAP)) + b"s" * (CHUNK_SIZE + KB))
        await w.drain()
        await srv.release.wait()

    async def to_ok(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        w.write(head("302 Found", Location="/ok", Content_Length="0"))
        await w.drain()

    srv.routes = {
        "/ok": ok,
        "/endless": endless_chunked,
        "/huge": announces_huge,
        "/truncated": truncated,
        "/little": announces_little,
        "/reset": reset,
        "/stall": stall,
        "/redirect": to_ok,
    }
    await srv.start()
    yield srv
    await srv.stop()


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    timeout = httpx.Timeout(5.0, read=0.3)
    async with make_client(allow_private=True, timeout=timeout, user_agent="t") as c:
        yield c


@pytest.fixture
def dest(tmp_path: Path) -> Path:
    return tmp_path / "xbot-media.mp4"


async def test_downloads_whole_file(
    server: MediaServer, client: httpx.AsyncClient, dest: Path
) -> None:
    calls: list[tuple[int, int | None]] = []
    result = await download(
        client, server.url("/ok"), dest, max_bytes=CAP, progress=lambda d, t: calls.append((d, t))
    )
    assert result.path == dest
    assert result.size == len(BODY)
    assert result.content_type == "video/mp4"
    assert dest.read_bytes() == BODY
    assert calls[-1] == (len(BODY), len(BODY))
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)


async def test_follows_redirects(
    server: MediaServer, client: httpx.AsyncClient, dest: Path
) -> None:
    result = await download(client, server.url("/redirect"), dest, max_bytes=CAP)
    assert result.size == len(BODY)


@pytest.mark.parametrize(
    ("path", "error"),
    [
        ("/endless", TooLarge),
        ("/huge", TooLarge),
        ("/truncated", TransientFetch),
        ("/reset", TransientFetch),
        ("/stall", TransientFetch),
    ],
    ids=[
        "chunked-no-length-over-cap",
        "content-length-over-cap",
        "announced-more-than-sent",
        "reset-mid-body",
        "stall-read-timeout",
    ],
)
async def test_misbehaving_servers_leave_no_file(
    server: MediaServer,
    client: httpx.AsyncClient,
    dest: Path,
    path: str,
    error: type[FetchError],
) -> None:
    written: list[int] = []
    with pytest.raises(error):
        await download(
            client, server.url(path), dest, max_bytes=CAP, progress=lambda d, t: written.append(d)
        )
    assert not dest.exists()
    if path == "/endless":
        # Stopped at the cap: never wrote past it, and read at most one chunk more.
        assert max(written) <= CAP


async def test_content_length_over_cap_is_refused_before_the_body(
    server: MediaServer, client: httpx.AsyncClient, dest: Path
) -> None:
    written: list[int] = []
    with pytest.raises(TooLarge, match="MB limit"):
        await download(
            client,
            server.url("/huge"),
            dest,
            max_bytes=CAP,
            progress=lambda d, t: written.append(d),
        )
    assert written == []


async def test_announcing_little_cannot_push_past_the_cap(
    server: MediaServer, client: httpx.AsyncClient, dest: Path
) -> None:
    # HTTP framing ends the body at Content-Length; the extra bytes are never ours.
    result = await download(client, server.url("/little"), dest, max_bytes=CAP)
    assert result.size == 10
    assert dest.read_bytes() == b"y" * 10


async def test_connection_refused_is_transient(client: httpx.AsyncClient, dest: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: connections are refused
        with pytest.raises(TransientFetch):
            await download(client, f"http://127.0.0.1:{port}/x", dest, max_bytes=CAP)
    assert not dest.exists()


async def test_guard_refuses_loopback(server: MediaServer, dest: Path) -> None:
    async with make_client(allow_private=False, timeout=httpx.Timeout(5), user_agent="t") as c:
        with pytest.raises(BlockedAddress):
            await download(c, server.url("/ok"), dest, max_bytes=CAP)
    assert not dest.exists()


async def test_cancellation_removes_the_partial_file(server: MediaServer, dest: Path) -> None:
    started = asyncio.Event()
    timeout = httpx.Timeout(5.0)  # long read timeout: only the cancel ends this
    async with make_client(allow_private=True, timeout=timeout, user_agent="t") as c:
        task = asyncio.create_task(
            download(
                c, server.url("/stall"), dest, max_bytes=CAP, progress=lambda d, t: started.set()
            )
        )
        await asyncio.wait_for(started.wait(), 5)
        assert dest.exists()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert not dest.exists()


async def test_pre_existing_dest_is_overwritten(
    server: MediaServer, client: httpx.AsyncClient, dest: Path
) -> None:
    dest.write_bytes(b"old" * 100000)
    result = await download(client, server.url("/ok"), dest, max_bytes=CAP)
    assert dest.read_bytes() == BODY
    assert result.size == len(BODY)


# -- MockTransport: statuses and lies that a real server rarely tells ----------


def mock_client(handler: Callable[[httpx.Request], httpx.Response]) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.MockTransport(handler), follow_redirects=True)


STATUS_CASES = [
    (404, PostUnavailable, "gone"),
    (410, PostUnavailable, "gone"),
    (403, PostUnavailable, "refused access"),
    (401, PostUnavailable, "refused access"),
    (429, TransientFetch, "busy"),
    (408, TransientFetch, "busy"),
    (500, TransientFetch, "HTTP 500"),
    (502, TransientFetch, "HTTP 502"),
    (503, TransientFetch, "HTTP 503"),
    (400, FetchError, "HTTP 400"),
    (418, FetchError, "HTTP 418"),
]


@pytest.mark.parametrize(
    ("status", "error", "words"), STATUS_CASES, ids=[str(s) for s, _, _ in STATUS_CASES]
)
async def test_status_classes(dest: Path, status: int, error: type[FetchError], words: str) -> None:
    async with mock_client(lambda r: httpx.Response(status, content=b"nope")) as c:
        with pytest.raises(error, match=words) as info:
            await download(c, "https://video.example/a.mp4", dest, max_bytes=CAP)
    assert type(info.value) is error
    assert not dest.exists()


async def test_fewer_bytes_than_announced_is_transient(dest: Path) -> None:
    async def body() -> AsyncIterator[bytes]:
        yield b"12345"

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"Content-Length": "10"}, content=body())

    async with mock_client(handler) as c:
        with pytest.raises(TransientFetch):
            await download(c, "https://video.example/a.mp4", dest, max_bytes=CAP)
    assert not dest.exists()


async def test_empty_body_is_an_error(dest: Path) -> None:
    async with mock_client(lambda r: httpx.Response(200, content=b"")) as c:
        with pytest.raises(FetchError, match="empty"):
            await download(c, "https://video.example/a.mp4", dest, max_bytes=CAP)
    assert not dest.exists()


async def test_body_exactly_at_the_cap_is_fine(dest: Path) -> None:
    body = b"a" * CAP
    async with mock_client(lambda r: httpx.Response(200, content=body)) as c:
        result = await download(c, "https://video.example/a.mp4", dest, max_bytes=CAP)
    assert result.size == CAP
    assert result.content_type is None


async def test_one_byte_over_the_cap_without_length(dest: Path) -> None:
    async def body() -> AsyncIterator[bytes]:
        for _ in range(4):
            yield b"a" * (CAP // 4)
        yield b"!"

    async with mock_client(lambda r: httpx.Response(200, content=body())) as c:
        with pytest.raises(TooLarge):
            await download(c, "https://video.example/a.mp4", dest, max_bytes=CAP)
    assert not dest.exists()


async def test_too_many_redirects_is_unsupported(dest: Path) -> None:
    def loop(request: httpx.Request) -> httpx.Response:
        return httpx.Response(302, headers={"Location": "/again"})

    async with mock_client(loop) as c:
        with pytest.raises(UnsupportedLink, match="redirects"):
            await download(c, "https://video.example/a.mp4", dest, max_bytes=CAP)


@pytest.mark.parametrize(
    ("exc", "error"),
    [
        (httpx.ConnectTimeout("t"), TransientFetch),
        (httpx.ReadTimeout("t"), TransientFetch),
        (httpx.PoolTimeout("t"), TransientFetch),
        (httpx.ConnectError("c"), TransientFetch),
        (httpx.ReadError("r"), TransientFetch),
        (httpx.RemoteProtocolError("p"), TransientFetch),
        (httpx.ProxyError("p"), TransientFetch),
        (httpx.TooManyRedirects("r"), UnsupportedLink),
        (httpx.UnsupportedProtocol("u"), UnsupportedLink),
        (httpx.InvalidURL("u"), UnsupportedLink),
        (httpx.DecodingError("d"), FetchError),
        (httpx.LocalProtocolError("l"), FetchError),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, Exception) else v.__name__,
)
def test_http_error_translation(exc: httpx.HTTPError, error: type[FetchError]) -> None:
    assert type(http_error(exc)) is error


@given(st.integers(min_value=100, max_value=599))
def test_status_error_is_none_exactly_for_2xx(status: int) -> None:
    error = status_error(status)
    assert (error is None) == (200 <= status < 300)
    if status >= 500:
        assert isinstance(error, TransientFetch)


def test_chunk_size_is_modest() -> None:
    # The cap can be overshot in memory by at most one chunk.
    assert CHUNK_SIZE <= 256 * KB


async def test_a_full_disk_is_a_retry_not_a_crash(
    server: MediaServer, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    # /dev/full answers every write with ENOSPC, like the data dir filling up
    # mid-download; the link to it is what gets removed, never the device.
    dest = tmp_path / "xbot-media.mp4"
    dest.symlink_to("/dev/full")
    with pytest.raises(TransientFetch, match="disk"):
        await download(client, server.url("/ok"), dest, max_bytes=CAP)
    assert not dest.is_symlink(), "the partial file goes, as for any failed download"
    assert Path("/dev/full").exists()


# -- decompression bombs (issue 30): the cap counts decoded bytes as they are produced ---

MB = 1024 * 1024
# What a refused bomb may cost the process at its peak: a few steps of 64 KiB and the
# buffers of one network read. httpx's own decoding inflated each read whole (GiBs).
BOMB_BOUND = 8 * MB


@pytest.fixture
async def media() -> AsyncIterator[StandinMedia]:
    server = await StandinMedia().start()
    try:
        yield server
    finally:
        await server.stop()


async def peak_during(work: Awaitable[object]) -> tuple[object, int]:
    """What `work` returned (or raised), and the most Python memory it held at once."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        try:
            outcome: object = await work
        except FetchError as exc:
            outcome = exc
        return outcome, tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(
    ("encoding", "size", "chunked"),
    [
        ("gzip", 128 * MB, False),
        ("gzip", 128 * MB, True),
        ("gzip, gzip", 3 * 1024 * MB, False),
        ("gzip, gzip", 3 * 1024 * MB, True),
        ("deflate", 128 * MB, False),
        ("deflate, gzip", 3 * 1024 * MB, True),
    ],
    ids=[
        "gzip",
        "gzip-chunked",
        "gzip-gzip",
        "gzip-gzip-chunked",
        "deflate",
        "deflate-gzip-chunked",
    ],
)
async def test_a_bomb_is_refused_at_the_cap_in_bounded_memory(
    media: StandinMedia, client: httpx.AsyncClient, dest: Path,
    encoding: str, size: int, chunked: bool,
) -> None:  # fmt: skip
    """Bytes that inflate far past the cap: TooLarge with the cap's sentence, no file
    left, never more than the cap written, and the process never holds much of it."""
    body = bomb(size, encoding)
    url = media.add("/b.jpg", body, "image/jpeg", chunked=chunked,
                    headers={"content-encoding": encoding})  # fmt: skip
    seen: list[int] = []
    outcome, peak = await peak_during(
        download(client, url, dest, max_bytes=CAP, progress=lambda done, _: seen.append(done))
    )
    assert isinstance(outcome, TooLarge), outcome
    assert outcome.reason == too_large(CAP).reason  # the cap's own sentence
    assert not dest.exists()
    assert seen
    assert seen[-1] <= CAP
    assert peak < BOMB_BOUND, f"{encoding}: held {peak / MB:.0f} MB at once"


async def test_a_gzipped_jpeg_under_the_cap_that_inflates_over_it(
    media: StandinMedia, client: httpx.AsyncClient, dest: Path
) -> None:
    """7 KB on the wire, a jpeg by its label, 64 MiB inflated: the cap is on what it is."""
    body = bomb(64 * MB)
    assert len(body) < CAP
    url = media.add("/p.jpg", body, "image/jpeg", headers={"content-encoding": "gzip"})
    with pytest.raises(TooLarge):
        await download(client, url, dest, max_bytes=CAP)
    assert not dest.exists()


@pytest.mark.parametrize(
    ("encoding", "wire"),
    [
        ("gzip", gzip.compress),
        ("deflate", zlib.compress),
        ("gzip, gzip", lambda b: gzip.compress(gzip.compress(b))),
    ],
    ids=["gzip", "deflate", "gzip-gzip"],
)
@pytest.mark.parametrize("chunked", [False, True], ids=["length", "chunked"])
async def test_a_legit_encoded_file_under_the_cap_arrives_decoded(
    media: StandinMedia, client: httpx.AsyncClient, dest: Path,
    encoding: str, wire: Callable[[bytes], bytes], chunked: bool,
) -> None:  # fmt: skip
    url = media.add("/ok.bin", wire(BODY), "image/jpeg", chunked=chunked,
                    headers={"content-encoding": encoding})  # fmt: skip
    result = await download(client, url, dest, max_bytes=CAP)
    assert result.size == len(BODY)
    assert dest.read_bytes() == BODY


@pytest.mark.parametrize("encoding", ["br", "zstd", "gzip, gzip, gzip, gzip"])
async def test_an_encoding_we_did_not_ask_for_is_refused(
    media: StandinMedia, client: httpx.AsyncClient, dest: Path, encoding: str
) -> None:
    url = media.add("/x.bin", b"\x00" * 100, "image/jpeg", headers={"content-encoding": encoding})
    with pytest.raises(FetchError, match="could not decode") as info:
        await download(client, url, dest, max_bytes=CAP)
    assert type(info.value) is FetchError
    assert not dest.exists()


async def test_media_is_asked_for_without_encoding(dest: Path) -> None:
    """Media is compressed already: the request asks for identity, whatever the site's
    own headers asked for."""
    asked: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        asked.append(request.headers.get("Accept-Encoding"))
        return httpx.Response(200, content=BODY)

    async with mock_client(handler) as c:
        await download(c, "https://m.test/a.jpg", dest, max_bytes=CAP,
                       headers={"accept-encoding": "gzip, br"})  # fmt: skip
    assert asked == ["identity"]


async def test_a_bomb_gives_the_event_loop_turns(
    media: StandinMedia, client: httpx.AsyncClient, dest: Path
) -> None:
    """A 7 KB body is one network read: what it inflates to is decoded in steps, and
    other tasks run between them."""
    url = media.add("/b.jpg", bomb(3 * 1024 * MB, "gzip, gzip"), "image/jpeg",
                    headers={"content-encoding": "gzip, gzip"})  # fmt: skip
    turns = 0
    stop = asyncio.Event()

    async def ticker() -> None:
        nonlocal turns
        while not stop.is_set():
            turns += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    try:
        with pytest.raises(TooLarge):
            await download(client, url, dest, max_bytes=16 * MB)
    finally:
        stop.set()
        await task
    # 16 MiB in 64 KiB steps: 256 turns at least, had the body come in one read.
    assert turns >= 16 * MB // CHUNK_SIZE
