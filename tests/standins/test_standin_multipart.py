"""The stand-in's multipart reader: any split of the body gives the same parts, file parts
land on disk with their size and digest, and a body cut short is a bad request."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from standins._botapi_wire import ApiError, form_params
from standins._multipart import MultipartReader
from standins.botapi import CLIENT_CLOSED, BotApiServer
from xbot.sending.upload_request import MultipartBody

BOUNDARY = "b0undary"
CTYPE = f"multipart/form-data; boundary={BOUNDARY}"
# Content that looks like a delimiter's start, at the edges where a split could cut one.
PAYLOAD = b"\xff\xd8\r\n--\r\n--b0undar" + bytes(range(256)) * 40 + b"\r\n--b0undar"
BODY = (
    (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="chat_id"\r\n\r\n-100\r\n'
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="media"\r\n\r\n'
        + json.dumps([{"type": "photo", "media": "attach://p1"}])
        + f'\r\n--{BOUNDARY}\r\nContent-Disposition: form-data; name="p1"; filename="a.jpg"\r\n'
        "Content-Type: image/jpeg\r\n\r\n"
    ).encode()
    + PAYLOAD
    + f"\r\n--{BOUNDARY}--\r\n".encode()
)


def read(body: bytes, cuts: list[int], folder: Path) -> MultipartReader:
    reader = MultipartReader(CTYPE, folder)
    last = 0
    for cut in [*sorted(cuts), len(body)]:
        reader.feed(body[last:cut])
        last = cut
    return reader


def test_fields_in_memory_files_on_disk(tmp_path: Path) -> None:
    fields, files = read(BODY, [], tmp_path).finish()
    params = form_params(fields, {})
    assert params["chat_id"] == -100
    assert params["media"] == [{"type": "photo", "media": "attach://p1"}]
    part = files["p1"]
    assert (part.filename, part.content_type) == ("a.jpg", "image/jpeg")
    assert part.path.parent == tmp_path
    assert part.read() == PAYLOAD
    assert (part.size, part.sha256) == (len(PAYLOAD), hashlib.sha256(PAYLOAD).hexdigest())


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.integers(0, len(BODY)), max_size=12))
def test_any_split_of_the_body_reads_the_same(tmp_path: Path, cuts: list[int]) -> None:
    folder = tmp_path / str(len(list(tmp_path.iterdir())))
    folder.mkdir()
    fields, files = read(BODY, cuts, folder).finish()
    assert fields["chat_id"] == "-100"
    assert files["p1"].read() == PAYLOAD


def test_one_byte_at_a_time(tmp_path: Path) -> None:
    _, files = read(BODY, list(range(len(BODY))), tmp_path).finish()
    assert files["p1"].read() == PAYLOAD


@pytest.mark.parametrize(
    "body",
    [BODY[: len(BODY) // 2], BODY[:-10], b"no boundary at all"],
    ids=["half", "no-closing-boundary", "garbage"],
)
def test_a_body_cut_short_is_a_bad_request(tmp_path: Path, body: bytes) -> None:
    reader = read(body, [], tmp_path)
    with pytest.raises(ApiError) as info:
        reader.finish()
    assert info.value.status == 400


def test_without_boundary_is_a_bad_request(tmp_path: Path) -> None:
    with pytest.raises(ApiError):
        MultipartReader("multipart/form-data", tmp_path)


async def test_reads_what_the_bots_request_class_writes(tmp_path: Path) -> None:
    """The writer (xbot's) and the reader (the stand-in's) agree, file handles and bytes alike."""
    source = tmp_path / "video.mp4"
    source.write_bytes(PAYLOAD * 50)
    with source.open("rb") as handle:
        body = MultipartBody(
            {"chat_id": "7", "caption": 'a "quoted"\r\ncaption'},
            {
                "video": ("video.mp4", handle, "video/mp4"),
                "thumb": ("thumb.jpg", b"\xff\xd8jpeg", "image/jpeg"),
            },
        )
        out = tmp_path / "parts"
        out.mkdir()
        reader = MultipartReader(body.content_type, out)
        length = 0
        async for chunk in body.chunks():
            length += len(chunk)
            reader.feed(chunk)
    assert length == body.length
    fields, files = reader.finish()
    assert fields == {"chat_id": "7", "caption": 'a "quoted"\r\ncaption'}
    assert files["video"].read() == PAYLOAD * 50
    assert files["video"].content_type == "video/mp4"
    assert files["thumb"].read() == b"\xff\xd8jpeg"
    assert files["thumb"].filename == "thumb.jpg"


async def test_an_upload_the_client_abandons_is_recorded_as_cut_short() -> None:
    """A bot whose task was cancelled closes the connection mid-body: the stand-in
    records the call (nginx's 499), stores nothing, and goes on serving."""
    async with BotApiServer(upload_limit=2000 * 2**20) as srv:
        head = (
            f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="chat_id"\r\n\r\n77\r\n'
            f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="video"; filename="v.mp4"\r\n'
            "Content-Type: video/mp4\r\n\r\n"
        ).encode()
        _, writer = await asyncio.open_connection("127.0.0.1", srv.port)
        writer.write(
            f"POST /bot{srv.token}/sendVideo HTTP/1.1\r\nHost: x\r\n"
            f"Content-Type: {CTYPE}\r\nContent-Length: {len(head) + 64 * 2**20}\r\n\r\n".encode()
            + head
            + b"\0" * 2**20
        )
        await writer.drain()
        writer.close()
        await writer.wait_closed()
        await srv.wait_for(lambda: srv.calls_for("sendVideo"), 10)
        (call,) = srv.calls_for("sendVideo")
        assert (call.status, call.chat_id, call.files) == (CLIENT_CLOSED, 77, {})
        assert srv.sent_messages(77) == []
