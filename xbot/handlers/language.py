"""Which language to answer an update in, and remembering who added the bot.

The rule is `xbot.i18n.chat_language` (pure); this module feeds it from the
update (the user's ``language_code``) and the chat's settings (an admin's
pick, the adder's language). A group learns its adder's language from the
``my_chat_member`` update Telegram sends when the bot is added.
"""

from __future__ import annotations

import logging

from telegram import ChatMember, Update
from telegram.ext import BaseHandler, ChatMemberHandler

from xbot.i18n import Translator, chat_language, normalize, translator
from xbot.logs import kv
from xbot.services import XContext

log = logging.getLogger(__name__)

_OUT = frozenset({ChatMember.LEFT, ChatMember.BANNED})


async def language_of(update: Update, context: XContext) -> str:
    """The language this update is answered in (one of `xbot.i18n.LANGUAGES`)."""
    chat, user = update.effective_chat, update.effective_user
    user_language = user.language_code if user is not None else None
    if chat is None or chat.type == "private":
        return chat_language("private", user_language=user_language)
    services = context.services
    settings = (await services.chats.get(chat.id, services.clock())).settings
    return chat_language(
        chat.type,
        user_language=user_language,
        chat_setting=settings.language,
        adder_language=settings.adder_language,
    )


async def remember_operator_language(
    context: XContext, user_id: int, language_code: str | None
) -> None:
    """An operator's Telegram language, kept in their private chat for the alerts sent
    to them later (`xbot.tasks.alerts`), when no update tells it. Written only on change."""
    if not language_code:
        return
    services = context.services
    lang = normalize(language_code)
    now = services.clock()
    if (await services.chats.get(user_id, now)).settings.operator_language != lang:
        await services.chats.set_settings(user_id, now, operator_language=lang)


async def translator_of(update: Update, context: XContext) -> Translator:
    return translator(await language_of(update, context))


async def on_my_chat_member(update: Update, context: XContext) -> None:
    """The bot was added to a group or channel: its adder's language is the chat's default."""
    change = update.my_chat_member
    if change is None or change.chat.type == "private":
        return
    joined = change.old_chat_member.status in _OUT and change.new_chat_member.status not in _OUT
    code = change.from_user.language_code if change.from_user else None
    if not joined or not code:
        return
    services = context.services
    lang = normalize(code)
    await services.chats.set_settings(change.chat.id, services.clock(), adder_language=lang)
    log.info("added to chat %s", kv(chat=change.chat.id, language=lang))


def handlers() -> list[BaseHandler[Update, XContext, None]]:
    return [ChatMemberHandler(on_my_chat_member, ChatMemberHandler.MY_CHAT_MEMBER)]
