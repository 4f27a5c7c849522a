"""Alerts to the operator, end to end: the real bot, the real queue, the Bot API stand-in and
the three X source stand-ins, every one of them down for longer than the alert's threshold."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from conftest import WallClock as Shifted

from standins.harness import Harness
from xbot.sources.x import BreakerPolicy, SourceChain
from xbot.tasks.alert_rules import Condition
from xbot.tasks.callback_data import Action, CallbackData, encode

CHAT = 811
ADMIN = 812
RAISED = "No X source has answered since"
BACK = "X is answering again."


@pytest.fixture
async def h(start_harness: Callable[..., Awaitable[Harness]]) -> Harness:
    harness = await start_harness(
        x_sources=True, start_bot=False, admin_ids=frozenset({ADMIN}), alert_after=0.5
    )
    harness.clock = Shifted()  # the queue's, breakers' and alerts' clock, moved by the test
    await harness.start_bot()
    # One failure opens a breaker, for a second: the outage is quick to start and to end.
    for chain in (s for s in harness.services.sources.by_kind.values()):
        if isinstance(chain, SourceChain):
            for health in chain.health.values():
                health.policy = BreakerPolicy(threshold=1, cool_down=1.0, max_cool_down=1.0)
    return harness


def admin_texts(h: Harness) -> list[dict[str, Any]]:
    return [m for m in h.sent(ADMIN) if "text" in m]


async def alert_tasks(h: Harness) -> list[Any]:
    return [t for t in await h.services.queue.list(chat_id=ADMIN) if t.kind == "alert"]


async def more_checks(h: Harness, n: int) -> None:
    alerts = h.services.alerts
    assert alerts is not None
    target = alerts.checks + n
    await h.api.wait_for(lambda: alerts.checks >= target, 10)


def x_sources(h: Harness, outage: str | None) -> None:
    h.fx.set_outage(outage)
    assert h.vx is not None
    assert h.syn is not None
    h.vx.set_outage(outage)
    h.syn.set_outage(outage)


async def test_every_x_source_down_is_one_alert_and_one_back_message_with_counts(
    h: Harness,
) -> None:
    for n in range(3):
        h.add_post(500 + n, author=("Alice", "alice"), photos=[h.photo(f"p{n}")])
    x_sources(h, "503")
    for n in range(3):
        h.api.user_message(CHAT, f"https://x.com/alice/status/{500 + n}")
    await h.api.wait_for(lambda: any(RAISED in m["text"] for m in admin_texts(h)), 15)
    raised = admin_texts(h)
    assert len(raised) == 1
    await more_checks(h, 5)  # still down, looked at again and again: still one alert
    assert len(await alert_tasks(h)) == 1
    assert "3 are waiting so far" in raised[0]["text"]
    # The mute button names the condition, in the project's callback format.
    button = raised[0]["reply_markup"]["inline_keyboard"][0][0]
    assert button["callback_data"] == encode(CallbackData(Action.MUTE, ("x_down", 1)))

    x_sources(h, None)
    h.clock.offset += 10  # the waiting links are due again, the breakers' cool-down is over
    h.services.workers.wake()
    await h.api.wait_for(lambda: len([m for m in h.sent(CHAT) if "photo" in m]) == 3, 20)
    await h.api.wait_for(lambda: any(BACK in m["text"] for m in admin_texts(h)), 15)
    texts = [m["text"] for m in admin_texts(h)]
    assert len(texts) == 2, texts
    assert "3 links delayed, 0 lost" in texts[1], texts
    assert sum(RAISED in t for t in texts) == 1


async def test_links_given_up_during_the_outage_are_counted_as_lost(h: Harness) -> None:
    for n in range(2):
        h.add_post(700 + n, author=("Alice", "alice"), photos=[h.photo(f"l{n}")])
    x_sources(h, "503")
    for n in range(2):
        h.api.user_message(CHAT, f"https://x.com/alice/status/{700 + n}")
    await h.api.wait_for(lambda: any(RAISED in m["text"] for m in admin_texts(h)), 15)
    # An hour and more later, still down: the links are given up (a dead-letter notice each).
    h.clock.offset += 3700
    h.services.workers.wake()
    await h.api.wait_for(
        lambda: len([m for m in h.sent(CHAT) if "Sorry" in m.get("text", "")]) == 2, 20
    )
    x_sources(h, None)
    h.clock.offset += 10
    # Nothing is waiting any more: the next link is the breakers' probe that finds X back.
    h.add_post(702, author=("Alice", "alice"), photos=[h.photo("l2")])
    h.api.user_message(CHAT, "https://x.com/alice/status/702")
    await h.api.wait_for(lambda: any(BACK in m["text"] for m in admin_texts(h)), 15)
    assert "2 links delayed, 2 lost" in admin_texts(h)[-1]["text"]


async def test_the_mute_button_mutes_that_condition_for_the_operator(h: Harness) -> None:
    alerts = h.services.alerts
    assert alerts is not None
    data = encode(CallbackData(Action.MUTE, (Condition.X_DOWN.value, 1)))
    # An alert message to press under (the real one, as the alert task sends it).
    await h.services.queue.enqueue(
        "alert",
        '{"v":1,"text":"test","condition":"x_down","lang":"en"}',
        ADMIN,
        now=h.clock(),
    )
    h.services.workers.wake()
    await h.api.wait_for(lambda: admin_texts(h), 10)
    message = admin_texts(h)[0]
    # Someone else's press changes nothing.
    h.api.callback_query(ADMIN, message["message_id"], data, user_id=CHAT)
    await h.api.wait_for(lambda: h.api.calls_for("answerCallbackQuery"), 10)
    refused = h.api.calls_for("answerCallbackQuery")[0].params.get("text")
    assert refused == "That command is for the bot's operators."
    assert (await h.services.chats.get(CHAT, h.clock())).settings.muted_alerts is None
    h.api.callback_query(ADMIN, message["message_id"], data, user_id=ADMIN, language_code="de")
    await h.api.wait_for(lambda: h.api.calls_for("editMessageText"), 10)
    settings = (await h.services.chats.get(ADMIN, h.clock())).settings
    assert settings.muted_alerts == "x_down"
    assert settings.operator_language == "de"
    answers = [c.params.get("text") for c in h.api.calls_for("answerCallbackQuery")]
    assert len(answers) == 2
    # Muted: every X source down is no alert for this operator any more.
    x_sources(h, "503")
    h.add_post(600, author=("Alice", "alice"), photos=[h.photo("q")])
    h.api.user_message(CHAT, "https://x.com/alice/status/600")
    await h.api.wait_for(lambda: any("X" in m.get("text", "") for m in h.sent(CHAT)), 15)
    await h.api.wait_for(lambda: alerts.watches.get(Condition.X_DOWN) is not None
                         and alerts.watches[Condition.X_DOWN].raised, 10)  # fmt: skip
    assert len(admin_texts(h)) == 1
