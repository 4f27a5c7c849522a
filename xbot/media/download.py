"""Stream one media file to disk under a size cap; httpx's errors become ours here, once.

The cap holds without trusting the server: a Content-Length over the cap is
refused before the body, and the body is counted as it arrives (a chunked
stream has no length; h11 stops a body at the announced length, so a server
that announces little and sends much cannot push past it either). Bytes go
to disk chunk by chunk, and any failure, cancellation included, removes the
partial file.

The cap counts *decoded* bytes as they are produced. Media is already
compressed, so the request asks for ``identity``; a server that gzips the
body anyway (or stacks ``gzip, gzip``: 7 KB that inflate to 3 GiB) is read
raw and decoded in bounded steps by `xbot.media.decoding`, never by httpx,
whose ``aiter_bytes`` inflates each network read whole before the count
sees it. A body that inflates past the cap is refused after at most the
cap's worth of work, with the cap's own sentence, and each step yields to
the event loop.

Time is bounded by the speed floor (`xbot.media.speed_floor`), not only per
read: the whole request, headers included, runs under a `SpeedWatch` that the
loop feeds per chunk, and a transfer that falls under the floor is cancelled
(its connection closed as the stream's ``with`` unwinds) and refused as `TooSlow`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Callable, Mapping
from pathlib import Path

import attrs
import httpx

from xbot.errors import FetchError, PostUnavailable, TooLarge, TransientFetch, UnsupportedLink
from xbot.i18n import N_, reason_template
from xbot.media.decoding import ACCEPT_MEDIA, BodyDecoder, encodings, undecodable
from xbot.media.speed_floor import DEFAULT_FLOOR, SpeedFloor, SpeedWatch
from xbot.media.tempfiles import room

CHUNK_SIZE = 64 * 1024

Progress = Callable[[int, int | None], None]


@attrs.frozen
class DownloadResult:
    """A file on disk.

    Attributes:
        path: where it is (the `dest` the caller gave).
        size: bytes written.
        content_type: the media type the server named, without parameters, or None.
    """

    path: Path
    size: int
    content_type: str | None


def _mb(n: int) -> str:
    return f"{n / (1024 * 1024):.0f}"


OVER_LIMIT = reason_template(N_("The file is over the {limit} MB limit."))
SERVER_ERROR = reason_template(N_("The media server had an error (HTTP {status})."))
REFUSED = reason_template(N_("The media server refused the request (HTTP {status})."))
# Who answered (or did not), named in the sentences below; translated with them.
MEDIA_SERVER = N_("the media server")
NO_ANSWER = reason_template(N_("No answer in time from {who}."))
BROKE_OFF = reason_template(N_("The transfer from {who} broke off."))
NO_CONNECTION = reason_template(N_("Could not connect to {who}."))
FAILED = reason_template(N_("The transfer from {who} failed."))
DISK = reason_template(N_("The bot could not write the media to its disk ({error})."))


def too_large(max_bytes: int) -> TooLarge:
    return TooLarge(OVER_LIMIT.format(limit=_mb(max_bytes)))


def status_error(status: int) -> FetchError | None:
    """What an HTTP status of a media file means for us; None for success."""
    if 200 <= status < 300:
        return None
    if status in (404, 410):
        return PostUnavailable(N_("The media file is gone from the server."))
    if status in (401, 403, 451):
        return PostUnavailable(N_("The media server refused access to the file."))
    if status in (408, 425, 429):
        return TransientFetch(N_("The media server is busy; I will try again."))
    if status >= 500:
        return TransientFetch(SERVER_ERROR.format(status=status))
    if 300 <= status < 400:
        return UnsupportedLink(N_("The media link redirects somewhere I do not follow."))
    return FetchError(REFUSED.format(status=status))


def http_error(exc: httpx.HTTPError | httpx.InvalidURL, who: str = MEDIA_SERVER) -> FetchError:
    """The one translation of httpx's exceptions into ours (jsonget and t.co use it too).

    `who` names the other side in the sentence the user may read.
    """
    if isinstance(exc, httpx.TimeoutException):
        return TransientFetch(NO_ANSWER.format(who=who))
    if isinstance(exc, httpx.RemoteProtocolError):
        return TransientFetch(BROKE_OFF.format(who=who))
    if isinstance(exc, httpx.NetworkError):
        return TransientFetch(NO_CONNECTION.format(who=who))
    if isinstance(exc, httpx.TooManyRedirects):
        return UnsupportedLink(N_("The link redirects too many times."))
    if isinstance(exc, httpx.UnsupportedProtocol | httpx.InvalidURL):
        return UnsupportedLink(N_("The link does not lead to an http or https address."))
    if isinstance(exc, httpx.DecodingError):
        return undecodable(who)
    if isinstance(exc, httpx.LocalProtocolError):
        return FetchError(N_("I could not make a valid request for that link."))
    # ProxyError and whatever httpx adds later: a retry is the safe guess.
    return TransientFetch(FAILED.format(who=who))


def _content_length(response: httpx.Response) -> int | None:
    raw = response.headers.get("Content-Length")
    if raw is None or not raw.strip().isdigit():
        return None
    return int(raw)


def _content_type(response: httpx.Response) -> str | None:
    raw = response.headers.get("Content-Type", "")
    media_type = raw.split(";", 1)[0].strip().lower()
    return media_type or None


async def decoded(response: httpx.Response, *, who: str) -> AsyncGenerator[bytes, None]:
    """The body of a streamed response, decoded in steps of at most `decoding.STEP` bytes.

    Read raw and decoded by `BodyDecoder`, never by httpx; while it inflates,
    the event loop gets a turn after each step. A response built in memory (a
    test's MockTransport) was read, and decoded, when it was made: it comes whole.

    Raises:
        FetchError: an encoding refused, or corrupt data (`decoding.undecodable`).
        TransientFetch: fewer bytes than announced, or a coded stream cut short.
        httpx.HTTPError: from the network, for the caller to translate.
    """
    if response.is_stream_consumed:
        if response.content:
            yield response.content
        return
    decoder = BodyDecoder(response.headers.get("Content-Encoding"), who=who)
    total = _content_length(response)
    received = 0
    async for raw in response.aiter_raw(CHUNK_SIZE):
        received += len(raw)
        for piece in decoder.feed(raw):
            yield piece
            if not decoder.identity:
                # 7 KB may inflate to the whole cap: the loop gets a turn each step.
                await asyncio.sleep(0)
    if (total is not None and received != total) or not decoder.complete():
        raise TransientFetch(BROKE_OFF.format(who=who))


def _discard(path: Path) -> None:
    # Synchronous on purpose: it runs while a cancellation unwinds, where an
    # await could be cancelled again and leave the file behind; unlink is one syscall.
    path.unlink(missing_ok=True)


async def download(
    client: httpx.AsyncClient,
    url: str,
    dest: Path,
    *,
    max_bytes: int,
    progress: Progress | None = None,
    headers: Mapping[str, str] | None = None,
    floor: SpeedFloor = DEFAULT_FLOOR,
) -> DownloadResult:
    """GET `url` into `dest`, at most `max_bytes` bytes, no slower than `floor`."""
    watch = SpeedWatch(floor)
    with room(dest.parent, max_bytes):  # the whole cap may land on the disk
        async with watch.held():
            return await _stream(
                client, url, dest, watch, max_bytes=max_bytes, progress=progress, headers=headers
            )


async def _stream(
    client: httpx.AsyncClient,
    url: str,
    dest: Path,
    watch: SpeedWatch,
    *,
    max_bytes: int,
    progress: Progress | None,
    headers: Mapping[str, str] | None,
) -> DownloadResult:
    """`download` under its watch.

    `progress(done, total)` is called after each chunk (total is None without
    a Content-Length); the caller throttles what it shows. `headers` go with
    the request (a host that answers 403 without its own Referer).

    Raises:
        TooLarge: announced or actual size over `max_bytes`.
        TooSlow: under the speed floor (raised by the watch around it).
        TransientFetch: timeouts, resets, truncated bodies, 5xx, 429; a local
            disk that refuses the write (full), or has too little room for the
            cap (`tempfiles.room`).
        PostUnavailable: 404/410 (the file is gone), 401/403.
        BlockedAddress: the SSRF guard refused a hop (from a guarded client).
        UnsupportedLink, FetchError: other permanent failures.
    """
    sent = httpx.Headers(headers)
    sent["Accept-Encoding"] = ACCEPT_MEDIA  # a site's own headers may not ask for gzip
    try:
        async with client.stream("GET", url, headers=sent) as response:
            error = status_error(response.status_code)
            if error is not None:
                raise error
            total = _content_length(response)
            if total is not None and total > max_bytes:
                raise too_large(max_bytes)
            # Content-Length counts the encoded bytes: no total to show while decoding.
            plain = encodings(response.headers.get("Content-Encoding")) == []
            shown = total if plain else None
            size = 0
            with dest.open("wb") as out:
                async with contextlib.aclosing(decoded(response, who=MEDIA_SERVER)) as chunks:
                    async for chunk in chunks:
                        size += len(chunk)
                        if size > max_bytes:
                            raise too_large(max_bytes)
                        # A plain write: ≤64 KiB into the page cache is cheaper than a thread hop.
                        out.write(chunk)
                        watch.sample(size)
                        if progress is not None:
                            progress(size, shown)
            if size == 0:
                raise FetchError(N_("The media server sent an empty file."))
            return DownloadResult(path=dest, size=size, content_type=_content_type(response))
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        _discard(dest)
        raise http_error(exc) from exc
    except OSError as exc:
        # Our side, not the server's: the disk filled up (ENOSPC) or refused the
        # write. It may pass; the task tries again later rather than crash.
        _discard(dest)
        raise TransientFetch(DISK.format(error=exc.strerror or exc)) from exc
    except BaseException:
        _discard(dest)
        raise
