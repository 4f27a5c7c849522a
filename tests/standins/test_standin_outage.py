"""The Bot API stand-in's outage modes, seen through the real PTB client over HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
import telegram
from telegram.error import NetworkError, TimedOut
from telegram.request import HTTPXRequest

from standins.botapi import BotApiServer

CHAT = 4242
READ_TIMEOUT = 0.4  # the client's read timeout: a hang outlasts it


@pytest.fixture
async def srv() -> AsyncIterator[BotApiServer]:
    async with BotApiServer() as s:
        yield s


def _request() -> HTTPXRequest:
    return HTTPXRequest(read_timeout=READ_TIMEOUT, httpx_kwargs={"verify": False})


@pytest.fixture
async def bot(srv: BotApiServer) -> AsyncIterator[telegram.Bot]:
    async with telegram.Bot(
        srv.token,
        base_url=f"{srv.url}/bot",
        base_file_url=f"{srv.url}/file/bot",
        request=_request(),
        get_updates_request=_request(),
    ) as b:
        yield b


def _texts(srv: BotApiServer) -> list[str]:
    return [m.get("text", "") for m in srv.sent_messages(CHAT)]


async def test_502_is_nginx_html_and_sends_only(bot: telegram.Bot, srv: BotApiServer) -> None:
    srv.set_outage("502")
    with pytest.raises(NetworkError, match=r"Bad Gateway \(502\)") as info:
        await bot.send_message(CHAT, "lost")
    assert not isinstance(info.value, TimedOut)
    assert await bot.get_updates(timeout=0) == ()  # polling still works
    async with httpx.AsyncClient() as client:
        raw = await client.post(f"{srv.url}/bot{srv.token}/sendMessage", data={"chat_id": CHAT})
    assert raw.status_code == 502
    assert raw.headers["content-type"] == "text/html"
    assert "<title>502 Bad Gateway</title>" in raw.text
    assert "<center>nginx</center>" in raw.text
    assert [(c.method, c.status, c.description) for c in srv.calls_for("sendMessage", CHAT)] == [
        ("sendMessage", 502, "outage:502"),
        ("sendMessage", 502, "outage:502"),
    ]
    assert _texts(srv) == []
    srv.set_outage(None)
    await bot.send_message(CHAT, "back")
    assert _texts(srv) == ["back"]
    assert srv.outage_hits == 2


async def test_502_for_every_method(bot: telegram.Bot, srv: BotApiServer) -> None:
    srv.set_outage("502", methods="all")
    for call in (bot.get_me(), bot.get_updates(timeout=0), bot.send_message(CHAT, "x")):
        with pytest.raises(NetworkError, match="Bad Gateway"):
            await call
    srv.set_outage(None)
    assert (await bot.get_me()).is_bot


async def test_named_methods_and_count(bot: telegram.Bot, srv: BotApiServer) -> None:
    srv.set_outage("502", methods=["sendPhoto"], count=1)
    await bot.send_message(CHAT, "text passes")
    with pytest.raises(NetworkError):
        await bot.send_photo(CHAT, "AgACAgIAAxkBAAIBfake")
    assert srv.outage is None  # the count ran out
    assert _texts(srv) == ["text passes"]


async def test_reset_drops_before_the_method_runs(bot: telegram.Bot, srv: BotApiServer) -> None:
    srv.set_outage("reset")
    with pytest.raises(NetworkError) as info:
        await bot.send_message(CHAT, "lost")
    assert not isinstance(info.value, TimedOut)
    assert "httpx." in info.value.message
    srv.set_outage(None)
    assert _texts(srv) == []


async def test_hang_times_out_and_nothing_is_sent(bot: telegram.Bot, srv: BotApiServer) -> None:
    srv.set_outage("hang")
    with pytest.raises(TimedOut):
        await bot.send_message(CHAT, "lost")
    assert [c.description for c in srv.calls_for("sendMessage")] == ["outage:hang"]
    srv.set_outage(None)  # ends the held connection too
    assert _texts(srv) == []
    await bot.send_message(CHAT, "back")
    assert _texts(srv) == ["back"]


async def test_hang_after_reached_the_chat(bot: telegram.Bot, srv: BotApiServer) -> None:
    """The ambiguous send: the client timed out, the message is in the chat all the same."""
    srv.set_outage("hang_after")
    with pytest.raises(TimedOut):
        await bot.send_message(CHAT, "arrived anyway")
    assert _texts(srv) == ["arrived anyway"]
    assert [(c.status, c.description) for c in srv.calls_for("sendMessage")] == [
        (200, None),
        (0, "outage:hang_after"),
    ]
    srv.set_outage(None)


async def test_refuse_closes_the_port_and_reopens_it(bot: telegram.Bot, srv: BotApiServer) -> None:
    await bot.get_me()  # a keep-alive connection is open: it must drop too
    port = srv.port
    with pytest.raises(ValueError, match="all"):
        srv.set_outage("refuse")
    srv.set_outage("refuse", methods="all")
    with pytest.raises(NetworkError) as info:
        await bot.send_message(CHAT, "lost")  # the dropped keep-alive, or refused
    assert not isinstance(info.value, TimedOut)
    with pytest.raises(NetworkError, match="ConnectError"):
        await bot.send_message(CHAT, "lost")  # a new connection: refused
    with pytest.raises(NetworkError):
        await bot.get_updates(timeout=0)
    srv.set_outage(None)
    assert srv.port == port
    await bot.send_message(CHAT, "back")
    assert _texts(srv) == ["back"]


async def test_unknown_mode_and_scope_are_refused(srv: BotApiServer) -> None:
    with pytest.raises(ValueError, match="unknown outage"):
        srv.set_outage("504")
    with pytest.raises(ValueError, match="methods"):
        srv.set_outage("502", methods="sends")
