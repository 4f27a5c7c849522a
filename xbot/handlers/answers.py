"""How a handler answers: through the `Sender`, like every task, so the chat's pace, a
429 hold and Telegram's own hold (`xbot.sending.telegram_health`) cover handler
replies too, and `telegram.error` stays inside the sender.

A held reply is not waited out here: the poller confirms a batch of updates only
after all its handlers returned (`xbot.receiving.polling`), so a handler that
waited for one held chat would delay every other chat's updates, and a wait in
memory is lost at a stop. It becomes durable work instead: a ``notice`` task in
its chat (`NoticePayload` with its text, HTML flag and buttons), queued to run
when the 429 hold ends, or behind Telegram's hold, which the worker waits out
like any task's. A reply that timed out (`TelegramUnreachable.ambiguous`) may be
in the chat already and is not queued again. Nothing here is raised into PTB's
error handler.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from telegram import InlineKeyboardMarkup, Message

from xbot.errors import RateLimited, StoreError, TelegramUnreachable, XbotError
from xbot.logs import kv
from xbot.sending.destination import Destination
from xbot.storage.queue import NOTICE_KIND, NOTICE_MAX_ATTEMPTS
from xbot.tasks.payloads import NoticePayload

if TYPE_CHECKING:
    from xbot.services import XContext

log = logging.getLogger(__name__)


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

    Returns the message sent, or None when it was dropped or queued behind a hold.
    """
    dest = Destination.answering(message, quote=quote)
    sender = context.services.sender
    try:
        return await sender.send_text(dest, text, html=html, reply_markup=markup)
    except RateLimited as exc:
        await _queue(context, dest, text, html=html, markup=markup, wait=exc.retry_after)
    except TelegramUnreachable as exc:
        if exc.ambiguous:
            log.info("answer may have been sent %s", kv(chat=dest.chat_id, error=exc.reason))
        else:
            await _queue(context, dest, text, html=html, markup=markup, wait=0.0)
    except XbotError as exc:
        log.info("answer not sent %s", kv(chat=dest.chat_id, error=type(exc).__name__))
    return None


async def _queue(
    context: XContext,
    dest: Destination,
    text: str,
    *,
    html: bool,
    markup: InlineKeyboardMarkup | None,
    wait: float,
) -> None:
    """The held reply as a ``notice`` task of its chat, runnable once the chat's hold ends."""
    services = context.services
    now = services.clock()
    payload = NoticePayload(
        text, dest, html=html, markup=markup.to_dict() if markup is not None else None
    )
    try:
        await services.queue.enqueue(
            NOTICE_KIND,
            payload.to_json(),
            dest.chat_id,
            now=now,
            run_after=now + wait,
            max_attempts=NOTICE_MAX_ATTEMPTS,
        )
    except StoreError as exc:
        log.warning("answer not queued %s", kv(chat=dest.chat_id, error=exc))
        return
    services.workers.wake()
    log.info("answer queued behind a hold %s", kv(chat=dest.chat_id, held=round(wait, 1)))


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
