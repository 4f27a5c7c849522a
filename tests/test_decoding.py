"""Content-Encoding decoded in bounded steps (`xbot.media.decoding`): a table of codings,
legit and hostile, and the bound on every step."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterator

import pytest

from standins.media_server import bomb
from xbot.errors import FetchError
from xbot.media.decoding import MAX_LAYERS, STEP, BodyDecoder, encodings

TEXT = b'{"text": "hello"}' * 5000  # 85 KB of JSON-ish text: more than one step


def raw_deflate(data: bytes) -> bytes:
    c = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    return c.compress(data) + c.flush()


def split(data: bytes, size: int) -> Iterator[bytes]:
    return (data[i : i + size] for i in range(0, len(data), size))


def decode(header: str | None, body: bytes, chunk: int = 65536) -> bytes:
    decoder = BodyDecoder(header, who="the media server")
    out = b"".join(piece for raw in split(body, chunk) for piece in decoder.feed(raw))
    assert decoder.complete()
    return out


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (None, []),
        ("", []),
        ("identity", []),
        ("gzip", ["gzip"]),
        ("GZip", ["gzip"]),
        ("x-gzip", ["x-gzip"]),
        ("deflate", ["deflate"]),
        ("deflate, gzip", ["gzip", "deflate"]),  # undone in the reverse of their order
        ("gzip,identity, gzip", ["gzip", "gzip"]),
        (", ".join(["gzip"] * MAX_LAYERS), ["gzip"] * MAX_LAYERS),
        (", ".join(["gzip"] * (MAX_LAYERS + 1)), None),
        ("br", None),
        ("zstd", None),
        ("compress", None),
        ("gzip, br", None),
        ("chunked", None),
    ],
    ids=repr,
)
def test_encodings(header: str | None, expected: list[str] | None) -> None:
    assert encodings(header) == expected


@pytest.mark.parametrize(
    ("header", "body"),
    [
        (None, TEXT),
        ("identity", TEXT),
        ("gzip", gzip.compress(TEXT)),
        ("x-gzip", gzip.compress(TEXT)),
        ("deflate", zlib.compress(TEXT)),
        ("deflate", raw_deflate(TEXT)),
        ("gzip, gzip", gzip.compress(gzip.compress(TEXT))),
        ("deflate, gzip", gzip.compress(zlib.compress(TEXT))),
        ("gzip", gzip.compress(TEXT) + b"junk after the end"),
    ],
    ids=[
        "none",
        "identity",
        "gzip",
        "x-gzip",
        "deflate-zlib",
        "deflate-raw",
        "gzip-gzip",
        "deflate-gzip",
        "trailing-junk",
    ],
)
@pytest.mark.parametrize("chunk", [1, 7, 65536], ids=["1B", "7B", "64KiB"])
def test_legit_bodies_decode_whole(header: str | None, body: bytes, chunk: int) -> None:
    assert decode(header, body, chunk) == TEXT


@pytest.mark.parametrize("header", ["br", "zstd", "compress", "gzip, " * MAX_LAYERS + "gzip"])
def test_refused_codings_say_who(header: str) -> None:
    with pytest.raises(FetchError, match=r"^Bluesky sent data I could not decode"):
        BodyDecoder(header, who="Bluesky")


@pytest.mark.parametrize(
    ("header", "body"),
    [
        ("gzip", b"not gzip at all"),
        ("deflate", b"\x78\x9c" + b"\xff" * 20),
        ("gzip, gzip", gzip.compress(b"inner is not gzip")),
    ],
    ids=["gzip", "deflate", "inner-layer"],
)
def test_corrupt_data_is_undecodable(header: str, body: bytes) -> None:
    decoder = BodyDecoder(header, who="the media server")
    with pytest.raises(FetchError, match=r"^The media server sent data I could not decode"):
        list(decoder.feed(body))


@pytest.mark.parametrize("header", ["gzip", "deflate", "gzip, gzip"])
def test_a_body_cut_short_is_not_complete(header: str) -> None:
    body = bomb(1024 * 1024, header)
    decoder = BodyDecoder(header, who="the media server")
    for _ in decoder.feed(body[: len(body) // 2]):
        pass
    assert not decoder.complete()


@pytest.mark.parametrize(
    "header", ["gzip", "deflate", "gzip, gzip", "deflate, gzip", "gzip, gzip, gzip"]
)
def test_a_bomb_comes_in_bounded_steps_and_stops_when_the_reader_does(header: str) -> None:
    """8 GiB of zeros, fed whole: each piece is at most one step, and taking 1 MiB of
    them does about 1 MiB of work (the generator inflates only what is asked for)."""
    body = bomb(8 * 1024**3, header) if header.count(",") else bomb(64 * 1024**2, header)
    decoder = BodyDecoder(header, who="the media server")
    taken = 0
    for piece in decoder.feed(body):
        assert 0 < len(piece) <= STEP
        taken += len(piece)
        if taken >= 1024 * 1024:
            break
    assert taken < 1024 * 1024 + STEP
