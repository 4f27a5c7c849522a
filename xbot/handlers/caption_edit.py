"""The new caption of a forward: the next text from the user who pressed "Edit caption"
in that chat, or a reply to the prompt from someone who may choose the channel's caption
(`Act.CAPTION`: in a group its admins, an anonymous admin too). A caption sends nothing:
the forward waits for a press, where the presser's right to post in the channel is asked.

Registered in a handler group before the link handler; when it takes a
message it stops the update there (`ApplicationHandlerStop`), so a caption
with a link in it is a caption, not a new post to fetch. In groups with
BotFather's privacy mode on the bot only sees replies to its own messages:
the reply path is the one that works there.
"""

from __future__ import annotations

import logging

from telegram import Update
from telegram.ext import ApplicationHandlerStop, BaseHandler, MessageHandler, filters

from xbot.handlers.answers import reply
from xbot.handlers.commands import actor_of
from xbot.i18n import translator
from xbot.logs import kv
from xbot.sending.caption import CAPTION_LIMIT, visible_length
from xbot.services import XContext
from xbot.services.auth import Act
from xbot.storage.state import CAPTION_EDIT
from xbot.tasks.prompts import Prompt, find_prompt, prompt_by_message

log = logging.getLogger(__name__)

GROUP = -1  # before the link handler (group 0)


async def _target(update: Update, context: XContext) -> Prompt | None:
    """The prompt this message edits the caption of, if any (and if its sender may)."""
    message, chat = update.effective_message, update.effective_chat
    assert message is not None
    assert chat is not None
    services = context.services
    now = services.clock()
    state = await services.chats.get(chat.id, now)
    if not state.records:
        return None  # the common case: nothing pending here, no further work
    actor = actor_of(update)
    reply = message.reply_to_message
    if reply is not None and reply.from_user is not None and reply.from_user.id == context.bot.id:
        prompt = prompt_by_message(state, reply.message_id, now)
        if prompt is not None and prompt.stage != "queued":
            if await services.authority.may(chat.type, chat.id, actor, Act.CAPTION, prompt.owner):
                return prompt
            return None
    if actor.user_id is None or actor.sender_chat_id is not None:
        return None
    edit = state.record(CAPTION_EDIT, str(actor.user_id), now)
    source = edit.data.get("source") if edit is not None else None
    if not isinstance(source, str) or not source.isdigit():
        return None
    prompt = find_prompt(state, int(source), now)
    if prompt is None or prompt.stage != "editing" or prompt.editor != actor.user_id:
        return None
    return prompt


async def on_text(update: Update, context: XContext) -> None:
    message, chat = update.effective_message, update.effective_chat
    if message is None or chat is None or not message.text:
        return
    prompt = await _target(update, context)
    if prompt is None:
        return
    caption = message.text_html
    length = visible_length(caption)
    if length > CAPTION_LIMIT:
        _ = translator(prompt.lang).gettext
        await reply(
            context,
            message,
            _(
                "That caption is {length} characters long; Telegram allows {limit}. "
                "Send a shorter one, or /cancel."
            ).format(length=length, limit=CAPTION_LIMIT),
        )
        raise ApplicationHandlerStop
    forwarding = context.services.forwarding
    confirm = await forwarding.take_caption(chat.id, prompt, caption)
    if confirm is None:
        return  # the prompt moved on meanwhile: the message is an ordinary one
    log.info("caption edited %s", kv(chat=chat.id, prompt=prompt.id, length=length))
    await forwarding.show(chat.id, confirm)
    raise ApplicationHandlerStop


def handlers() -> list[BaseHandler[Update, XContext, None]]:
    only_new_text = filters.UpdateType.MESSAGE & filters.TEXT & ~filters.COMMAND
    return [MessageHandler(only_new_text, on_text)]
