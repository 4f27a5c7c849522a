"""Content-Encoding, decoded in bounded steps: a body that inflates is counted as it inflates.

httpx decodes ``Content-Encoding`` itself in `Response.aiter_bytes`: each
network read is inflated whole before the caller sees a byte, so a 7 KB
``gzip, gzip`` file becomes 3 GiB in memory, on the event loop, before any
size cap is looked at. Its decoders (``httpx._decoders``) are private and
have no output bound. So every body from a server we do not control is read
raw (`httpx.Response.aiter_raw`) and decoded here, with the standard
library's ``zlib`` and ``max_length``:

- every step yields at most `STEP` decoded bytes, whatever the input, so the
  caller counts decoded bytes against its cap as they are produced and stops
  a bomb after at most the cap's worth of work (and the work of one step);
- stacked encodings (``gzip, gzip``) are decoded layer by layer, each layer
  bounded the same way, up to `MAX_LAYERS` (a real server stacks none);
- ``gzip``, ``x-gzip`` and ``deflate`` (zlib-wrapped, or raw as some servers
  send it) are decoded; ``identity`` is none. Anything else is refused:
  ``br`` and ``zstd`` need libraries that are not installed (brotli's
  ``decompress`` has no output bound before 1.2 either), and ``compress``
  is dead. We never ask for them (`ACCEPT_MEDIA`, `ACCEPT_JSON`), so a
  server that sends one anyway is misbehaving.

Media files are already compressed (JPEG, MP4): gzip gains nothing there, so
downloads ask for ``identity`` and decode only what a server sends unasked.
JSON compresses well, so the sources ask for gzip and deflate.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

from xbot.errors import FetchError
from xbot.i18n import N_, reason_template

__all__ = [
    "ACCEPT_JSON",
    "ACCEPT_MEDIA",
    "MAX_LAYERS",
    "STEP",
    "UNDECODABLE",
    "BodyDecoder",
    "encodings",
    "undecodable",
]

STEP = 64 * 1024  # the most one decode step yields: small work between two counts
MAX_LAYERS = 3  # urllib3 allows 5; a real server sends one
ACCEPT_MEDIA = "identity"
ACCEPT_JSON = "gzip, deflate"

UNDECODABLE = reason_template(N_("{who} sent data I could not decode."))

_GZIP = zlib.MAX_WBITS | 16
_ZLIB = zlib.MAX_WBITS
_RAW = -zlib.MAX_WBITS
_KNOWN = {"gzip": _GZIP, "x-gzip": _GZIP, "deflate": None}


def encodings(header: str | None) -> list[str] | None:
    """The codings to undo, outermost first (the header lists them as applied); None
    when they are refused: an unknown coding, or more than `MAX_LAYERS`. Pure.

    ``identity`` and empty entries are no coding at all.
    """
    names = [n.strip().lower() for n in (header or "").split(",")]
    names = [n for n in names if n and n != "identity"]
    if len(names) > MAX_LAYERS or any(n not in _KNOWN for n in names):
        return None
    return names[::-1]


def undecodable(who: str) -> FetchError:
    """The refusal of a body whose coding is unknown, stacked too deep, or corrupt; `who`
    names the other side (a msgid: "the media server", "Bluesky"). Permanent."""
    return FetchError(UNDECODABLE.format(who=who[:1].upper() + who[1:]))


class _Layer:
    """One zlib decompressor; ``deflate`` picks zlib-wrapped or raw from the first bytes."""

    def __init__(self, name: str) -> None:
        self._wbits = _KNOWN[name]
        self._head = b""
        self._obj = None if self._wbits is None else zlib.decompressobj(self._wbits)

    @property
    def eof(self) -> bool:
        return self._obj is not None and self._obj.eof

    def pieces(self, data: bytes, step: int) -> Iterator[bytes]:
        """What `data` decodes to, at most `step` bytes at a time."""
        if self._obj is None:
            # RFC 9110's deflate is zlib-wrapped; some servers send it raw. The first
            # two bytes tell: a zlib header is CM=8 and a multiple of 31.
            self._head += data
            if len(self._head) < 2:
                return
            data, self._head = self._head, b""
            wrapped = data[0] & 0x0F == 8 and (data[0] << 8 | data[1]) % 31 == 0
            self._obj = zlib.decompressobj(_ZLIB if wrapped else _RAW)
        obj = self._obj
        while data and not obj.eof:
            out = obj.decompress(data, step)
            data = obj.unconsumed_tail
            if out:
                yield out
        # Bytes after the end of the stream (a second gzip member, junk) are
        # ignored, as httpx and yt-dlp ignore them.


class BodyDecoder:
    """Undo a response's ``Content-Encoding`` from its raw bytes, in bounded steps.

    Feed it raw chunks; each decoded piece is at most `step` bytes, and the
    caller counts them (and may stop) between pieces. With no encoding the
    raw chunks pass through as they are.
    """

    def __init__(self, content_encoding: str | None, *, who: str, step: int = STEP) -> None:
        """
        Raises:
            FetchError: the encoding is refused (`encodings`).
        """
        names = encodings(content_encoding)
        if names is None:
            raise undecodable(who)
        self._layers = [_Layer(name) for name in names]
        self._step = step
        self._who = who

    @property
    def identity(self) -> bool:
        return not self._layers

    def feed(self, raw: bytes) -> Iterator[bytes]:
        """The decoded pieces of the next raw chunk.

        Raises:
            FetchError: the data is corrupt for its coding.
        """
        try:
            yield from self._through(0, raw)
        except zlib.error as exc:
            raise undecodable(self._who) from exc

    def _through(self, index: int, data: bytes) -> Iterator[bytes]:
        if index == len(self._layers):
            if data:
                yield data
            return
        for piece in self._layers[index].pieces(data, self._step):
            yield from self._through(index + 1, piece)

    def complete(self) -> bool:
        """Whether every layer reached its end (False: the body was cut short)."""
        return all(layer.eof for layer in self._layers)
