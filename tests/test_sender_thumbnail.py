"""The Sender attaches a video's thumbnail only where Telegram uses it: beside an uploaded
video, as its own multipart part; never with a URL or file_id; never one that breaks the rule.

The real PTB client against the Bot API stand-in, which records every uploaded part.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import telegram

from standins.botapi import BotApiServer, Call
from standins.media_server import MediaServer, fake_mp4, tiny_jpeg
from xbot.sending.destination import Destination
from xbot.sending.pacing import Pacer
from xbot.sending.sender import OutMedia, Sender
from xbot.sending.sent import OutKind
from xbot.sending.upload_request import StreamingRequest

CHAT = 4343  # a private chat: exists without being added
TO = Destination(CHAT, "private")


@pytest.fixture
async def srv() -> AsyncIterator[BotApiServer]:
    async with BotApiServer(allow_url_fetch_from_loopback=True) as s:
        yield s


@pytest.fixture
async def sender(srv: BotApiServer) -> AsyncIterator[Sender]:
    request = StreamingRequest()  # the bot's own: uploads streamed
    bot = telegram.Bot(
        srv.token, base_url=f"{srv.url}/bot", base_file_url=f"{srv.url}/file/bot", request=request
    )
    async with bot:
        yield Sender(bot, Pacer(enabled=False))


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def thumbnail_part(call: Call, params: dict[str, Any]) -> tuple[str, int, str] | None:
    """The uploaded part `params` names as its thumbnail (``attach://…``), or None."""
    ref = params.get("thumbnail")
    if ref is None:
        return None
    assert isinstance(ref, str)
    assert ref.startswith("attach://"), ref
    return call.files[ref.removeprefix("attach://")]


def last(srv: BotApiServer, method: str) -> Call:
    calls = [c for c in srv.calls_for(method, CHAT) if c.status == 200]
    assert calls, f"no successful {method}"
    return calls[-1]


def video_file(folder: Path, name: str = "v.mp4") -> Path:
    path = folder / name
    path.write_bytes(fake_mp4(8000))
    return path


def still(folder: Path, data: bytes, name: str = "thumb.jpg") -> Path:
    path = folder / name
    path.write_bytes(data)
    return path


async def test_an_uploaded_video_carries_its_thumbnail(
    srv: BotApiServer, sender: Sender, tmp_path: Path
) -> None:
    jpeg = tiny_jpeg(160, 90)
    item = OutMedia(
        "video", video_file(tmp_path), "upload", 1280, 720, 9.0, filename="v.mp4",
        thumbnail=still(tmp_path, jpeg),
    )  # fmt: skip
    await sender.send_media(TO, [item], caption="clip")
    call = last(srv, "sendVideo")
    assert "video" in call.files
    assert thumbnail_part(call, call.params) == ("thumb.jpg", len(jpeg), sha(jpeg))


async def test_an_album_of_uploaded_videos_carries_a_thumbnail_per_video(
    srv: BotApiServer, sender: Sender, tmp_path: Path
) -> None:
    a, b = tiny_jpeg(100, 100), tiny_jpeg(120, 80)
    va, vb = video_file(tmp_path, "a.mp4"), video_file(tmp_path, "b.mp4")
    items = [
        OutMedia("video", va, "upload", thumbnail=still(tmp_path, a, "a.jpg")),
        OutMedia("photo", still(tmp_path, tiny_jpeg(64, 64), "p.jpg"), "upload"),
        OutMedia("video", vb, "upload", thumbnail=still(tmp_path, b, "b.jpg")),
    ]
    await sender.send_media(TO, items, caption="album")
    call = last(srv, "sendMediaGroup")
    media = call.params["media"]
    assert [thumbnail_part(call, m) for m in media] == [
        ("thumb.jpg", len(a), sha(a)),
        None,
        ("thumb.jpg", len(b), sha(b)),
    ]


async def test_no_thumbnail_with_a_file_id_or_a_url(
    srv: BotApiServer, sender: Sender, tmp_path: Path
) -> None:
    thumb = still(tmp_path, tiny_jpeg(160, 90))
    await sender.send_media(TO, [OutMedia("video", video_file(tmp_path), "upload")], caption=None)
    file_id = srv.sent_messages(CHAT)[-1]["video"]["file_id"]
    await sender.send_media(
        TO, [OutMedia("video", file_id, "file_id", thumbnail=thumb)], caption=None
    )
    by_file_id = last(srv, "sendVideo")
    assert by_file_id.params["video"] == file_id
    assert "thumbnail" not in by_file_id.params
    assert by_file_id.files == {}, "Telegram ignores a thumbnail beside a file_id"
    async with MediaServer() as media:
        url = media.add("/v.mp4", fake_mp4(8000), "video/mp4")
        await sender.send_media(TO, [OutMedia("video", url, "url", thumbnail=thumb)], caption=None)
    by_url = last(srv, "sendVideo")
    assert by_url.params["video"] == url
    assert "thumbnail" not in by_url.params
    assert by_url.files == {}, "and beside a URL"


def _over_200kb() -> bytes:
    jpeg = tiny_jpeg(90, 90)
    comments = b"".join(b"\xff\xfe\xea\x62" + bytes(60_000) for _ in range(4))
    return jpeg[:2] + comments + jpeg[2:]


@pytest.mark.parametrize(
    "data",
    [
        tiny_jpeg(640, 480),
        tiny_jpeg(321, 100),
        _over_200kb(),
        b"\x89PNG\r\n\x1a\n" + bytes(40),
        None,
    ],
    ids=["640x480", "321-wide", "over-200kB", "png", "missing-file"],
)
async def test_a_thumbnail_telegram_would_refuse_is_left_out(
    srv: BotApiServer, sender: Sender, tmp_path: Path, data: bytes | None
) -> None:
    thumb = tmp_path / "thumb.jpg"
    if data is not None:
        thumb.write_bytes(data)
    item = OutMedia("video", video_file(tmp_path), "upload", thumbnail=thumb)
    await sender.send_media(TO, [item], caption=None)
    call = last(srv, "sendVideo")
    assert "thumbnail" not in call.params
    assert list(call.files) == ["video"], "the video goes, without the still"


@pytest.mark.parametrize(
    ("kind", "method"),
    [("document", "sendDocument"), ("gif", "sendAnimation"), ("photo", "sendPhoto")],
    ids=["document", "gif", "photo"],
)
async def test_only_videos_carry_one(
    srv: BotApiServer, sender: Sender, tmp_path: Path, kind: OutKind, method: str
) -> None:
    source = (
        still(tmp_path, tiny_jpeg(64, 64), "p.jpg") if kind == "photo" else video_file(tmp_path)
    )
    thumb = still(tmp_path, tiny_jpeg(64, 64))
    await sender.send_media(TO, [OutMedia(kind, source, "upload", thumbnail=thumb)], caption=None)
    call = last(srv, method)
    assert "thumbnail" not in call.params
    assert len(call.files) == 1
