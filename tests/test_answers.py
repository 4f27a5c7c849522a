"""Handler answers go through the sender: a chat held by a 429 gets its answer after the
hold, and meanwhile the poller goes on (other chats are not held up behind it); an
answer Telegram's hold stops becomes durable work, sent when Telegram is back."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from standins.harness import Harness

HELD, OTHER = 611, 612
HOLD = 6.0  # longer than the pacer sleeps in place (Pacer.max_wait)


def answers(h: Harness, chat: int) -> list[str]:
    return [m.get("text", "") for m in h.sent(chat)]


async def test_a_held_chat_is_answered_after_its_hold_and_polling_goes_on(
    harness: Harness,
) -> None:
    h = harness
    pacer = h.services.sender.pacer
    pacer.hold(HELD, pacer.clock() + HOLD)
    started = time.monotonic()
    update = h.api.user_message(HELD, "/help")
    # The batch with the held chat's command is handled and confirmed long before
    # the hold ends: its handler did not wait the hold out.
    poller = h.bot.poller
    assert poller is not None
    await h.api.wait_for(lambda: poller.offset > update["update_id"], HOLD / 2)
    h.api.user_message(OTHER, "/help")
    await h.api.wait_for(lambda: answers(h, OTHER), HOLD / 2)
    assert answers(h, HELD) == [], "nothing goes to a held chat"
    await h.api.wait_for(lambda: answers(h, HELD), 10)
    assert time.monotonic() - started >= HOLD - 0.5, "the held chat's answer came after it"
    assert answers(h, HELD)[0].startswith("Send me a link")


async def test_an_answer_while_telegram_is_down_is_durable_work_with_its_buttons(
    start_harness: Any,
) -> None:
    h = await start_harness(bot_options={"first_probe": 0.05, "probe_cap": 0.2})
    h.api.set_outage("502")  # sends fail, polling works
    h.api.user_message(HELD, "/settings")
    queue = h.services.queue

    async def queued() -> list[Any]:
        return [t for t in await queue.list(chat_id=HELD) if t.kind == "notice"]

    notices: list[Any] = []
    for _ in range(1000):  # the reply failed (or was held) and became a notice task
        notices[:] = await queued()
        if notices:
            break
        await asyncio.sleep(0.01)
    (task,) = notices
    assert json.loads(task.payload)["markup"]["inline_keyboard"]  # its buttons kept
    assert answers(h, HELD) == []
    h.api.set_outage(None)
    await h.api.wait_for(lambda: answers(h, HELD), 10)
    await h.wait_idle()
    (said,) = h.sent(HELD)
    assert said["reply_markup"]["inline_keyboard"], "the menu came with its buttons"
    assert [t.state for t in await queued()] == ["done"]
