"""Webhook mode (xbot.receiving.webhook): setWebhook with the secret, 403 without it and
nothing queued, an answer only once the update's work is queued, 500 when it cannot be,
and Telegram's limits on the listener (body size, requests in progress)."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import apsw
import httpx
import pytest

from standins.harness import Harness
from xbot.config import WebhookConfig
from xbot.receiving.webhook import MAX_BODY, SECRET_HEADER, WebhookListener
from xbot.runtime import Runtime
from xbot.sending.pacing import Pacer

SECRET = "s3cret-Token_for-tests"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def link_update(update_id: int, chat: int, post: str) -> dict[str, Any]:
    text = f"https://x.com/a/status/{post}"
    return {
        "update_id": update_id,
        "message": {
            "message_id": update_id, "date": 0, "chat": {"id": chat, "type": "private"},
            "from": {"id": chat, "is_bot": False, "first_name": "W"},
            "text": text, "entities": [{"type": "url", "offset": 0, "length": len(text)}],
        },
    }  # fmt: skip


def get_update(update_id: int, chat: int, post: str) -> dict[str, Any]:
    """``/get <link>`` (the way in for groups that keep privacy mode on)."""
    link = f"https://x.com/a/status/{post}"
    update = link_update(update_id, chat, post)
    update["message"]["text"] = f"/get {link}"
    update["message"]["entities"] = [
        {"type": "bot_command", "offset": 0, "length": 4},
        {"type": "url", "offset": 5, "length": len(link)},
    ]
    return update


class Hooked:
    def __init__(self, h: Harness, port: int, max_connections: int = 40) -> None:
        self.h = h
        self.url = f"http://127.0.0.1:{port}/tg/hook"
        self.config = WebhookConfig(
            url="https://bot.example.org/tg/hook",
            listen="127.0.0.1",
            port=port,
            secret_token=SECRET,
            max_connections=max_connections,
        )

    async def start_bot(self) -> Runtime:
        self.h.bot = Runtime(self.h.settings, pacer=Pacer(enabled=False), webhook=self.config)
        await self.h.bot.start()
        return self.h.bot

    async def post(
        self, client: httpx.AsyncClient, body: object, secret: str | None = SECRET
    ) -> httpx.Response:
        headers = {"Content-Type": "application/json"}
        if secret is not None:
            headers[SECRET_HEADER] = secret
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        return await client.post(self.url, content=content, headers=headers)

    def tasks(self) -> int:
        conn = apsw.Connection(str(self.h.settings.db_path), flags=apsw.SQLITE_OPEN_READONLY)
        try:
            return int(conn.execute("SELECT count(*) FROM tasks").fetchall()[0][0])
        finally:
            conn.close()


@pytest.fixture
async def hooked(tmp_path: Path) -> AsyncIterator[Hooked]:
    h = await Harness.start(tmp_path / "data", start_bot=False)
    try:
        yield Hooked(h, free_port())
    finally:
        await h.stop()


async def test_webhook_mode_checks_the_secret_and_serves_updates(hooked: Hooked) -> None:
    h = hooked.h
    bot = await hooked.start_bot()
    assert bot.phase == "webhook"
    assert bot.receiving
    (call,) = h.api.calls_for("setWebhook")
    assert call.params["url"] == "https://bot.example.org/tg/hook"
    assert call.params["secret_token"] == SECRET
    assert int(call.params["max_connections"]) == 40
    assert not h.api.calls_for("getUpdates"), "webhook mode does not poll"

    h.fx.add_post("900", text="hooked", photos=[h.photo("hook")])
    update = link_update(1, 31, "900")
    async with httpx.AsyncClient() as client:
        refused = await hooked.post(client, update, secret=None)
        forged = await hooked.post(client, update, secret="wrong")
        assert hooked.tasks() == 0, "a refused post queued something"
        accepted = await hooked.post(client, update)
        # Answered only once the work is durable: the task is in the database now.
        assert accepted.status_code == 200
        assert hooked.tasks() == 1
    assert refused.status_code == 403
    assert forged.status_code == 403
    await h.api.wait_for(lambda: h.api.calls_for("sendPhoto", 31), 10)
    (sent,) = h.api.calls_for("sendPhoto", 31)
    assert "hooked" in sent.params["caption"]


async def test_what_is_no_update_is_refused(hooked: Hooked) -> None:
    await hooked.start_bot()
    async with httpx.AsyncClient() as client:
        not_json = await hooked.post(client, b"<html>")
        not_an_update = await hooked.post(client, [1, 2])
        too_big = await hooked.post(client, b"{" + b" " * MAX_BODY + b"}")
        elsewhere = await client.post(
            hooked.url.replace("/tg/hook", "/other"), headers={SECRET_HEADER: SECRET}
        )
        get = await client.get(hooked.url, headers={SECRET_HEADER: SECRET})
    assert [r.status_code for r in (not_json, not_an_update, too_big, elsewhere, get)] == [
        400, 400, 413, 404, 405,
    ]  # fmt: skip
    assert hooked.tasks() == 0


async def test_a_redelivered_update_is_answered_not_handled_again(hooked: Hooked) -> None:
    """Telegram sends an update again when our 200 got lost: after its task is done the
    tasks' dedup key no longer covers it, the answered mark does."""
    h = hooked.h
    await hooked.start_bot()
    h.fx.add_post("903", text="once", photos=[h.photo("once")])
    update = link_update(11, 35, "903")
    async with httpx.AsyncClient() as client:
        assert (await hooked.post(client, update)).status_code == 200
        await h.api.wait_for(lambda: h.api.calls_for("sendPhoto", 35), 10)
        await h.wait_idle()
        again = await hooked.post(client, update)
    assert again.status_code == 200
    assert again.text == "ok, already handled\n"
    assert hooked.tasks() == 1  # answered after its handling: nothing new was queued


async def test_a_handler_that_cannot_store_its_work_fails_the_request(
    tmp_path: Path, hooked: Hooked
) -> None:
    """The handler's side of the 500: the real PTB Application, our error handler, and a
    handler whose enqueue met a StoreError (xbot.receiving.intake)."""
    from telegram.ext import ApplicationBuilder, MessageHandler, filters

    from xbot.errors import StoreBusy
    from xbot.handlers.errors import on_error
    from xbot.receiving.intake import telegram_resends
    from xbot.receiving.webhook import WebhookListener
    from xbot.storage.db import open_store
    from xbot.storage.webhook_updates import AnsweredUpdates

    seen: list[bool] = []

    async def enqueue_fails(update: object, context: object) -> None:
        seen.append(telegram_resends())
        raise StoreBusy("database is locked")

    api = hooked.h.api
    app = ApplicationBuilder().token(api.token).base_url(f"{api.url}/bot").build()
    app.add_handler(MessageHandler(filters.ALL, enqueue_fails))
    app.add_error_handler(on_error)  # type: ignore[arg-type]
    await app.initialize()  # getMe, from the stand-in
    pool = await open_store(tmp_path / "x.sqlite3")
    listener = WebhookListener(app, AnsweredUpdates(pool), path="/hook", secret_token=SECRET)
    try:
        answers: list[tuple[int, str]] = []

        async def answer(status: int, text: str) -> None:
            answers.append((status, text))

        await listener.start()
        await listener.receive(json.dumps(link_update(5, 36, "904")).encode(), answer)
        assert answers == [(500, "not stored; send it again")]
        assert seen == [True]
        assert not await AnsweredUpdates(pool).answered(5)
    finally:
        await listener.stop()
        await pool.close()
        await app.shutdown()


async def test_an_update_that_cannot_be_stored_gets_a_500_and_comes_again(
    hooked: Hooked,
) -> None:
    """The database is gone mid-run: no 200 (Telegram would never send it again) but a
    500, and no apology in the chat; the same update sent again after a restart is
    handled once."""
    h = hooked.h
    bot = await hooked.start_bot()
    h.fx.add_post("901", text="stored later", photos=[h.photo("later")])
    update = link_update(7, 32, "901")
    assert bot.services is not None
    await bot.services.pool.close()  # every store call fails from now on
    async with httpx.AsyncClient() as client:
        failed = await hooked.post(client, update)
        assert failed.status_code == 500
        assert not h.api.calls_for("sendMessage", 32), "the user was told to send it again"
        await h.stop_bot()
        await hooked.start_bot()
        again = await hooked.post(client, update)
        twice = await hooked.post(client, update)  # a redelivery while it is still queued
    assert (again.status_code, twice.status_code) == (200, 200)
    await h.api.wait_for(lambda: h.api.calls_for("sendPhoto", 32), 10)
    await h.wait_idle()
    assert len(h.api.calls_for("sendPhoto", 32)) == 1


async def test_a_get_that_cannot_be_stored_gets_a_500_too(hooked: Hooked) -> None:
    """/get goes through the command table's guard: a store that failed is still the
    webhook's 500 (Telegram sends it again), not "something went wrong" and a 200."""
    h = hooked.h
    bot = await hooked.start_bot()
    h.fx.add_post("902", text="got later", photos=[h.photo("got")])
    assert bot.services is not None
    await bot.services.pool.close()
    async with httpx.AsyncClient() as client:
        failed = await hooked.post(client, get_update(8, 33, "902"))
        assert failed.status_code == 500
        assert not h.api.calls_for("sendMessage", 33), "the user was told something"
        await h.stop_bot()
        await hooked.start_bot()
        again = await hooked.post(client, get_update(8, 33, "902"))
    assert again.status_code == 200
    await h.api.wait_for(lambda: h.api.calls_for("sendPhoto", 33), 10)


async def test_no_more_than_max_connections_at_once(tmp_path: Path) -> None:
    """With the database locked the first update waits in its handler; a second one at
    the same time is told to come back later (503), and the first is answered 200 once
    the lock is gone."""
    h = await Harness.start(tmp_path / "data", start_bot=False)
    hooked = Hooked(h, free_port(), max_connections=1)
    lock = None
    try:
        await hooked.start_bot()
        h.fx.add_post("902", text="one at a time", photos=[h.photo("one")])
        lock = apsw.Connection(str(h.settings.db_path))
        lock.set_busy_timeout(5000)
        lock.execute("BEGIN EXCLUSIVE")
        async with httpx.AsyncClient(timeout=30) as client:
            first = asyncio.create_task(hooked.post(client, link_update(1, 33, "902")))
            listener = h.bot.hook_listener if h.bot else None
            assert listener is not None
            async with asyncio.timeout(10):
                while listener.in_progress == 0:
                    await asyncio.sleep(0.01)
            second = await hooked.post(client, link_update(2, 34, "902"))
            assert second.status_code == 503
            assert second.headers["Retry-After"] == "1"
            lock.execute("ROLLBACK")
            assert (await first).status_code == 200
    finally:
        if lock is not None:
            if lock.in_transaction:
                lock.execute("ROLLBACK")
            lock.close()
        await h.stop()


async def test_the_secret_is_in_no_log_line_even_at_debug(
    hooked: Hooked, caplog: pytest.LogCaptureFixture
) -> None:
    """PTB logs each call's parameters at DEBUG, setWebhook's secret_token among them."""
    caplog.set_level(logging.DEBUG)
    await hooked.start_bot()
    calls = [r.getMessage() for r in caplog.records if "setWebhook" in r.getMessage()]
    assert any("secret_token" in line for line in calls), "PTB logged the call's parameters"
    assert SECRET not in caplog.text


# --- what an unauthenticated client can hold ------------------------------------------------


@pytest.fixture
async def bare_listener() -> AsyncIterator[WebhookListener]:
    """The real listener on a real socket, with short timeouts and a small cap; nothing
    here reaches the handlers (no request is complete and authentic)."""
    listener = WebhookListener(
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        path="/tg/hook",
        secret_token=SECRET,
        idle_timeout=0.5,
        body_timeout=0.5,
        max_unauthenticated=2,
    )
    await listener.start()
    try:
        yield listener
    finally:
        await listener.stop(grace=1)


async def closed_by_server(reader: asyncio.StreamReader) -> bool:
    """Whether the server closes the connection (EOF) within a bound."""
    async with asyncio.timeout(10):
        while await reader.read(4096):
            pass
    return True


async def test_a_slow_loris_is_closed_after_the_idle_timeout(
    bare_listener: WebhookListener,
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", bare_listener.port)
    try:
        writer.write(b"POST /tg/hook HTTP/1.1\r\nHost: x\r\n")  # and never the rest
        await writer.drain()
        assert await closed_by_server(reader)
    finally:
        writer.close()


async def test_a_body_that_trickles_is_closed_after_the_body_timeout(
    bare_listener: WebhookListener,
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", bare_listener.port)
    try:
        writer.write(
            f"POST /tg/hook HTTP/1.1\r\nHost: x\r\n{SECRET_HEADER}: {SECRET}\r\n"
            "Content-Length: 100\r\n\r\n{".encode()
        )
        await writer.drain()
        assert await closed_by_server(reader)
    finally:
        writer.close()


async def test_connections_over_the_cap_are_closed_at_once(
    bare_listener: WebhookListener,
) -> None:
    held = [await asyncio.open_connection("127.0.0.1", bare_listener.port) for _ in range(2)]
    try:
        # Each held connection is served (waiting for its headers) before the next comes.
        async with asyncio.timeout(10):
            while bare_listener.unauthenticated < 2:
                await asyncio.sleep(0.01)
        reader, writer = await asyncio.open_connection("127.0.0.1", bare_listener.port)
        try:
            assert await closed_by_server(reader)
        finally:
            writer.close()
        assert bare_listener.closed_at_cap == 1
    finally:
        for _, w in held:
            w.close()
