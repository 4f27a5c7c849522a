"""The Bot API stand-in, driven by the real PTB client over HTTP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import hashlib
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import telegram
from telegram import (
    ChatMemberAdministrator,
    ChatMemberLeft,
    ChatMemberMember,
    ChatMemberOwner,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    InputMediaPhoto,
    InputMediaVideo,
    ReplyParameters,
    Update,
)
from telegram.error import BadRequest, Forbidden, InvalidToken, NetworkError, RetryAfter
from telegram.ext import (
    ApplicationBuilder,
    CallbackQueryHandler,
    CommandHandler,
    ContextTypes,
    MessageHandler,
    filters,
)
from telegram.request import HTTPXRequest

from standins.botapi import DEFAULT_TOKEN, BotApiServer, retry_after_seconds
from standins.media_server import MediaServer, big, fake_mp4, tiny_jpeg

CHAT = 4242  # a private chat: exists without being added


@pytest.fixture(autouse=True)
def _ptb_timedelta(monkeypatch: pytest.MonkeyPatch) -> None:
    # PTB 22 warns when RetryAfter.retry_after is read as an int; the warning is an
    # error under filterwarnings=error, and PTB reads it itself while raising.
    monkeypatch.setenv("PTB_TIMEDELTA", "1")


@pytest.fixture
async def srv() -> AsyncIterator[BotApiServer]:
    async with BotApiServer(allow_url_fetch_from_loopback=True, url_fetch_timeout=2.0) as s:
        yield s


@pytest.fixture
async def media() -> AsyncIterator[MediaServer]:
    async with MediaServer() as m:
        yield m


def plain_http() -> HTTPXRequest:
    # Plain HTTP on loopback: skipping the CA bundle saves ~30 ms per client, per test.
    return HTTPXRequest(httpx_kwargs={"verify": False})


def make_bot(srv: BotApiServer) -> telegram.Bot:
    return telegram.Bot(
        srv.token,
        base_url=f"{srv.url}/bot",
        base_file_url=f"{srv.url}/file/bot",
        request=plain_http(),
        get_updates_request=plain_http(),
    )


@pytest.fixture
async def bot(srv: BotApiServer) -> AsyncIterator[telegram.Bot]:
    async with make_bot(srv) as b:
        yield b


def exactly(text: str) -> str:
    return f"^{re.escape(text)}$"


def starting(text: str) -> str:
    return f"^{re.escape(text)}"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# -- identity, routing --------------------------------------------------------


async def test_get_me_is_the_bot_of_the_token(bot: telegram.Bot, srv: BotApiServer) -> None:
    me = await bot.get_me()
    assert me.id == int(srv.token.split(":")[0])
    assert me.is_bot
    assert me.username == "xbot_standin_bot"


@pytest.mark.parametrize(
    ("path", "status", "description"),
    [
        ("/bot{token}/noSuchMethod", 404, "Not Found"),
        ("/bot123456789:AAHwrongTokenButWellFormed_00000000/getMe", 401, "Unauthorized"),
        ("/botnot-a-token/getMe", 404, "Not Found"),
        ("/elsewhere", 404, "Not Found"),
    ],
    ids=["unknown-method", "wrong-token", "malformed-token", "not-the-api"],
)
async def test_routing_errors_look_like_telegrams(
    srv: BotApiServer, path: str, status: int, description: str
) -> None:
    async with httpx.AsyncClient() as client:
        response = await client.post(srv.url + path.format(token=srv.token))
    assert response.status_code == status
    assert response.json() == {"ok": False, "error_code": status, "description": description}


async def test_wrong_token_is_invalid_token_for_ptb(srv: BotApiServer) -> None:
    request = HTTPXRequest()
    other = telegram.Bot(
        "123456789:AAHwrongTokenButWellFormed_00000000",
        base_url=f"{srv.url}/bot",
        request=request,
    )
    try:
        with pytest.raises(InvalidToken):
            await other.get_me()
    finally:
        await request.shutdown()


async def test_method_names_are_case_insensitive(srv: BotApiServer) -> None:
    async with httpx.AsyncClient() as client:
        response = await client.post(f"{srv.url}/bot{srv.token}/GETME")
    assert response.json()["ok"] is True
    assert srv.calls_for("getMe")


# -- text -----------------------------------------------------------------------


async def test_send_message_parses_html_and_records(bot: telegram.Bot, srv: BotApiServer) -> None:
    markup = InlineKeyboardMarkup([[InlineKeyboardButton("Forward", callback_data="fw:1")]])
    msg = await bot.send_message(CHAT, "<b>hi</b> 123", parse_mode="HTML", reply_markup=markup)
    assert msg.text == "hi 123"
    assert msg.entities[0].type == "bold"
    assert msg.from_user is not None
    assert msg.from_user.id == srv.bot_user["id"]
    assert msg.reply_markup == markup
    call = srv.calls_for("sendMessage")[-1]
    assert call.chat_id == CHAT
    assert call.status == 200
    assert call.params["text"] == "<b>hi</b> 123"
    assert srv.sent_messages(CHAT)[-1]["message_id"] == msg.message_id


async def test_message_ids_increase_per_chat(bot: telegram.Bot) -> None:
    ids = [(await bot.send_message(CHAT, str(i))).message_id for i in range(3)]
    other = (await bot.send_message(CHAT + 1, "x")).message_id
    assert ids == sorted(ids)
    assert len(set(ids)) == 3
    assert other == 1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"text": "a" * 4097}, "Message is too long"),
        ({"text": "<b>x", "parse_mode": "HTML"}, "Can't parse entities"),
        ({"text": "<b></b>", "parse_mode": "HTML"}, "Message text is empty"),
        ({"text": "x", "chat_id": -1001}, "Chat not found"),
        (
            {"text": "x", "reply_parameters": ReplyParameters(999)},
            "Message to be replied not found",
        ),
    ],
    ids=["too-long", "bad-html", "empty-after-parsing", "unknown-group", "reply-missing"],
)
async def test_send_message_errors(bot: telegram.Bot, kwargs: dict[str, Any], message: str) -> None:
    kwargs.setdefault("chat_id", CHAT)
    with pytest.raises(BadRequest) as info:
        await bot.send_message(**kwargs)
    assert str(info.value).startswith(message.capitalize())


async def test_text_of_4096_after_parsing_passes(bot: telegram.Bot) -> None:
    msg = await bot.send_message(CHAT, "<i>" + "a" * 4096 + "</i>", parse_mode="HTML")
    assert len(msg.text or "") == 4096


async def test_reply_parameters_embed_the_replied_message(
    bot: telegram.Bot, srv: BotApiServer
) -> None:
    update = srv.user_message(CHAT, "https://x.com/a/status/1")
    mid = update["message"]["message_id"]
    msg = await bot.send_message(CHAT, "here", reply_parameters=ReplyParameters(mid))
    assert msg.reply_to_message is not None
    assert msg.reply_to_message.text == "https://x.com/a/status/1"


async def test_blocked_user_is_forbidden(bot: telegram.Bot, srv: BotApiServer) -> None:
    srv.block_bot(CHAT)
    with pytest.raises(Forbidden, match="bot was blocked by the user"):
        await bot.send_message(CHAT, "x")


# -- media ----------------------------------------------------------------------

JPEG = tiny_jpeg(1600, 900)
MP4 = fake_mp4(20_000)
GIF = b"GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff!\xf9\x04\x01\x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;"  # noqa: E501
PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"

KINDS = [
    ("photo", JPEG, "image/jpeg", "send_photo"),
    ("video", MP4, "video/mp4", "send_video"),
    ("animation", MP4, "video/mp4", "send_animation"),
    ("document", PDF, "application/pdf", "send_document"),
]


def media_of(msg: telegram.Message, kind: str) -> Any:
    return msg.photo[-1] if kind == "photo" else getattr(msg, kind)


@pytest.mark.parametrize(("kind", "data", "ctype", "method"), KINDS, ids=[k[0] for k in KINDS])
async def test_upload_each_kind_keeps_the_bytes(
    bot: telegram.Bot, srv: BotApiServer, kind: str, data: bytes, ctype: str, method: str
) -> None:
    send = getattr(bot, method)
    msg = await send(CHAT, telegram.InputFile(data, filename=f"f.{ctype.split('/')[1]}"))
    item = media_of(msg, kind)
    assert item.file_size == len(data)
    assert srv.file_bytes(item.file_id) == data
    call = srv.calls_for(method.title().replace("_", "").replace("Send", "send"))[-1]
    assert call.files[kind][1:] == (len(data), sha(data))


async def test_photo_has_telegrams_size_ladder(bot: telegram.Bot) -> None:
    msg = await bot.send_photo(CHAT, JPEG)
    assert [(p.width, p.height) for p in msg.photo] == [
        (90, 51),
        (320, 180),
        (800, 450),
        (1280, 720),
        (1600, 900),
    ]
    assert len({p.file_unique_id for p in msg.photo}) == 5


async def test_video_carries_the_given_dimensions(bot: telegram.Bot) -> None:
    msg = await bot.send_video(CHAT, MP4, width=720, height=1280, duration=12, caption="c")
    assert msg.video is not None
    assert (msg.video.width, msg.video.height) == (720, 1280)
    assert msg.video.duration.total_seconds() == 12
    assert msg.caption == "c"


async def test_audio_is_telegrams_audio_and_a_resend_keeps_its_tags(
    bot: telegram.Bot, srv: BotApiServer
) -> None:
    still = tiny_jpeg(320, 180)
    msg = await bot.send_audio(
        CHAT,
        telegram.InputFile(MP4, filename="audio.m4a"),
        duration=7,
        title="Song",
        performer="Band",
        thumbnail=telegram.InputFile(still, filename="t.jpg", attach=True),
    )
    audio = msg.audio
    assert audio is not None
    assert (audio.title, audio.performer, audio.duration.total_seconds()) == ("Song", "Band", 7)
    assert (audio.file_name, audio.mime_type, audio.file_size) == (
        "audio.m4a",
        "audio/mp4",
        len(MP4),
    )
    assert audio.thumbnail is not None
    assert (audio.thumbnail.width, audio.thumbnail.height) == (320, 180)
    assert audio.file_id.startswith("CQAC")
    # Telegram keeps an audio's tags and still with the file: a resend by file_id has them.
    again = await bot.send_audio(CHAT, audio.file_id)
    assert again.audio is not None
    assert (again.audio.title, again.audio.performer) == ("Song", "Band")
    assert again.audio.thumbnail == audio.thumbnail
    with pytest.raises(BadRequest, match="Can't use file of type audio as video"):
        await bot.send_video(CHAT, audio.file_id)
    raw = srv.sent_messages(CHAT)[-1]["audio"]
    assert set(raw) == {
        "file_id", "file_unique_id", "duration", "performer", "title", "file_name",
        "mime_type", "file_size", "thumbnail",
    }  # fmt: skip


async def test_animation_is_also_a_document(bot: telegram.Bot) -> None:
    msg = await bot.send_animation(CHAT, MP4)
    assert msg.animation is not None
    assert msg.document is not None
    assert msg.document.file_id == msg.animation.file_id


@pytest.mark.parametrize(("kind", "data", "ctype", "method"), KINDS, ids=[k[0] for k in KINDS])
async def test_url_is_fetched_when_loopback_is_allowed(
    bot: telegram.Bot,
    srv: BotApiServer,
    media: MediaServer,
    kind: str,
    data: bytes,
    ctype: str,
    method: str,
) -> None:
    url = media.add(f"/m/{kind}", data, ctype)
    msg = await getattr(bot, method)(CHAT, url)
    item = media_of(msg, kind)
    assert srv.file_bytes(item.file_id) == data
    assert srv.file_info(item.file_id).source == "url"  # type: ignore[union-attr]
    assert media.hits[f"/m/{kind}"] == 1


@pytest.mark.parametrize(("kind", "data", "ctype", "method"), KINDS, ids=[k[0] for k in KINDS])
async def test_url_on_loopback_fails_like_telegram(
    bot: telegram.Bot,
    srv: BotApiServer,
    media: MediaServer,
    kind: str,
    data: bytes,
    ctype: str,
    method: str,
) -> None:
    srv.allow_url_fetch_from_loopback = False
    url = media.add(f"/m/{kind}", data, ctype)
    with pytest.raises(BadRequest, match=exactly("Failed to get http url content")):
        await getattr(bot, method)(CHAT, url)
    assert media.hits[f"/m/{kind}"] == 0


@pytest.mark.parametrize(
    ("method", "route", "message"),
    [
        (
            "send_photo",
            {"data": b"<html></html>", "content_type": "text/html"},
            "Wrong type of the web page content",
        ),
        (
            "send_video",
            {"data": JPEG, "content_type": "image/jpeg"},
            "Wrong type of the web page content",
        ),
        (
            "send_document",
            {"data": MP4, "content_type": "video/mp4"},
            "Wrong type of the web page content",
        ),
        (
            "send_photo",
            {"data": big(5 * 2**20 + 1, prefix=JPEG), "content_type": "image/jpeg"},
            "Failed to get http url content",
        ),
        (
            "send_photo",
            {
                "data": big(5 * 2**20 + 1, prefix=JPEG),
                "content_type": "image/jpeg",
                "chunked": True,
            },
            "Failed to get http url content",
        ),
        (
            "send_video",
            {
                "data": big(20 * 2**20 + 1),
                "content_type": "video/mp4",
                "chunked": True,
            },
            "Failed to get http url content",
        ),
        (
            "send_photo",
            {"data": b"gone", "content_type": "text/plain", "status": 404},
            "Failed to get http url content",
        ),
        (
            "send_video",
            {"data": MP4, "content_type": "video/mp4", "reset_after": 100},
            "Failed to get http url content",
        ),
        (
            "send_photo",
            {"data": b"not a picture", "content_type": "image/jpeg"},
            "Image_process_failed",
        ),
    ],
    ids=[
        "html-for-photo",
        "jpeg-for-video",
        "mp4-for-document",
        "photo-over-5mb",
        "photo-over-5mb-chunked",
        "video-over-20mb-chunked",
        "not-found",
        "reset",
        "photo-not-an-image",
    ],
)
async def test_url_failures(
    bot: telegram.Bot, media: MediaServer, method: str, route: dict[str, Any], message: str
) -> None:
    url = media.add("/bad", **route)
    with pytest.raises(BadRequest) as info:
        await getattr(bot, method)(CHAT, url)
    assert str(info.value) == message


async def test_url_redirect_is_followed(bot: telegram.Bot, media: MediaServer) -> None:
    media.add("/real.jpg", JPEG, "image/jpeg")
    url = media.add("/short", b"", redirect_to="/real.jpg")
    msg = await bot.send_photo(CHAT, url)
    assert msg.photo[-1].width == 1600
    assert media.hits["/real.jpg"] == 1


async def test_stalled_url_fails_within_the_fetch_timeout(
    bot: telegram.Bot, srv: BotApiServer, media: MediaServer
) -> None:
    srv.url_fetch_timeout = 0.5  # the fixture's 2 s, shortened for this test
    url = media.add("/stall.mp4", MP4, "video/mp4", stall_after=1000)
    started = time.monotonic()
    with pytest.raises(BadRequest, match="Failed to get http url content"):
        await bot.send_video(CHAT, url)
    assert time.monotonic() - started < 2


async def test_file_id_resend_and_invalidation(bot: telegram.Bot, srv: BotApiServer) -> None:
    first = await bot.send_video(CHAT, MP4)
    assert first.video is not None
    again = await bot.send_video(CHAT, first.video.file_id)
    assert again.video is not None
    assert again.video.file_unique_id == first.video.file_unique_id
    with pytest.raises(BadRequest, match="Can't use file of type video as photo"):
        await bot.send_photo(CHAT, first.video.file_id)
    srv.invalidate_file_id(first.video.file_id)
    with pytest.raises(BadRequest, match=exactly("Wrong file identifier/http url specified")):
        await bot.send_video(CHAT, first.video.file_id)
    with pytest.raises(BadRequest, match=exactly("Wrong file identifier/http url specified")):
        await bot.send_photo(CHAT, "AgACAgIAAxkBAAnever-issued")


async def test_photo_rules_on_upload(bot: telegram.Bot) -> None:
    with pytest.raises(BadRequest, match="Photo_invalid_dimensions"):
        await bot.send_photo(CHAT, tiny_jpeg(2100, 100))
    with pytest.raises(BadRequest, match="Image_process_failed"):
        await bot.send_photo(CHAT, b"definitely not an image")


async def test_upload_over_the_limit_is_413(srv: BotApiServer) -> None:
    async with (
        BotApiServer(upload_limit=10_000) as small,
        make_bot(small) as bot,
    ):
        with pytest.raises(NetworkError, match="Request Entity Too Large"):
            await bot.send_video(CHAT, fake_mp4(20_000))


@pytest.mark.parametrize(
    ("caption", "parse_mode", "ok"),
    [
        ("a" * 1024, None, True),
        ("a" * 1025, None, False),
        ("<b>" + "a" * 1024 + "</b>", "HTML", True),
        ("😀" * 512, None, True),
        ("😀" * 513, None, False),
    ],
    ids=["1024", "1025", "tags-free", "512-emoji", "513-emoji"],
)
async def test_caption_limit(
    bot: telegram.Bot, caption: str, parse_mode: str | None, ok: bool
) -> None:
    if ok:
        await bot.send_photo(CHAT, JPEG, caption=caption, parse_mode=parse_mode)
    else:
        with pytest.raises(BadRequest, match=exactly("Message caption is too long")):
            await bot.send_photo(CHAT, JPEG, caption=caption, parse_mode=parse_mode)


async def test_media_group_mixes_uploads_file_ids_and_urls(
    bot: telegram.Bot, srv: BotApiServer, media: MediaServer
) -> None:
    earlier = await bot.send_photo(CHAT, tiny_jpeg(50, 50))
    url = media.add("/v.mp4", MP4, "video/mp4")
    group = await bot.send_media_group(
        CHAT,
        [
            InputMediaPhoto(JPEG, caption="<b>Alice</b>", parse_mode="HTML"),
            InputMediaPhoto(earlier.photo[-1].file_id),
            InputMediaVideo(url),
            InputMediaVideo(MP4, width=640, height=360, duration=3),
        ],
    )
    assert len({m.media_group_id for m in group}) == 1
    assert group[0].media_group_id is not None
    assert group[0].caption == "Alice"
    assert group[1].photo[-1].file_id == earlier.photo[-1].file_id
    assert group[2].video is not None
    assert srv.file_bytes(group[2].video.file_id) == MP4
    assert group[3].video is not None
    assert group[3].video.width == 640
    call = srv.calls_for("sendMediaGroup")[-1]
    assert len(call.files) == 2
    assert all(name.startswith("attached") for name in call.files)
    assert [m.message_id for m in group] == sorted(m.message_id for m in group)


@pytest.mark.parametrize(
    ("count", "message"),
    [(1, "Media group must include 2-10 items"), (11, "Too much messages to send as an album")],
    ids=["one", "eleven"],
)
async def test_media_group_size_rules(bot: telegram.Bot, count: int, message: str) -> None:
    photo = await bot.send_photo(CHAT, JPEG)
    items = [InputMediaPhoto(photo.photo[-1].file_id) for _ in range(count)]
    with pytest.raises(BadRequest, match=exactly(message)):
        await bot.send_media_group(CHAT, items)


async def test_media_group_upload_without_attach_is_refused(bot: telegram.Bot) -> None:
    # PTB uploads an InputFile made without attach=True as one part named "media",
    # leaving the items without a "media" field; Telegram cannot read such an album.
    photo = await bot.send_photo(CHAT, JPEG)
    loose = telegram.InputFile(JPEG, filename="1.jpg")
    with pytest.raises(BadRequest, match=exactly("Can't parse inputmedia: media not found")):
        await bot.send_media_group(
            CHAT, [InputMediaPhoto(loose), InputMediaPhoto(photo.photo[-1].file_id)]
        )


async def test_media_group_url_failure_names_the_item(
    bot: telegram.Bot, media: MediaServer
) -> None:
    photo = await bot.send_photo(CHAT, JPEG)
    bad = media.add("/missing.jpg", b"", "image/jpeg", status=404)
    with pytest.raises(BadRequest) as info:
        await bot.send_media_group(
            CHAT, [InputMediaPhoto(photo.photo[-1].file_id), InputMediaPhoto(bad)]
        )
    assert str(info.value) == (
        'Failed to send message #2 with the error message "failed to get http url content"'
    )


async def test_get_file_downloads_the_stored_bytes(bot: telegram.Bot) -> None:
    msg = await bot.send_document(CHAT, PDF, filename="a.pdf")
    assert msg.document is not None
    file = await bot.get_file(msg.document.file_id)
    assert bytes(await file.download_as_bytearray()) == PDF


# -- edits, deletes, copies --------------------------------------------------------


async def test_edits_and_their_errors(bot: telegram.Bot, srv: BotApiServer) -> None:
    msg = await bot.send_message(CHAT, "one")
    edited = await bot.edit_message_text("two", chat_id=CHAT, message_id=msg.message_id)
    assert isinstance(edited, telegram.Message)
    assert edited.text == "two"
    assert edited.edit_date is not None
    with pytest.raises(
        BadRequest, match=starting("Message is not modified: specified new message")
    ):
        await bot.edit_message_text("two", chat_id=CHAT, message_id=msg.message_id)
    with pytest.raises(BadRequest, match=exactly("Message to edit not found")):
        await bot.edit_message_text("x", chat_id=CHAT, message_id=999)
    with pytest.raises(BadRequest, match=exactly("There is no caption in the message to edit")):
        await bot.edit_message_caption(chat_id=CHAT, message_id=msg.message_id, caption="c")
    photo = await bot.send_photo(CHAT, JPEG, caption="old")
    await bot.edit_message_caption(chat_id=CHAT, message_id=photo.message_id, caption="new")
    assert srv.sent_messages(CHAT)[-1]["caption"] == "new"
    assert await bot.delete_message(CHAT, photo.message_id)
    assert [m["message_id"] for m in srv.sent_messages(CHAT)] == [msg.message_id]
    with pytest.raises(BadRequest, match=exactly("Message to delete not found")):
        await bot.delete_message(CHAT, photo.message_id)


async def test_users_messages_cannot_be_edited(bot: telegram.Bot, srv: BotApiServer) -> None:
    mid = srv.user_message(CHAT, "mine")["message"]["message_id"]
    with pytest.raises(BadRequest, match=exactly("Message can't be edited")):
        await bot.edit_message_text("x", chat_id=CHAT, message_id=mid)


async def test_forward_and_copy_into_a_channel(bot: telegram.Bot, srv: BotApiServer) -> None:
    srv.add_chat(-1009, "channel", "My channel", username="mychan", admins=[CHAT])
    group = await bot.send_media_group(CHAT, [InputMediaPhoto(JPEG), InputMediaPhoto(JPEG)])
    copies = await bot.copy_messages("@mychan", CHAT, [m.message_id for m in group])
    posted = srv.sent_messages(-1009)
    assert [c.message_id for c in copies] == [m["message_id"] for m in posted]
    assert len({m["media_group_id"] for m in posted}) == 1
    assert posted[0]["media_group_id"] != group[0].media_group_id
    assert posted[0]["sender_chat"]["id"] == -1009
    copy = await bot.copy_message(-1009, CHAT, group[0].message_id, caption="edited")
    assert srv.message(-1009, copy.message_id)["caption"] == "edited"  # type: ignore[index]
    forwarded = await bot.forward_message(-1009, CHAT, group[1].message_id)
    assert forwarded.forward_origin is not None
    assert forwarded.forward_origin.type == "user"


async def test_channel_rights(bot: telegram.Bot, srv: BotApiServer) -> None:
    srv.add_chat(-1001, "channel", bot_is_admin=False)
    srv.add_chat(-1002, "channel", bot_can_post=False)
    with pytest.raises(Forbidden, match="bot is not a member of the channel chat"):
        await bot.send_message(-1001, "x")
    with pytest.raises(BadRequest, match="Need administrator rights in the channel chat"):
        await bot.send_message(-1002, "x")


async def test_chat_members_parse_in_ptb(bot: telegram.Bot, srv: BotApiServer) -> None:
    srv.add_chat(
        -100, "supergroup", "G", creator=1, admins=[2], members={4: "left"}, linked_chat_id=-1009
    )
    chat = await bot.get_chat(-100)
    assert chat.title == "G"
    assert chat.linked_chat_id == -1009
    assert isinstance(await bot.get_chat_member(-100, 1), ChatMemberOwner)
    assert isinstance(await bot.get_chat_member(-100, 2), ChatMemberAdministrator)
    assert isinstance(await bot.get_chat_member(-100, 3), ChatMemberMember)
    assert isinstance(await bot.get_chat_member(-100, 4), ChatMemberLeft)
    bot_member = await bot.get_chat_member(-100, srv.bot_user["id"])
    assert isinstance(bot_member, ChatMemberAdministrator)
    admins = await bot.get_chat_administrators(-100)
    assert [a.user.id for a in admins] == [1, 2, srv.bot_user["id"]]


async def test_commands_round_trip(bot: telegram.Bot) -> None:
    await bot.set_my_commands([("start", "Start"), ("help", "Help")])
    assert [(c.command, c.description) for c in await bot.get_my_commands()] == [
        ("start", "Start"),
        ("help", "Help"),
    ]
    with pytest.raises(BadRequest, match="Bot_command_invalid"):
        await bot.set_my_commands([("Bad-Name", "x")])


# -- rate limits and faults ---------------------------------------------------------


async def test_429_maps_to_retry_after_and_the_referee_notes_early_requests(
    bot: telegram.Bot, srv: BotApiServer
) -> None:
    srv.fail_next("sendMessage", 429, "Too Many Requests: retry after 3", retry_after=3)
    with pytest.raises(RetryAfter) as info:
        await bot.send_message(CHAT, "x")
    assert retry_after_seconds(info.value.retry_after) == 3
    assert srv.calls_for("sendMessage")[-1].description == "Too Many Requests: retry after 3"
    assert srv.early_requests == []
    await bot.send_message(CHAT + 1, "another chat is not held")
    assert srv.early_requests == []
    with pytest.raises(RetryAfter) as again:
        await bot.send_photo(CHAT, JPEG)  # too soon, and any method counts
    assert 2 <= retry_after_seconds(again.value.retry_after) <= 3
    early = srv.early_requests
    assert [(e.method, e.chat_id) for e in early] == [("sendPhoto", CHAT)]
    assert early[0].not_before > early[0].at


async def test_a_client_that_waits_is_not_early(bot: telegram.Bot, srv: BotApiServer) -> None:
    srv.fail_next("sendMessage", 429, "Too Many Requests: retry after 1", retry_after=1)
    with pytest.raises(RetryAfter) as info:
        await bot.send_message(CHAT, "x")
    resume = time.monotonic() + retry_after_seconds(info.value.retry_after)
    await srv.wait_for(lambda: time.monotonic() >= resume, timeout=3)
    await bot.send_message(CHAT, "x")
    assert srv.early_requests == []


async def test_fail_next_is_scoped_and_counted(bot: telegram.Bot, srv: BotApiServer) -> None:
    srv.fail_next("sendMessage", 400, "Bad Request: chat not found", chat_id=CHAT, count=2)
    await bot.send_message(CHAT + 1, "other chat passes")
    for _ in range(2):
        with pytest.raises(BadRequest, match="Chat not found"):
            await bot.send_message(CHAT, "x")
    await bot.send_message(CHAT, "third passes")


async def test_rate_limit_storm(bot: telegram.Bot, srv: BotApiServer) -> None:
    srv.set_rate_limit_storm(1.0, retry_after_range=(2, 4), seed=7)
    for chat in range(1, 6):
        with pytest.raises(RetryAfter) as info:
            await bot.send_message(chat, "x")
        assert 2 <= retry_after_seconds(info.value.retry_after) <= 4
    await bot.send_chat_action(100, "typing")  # not a send method: untouched
    srv.set_rate_limit_storm(0)
    await bot.send_message(100, "calm again")


async def test_5xx_and_latency(bot: telegram.Bot, srv: BotApiServer) -> None:
    srv.set_5xx(1.0)
    with pytest.raises(NetworkError, match="Bad Gateway"):
        await bot.send_message(CHAT, "x")
    srv.set_5xx(0)
    srv.set_latency(0.3)
    started = time.monotonic()
    await bot.send_message(CHAT, "x")
    assert time.monotonic() - started >= 0.3


# -- updates ------------------------------------------------------------------------


async def test_user_message_builders(srv: BotApiServer) -> None:
    update = Update.de_json(srv.user_message(CHAT, "😀 https://x.com/a/status/1"), None)
    assert update.message is not None
    assert update.message.parse_entities(["url"]) == {
        update.message.entities[0]: "https://x.com/a/status/1"
    }
    channel = srv.user_message(-1005, "post", chat_type="channel")
    assert channel["channel_post"]["sender_chat"]["id"] == -1005
    anon = srv.user_message(-1006, "hi", chat_type="supergroup", sender_chat=-1006)
    assert anon["message"]["from"]["username"] == "GroupAnonymousBot"
    photo = srv.user_message(CHAT, "look https://x.com/b/status/2", caption=True)
    assert photo["message"]["caption_entities"][0]["type"] == "url"
    assert photo["update_id"] > update.update_id


async def test_long_poll_is_held_and_woken(srv: BotApiServer) -> None:
    url = f"{srv.url}/bot{srv.token}/getUpdates"
    async with httpx.AsyncClient(timeout=10) as client:
        started = time.monotonic()
        empty = await client.post(url, data={"timeout": "1"})
        assert empty.json() == {"ok": True, "result": []}
        assert time.monotonic() - started >= 0.9
        poll = asyncio.create_task(client.post(url, data={"timeout": "10"}))
        await srv.wait_for(lambda: srv.held_polls, timeout=2)
        started = time.monotonic()
        srv.user_message(CHAT, "wake up")
        result = (await poll).json()["result"]
        assert time.monotonic() - started < 1
        assert result[0]["message"]["text"] == "wake up"
        offset = result[0]["update_id"] + 1
        confirmed = await client.post(url, data={"offset": str(offset), "timeout": "0"})
        assert confirmed.json()["result"] == []


async def test_a_newer_poll_ends_the_older_with_409(srv: BotApiServer) -> None:
    url = f"{srv.url}/bot{srv.token}/getUpdates"
    async with httpx.AsyncClient(timeout=10) as a, httpx.AsyncClient(timeout=10) as b:
        first = asyncio.create_task(a.post(url, data={"timeout": "10"}))
        await srv.wait_for(lambda: srv.held_polls, timeout=2)
        second = asyncio.create_task(b.post(url, data={"timeout": "0"}))
        old = await first
        assert old.status_code == 409
        assert old.json()["description"].startswith("Conflict: terminated by other getUpdates")
        assert (await second).status_code == 200


async def test_polling_application_end_to_end(srv: BotApiServer) -> None:
    async def on_link(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        assert update.effective_message is not None
        markup = InlineKeyboardMarkup([[InlineKeyboardButton("Dismiss", callback_data="x")]])
        await update.effective_message.reply_text("got it", reply_markup=markup, do_quote=True)

    async def on_start(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        assert update.effective_message is not None
        await update.effective_message.reply_text("hello")

    async def on_button(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        assert update.callback_query is not None
        await update.callback_query.answer("done")

    app = (
        ApplicationBuilder()
        .token(srv.token)
        .base_url(f"{srv.url}/bot")
        .base_file_url(f"{srv.url}/file/bot")
        .build()
    )
    app.add_handler(CommandHandler("start", on_start))
    app.add_handler(MessageHandler(filters.Entity("url"), on_link))
    app.add_handler(CallbackQueryHandler(on_button))
    async with app:
        await app.start()
        assert app.updater is not None
        await app.updater.start_polling(poll_interval=0, timeout=1)
        try:
            link = srv.user_message(CHAT, "https://x.com/a/status/1")
            srv.user_message(CHAT, "/start")
            await srv.wait_for(lambda: len(srv.sent_messages(CHAT)) == 2, timeout=5)
            reply = next(m for m in srv.sent_messages(CHAT) if m["text"] == "got it")
            assert reply["reply_to_message"]["message_id"] == link["message"]["message_id"]
            press = srv.callback_query(CHAT, reply["message_id"], "x")
            query_id = press["callback_query"]["id"]
            await srv.wait_for(lambda: query_id in srv.callback_answers, timeout=5)
        finally:
            started = time.monotonic()
            await app.updater.stop()
            await app.stop()
    assert time.monotonic() - started < 2
    calls = [c.method for c in srv.calls]
    assert calls[:3] == ["getMe", "deleteWebhook", "getUpdates"]
    # Calls are recorded as they finish; the held poll may finish after the last one.
    last_poll = max(srv.calls_for("getUpdates"), key=lambda c: c.at)
    assert last_poll.params["timeout"] == 0
    assert srv.callback_answers[press["callback_query"]["id"]]["text"] == "done"


async def test_answering_a_query_twice_is_too_old(bot: telegram.Bot, srv: BotApiServer) -> None:
    msg = await bot.send_message(CHAT, "x")
    query = srv.callback_query(CHAT, msg.message_id, "d")["callback_query"]
    assert await bot.answer_callback_query(query["id"])
    with pytest.raises(BadRequest, match=starting("Query is too old and response timeout expired")):
        await bot.answer_callback_query(query["id"])


# -- lifecycle ----------------------------------------------------------------------


async def test_stop_ends_a_held_long_poll_at_once() -> None:
    srv = await BotApiServer().start()
    async with httpx.AsyncClient(timeout=10) as client:
        poll = asyncio.create_task(
            client.post(f"{srv.url}/bot{srv.token}/getUpdates", data={"timeout": "30"})
        )
        await srv.wait_for(lambda: srv.held_polls, timeout=2)
        started = time.monotonic()
        await srv.stop()
        with pytest.raises(httpx.HTTPError):
            await poll
    assert time.monotonic() - started < 2


async def test_restart_keeps_port_and_state(srv: BotApiServer) -> None:
    async with make_bot(srv) as bot:
        sent = await bot.send_photo(CHAT, JPEG)
    port = srv.port
    await srv.stop()
    await srv.start()
    assert srv.port == port
    async with make_bot(srv) as bot:
        again = await bot.send_photo(CHAT, sent.photo[-1].file_id)
    assert again.message_id == sent.message_id + 1


def test_usable_from_sync_code() -> None:
    with BotApiServer() as srv:
        response = httpx.post(f"{srv.url}/bot{srv.token}/getMe")
        assert response.json()["result"]["is_bot"] is True


def test_subprocess_prints_its_port() -> None:
    with subprocess.Popen(
        [sys.executable, "-m", "standins.botapi"],
        stdout=subprocess.PIPE,
        text=True,
    ) as proc:
        try:
            assert proc.stdout is not None
            port = int(proc.stdout.readline().rsplit(" ", 1)[1])
            response = httpx.get(f"http://127.0.0.1:{port}/bot{DEFAULT_TOKEN}/getMe")
            assert response.json()["ok"] is True
        finally:
            proc.terminate()
        assert proc.wait(timeout=5) == 0


async def test_a_channels_members_as_telegram_lists_them(
    bot: telegram.Bot, srv: BotApiServer
) -> None:
    """The creator, an admin who may post, one who may not, a subscriber, someone who
    never joined: their statuses and ``can_post_messages`` as PTB parses them, and
    getChatAdministrators listing the admins and the bot itself, with its rights."""
    srv.add_chat(-1003, "channel", "C", creator=1, admins=[2, 3], cannot_post=[3],
                 members={4: "member"})  # fmt: skip
    assert isinstance(await bot.get_chat_member(-1003, 1), ChatMemberOwner)
    poster = await bot.get_chat_member(-1003, 2)
    editor = await bot.get_chat_member(-1003, 3)
    assert isinstance(poster, ChatMemberAdministrator)
    assert poster.can_post_messages
    assert isinstance(editor, ChatMemberAdministrator)
    assert editor.can_post_messages is False
    assert editor.can_pin_messages is None, "a channel admin has no group rights"
    assert isinstance(await bot.get_chat_member(-1003, 4), ChatMemberMember)
    assert isinstance(await bot.get_chat_member(-1003, 5), ChatMemberLeft)
    admins = await bot.get_chat_administrators(-1003)
    assert [m.user.id for m in admins] == [1, 2, 3, srv.bot_user["id"]]
    me = admins[-1]
    assert isinstance(me, ChatMemberAdministrator)
    assert me.can_post_messages
