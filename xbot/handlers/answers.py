"""How a handler answers: through the `Sender`, like every task, so the chat's pace and a
429 hold cover handler replies too, and `telegram.error` stays inside the sender.

A chat held by a 429 holds handler replies too: the reply waits the hold out
(up to `HOLD_WAIT` seconds; handlers run concurrently, so one waiting reply
holds up no other chat). Beyond that, or when Telegram refuses it (the bot
was removed), the answer is logged, never raised into PTB's error handler.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from telegram import InlineKeyboardMarkup, Message

from xbot.destination import Destination
from xbot.errors import RateLimited, XbotError
from xbot.logs import kv

if TYPE_CHECKING:
    from xbot.services import XContext

log = logging.getLogger(__name__)

HOLD_WAIT = 15.0  # the longest a reply waits for a 429 hold on its chat to pass


async def reply(
    context: XContext,
    message: Message,
    text: str,
    *,
    html: bool = False,
    markup: InlineKeyboardMarkup | None = None,
    quote: bool | None = None,
) -> Message | None:
    """Answer ``message`` in its chat and topic (quoted as `Destination.answering` says)."""
    dest = Destination.answering(message, quote=quote)
    deadline = time.monotonic() + HOLD_WAIT
    while True:
        try:
            return await context.services.sender.send_text(
                dest, text, html=html, reply_markup=markup
            )
        except RateLimited as exc:
            left = deadline - time.monotonic()
            if exc.retry_after > left:
                log.info("answer not sent %s", kv(chat=dest.chat_id, held=exc.retry_after))
                return None
            await asyncio.sleep(exc.retry_after)
        except XbotError as exc:
            log.info("answer not sent %s", kv(chat=dest.chat_id, error=type(exc).__name__))
            return None


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
