"""Pacing inside Telegram's limits, over an injected clock."""

from __future__ import annotations

import pytest

from xbot.errors import RateLimited
from xbot.sending.pacing import IN_FLIGHT_POLL, PER_CHAT_BURST, Pacer


def test_one_message_per_second_per_chat_after_a_short_burst() -> None:
    p = Pacer()
    assert p.delay(1, group=False, now=100.0) == 0
    for _ in range(PER_CHAT_BURST):  # "short bursts" pass (the Bot FAQ)
        assert p.delay(1, group=False, now=100.0) == 0
        p.record(1, group=False, now=100.0)
    assert p.delay(1, group=False, now=100.4) == pytest.approx(0.6)
    assert p.delay(2, group=False, now=100.4) == 0  # other chats go on
    assert p.delay(1, group=False, now=101.0) == 0
    p.record(1, group=False, now=101.0)
    assert p.delay(1, group=False, now=101.5) == pytest.approx(0.5)


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
    from xbot.sending.destination import Destination
    from xbot.sending.sender import Sender

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


# --- only what Telegram accepted is spent -----------------------------------------------------


async def test_a_refused_send_frees_its_slot_and_an_accepted_one_keeps_it() -> None:
    now = [100.0]
    p = Pacer(clock=lambda: now[0])

    async def refused() -> None:
        async with p.sending(-5, group=True, messages=10):
            raise RuntimeError("failed to get HTTP URL content")  # Telegram refused the URL

    for _ in range(PER_CHAT_BURST + 2):
        with pytest.raises(RuntimeError):
            await refused()
    assert p.delay(-5, group=True, now=100.0) == 0, "refused albums must spend nothing"
    async with p.sending(-5, group=True, messages=10):
        now[0] = 100.5  # Telegram answered here
    p.record(-5, group=True, now=102.0, messages=10)
    # 20 accepted: the 21st waits for the first ten (stamped 100.5) to leave the window.
    assert p.delay(-5, group=True, now=103.0) == pytest.approx(57.5)


async def test_a_429_holds_the_chat_exactly_retry_after_and_no_window_on_top() -> None:
    now = [100.0]
    p = Pacer(clock=lambda: now[0])
    for _ in range(PER_CHAT_BURST):
        async with p.sending(3, group=False):
            pass  # earlier messages, accepted at 100.0: the bucket is empty
    now[0] = 101.0

    async def refused() -> None:
        async with p.sending(3, group=False):
            p.hold(3, until=now[0] + 2.0)  # what the sender does with a 429's retry_after
            raise RuntimeError("429")

    with pytest.raises(RuntimeError):
        await refused()
    assert p.delay(3, group=False, now=102.0) == pytest.approx(1.0)
    assert p.delay(3, group=False, now=103.0) == 0, "the hold, then nothing on top"


def test_sends_in_flight_fill_a_window_until_they_are_answered() -> None:
    p = Pacer()
    out = [p.take(chat, group=False, now=100.0) for chat in range(30)]
    # An hour later they are still out: they may reach Telegram any moment.
    assert p.delay(99, group=False, now=3700.0) == IN_FLIGHT_POLL
    p.release(out[0])  # one failed: its place is free
    assert p.delay(99, group=False, now=3700.0) == 0
    p.confirm(out[1], 3700.0)  # one answered: it counts from its answer
    p.take(99, group=False, now=3700.0)
    # 28 out, 1 more out, 1 answered: the next waits for the answered one to leave.
    assert p.delay(98, group=False, now=3700.5) == pytest.approx(0.5)


async def test_a_send_without_an_answer_stays_counted() -> None:
    now = [100.0]
    p = Pacer(clock=lambda: now[0])

    async def timed_out() -> None:
        async with p.sending(-5, group=True, messages=10) as slot:
            slot.maybe_delivered = True  # a timeout: Telegram may have posted the album
            raise TimeoutError

    for _ in range(2):
        with pytest.raises(TimeoutError):
            await timed_out()
    assert p.delay(-5, group=True, now=101.0) == pytest.approx(59.0), "20 may have arrived"
