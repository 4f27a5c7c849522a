"""Webhook mode: setWebhook with the secret, 403 without it, updates served with it."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import httpx

from xbot.app import Bot
from xbot.config import WebhookConfig
from xbot.sending.pacing import Pacer
from xbot.standins.harness import Harness

SECRET = "s3cret-Token_for-tests"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_webhook_mode_checks_the_secret_and_serves_updates(tmp_path: Path) -> None:
    h = await Harness.start(tmp_path / "data", start_bot=False)
    port = free_port()
    hook = WebhookConfig(
        url="https://bot.example.org/tg/hook", listen="127.0.0.1", port=port, secret_token=SECRET
    )
    h.bot = Bot(h.settings, pacer=Pacer(enabled=False), webhook=hook)
    try:
        await h.bot.start()
        (call,) = h.api.calls_for("setWebhook")
        assert call.params["url"] == "https://bot.example.org/tg/hook"
        assert call.params["secret_token"] == SECRET
        assert not h.api.calls_for("getUpdates"), "webhook mode does not poll"

        h.fx.add_post("900", text="hooked", photos=[h.photo("hook")])
        update = {
            "update_id": 1,
            "message": {
                "message_id": 10, "date": 0, "chat": {"id": 31, "type": "private"},
                "from": {"id": 31, "is_bot": False, "first_name": "W"},
                "text": "https://x.com/a/status/900",
                "entities": [{"type": "url", "offset": 0, "length": 26}],
            },
        }  # fmt: skip
        url = f"http://127.0.0.1:{port}/tg/hook"
        async with httpx.AsyncClient() as client:
            refused = await client.post(url, content=json.dumps(update))
            forged = await client.post(
                url,
                content=json.dumps(update),
                headers={"X-Telegram-Bot-Api-Secret-Token": "wrong"},
            )
            accepted = await client.post(
                url,
                content=json.dumps(update),
                headers={
                    "X-Telegram-Bot-Api-Secret-Token": SECRET,
                    "Content-Type": "application/json",
                },
            )
        assert refused.status_code == 403
        assert forged.status_code == 403
        assert accepted.status_code == 200
        await h.api.wait_for(lambda: h.api.calls_for("sendPhoto", 31), 10)
        (sent,) = h.api.calls_for("sendPhoto", 31)
        assert "hooked" in sent.params["caption"]
    finally:
        await h.stop()
