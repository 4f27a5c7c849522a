"""Inline mode: ``@bot <link>`` in any chat (a site whose `Site.inline` says so), and the
album button's ``/start <parameter>`` (`inline_results.album_parameter`).

The inline handler looks the link up (`InlineFetches.look_up`: the link
cache, then one fetch through the sources, within a budget), lets
`xbot.handlers.inline_results` plan the answer and answers once; a late or refused
answer is a log line, never an error to the user: an answer past Telegram's window
(`ANSWER_WINDOW`), or one while Telegram is unreachable (the sender's hold), is
dropped, never queued or retried, since Telegram would refuse it. The album button opens
the private chat with ``/start <parameter>`` naming the post: that becomes an
ordinary deliver task there.
"""

from __future__ import annotations

import logging
import time

from telegram import Update
from telegram.constants import ChatType
from telegram.ext import BaseHandler, InlineQueryHandler

from xbot.errors import (
    FetchError,
    PostUnavailable,
    StaleFileId,
    StoreError,
    TransientFetch,
    XbotError,
)
from xbot.handlers import inline_results as plan
from xbot.handlers.inline_results import InlineAnswer
from xbot.handlers.language import language_of
from xbot.i18n import DEFAULT, N_, normalize, translator
from xbot.links import Link
from xbot.logs import kv
from xbot.sending.caption import post_from_parts
from xbot.sending.destination import Destination
from xbot.services import Services, XContext
from xbot.storage.link_cache import CachedPost
from xbot.tasks.delivery import KIND
from xbot.tasks.payloads import DeliverPayload

log = logging.getLogger(__name__)

NOT_INLINE = N_(
    "This pixiv work is marked R-18, which I send only in a chat that allows it, not inline."
)

ALBUM_REFUSED = N_("That button is out of date: paste the link here instead.")
# Telegram takes an inline answer for about 10 s after the query ("query is too old and
# response timeout expired" after that): a later one is dropped, not sent to be refused.
ANSWER_WINDOW = 10.0


def handlers() -> list[BaseHandler[Update, XContext, None]]:
    return [InlineQueryHandler(on_inline_query)]


async def on_inline_query(update: Update, context: XContext) -> None:
    query = update.inline_query
    if query is None:
        return
    started = time.monotonic()
    services = context.services
    # Answered in the asker's own Telegram language, wherever they type (issue 16).
    lang = normalize(query.from_user.language_code)
    answer = await answer_for(services, query.from_user.id, query.query, lang=lang)
    try:
        try:
            await _answer(services, query.id, answer, started)
        except StaleFileId:
            # Telegram no longer knows a cached file_id: forget the entry, answer afresh
            # (a refused answer is no answer: the query may still be answered once).
            if answer.key is not None:
                await services.cache.invalidate(answer.key)
            answer = await answer_for(
                services, query.from_user.id, query.query, cached=False, lang=lang
            )
            await _answer(services, query.id, answer, started)
    except (XbotError, StoreError) as exc:  # too late, or refused: nobody waits for a reply
        log.warning("inline answer refused %s", kv(kind=answer.kind, error=exc))
        return
    log.info(
        "inline %s",
        kv(
            kind=answer.kind,
            results=len(answer.results),
            ms=int((time.monotonic() - started) * 1000),
        ),
    )


async def _answer(services: Services, query_id: str, answer: InlineAnswer, started: float) -> None:
    late = time.monotonic() - started
    if late >= ANSWER_WINDOW:
        log.info("inline answer dropped %s", kv(kind=answer.kind, late=f"{late:.1f}s"))
        return
    await services.sender.answer_inline(
        query_id,
        answer.results,
        cache_time=answer.cache_time,
        is_personal=answer.is_personal,
        button=answer.button,
        by="file_id" if answer.kind == "cached" else "",
    )


async def answer_for(
    services: Services, user_id: int, text: str, *, cached: bool = True, lang: str = DEFAULT
) -> InlineAnswer:
    """What to answer `user_id`'s query `text` with, our words in `lang` (one of
    `xbot.i18n.LANGUAGES`; `cached=False`: never by a cache entry). Never raises for bad
    input."""
    settings = services.settings
    if not settings.is_allowed_chat(user_id, user_id):
        return plan.for_not_allowed(lang)
    # Always per user: the answer is in the asker's language (see `plan.CACHE_WHOLE`).
    personal = True
    link = plan.parse_query(text, allow_private=settings.allow_private_networks)
    if link is None or link.post_id is None:
        return plan.for_hint(personal=personal, lang=lang)
    post_id = link.post_id

    async def read_cache(resolved: Link) -> CachedPost | None:
        if not cached:
            return None
        try:
            return await services.cache.get(resolved.key, services.clock(), settings.cache_ttl)
        except StoreError as exc:
            log.warning("inline cache lookup failed %s", kv(key=resolved.key, error=exc))
            return None

    try:
        found = await services.inline.look_up(link, read_cache, user_id)
    except PostUnavailable as exc:
        return plan.for_failure(
            post_id, link.url, exc.reason, personal=personal, lasting=True, lang=lang
        )
    except TransientFetch:
        return plan.for_timeout(
            post_id, link.url, personal=personal, key=link.key, kind="transient", lang=lang
        )
    except FetchError as exc:
        return plan.for_failure(
            post_id, link.url, exc.reason, personal=personal, lasting=False, lang=lang
        )
    if found is None:
        return plan.for_timeout(post_id, link.url, personal=personal, key=link.key, lang=lang)
    rating = (
        post_from_parts(found.key, found.url, found.caption_parts).rating
        if isinstance(found, CachedPost)
        else found.rating
    )
    if rating:
        # Inline mode cannot know where the answer will be posted, nor that chat's
        # settings: a rated work goes only through a chat that allows it.
        return plan.for_failure(
            post_id, link.url, NOT_INLINE, personal=personal, lasting=True, lang=lang
        )
    if isinstance(found, CachedPost):
        return plan.for_cached(found, post_id, personal=personal, lang=lang)
    return plan.for_fresh(found, post_id, personal=personal, lang=lang)


async def start_album(update: Update, context: XContext, parameter: str) -> bool:
    """``/start <parameter>`` from the album button (`plan.album_link`: each site's
    `Site.album_url`, ``a<X id>`` for X): queue the post for this private chat.

    Returns False when `parameter` is not an album button's (the caller answers as usual).
    """
    link = plan.album_link(parameter)
    message, chat, user = update.effective_message, update.effective_chat, update.effective_user
    if link is None or message is None or chat is None or chat.type != ChatType.PRIVATE:
        return False
    services = context.services
    if not services.settings.is_allowed_chat(chat.id, user.id if user else None):
        return False
    key = link.key
    # The album is a task like any link pasted here, in this chat's language (the user's).
    lang = await language_of(update, context)
    payload = DeliverPayload.for_link(
        link,
        Destination.answering(message, quote=True, lang=lang),
        user_id=user.id if user else None,
    )
    try:
        await services.queue.enqueue(
            KIND,
            payload.to_json(),
            chat.id,
            now=services.clock(),
            dedup_key=f"start:{chat.id}:{message.message_id}",
            user_id=user.id if user else None,
        )
    except StoreError as exc:
        log.warning("album not queued %s", kv(chat=chat.id, post=key, error=exc))
        await message.reply_text(translator(lang).gettext(ALBUM_REFUSED))
        return True
    services.workers.wake()
    log.info("inline album queued %s", kv(chat=chat.id, post=key))
    return True
