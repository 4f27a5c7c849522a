"""Every inline button: decode, check who pressed, answer once, then show the result.

Callback data comes from the client and can be forged: it only names which
button (`xbot.tasks.callback_data`). Whether the button still exists, what it acts
on and whether this person may press it come from the message Telegram
shows, our database and the Bot API. Anything that does not add up raises
`_Refused` (default: "This button has expired."), answered in one place, and
changes nothing. What a button starts is a durable task (a forward) or one quick
database write (a setting); the press is answered right after that write, since
the answer says what it did, and the message is edited after the answer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TypeVar

import attrs
from telegram import CallbackQuery, InlineKeyboardMarkup, Message, MessageEntity, Update
from telegram.ext import BaseHandler, CallbackQueryHandler

from xbot.errors import XbotError
from xbot.handlers.answers import edit
from xbot.handlers.commands import menu_context
from xbot.handlers.language import language_of, remember_operator_language
from xbot.handlers.messages import NOT_ALLOWED
from xbot.handlers.operator import DEAD_SHOWN, dead_view
from xbot.handlers.settings_menu import change_note, closed_text, menu_markup, menu_text, toggle
from xbot.i18n import N_, normalize, translator
from xbot.links import Link, classify, extract_links
from xbot.logs import kv
from xbot.sending.destination import Destination
from xbot.services import XContext
from xbot.services.auth import (
    FOR_THE_CHANNEL,
    ONLY_ADMINS,
    ONLY_OPERATORS,
    Act,
    Actor,
    is_operator,
)
from xbot.storage.state import ChatState
from xbot.tasks.alert_rules import Condition
from xbot.tasks.alerts import MUTED, UNMUTED, mute_markup, muted
from xbot.tasks.callback_data import Action, CallbackData, decode
from xbot.tasks.payloads import DELIVER, DeliverPayload
from xbot.tasks.prompts import EXPIRED, SKIPPED, find_prompt

log = logging.getLogger(__name__)
T = TypeVar("T")

CONDITIONS = frozenset(c.value for c in Condition)
# The answer to a 🎵 press: the sound follows as its own message.
SOUND_COMING = N_("The sound is on its way.")
# What each button under a forward prompt does, as far as who may press it goes.
_PROMPT_ACTS = {
    Action.FORWARD: Act.FORWARD,
    Action.CONFIRM: Act.FORWARD,  # "Forward" after an edit, or "Keep caption" (then Forward)
    Action.EDIT: Act.CAPTION,
    Action.SKIP: Act.DISMISS,
}


def carries(message: Message, data: str) -> bool:
    """The message really shows a button with this data (Telegram sends the message as it is
    now: a button removed by an edit, or never there, is not on it)."""
    markup = message.reply_markup
    if not isinstance(markup, InlineKeyboardMarkup):
        return False
    return any(b.callback_data == data for row in markup.inline_keyboard for b in row)


class _Refused(Exception):
    """A press that does not add up: answered with ``text`` (a msgid), nothing changed."""

    def __init__(self, text: str = EXPIRED) -> None:
        super().__init__(text)
        self.text = text


def _only_arg(value: T | None, data: CallbackData) -> T:
    """The button's one argument, read by ``data.int_arg``/``str_arg``; refused otherwise."""
    if value is None or len(data.args) != 1:
        raise _Refused
    return value


def _short(title: str, limit: int = 64) -> str:
    """A channel's title inside a callback answer (Telegram allows 200 characters)."""
    return title if len(title) <= limit else title[: limit - 1] + "…"


async def answer(context: XContext, query: CallbackQuery, text: str | None = None) -> None:
    """Answer the press (Telegram shows a spinner until we do); a late answer is no error.

    `text` is said as given: callers translate it (`_text`)."""
    try:
        await context.services.sender.answer_callback(query.id, text)
    except XbotError as exc:
        log.info("callback answer failed %s", kv(error=type(exc).__name__))


async def on_callback(update: Update, context: XContext) -> None:
    query = update.callback_query
    if query is None:
        return
    # Before the chat is known (or trusted): the presser's own language.
    _ = translator(query.from_user.language_code).gettext
    try:
        message, data = _pressed(query, context)
        try:
            _ = translator(await language_of(update, context)).gettext
            if data.action in _PROMPT_ACTS:
                await _prompt(query, message, data, context, _)
            elif data.action in (Action.SETTING, Action.MENU):
                await _settings(query, message, data, context, _)
            elif data.action == Action.RETRY:
                await _retry(query, message, data, context)
            elif data.action == Action.MUTE:
                await _mute(query, message, data, context, _)
            elif data.action == Action.AUDIO:
                await _sound(update, query, message, data, context, _)
            else:
                raise _Refused
        except XbotError as exc:
            log.warning("button failed %s", kv(chat=message.chat.id, error=exc))
            await answer(context, query, _("Sorry, something went wrong. Please try again."))
    except _Refused as refused:
        await answer(context, query, _(refused.text))


def _pressed(query: CallbackQuery, context: XContext) -> tuple[Message, CallbackData]:
    """The message under the button and the button's data, when both add up."""
    message = query.message
    if message is None:  # a button under an inline message: none of ours
        raise _Refused
    if not context.services.settings.is_allowed_chat(message.chat.id, query.from_user.id):
        raise _Refused(NOT_ALLOWED)
    data = decode(query.data)
    if data is None or not isinstance(message, Message) or not carries(message, str(query.data)):
        raise _Refused
    return message, data


async def _prompt(
    query: CallbackQuery,
    message: Message,
    data: CallbackData,
    context: XContext,
    _: Callable[[str], str],
) -> None:
    services = context.services
    chat = message.chat
    prompt_id = data.int_arg(0)
    state = await services.chats.get(chat.id, services.clock())
    prompt = find_prompt(state, prompt_id, services.clock()) if prompt_id is not None else None
    if prompt is None or prompt.message_id != message.message_id:
        raise _Refused
    presser = query.from_user.id
    act = _PROMPT_ACTS[data.action]
    if not await services.authority.may(chat.type, chat.id, Actor(presser), act, prompt.owner):
        raise _Refused(ONLY_ADMINS)
    channel = state.settings.channel_id
    if act in FOR_THE_CHANNEL and channel is not None:
        # Rights in the channel change after /channel linked it: asked at every press.
        refusal = await services.authority.refusal_in(channel, presser)
        if refusal is not None:
            title = state.settings.channel_title or str(channel)
            await answer(context, query, _(refusal).format(channel=_short(title)))
            return
    forwarding = services.forwarding
    result = await forwarding.press(chat.id, data, message_id=message.message_id, presser=presser)
    await answer(context, query, _(result.answer))
    if result.outcome == "skipped":
        # The prompt's own language (the chat's when it was offered), like the rest of it.
        skipped = translator(prompt.lang).gettext(SKIPPED)
        await forwarding.edit(chat.id, message.message_id, skipped, None)
    elif result.outcome in ("ask", "confirm", "queued") and result.prompt is not None:
        # Shown before the task is queued, so the task's "Forwarded" is always the last word.
        await forwarding.show(chat.id, result.prompt)
        if result.outcome == "queued":
            await forwarding.start(chat.id, result.prompt)


async def _settings(
    query: CallbackQuery,
    message: Message,
    data: CallbackData,
    context: XContext,
    _: Callable[[str], str],
) -> None:
    services = context.services
    chat = message.chat
    # In a channel the presser is a subscriber unless its admin list names him.
    if not await services.authority.may(chat.type, chat.id, Actor(query.from_user.id), Act.MANAGE):
        raise _Refused(ONLY_ADMINS)
    if data.action == Action.MENU:
        if data.args != ("close",):
            raise _Refused
        await answer(context, query)
        menu = await menu_context(services, chat, query.from_user.language_code)
        settings = (await services.chats.get(chat.id, services.clock())).settings
        await edit(context, message, closed_text(settings, menu))
        return
    code = _only_arg(data.str_arg(0), data)
    menu = await menu_context(services, chat, query.from_user.language_code)
    now = services.clock()
    changed: list[bool] = []

    def flip(state: ChatState) -> ChatState:
        # Read and flip under the chat's lock: two quick presses flip twice, not once.
        change = toggle(state.settings, code, menu)
        changed.append(change is not None)
        return state.with_settings(**change) if change is not None else state

    new = await services.chats.update(chat.id, flip, now)
    if not changed or not changed[0]:
        raise _Refused
    await answer(context, query, change_note(new.settings, code, menu))
    await edit(
        context,
        message,
        menu_text(new.settings, menu),
        html=True,
        markup=menu_markup(new.settings, menu),
    )


def sound_link(
    caption: str, entities: Sequence[MessageEntity], *, allow_private: bool = False
) -> Link | None:
    """The video's page under a 🎵 button: the last link of the caption Telegram shows
    (every caption style ends with it), asked of yt-dlp whatever site it names."""
    urls = extract_links(caption, entities)
    link = classify(urls[-1], allow_private=allow_private) if urls else None
    if link is None or link.kind == "tco":
        return None
    return link if link.kind == "other" else attrs.evolve(link, kind="other")


async def _sound(
    update: Update,
    query: CallbackQuery,
    message: Message,
    data: CallbackData,
    context: XContext,
    _: Callable[[str], str],
) -> None:
    """🎵 under a video from another site: its sound alone, queued like a link (the
    presser's work, in reply to the video); answered at once, the audio follows."""
    services = context.services
    chat = message.chat
    presser = query.from_user.id
    if data.args:
        raise _Refused
    if not await services.authority.may(chat.type, chat.id, Actor(presser), Act.FETCH):
        raise _Refused(ONLY_ADMINS)
    allow = services.settings.allow_private_networks
    link = sound_link(message.caption or "", message.caption_entities, allow_private=allow)
    if link is None:
        raise _Refused
    dest = Destination.answering(message, quote=True, lang=await language_of(update, context))
    # No follow-up: the forward prompt and "delete the link message" are the video's,
    # and the message this answers is the bot's own video.
    payload = attrs.evolve(
        DeliverPayload.for_link(link, dest, user_id=presser), audio=True, announced=True
    )
    await services.queue.enqueue(
        DELIVER,
        payload.to_json(),
        chat.id,
        now=services.clock(),
        # Two quick presses on one video: one task (while it is queued or running).
        dedup_key=f"audio:{chat.id}:{message.message_id}",
        user_id=presser,
    )
    services.workers.wake()
    log.info("sound asked %s", kv(chat=chat.id, message=message.message_id, user=presser))
    await answer(context, query, _(SOUND_COMING))


async def _retry(
    query: CallbackQuery, message: Message, data: CallbackData, context: XContext
) -> None:
    services = context.services
    if not is_operator(services.settings.admin_ids, query.from_user.id):
        raise _Refused(ONLY_OPERATORS)
    task_id = _only_arg(data.int_arg(0), data)
    if await services.queue.retry(task_id, services.clock()):
        services.workers.wake()
        await answer(context, query, f"Task #{task_id} is queued again.")
    else:
        await answer(context, query, f"Task #{task_id} is no longer a dead letter.")
    text, markup = dead_view(await services.queue.list(state="dead", limit=DEAD_SHOWN))
    await edit(context, message, text, markup=markup)


async def _mute(
    query: CallbackQuery,
    message: Message,
    data: CallbackData,
    context: XContext,
    _: Callable[[str], str],
) -> None:
    """The button under an alert: mute (or unmute) its condition for the operator who
    pressed it, in their own private chat; anyone else's press changes nothing."""
    services = context.services
    presser = query.from_user.id
    if not is_operator(services.settings.admin_ids, presser) or message.chat.id != presser:
        await answer(context, query, _(ONLY_OPERATORS))
        return
    condition = data.str_arg(0)
    on = data.int_arg(1)
    if condition not in CONDITIONS or on not in (0, 1) or len(data.args) != 2:
        await answer(context, query, _(EXPIRED))
        return
    await remember_operator_language(context, presser, query.from_user.language_code)
    now = services.clock()
    current = muted((await services.chats.get(presser, now)).settings.muted_alerts)
    wanted = current | {condition} if on else current - {condition}
    value = ",".join(sorted(wanted)) or None
    await services.chats.set_settings(presser, now, muted_alerts=value)
    log.info("alerts muted %s", kv(user=presser, condition=condition, muted=bool(on)))
    await answer(context, query, _(MUTED) if on else _(UNMUTED))
    lang = normalize(query.from_user.language_code)
    await edit(
        context, message, message.text or "", markup=mute_markup(condition, lang, is_muted=bool(on))
    )


def handlers() -> list[BaseHandler[Update, XContext, None]]:
    # No pattern: malformed data must reach us too, to be answered "expired".
    return [CallbackQueryHandler(on_callback)]
