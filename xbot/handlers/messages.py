"""Links in messages become durable deliver tasks; nothing else happens here.

The handler parses, answers at most one quick sentence, enqueues and returns:
the network work is the workers'. Junk is ignored or gets one clear answer.
"""

from __future__ import annotations

import asyncio
import logging

from telegram import Update
from telegram.constants import ChatType

from xbot.errors import StoreError
from xbot.handlers.answers import reply
from xbot.handlers.language import language_of
from xbot.i18n import N_, translator
from xbot.links import LinkPlan, extract_links, plan_links
from xbot.logs import kv
from xbot.sending.destination import Destination
from xbot.services import XContext
from xbot.tasks.payloads import DELIVER, DeliverPayload

log = logging.getLogger(__name__)

MAX_LINKS = 10
NOT_ALLOWED = N_("Sorry, this bot is private and does not serve this chat.")
UNSUPPORTED_LINK = N_("I cannot fetch anything from that link.")
X_ONLY = N_("I can only fetch posts from X (twitter.com / x.com) here.")
STORE_UNAVAILABLE = N_(
    "I could not take that link just now: my storage is busy or full. "
    "Please send it again in a few minutes."
)
# Pauses before the tries of an enqueue that met a locked or full database. Telegram
# will not send the update again once the next poll confirmed it, so the handler is
# the last place the link exists: wait out a short lock, then tell the sender.
ENQUEUE_PAUSES = (0.0, 1.0, 3.0)


async def on_message(update: Update, context: XContext) -> None:
    message = update.effective_message
    chat = update.effective_chat
    if message is None or chat is None:
        return
    text = message.text or message.caption or ""
    entities = message.entities or message.caption_entities or ()
    if not text or not entities:
        return
    services = context.services
    links_found = extract_links(text, entities)
    if not links_found:
        return
    user = update.effective_user
    private = chat.type == ChatType.PRIVATE
    if not services.settings.is_allowed_chat(chat.id, user.id if user else None):
        if private:
            code = user.language_code if user else None
            await reply(context, message, translator(code).gettext(NOT_ALLOWED))
        return

    plan = plan_links(
        links_found, MAX_LINKS, allow_private=services.settings.allow_private_networks
    )
    # Decided now, while the update says who asked, and carried in every task.
    lang = await language_of(update, context)
    tr = translator(lang)
    _ = tr.gettext
    try:
        queued, refused_other = await _enqueue_links(update, context, plan, lang)
    except StoreError as exc:
        log.warning("links not queued %s", kv(chat=chat.id, message=message.message_id, error=exc))
        # Quoted, even in private: it names which message to send again.
        await reply(context, message, _(STORE_UNAVAILABLE), quote=True)
        return
    if queued:
        services.workers.wake()
    log.info(
        "links %s",
        kv(chat=chat.id, message=message.message_id, queued=queued, skipped=plan.skipped),
    )
    notes = []
    if plan.skipped:
        notes.append(
            tr.ngettext(
                "I took the first {limit} links of your message and skipped {n} more.",
                "I took the first {limit} links of your message and skipped {n} more.",
                plan.skipped,
            ).format(limit=MAX_LINKS, n=plan.skipped)
        )
    if refused_other and private and not queued:
        notes.append(_(X_ONLY))
    elif plan.unsupported and private and not queued:
        notes.append(_(UNSUPPORTED_LINK))
    if notes:
        await reply(context, message, " ".join(notes))


async def _enqueue_links(
    update: Update, context: XContext, plan: LinkPlan, lang: str
) -> tuple[int, int]:
    """Queue the plan's links, answered in `lang`; returns (queued, refused other-site links).

    Raises:
        StoreError: the database stayed locked or full through every try.
    """
    message, chat, user = update.effective_message, update.effective_chat, update.effective_user
    assert message is not None
    assert chat is not None
    services = context.services
    now = services.clock()
    chat_state = await services.chats.get(chat.id, now)
    others_on = chat_state.settings.ytdlp_enabled(chat.type)
    queued = 0
    refused_other = 0
    for link in plan.links:
        if link.kind == "other" and not others_on:
            refused_other += 1
            continue
        payload = DeliverPayload.for_link(
            link,
            # The media answer the message, in its topic.
            Destination.answering(message, quote=True, lang=lang),
            # Whose forward prompt it will be; None when posted as a chat (anonymous admin).
            user_id=user.id if user and message.sender_chat is None else None,
        )
        for attempt, pause in enumerate(ENQUEUE_PAUSES, 1):
            if pause:
                await asyncio.sleep(pause)
            try:
                await services.queue.enqueue(
                    DELIVER,
                    payload.to_json(),
                    chat.id,
                    now=now,
                    # Telegram may deliver an update twice (a crash before the offset was
                    # confirmed): the same message's link is queued once.
                    dedup_key=f"msg:{chat.id}:{message.message_id}:{link.key}",
                )
                break
            except StoreError:
                if attempt == len(ENQUEUE_PAUSES):
                    raise
        queued += 1
    return queued, refused_other
