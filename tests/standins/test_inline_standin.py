"""The Bot API stand-in's inline mode, driven by the real PTB client over HTTP."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
import telegram
from telegram import (
    InlineQueryResultArticle,
    InlineQueryResultCachedPhoto,
    InlineQueryResultPhoto,
    InlineQueryResultsButton,
    InlineQueryResultVideo,
    InputTextMessageContent,
)
from telegram.error import BadRequest
from telegram.request import HTTPXRequest

from standins._mediabytes import tiny_jpeg
from standins.botapi import BotApiServer

USER = 4242
TOO_OLD = "Query is too old and response timeout expired or query id is invalid"


@pytest.fixture
async def srv() -> AsyncIterator[BotApiServer]:
    async with BotApiServer() as s:
        s.set_inline_mode(True)
        yield s


@pytest.fixture
async def bot(srv: BotApiServer) -> AsyncIterator[telegram.Bot]:
    plain = HTTPXRequest(httpx_kwargs={"verify": False})
    async with telegram.Bot(srv.token, base_url=f"{srv.url}/bot", request=plain) as b:
        yield b


def exactly(text: str) -> str:
    return f"^{re.escape(text)}$"


def article(rid: str = "a") -> InlineQueryResultArticle:
    return InlineQueryResultArticle(rid, "Paste a link", InputTextMessageContent("x.com/…"))


def photo(rid: str) -> InlineQueryResultPhoto:
    return InlineQueryResultPhoto(rid, "https://pbs.example/p.jpg", "https://pbs.example/t.jpg")


async def test_get_me_says_whether_inline_mode_is_on(srv: BotApiServer, bot: telegram.Bot) -> None:
    assert (await bot.get_me()).supports_inline_queries is True
    srv.set_inline_mode(False)
    assert (await bot.get_me()).supports_inline_queries is False
    with pytest.raises(RuntimeError):
        srv.inline_query(USER, "x")


async def test_an_inline_query_arrives_and_is_answered_once(
    srv: BotApiServer, bot: telegram.Bot
) -> None:
    query = srv.inline_query(USER, "https://x.com/a/status/1", chat_type="supergroup")
    updates = await bot.get_updates(timeout=1)
    inline = updates[0].inline_query
    assert inline is not None
    assert (inline.query, inline.from_user.id, inline.chat_type) == (
        "https://x.com/a/status/1",
        USER,
        "supergroup",
    )
    button = InlineQueryResultsButton("Get the album", start_parameter="p1790")
    assert await bot.answer_inline_query(
        inline.id, [photo("1"), photo("2")], cache_time=5, is_personal=True, button=button
    )
    answer = srv.inline_answer(query["inline_query"]["id"])
    assert answer is not None
    assert [r["id"] for r in answer.results] == ["1", "2"]
    assert (answer.cache_time, answer.is_personal) == (5, True)
    assert answer.button == {"text": "Get the album", "start_parameter": "p1790"}
    assert answer.latency >= 0
    with pytest.raises(BadRequest, match=f"^{re.escape(TOO_OLD)}$"):
        await bot.answer_inline_query(inline.id, [article()])


async def test_a_late_or_unknown_answer_is_too_old(srv: BotApiServer, bot: telegram.Bot) -> None:
    with pytest.raises(BadRequest, match=f"^{re.escape(TOO_OLD)}$"):
        await bot.answer_inline_query("123456789012345678", [article()])
    srv.inline_answer_window = 0.0
    query = srv.inline_query(USER, "x")["inline_query"]
    with pytest.raises(BadRequest, match=f"^{re.escape(TOO_OLD)}$"):
        await bot.answer_inline_query(query["id"], [article()])


async def test_cached_results_name_files_telegram_knows(
    srv: BotApiServer, bot: telegram.Bot
) -> None:
    sent = await bot.send_photo(USER, tiny_jpeg())
    file_id = sent.photo[-1].file_id
    query = srv.inline_query(USER, "x")["inline_query"]
    with pytest.raises(BadRequest, match=exactly("Wrong file identifier/http url specified")):
        await bot.answer_inline_query(
            query["id"], [InlineQueryResultCachedPhoto("1", "AgACnot-a-file")]
        )
    assert await bot.answer_inline_query(
        query["id"],
        [InlineQueryResultCachedPhoto("1", file_id, caption="<b>A</b>", parse_mode="HTML")],
    )


def _many(n: int) -> list[Any]:
    return [photo(str(i)) for i in range(n)]


@pytest.mark.parametrize(
    ("results", "error"),
    [
        (_many(51), "Results_too_much"),
        ([photo("1"), photo("1")], "Result_id_duplicate"),
        ([photo("x" * 65)], "Result_id_invalid"),
        (
            [
                InlineQueryResultVideo(
                    "v", "https://v.example/a", "video/webm", "https://t/a.jpg", "T"
                )
            ],
            'Can\'t parse inline query result: unsupported mime type "video/webm"',
        ),
        (
            [InlineQueryResultPhoto("p", "file:///etc/passwd", "https://t.example/a.jpg")],
            "Wrong http url specified",
        ),
        (
            [
                InlineQueryResultPhoto(
                    "p", "https://p.example/a.jpg", "https://t/a.jpg", caption="c" * 1025
                )
            ],
            "Message caption is too long",
        ),
    ],
    ids=["51-results", "duplicate-id", "id-over-64-bytes", "video-mime", "not-http", "caption"],
)
async def test_telegram_refuses_bad_answers(
    srv: BotApiServer, bot: telegram.Bot, results: list[Any], error: str
) -> None:
    query = srv.inline_query(USER, "x")["inline_query"]
    with pytest.raises(BadRequest, match=f"^{re.escape(error)}$"):
        await bot.answer_inline_query(query["id"], results)
    assert srv.inline_answer(query["id"]) is None
    assert await bot.answer_inline_query(query["id"], _many(50)), "a refused answer is not one"


async def test_the_start_parameter_is_checked(srv: BotApiServer, bot: telegram.Bot) -> None:
    query = srv.inline_query(USER, "x")["inline_query"]
    with pytest.raises(BadRequest, match=exactly("Start_param_invalid")):
        await bot.answer_inline_query(
            query["id"], [], button=InlineQueryResultsButton("Open", start_parameter="no spaces")
        )
    assert await bot.answer_inline_query(
        query["id"], [], button=InlineQueryResultsButton("Open", start_parameter="ok_-1")
    )
