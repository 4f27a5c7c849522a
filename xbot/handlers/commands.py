"""The command table: one list feeds the handlers, /help and setMyCommands.

Each handler answers with one short message and returns. Changes are quick
database writes; nothing here waits on media. In groups only admins may
change what the chat does (`xbot.services.auth`); the operator commands are
for ``XBOT_ADMIN_IDS`` only and never show in the public menu.
"""

from __future__ import annotations

import html
import logging
from collections.abc import Callable, Coroutine
from typing import Any

import attrs
from telegram import (
    BotCommand,
    Chat,
    ChatMemberAdministrator,
    ChatMemberOwner,
    Update,
)
from telegram.constants import ChatType
from telegram.ext import BaseHandler, CommandHandler, MessageHandler, filters

from xbot.errors import ChatUnavailable, Permanent, StoreError, XbotError
from xbot.handlers import inline
from xbot.handlers.answers import reply, rest_of
from xbot.handlers.language import language_of, remember_operator_language, translator_of
from xbot.handlers.messages import NOT_ALLOWED, cmd_get
from xbot.handlers.operator import cmd_clear_cache, cmd_dead, cmd_debug, cmd_stats
from xbot.handlers.settings_menu import MenuContext, menu_markup, menu_text
from xbot.i18n import LANGUAGES, N_, telegram_code, translator
from xbot.logs import kv
from xbot.media.models import Post
from xbot.receiving.intake import telegram_resends
from xbot.sending.caption import (
    MALFORMED,
    MAX_TEMPLATE_LENGTH,
    PLACEHOLDERS,
    TOO_LONG,
    render_template,
    validate_template,
)
from xbot.services import Services, XContext
from xbot.services.auth import ONLY_ADMINS, ONLY_OPERATORS, Act, Actor, is_operator

log = logging.getLogger(__name__)

Handler = Callable[[Update, XContext], Coroutine[Any, Any, None]]

HELP_TEXT = N_(
    "Send me a link to a post on X and I answer with its photos and videos.\n"
    "For example: https://x.com/NASA/status/1234567890\n\n"
    "Links from twitter.com, fxtwitter.com, vxtwitter.com and fixupx.com work too, "
    "and so do Bluesky posts (bsky.app, fxbsky.app, bskx.app) and pixiv works "
    "(pixiv.net, phixiv.net). "
    "In groups, add me and paste links as usual."
)
# Said by /help and /start only in a group where Telegram's privacy mode keeps plain
# messages from the bot (getMe's can_read_all_group_messages is false).
PRIVACY_HINT = N_(
    "In this group I only see commands and messages that mention me: send /get with a "
    "link, or reply /get to a message that has one."
)
KNOWN_PLACEHOLDERS = " ".join(f"{{{p}}}" for p in PLACEHOLDERS)
SAMPLE = Post(
    key="x:1",
    url="https://x.com/alice/status/1",
    author_name="Alice",
    author_handle="alice",
    text="Hello from the sample post.",
)


@attrs.frozen
class Command:
    """One bot command.

    Attributes:
        name: without the slash.
        description: shown in Telegram's command menu and in /help; an English
            msgid (marked with ``N_``), translated where it is shown.
        handler: the coroutine answering it.
        admin: only for the bot's admins (XBOT_ADMIN_IDS); not in the public menu.
    """

    name: str
    description: str
    handler: Handler
    admin: bool = False


# --- helpers --------------------------------------------------------------------------------


def actor_of(update: Update) -> Actor:
    message = update.effective_message
    user = update.effective_user
    sender_chat = message.sender_chat if message is not None else None
    return Actor(user.id if user else None, sender_chat.id if sender_chat else None)


async def may_manage(update: Update, context: XContext) -> bool:
    """May this message's sender change what the chat does (settings, channel, format)?"""
    chat = update.effective_chat
    if chat is None:
        return False
    return await context.services.authority.may(chat.type, chat.id, actor_of(update), Act.MANAGE)


async def menu_context(
    services: Services, chat: Chat, user_language: str | None = None
) -> MenuContext:
    """What the /settings menu offers in this chat, from the Bot API, not the client;
    `user_language` is the Telegram language of whoever opened or pressed it."""
    can_delete = False
    if chat.type in (ChatType.GROUP, ChatType.SUPERGROUP):
        can_delete = (await services.authority.admins(chat.id)).bot_can_delete
    return MenuContext(
        chat_type=chat.type,
        can_delete=can_delete,
        other_sites=True,  # yt-dlp is always wired in; each chat turns it on or off
        documents=True,  # xbot.tasks.delivery sends photos as files when the chat asks
        user_language=user_language,
        sensitive_works=bool(services.settings.pixiv_session),
    )


# --- everyone -------------------------------------------------------------------------------


async def cmd_start(update: Update, context: XContext) -> None:
    message = update.effective_message
    if message is None:
        return
    # The inline album button opens this chat with "/start a<post id>".
    if context.args and await inline.start_album(update, context, context.args[0]):
        return
    _ = (await translator_of(update, context)).gettext
    text = _(HELP_TEXT)
    if privacy_on(update, context):
        text += "\n\n" + _(PRIVACY_HINT)
    await reply(context, message, text)


def privacy_on(update: Update, context: XContext) -> bool:
    """Whether this is a group where privacy mode hides plain messages from the bot.

    From getMe (PTB keeps it from ``initialize``): a bot an admin of the group sees
    everything even then, but a /help needs no extra call to say one sentence too many.
    """
    chat = update.effective_chat
    if chat is None or chat.type not in (ChatType.GROUP, ChatType.SUPERGROUP):
        return False
    return context.bot.bot.can_read_all_group_messages is False


def help_text(lang: str, *, privacy: bool = False) -> str:
    """/help: what the bot does and the public commands, in `lang`; with `privacy`, how
    to use it in a group whose privacy mode is on."""
    _ = translator(lang).gettext
    lines = [_(HELP_TEXT)]
    if privacy:
        lines += ["", _(PRIVACY_HINT)]
    lines += ["", _("Commands:")]
    lines += [f"/{c.name} — {_(c.description)}" for c in COMMANDS if not c.admin]
    return "\n".join(lines)


async def cmd_help(update: Update, context: XContext) -> None:
    message = update.effective_message
    if message is None:
        return
    lang = await language_of(update, context)
    await reply(context, message, help_text(lang, privacy=privacy_on(update, context)))


async def cmd_settings(update: Update, context: XContext) -> None:
    message, chat = update.effective_message, update.effective_chat
    if message is None or chat is None:
        return
    if not await may_manage(update, context):
        _ = (await translator_of(update, context)).gettext
        await reply(context, message, _(ONLY_ADMINS))
        return
    services = context.services
    settings = (await services.chats.get(chat.id, services.clock())).settings
    user = update.effective_user
    ctx = await menu_context(services, chat, user.language_code if user else None)
    await reply(
        context,
        message,
        menu_text(settings, ctx),
        html=True,
        markup=menu_markup(settings, ctx),
    )


CHANNEL_USAGE = N_(
    "Usage: /channel @name (or the channel's numeric id) links this chat to your channel; "
    "/channel off unlinks it. You must be an admin of the channel, and I must be an admin "
    "there allowed to post messages."
)


def _channel_target(arg: str) -> str | int | None:
    """``@name``, ``t.me/name`` or a numeric id, as getChat takes it; None for junk."""
    arg = arg.strip()
    for prefix in ("https://t.me/", "http://t.me/", "t.me/"):
        if arg.lower().startswith(prefix):
            arg = "@" + arg[len(prefix) :].strip("/")
    if arg.startswith("@") and 5 <= len(arg) <= 33 and arg[1:].replace("_", "").isalnum():
        return arg
    try:
        value = int(arg)
    except ValueError:
        return None
    return value if value < 0 else None


async def cmd_channel(update: Update, context: XContext) -> None:
    message, chat = update.effective_message, update.effective_chat
    if message is None or chat is None:
        return
    services = context.services
    now = services.clock()
    args = context.args or []
    _ = (await translator_of(update, context)).gettext
    if not args:
        settings = (await services.chats.get(chat.id, now)).settings
        if settings.channel_id is None:
            await reply(context, message, _("No channel is linked.") + " " + _(CHANNEL_USAGE))
        else:
            title = html.escape(settings.channel_title or str(settings.channel_id))
            await reply(
                context,
                message,
                _("Linked to {channel}. /channel off unlinks it.").format(
                    channel=f"<b>{title}</b>"
                ),
                html=True,
            )
        return
    if not await may_manage(update, context):
        await reply(context, message, _(ONLY_ADMINS))
        return
    if args[0].lower() == "off":
        await services.chats.set_settings(chat.id, now, channel_id=None, channel_title=None)
        await reply(
            context, message, _("Unlinked: I no longer offer to forward posts to a channel.")
        )
        return
    target = _channel_target(args[0])
    if target is None or len(args) > 1:
        await reply(context, message, _(CHANNEL_USAGE))
        return
    actor = actor_of(update)
    if actor.user_id is None or actor.sender_chat_id is not None:
        await reply(
            context,
            message,
            _(
                "Send /channel as yourself, not anonymously: I need to check that you are an "
                "admin of the channel."
            ),
        )
        return
    answer = await _check_channel(context, target, actor.user_id, _)
    if isinstance(answer, str):
        await reply(context, message, answer, html=True)
        return
    channel_id, title = answer
    await services.chats.set_settings(chat.id, now, channel_id=channel_id, channel_title=title)
    log.info("channel linked %s", kv(chat=chat.id, channel=channel_id, user=actor.user_id))
    await reply(
        context,
        message,
        _("Linked to {channel}. After each post I send here, I offer to forward it there.").format(
            channel=f"<b>{html.escape(title)}</b>"
        ),
        html=True,
    )


async def _check_channel(
    context: XContext, target: str | int, user_id: int, _: Callable[[str], str]
) -> tuple[int, str] | str:
    """The channel's (id, title) when the user administers it and the bot may post; else why
    not (HTML, said with `_`)."""
    sender = context.services.sender
    not_found = _("I cannot find that channel. Add me to it as an admin, then try again.")
    try:
        channel = await sender.get_chat(target)
    except ChatUnavailable as exc:
        if "not found" in str(exc).lower():
            return not_found
        return _("I am not in that channel. Add me as an admin allowed to post, then try again.")
    except Permanent:
        return not_found
    except XbotError as exc:
        log.warning("getChat failed %s", kv(target=target, error=type(exc).__name__))
        return _("Telegram did not answer; please try again in a minute.")
    title = channel.title or str(channel.id)
    shown = f"<b>{html.escape(title)}</b>"
    if channel.type != ChatType.CHANNEL:
        return _("{channel} is not a channel.").format(channel=shown)
    try:
        member = await sender.get_chat_member(channel.id, user_id)
        me = await sender.get_chat_member(channel.id, context.bot.id)
    except XbotError as exc:
        log.warning("getChatMember failed %s", kv(channel=channel.id, error=type(exc).__name__))
        return _(
            "I cannot see who administers {channel}. Make me an admin there, then try again."
        ).format(channel=shown)
    user_ok = isinstance(member, ChatMemberOwner) or (
        isinstance(member, ChatMemberAdministrator) and bool(member.can_post_messages)
    )
    if not user_ok:
        return _("You need to be an admin of {channel} who can post messages to link it.").format(
            channel=shown
        )
    if not (isinstance(me, ChatMemberAdministrator) and me.can_post_messages):
        return _(
            "I cannot post in {channel}: make me an admin there allowed to post messages."
        ).format(channel=shown)
    return channel.id, title


FORMAT_USAGE = N_(
    "Usage: /format followed by a caption template, for example\n"
    "{example}\n"
    "Placeholders: {placeholders}. /format reset goes back to the built-in caption."
)
FORMAT_EXAMPLE = "/format {author}: {text} {url}"


def format_usage(lang: str = "en") -> str:
    return (
        translator(lang)
        .gettext(FORMAT_USAGE)
        .format(example=FORMAT_EXAMPLE, placeholders=KNOWN_PLACEHOLDERS)
    )


def format_problems(problems: list[str], lang: str = "en") -> str:
    """The refusal of a template, in `lang`: what is wrong, and the placeholders that exist."""
    tr = translator(lang)
    _ = tr.gettext
    unknown = [p for p in problems if p not in (MALFORMED, TOO_LONG)]
    parts = []
    if MALFORMED in problems:
        parts.append(_("The template has unbalanced braces: write { and } around a placeholder."))
    if unknown:
        listed = " ".join(f"{{{p}}}" for p in unknown)
        parts.append(
            tr.ngettext(
                "Unknown placeholder: {listed}.", "Unknown placeholders: {listed}.", len(unknown)
            ).format(listed=listed)
        )
    if TOO_LONG in problems:
        parts.append(
            _("The template's own text is longer than {limit} characters.").format(
                limit=MAX_TEMPLATE_LENGTH
            )
        )
    parts.append(_("Known placeholders: {placeholders}.").format(placeholders=KNOWN_PLACEHOLDERS))
    return " ".join(parts)


async def cmd_format(update: Update, context: XContext) -> None:
    message, chat = update.effective_message, update.effective_chat
    if message is None or chat is None:
        return
    services = context.services
    now = services.clock()
    template = rest_of(message)
    lang = await language_of(update, context)
    _ = translator(lang).gettext
    if not template:
        current = (await services.chats.get(chat.id, now)).settings.caption_template
        if current is None:
            await reply(
                context, message, _("Captions use the built-in format.") + " " + format_usage(lang)
            )
        else:
            await reply(
                context,
                message,
                _("Your caption template:") + f"\n{current}\n\n" + format_usage(lang),
            )
        return
    if not await may_manage(update, context):
        await reply(context, message, _(ONLY_ADMINS))
        return
    if template.lower() == "reset":
        await services.chats.set_settings(chat.id, now, caption_template=None)
        await reply(context, message, _("Captions use the built-in format again."))
        return
    problems = validate_template(template)
    if problems:
        await reply(context, message, format_problems(problems, lang))
        return
    await services.chats.set_settings(chat.id, now, caption_template=template)
    preview = render_template(template, SAMPLE)
    await reply(
        context,
        message,
        _("Saved. A caption now looks like this:") + f"\n\n{preview}",
        html=True,
    )


async def cmd_cancel(update: Update, context: XContext) -> None:
    message, chat, user = update.effective_message, update.effective_chat, update.effective_user
    if message is None or chat is None:
        return
    forwarding = context.services.forwarding
    had, reopened = (False, None) if user is None else await forwarding.cancel(chat.id, user.id)
    if reopened is not None:
        await forwarding.show(chat.id, reopened)
    _ = (await translator_of(update, context)).gettext
    if had:
        await reply(context, message, _("Caption edit cancelled; nothing was forwarded."))
    else:
        await reply(context, message, _("There is no caption edit to cancel."))


# --- the chat itself ------------------------------------------------------------------------


async def on_migrate(update: Update, context: XContext) -> None:
    message = update.effective_message
    if message is None:
        return
    if message.migrate_to_chat_id:
        await context.services.mover.move(message.chat.id, message.migrate_to_chat_id)
    elif message.migrate_from_chat_id:
        await context.services.mover.move(message.migrate_from_chat_id, message.chat.id)


COMMANDS: list[Command] = [
    Command("start", N_("what this bot does"), cmd_start),
    Command("help", N_("how to use it"), cmd_help),
    Command("get", N_("fetch the post behind a link (or reply /get to a message)"), cmd_get),
    Command("settings", N_("this chat's settings"), cmd_settings),
    Command("channel", N_("link a channel to forward posts to"), cmd_channel),
    Command("format", N_("your own caption template"), cmd_format),
    Command("cancel", N_("drop a pending caption edit"), cmd_cancel),
    # The operators' commands are not in the menu and stay in English: they are
    # for the people running the bot, whose tools (logs, xbot doctor) are English.
    Command("stats", "queue, cache and uptime", cmd_stats, admin=True),
    Command("clear_cache", "forget cached posts", cmd_clear_cache, admin=True),
    Command("debug", "what the fetcher sees for a link", cmd_debug, admin=True),
    Command("dead", "the last dead letters, with retry buttons", cmd_dead, admin=True),
]


def guarded(command: Command) -> Handler:
    """Who may run a command at all: operators for admin commands; the allow-list for the rest."""

    async def run(update: Update, context: XContext) -> None:
        message, chat = update.effective_message, update.effective_chat
        if message is None or chat is None:
            return
        settings = context.services.settings
        user = update.effective_user
        user_id = user.id if user else None
        # A refusal is said in the asker's own language: no chat setting is read for it.
        _ = translator(user.language_code if user else None).gettext
        if command.admin:
            if not is_operator(settings.admin_ids, user_id):
                await reply(context, message, _(ONLY_OPERATORS))
                return
            if user is not None:
                await remember_operator_language(context, user.id, user.language_code)
        elif not settings.is_allowed_chat(chat.id, user_id):
            await reply(context, message, _(NOT_ALLOWED))
            return
        try:
            await command.handler(update, context)
        except XbotError as exc:
            if isinstance(exc, StoreError) and telegram_resends():
                raise  # not stored (/get's links): a webhook's 500 has Telegram send it again
            log.warning("command failed %s", kv(command=command.name, chat=chat.id, error=exc))
            await reply(
                context,
                message,
                # The asker's language: the chat's setting may be what just failed to read.
                _("Sorry, something went wrong on my side. Please try again."),
            )

    return run


def handlers() -> list[BaseHandler[Update, XContext, None]]:
    """One CommandHandler per command (edited messages never re-run one), and the
    group-to-supergroup service message."""
    fresh = filters.UpdateType.MESSAGE | filters.UpdateType.CHANNEL_POST
    found: list[BaseHandler[Update, XContext, None]] = [
        CommandHandler(c.name, guarded(c), filters=fresh) for c in COMMANDS
    ]
    found.append(MessageHandler(filters.StatusUpdate.MIGRATE, on_migrate))
    return found


def menu(lang: str = "en") -> list[BotCommand]:
    """The public command menu (setMyCommands), in `lang`."""
    _ = translator(lang).gettext
    return [BotCommand(c.name, _(c.description)) for c in COMMANDS if not c.admin]


def menus() -> list[tuple[str | None, list[BotCommand]]]:
    """(setMyCommands' ``language_code``, the menu) for every language: None is the
    default menu (English), which users of any other language see."""
    return [(telegram_code(lang), menu(lang)) for lang in LANGUAGES]
