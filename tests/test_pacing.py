"""Pacing inside Telegram's limits, over an injected clock."""

from __future__ import annotations

import pytest

from xbot.errors import RateLimited
from xbot.pacing import Pacer


def test_one_message_per_second_per_chat() -> None:
    p = Pacer()
    assert p.delay(1, group=False, now=100.0) == 0
    p.record(1, group=False, now=100.0)
    assert p.delay(1, group=False, now=100.4) == pytest.approx(0.6)
    assert p.delay(2, group=False, now=100.4) == 0  # other chats go on
    assert p.delay(1, group=False, now=101.0) == 0


def test_twenty_per_minute_in_groups() -> None:
    p = Pacer()
    for i in range(20):
        p.record(-5, group=True, now=100.0 + i * 1.0)
    assert p.delay(-5, group=True, now=120.0) == pytest.approx(40.0)
    assert p.delay(-5, group=True, now=160.5) == 0


def test_thirty_per_second_overall() -> None:
    p = Pacer()
    for chat in range(30):
        p.record(chat, group=False, now=50.0)
    assert p.delay(999, group=False, now=50.5) == pytest.approx(0.5)
    assert p.delay(999, group=False, now=51.01) == 0


def test_disabled_pacer_never_waits() -> None:
    p = Pacer(enabled=False)
    p.record(1, group=True, now=1.0)
    assert p.delay(1, group=True, now=1.0) == 0


async def test_long_wait_becomes_rate_limited_instead_of_sleeping() -> None:
    now = [100.0]
    p = Pacer(clock=lambda: now[0], max_wait=3.0)
    for i in range(20):
        p.record(-7, group=True, now=100.0 + i * 0.01)
    with pytest.raises(RateLimited) as info:
        await p.wait(-7, group=True)
    assert info.value.retry_after > 50


def test_a_hold_from_telegram_counts_even_with_pacing_off() -> None:
    for enabled in (True, False):
        p = Pacer(enabled=enabled)
        p.hold(5, until=110.0)
        assert p.held(5, now=100.0) == pytest.approx(10.0)
        assert p.delay(5, group=False, now=100.0) == pytest.approx(10.0)
        assert p.delay(6, group=False, now=100.0) == 0  # only that chat
        assert p.held(5, now=110.0) == 0
        assert p.delay(5, group=False, now=110.0) == 0


async def test_a_chat_action_is_skipped_while_telegram_holds_the_chat() -> None:
    from xbot.destination import Destination
    from xbot.sender import Sender

    class NoBot:
        calls = 0

        async def send_chat_action(self, chat_id: int, action: str) -> None:
            NoBot.calls += 1

    now = [100.0]
    sender = Sender(NoBot(), Pacer(clock=lambda: now[0]))  # type: ignore[arg-type]
    sender.pacer.hold(7, until=103.0)
    await sender.chat_action(Destination(7, "private"), "upload_photo")
    assert NoBot.calls == 0
    now[0] = 103.5
    await sender.chat_action(Destination(7, "private"), "upload_photo")
    assert NoBot.calls == 1
