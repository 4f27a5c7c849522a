"""Links in messages, and those ``/get`` asks for, become durable deliver tasks; nothing
else happens here.

The handler parses, answers at most one quick sentence, enqueues and returns:
the network work is the workers'. Junk is ignored or gets one clear answer.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from telegram import Message, MessageEntity, Update
from telegram.constants import ChatType

from xbot.errors import StoreError
from xbot.handlers.answers import reply
from xbot.handlers.language import language_of, translator_of
from xbot.i18n import N_, translator
from xbot.links import LinkPlan, extract_links, plan_links
from xbot.logs import kv
from xbot.receiving.intake import telegram_resends
from xbot.sending.destination import Destination
from xbot.services import XContext
from xbot.tasks.payloads import DELIVER, DeliverPayload

log = logging.getLogger(__name__)

MAX_LINKS = 10
NOT_ALLOWED = N_("Sorry, this bot is private and does not serve this chat.")
UNSUPPORTED_LINK = N_("I cannot fetch anything from that link.")
X_ONLY = N_("I can only fetch posts from X (twitter.com / x.com) here.")
GET_USAGE = N_("Send /get with a link, or reply /get to a message that has one.")
STORE_UNAVAILABLE = N_(
    "I could not take that link just now: my storage is busy or full. "
    "Please send it again in a few minutes."
)


async def on_message(update: Update, context: XContext) -> None:
    """A message in a chat: its links (if any) are taken as asked for."""
    message = update.effective_message
    if message is None:
        return
    text = message.text or message.caption or ""
    entities = message.entities or message.caption_entities or ()
    await take_links(update, context, text, entities)


async def cmd_get(update: Update, context: XContext) -> None:
    """``/get <link>…``, ``/get@bot <link>``, or ``/get`` in reply to a message with links.

    The way in for groups whose privacy mode is on (Telegram gives the bot only
    commands, mentions and replies to it there). The command's own links come
    first; else the replied-to message's (its text or caption and entities, which
    Telegram sends with the reply even though the bot never received that
    message), answered in reply to that message. Else one line on how to use it.
    """
    message = update.effective_message
    if message is None:
        return
    text = message.text or ""
    entities = message.entities or ()
    if extract_links(text, entities):
        await take_links(update, context, text, entities, explicit=True)
        return
    replied = message.reply_to_message
    if replied is not None and not _is_topic_root(replied):
        r_text = replied.text or replied.caption or ""
        r_entities = replied.entities or replied.caption_entities or ()
        if extract_links(r_text, r_entities):
            await take_links(
                update, context, r_text, r_entities, explicit=True, answer_to=replied.message_id
            )
            return
    _ = (await translator_of(update, context)).gettext
    await reply(context, message, _(GET_USAGE))


def _is_topic_root(message: Message) -> bool:
    """In a forum every message of a topic "replies" to the topic's first service message."""
    return message.forum_topic_created is not None


async def take_links(
    update: Update,
    context: XContext,
    text: str,
    entities: Sequence[MessageEntity],
    *,
    explicit: bool = False,
    answer_to: int | None = None,
) -> None:
    """Queue the links of `text` as deliver tasks: the one path from a message to the queue.

    `explicit`: someone asked for these links (``/get``), so what cannot be taken is
    said in groups too, not only in private. `answer_to`: the message the media
    answer (the one holding the links), when it is not the update's own message.
    """
    message = update.effective_message
    chat = update.effective_chat
    if message is None or chat is None:
        return
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
        queued, refused_other = await _enqueue_links(update, context, plan, lang, answer_to)
    except StoreError as exc:
        log.warning("links not queued %s", kv(chat=chat.id, message=message.message_id, error=exc))
        if telegram_resends():
            raise  # a webhook's 500: Telegram sends the update again (xbot.receiving.intake)
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
    told = private or explicit
    if refused_other and told and not queued:
        notes.append(_(X_ONLY))
    elif plan.unsupported and told and not queued:
        notes.append(_(UNSUPPORTED_LINK))
    if notes:
        await reply(context, message, " ".join(notes))


async def _enqueue_links(
    update: Update, context: XContext, plan: LinkPlan, lang: str, answer_to: int | None
) -> tuple[int, int]:
    """Queue the plan's links, answered in `lang` (in reply to `answer_to`, else to the
    update's message); returns (queued, refused other-site links).

    Raises:
        StoreError: the database is locked (past its busy timeout) or full.
    """
    message, chat, user = update.effective_message, update.effective_chat, update.effective_user
    assert message is not None
    assert chat is not None
    services = context.services
    now = services.clock()
    chat_state = await services.chats.get(chat.id, now)
    others_on = chat_state.settings.ytdlp_enabled(chat.type)
    # The media answer the message, in its topic (a /get reply: the message with the link).
    dest = Destination.answering(message, quote=True, lang=lang)
    if answer_to is not None:
        dest = dest.replying_to(answer_to)
    # Whose work it is, for the queue's bound on one user's work in flight: the user,
    # or the chat a message is posted as (an anonymous admin, a channel).
    requester = message.sender_chat.id if message.sender_chat else (user.id if user else None)
    queued = 0
    refused_other = 0
    for link in plan.links:
        if link.kind == "other" and not others_on:
            refused_other += 1
            continue
        payload = DeliverPayload.for_link(
            link,
            dest,
            # Whose forward prompt it will be; None when posted as a chat (anonymous admin).
            user_id=user.id if user and message.sender_chat is None else None,
        )
        # One try: a locked or full database is waited out by whoever received the
        # update (the poller asks for it again, a webhook's 500 has Telegram send it
        # again: xbot.receiving), never by a handler asleep in the middle of a batch.
        await services.queue.enqueue(
            DELIVER,
            payload.to_json(),
            chat.id,
            now=now,
            # Telegram may deliver an update twice (a crash before the offset was
            # confirmed): the same message's link is queued once (for /get: the
            # command's message, so a second /get asks again).
            dedup_key=f"msg:{chat.id}:{message.message_id}:{link.key}",
            user_id=requester,
        )
        queued += 1
    return queued, refused_other
