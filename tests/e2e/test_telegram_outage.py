"""Telegram's bad day costs a delay, never a link (issue 20): the real bot, the real PTB
client over HTTP, the Bot API stand-in's outage modes (`BotApiServer.set_outage`).

The hold's probe backoff, the client's read timeout while calls hang and the Telegram
budget are scaled down (`Runtime(first_probe=, probe_cap=, telegram_budget=)`,
`Sender.read_timeout`) so that minutes of outage take a second or two here. Nothing
here measures time: each check waits, with a bound, for the event it is about.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from conftest import eventually

from standins.harness import Harness
from xbot.sending.telegram_health import TelegramHealth

FIRST = 600  # the chat that gets one normal delivery before the outage
CHATS = range(601, 609)  # eight chats, two links each, all arriving during the outage
MEDIA = ("sendPhoto", "sendVideo", "sendAnimation", "sendDocument", "sendMediaGroup")
PROBE_CAP = 0.25  # stands for the real 30 s
# A hung call is TimedOut after the read timeout, so it is short (standing for the real
# 30 s) while calls hang, and the real one at every other time: a loaded machine may take
# longer than a fraction of a second over a send that is answered, which would then be a
# timeout of our own making (a hold, a send counted ambiguous, a link sent twice).
HANG_TIMEOUT = 0.5
READ_TIMEOUT = 30.0

Start = Callable[..., Awaitable[Harness]]


# Telegram's hold probes within a fraction of a second (the real one: 1 s, up to 30 s).
PROBES: dict[str, Any] = {"first_probe": 0.05, "probe_cap": PROBE_CAP}


def _health(h: Harness) -> TelegramHealth:
    assert h.bot is not None
    return h.bot.health


def delivered(h: Harness, chat: int) -> list[Any]:
    """The media calls Telegram accepted for `chat`, in order."""
    return [c for c in h.api.calls if c.method in MEDIA and c.chat_id == chat and c.status == 200]


def post_of(call: Any) -> str:
    found = re.search(r"/status/(\d+)", str(call.params.get("caption", "")))
    assert found is not None, call.params
    return found.group(1)


def notices(h: Harness, chat: int) -> list[str]:
    return [m.get("text", "") for m in h.sent(chat) if "could not deliver" in m.get("text", "")]


def _switch(h: Harness, mode: str | None, *, methods: str = "send") -> None:
    """The stand-in's outage, and the sender's read timeout to go with it (see HANG_TIMEOUT).

    Called only while no call of the hold's is out (`Hold.probing` false), or while its
    one probe hangs in an outage this switch ends: every send given one timeout is then
    answered in the outage it was made for. A switch while a probe is on its way would
    also make the result depend on the moment: a request half-way when the port closes
    ("refuse") is a dropped connection, which may have arrived (ambiguous)."""
    h.services.sender.read_timeout = HANG_TIMEOUT if mode == "hang" else READ_TIMEOUT
    h.api.set_outage(mode, methods=methods)


async def _between_probes(health: TelegramHealth, what: str) -> None:
    await eventually(lambda: not health.hold.probing, 10, what)


async def _outage_then_recovery(
    h: Harness, health: TelegramHealth, sends: str, every: str
) -> float:
    """One delivery; sends fail while 16 links arrive; then every method fails; then back.

    Returns the monotonic time Telegram came back: every call that arrived at the
    stand-in from then on was answered as Telegram answers."""
    h.add_post(700, text="before", photos=[h.photo("p700")])
    h.api.user_message(FIRST, "https://x.com/a/status/700")
    await eventually(lambda: delivered(h, FIRST), 10, "the first delivery")
    await h.wait_idle(10)  # its answer is in: nothing is out when the outage starts

    _switch(h, sends)  # every send fails; getUpdates still works
    for i, chat in enumerate(CHATS):
        for k in range(2):
            post = 710 + 2 * i + k
            h.add_post(post, text=f"post {post}", photos=[h.photo(f"p{post}")])
            h.api.user_message(chat, f"https://x.com/a/status/{post}")
    await eventually(lambda: not health.reachable, 10, "the hold")
    queue = h.services.queue

    async def queued() -> int:
        return len(await queue.list(state="pending", limit=100))

    # Every link is in the queue, durably, while sends fail, and no lease is held across
    # the hold: all 16 are seen pending at once (one count: a probe leases one for its call).
    waiting = 0
    for _ in range(1000):
        waiting = await queued()
        if waiting == 16:
            break
        await asyncio.sleep(0.01)
    assert waiting == 16
    failures = health.hold.failures
    await eventually(lambda: health.hold.failures >= failures + 2, 10, "probes while sends fail")

    await _between_probes(health, "a moment with no probe out")
    _switch(h, every, methods="all")  # now getUpdates fails too
    failures = health.hold.failures
    await eventually(lambda: health.hold.failures >= failures + 3, 10, "probes while all fails")
    # One probe at a time, backing off: every call that met the outage but getUpdates
    # was one the hold counted (none per task; no storm while getUpdates answers, and
    # none ended the hold: its count never started again). A probe still out: the + 1.
    into = [
        c
        for c in h.api.calls
        if (c.description or "").startswith("outage:") and c.method != "getUpdates"
    ]
    assert len(into) <= health.hold.failures + 1, [c.method for c in into]
    if every == "hang":  # its probe hangs until the switch ends it (a 504, an ambiguous send)
        await eventually(lambda: health.hold.probing, 10, "a probe in the hang")
    else:
        await _between_probes(health, "a moment with no probe out")
    _switch(h, None)
    return time.monotonic()  # the bot's loop did not run since: no answer came before


@pytest.mark.parametrize(
    ("sends", "every"),
    [("502", "refuse"), ("hang", "502"), ("reset", "hang")],
    ids=["502-then-refused", "hang-then-502", "reset-then-hang"],
)
async def test_an_outage_costs_a_delay_never_a_link(
    start_harness: Start, sends: str, every: str
) -> None:
    h = await start_harness(pacer=True, bot_options={**PROBES, "read_timeout": READ_TIMEOUT})
    health = _health(h)
    sendable: list[float] = []  # when the hold ended, or its probe was brought forward
    health.add_listener(lambda ok: sendable.append(time.monotonic()) if ok else None)
    back = await _outage_then_recovery(h, health, sends, every)

    await eventually(lambda: all(len(delivered(h, c)) == 2 for c in CHATS), 20, "the backlog")
    await h.wait_idle(10)
    for i, chat in enumerate(CHATS):
        # Every link once, in the order it arrived in its chat.
        assert [post_of(c) for c in delivered(h, chat)] == [str(710 + 2 * i), str(711 + 2 * i)]
        assert notices(h, chat) == []
    # The backlog starts at the first probe after recovery (due within the cap: 30 s for
    # real, far inside "about a minute"): that probe is a delivery, and at most one call
    # (a probe the outage took as it ended) came in before it.
    after = sorted(
        (c for c in h.api.calls if c.at >= back and c.method != "getUpdates"),
        key=lambda c: c.at,
    )
    first = next(n for n, c in enumerate(after) if c in delivered(h, c.chat_id))
    assert first <= 1, [(c.method, c.status, c.description) for c in after[: first + 1]]
    assert health.reachable
    # Neither getUpdates' answers during the sends' outage nor anything else let sends
    # go before Telegram was back.
    assert sendable
    assert min(sendable) >= back
    done = await h.services.queue.list(state="done", limit=100)
    assert {t.attempts for t in done if t.kind == "deliver"} == {1}  # no attempt burnt
    ambiguous = sum(t.ambiguous_sends for t in done)
    if "hang" in (sends, every):
        assert ambiguous >= 1  # a hung send may have arrived: counted, not guessed
    else:
        assert ambiguous == 0  # a 502, a refusal: nothing arrived, nothing to count
    assert await h.services.queue.list(state="dead") == []


async def test_past_the_budget_one_notice_after_telegram_is_back(start_harness: Start) -> None:
    h = await start_harness(bot_options={**PROBES, "telegram_budget": 1.0})
    health = _health(h)
    h.add_post(720, text="too late", photos=[h.photo("p720")])
    h.api.set_outage("502")
    h.api.user_message(620, "https://x.com/a/status/720")
    queue = h.services.queue
    dead: list[Any] = []

    async def buried() -> bool:
        dead[:] = await queue.list(state="dead")
        return bool(dead)

    for _ in range(1000):  # a second of budget, probes every quarter second
        if await buried():
            break
        await asyncio.sleep(0.01)
    (task,) = dead
    assert "Telegram did not answer" in (task.last_error or "")
    assert task.attempts == 1  # the lease that gave it up; every one before was given back
    # The notice waits behind the hold: nothing reached the chat while Telegram is down.
    await eventually(lambda: health.hold.failures >= 6, 10, "probes past the burial")
    assert [c for c in h.api.calls_for("sendMessage", 620) if c.status == 200] == []
    h.api.set_outage(None)
    await eventually(lambda: notices(h, 620), 10, "the notice")
    await h.wait_idle(10)
    (said,) = notices(h, 620)
    assert "Telegram did not answer for too long" in said
    assert delivered(h, 620) == []
    assert health.reachable
