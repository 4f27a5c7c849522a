"""How a handler answers: through the `Sender`, like every task, so the chat's pace and a
429 hold cover handler replies too, and `telegram.error` stays inside the sender.

A chat held by a 429 holds handler replies too. The handler does not wait
the hold out itself: the poller confirms a batch of updates only after all
its handlers returned (`xbot.polling`), so one held chat would delay every
other chat's updates. The reply goes out from a task of its own once the
hold ends (for holds up to `HOLD_WAIT` seconds; longer ones drop it, as a
chat Telegram refuses does). Nothing here is raised into PTB's error handler.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from telegram import InlineKeyboardMarkup, Message

from xbot.destination import Destination
from xbot.errors import RateLimited, XbotError
from xbot.logs import kv

if TYPE_CHECKING:
    from xbot.sender import Sender
    from xbot.services import XContext

log = logging.getLogger(__name__)

HOLD_WAIT = 15.0  # the longest a reply waits for a 429 hold on its chat to pass
_LATER: set[asyncio.Task[None]] = set()  # replies waiting out a hold (kept from the GC)


async def reply(
    context: XContext,
    message: Message,
    text: str,
    *,
    html: bool = False,
    markup: InlineKeyboardMarkup | None = None,
    quote: bool | None = None,
) -> Message | None:
    """Answer ``message`` in its chat and topic (quoted as `Destination.answering` says).

    Returns the message sent, or None when it was dropped or waits out a hold.
    """
    dest = Destination.answering(message, quote=quote)
    sender = context.services.sender
    try:
        return await sender.send_text(dest, text, html=html, reply_markup=markup)
    except RateLimited as exc:
        if exc.retry_after > HOLD_WAIT:
            log.info("answer not sent %s", kv(chat=dest.chat_id, held=exc.retry_after))
            return None
        later = asyncio.create_task(
            _after_hold(sender, dest, text, html=html, markup=markup, wait=exc.retry_after),
            name=f"xbot-reply-{dest.chat_id}",
        )
        _LATER.add(later)
        later.add_done_callback(_LATER.discard)
    except XbotError as exc:
        log.info("answer not sent %s", kv(chat=dest.chat_id, error=type(exc).__name__))
    return None


async def _after_hold(
    sender: Sender,
    dest: Destination,
    text: str,
    *,
    html: bool,
    markup: InlineKeyboardMarkup | None,
    wait: float,
) -> None:
    """The reply, once the chat's hold has passed (again if a new 429 came meanwhile)."""
    left = HOLD_WAIT
    while wait <= left:
        await asyncio.sleep(wait)
        left -= wait
        try:
            await sender.send_text(dest, text, html=html, reply_markup=markup)
            return
        except RateLimited as exc:
            wait = exc.retry_after
        except XbotError as exc:
            log.info("answer not sent %s", kv(chat=dest.chat_id, error=type(exc).__name__))
            return
    log.info("answer not sent %s", kv(chat=dest.chat_id, held=wait))


async def edit(
    context: XContext,
    message: Message,
    text: str,
    *,
    html: bool = False,
    markup: InlineKeyboardMarkup | None = None,
) -> bool:
    """Edit a message the bot sent (a menu, a list); a refusal is logged, not raised."""
    try:
        await context.services.sender.edit_text(
            message.chat.id, message.message_id, text, html=html, reply_markup=markup
        )
    except XbotError as exc:
        log.info("edit failed %s", kv(chat=message.chat.id, error=type(exc).__name__))
        return False
    return True


def rest_of(message: Message) -> str:
    """The text after the command, spacing and line breaks kept (context.args loses them)."""
    text = message.text or ""
    _, _, rest = text.partition(" ")
    if not rest:
        _, _, rest = text.partition("\n")
    return rest.strip()
