"""The command table: one list feeds the handlers, /help and setMyCommands."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

import attrs
from telegram import BotCommand, Update

from xbot.services import XContext

Handler = Callable[[Update, XContext], Coroutine[Any, Any, None]]

HELP_TEXT = (
    "Send me a link to a post on X and I answer with its photos and videos.\n"
    "For example: https://x.com/NASA/status/1234567890\n\n"
    "Links from twitter.com, fxtwitter.com, vxtwitter.com and fixupx.com work too. "
    "In groups, add me and paste links as usual."
)


@attrs.frozen
class Command:
    """One bot command.

    Attributes:
        name: without the slash.
        description: shown in Telegram's command menu and in /help.
        handler: the coroutine answering it.
        admin: only for the bot's admins (XBOT_ADMIN_IDS); not in the public menu.
    """

    name: str
    description: str
    handler: Handler
    admin: bool = False


async def cmd_start(update: Update, context: XContext) -> None:
    message = update.effective_message
    if message is None:
        return
    await message.reply_text(HELP_TEXT, disable_web_page_preview=True)


async def cmd_help(update: Update, context: XContext) -> None:
    message = update.effective_message
    if message is None:
        return
    lines = [HELP_TEXT, "", "Commands:"]
    lines += [f"/{c.name} — {c.description}" for c in COMMANDS if not c.admin]
    await message.reply_text("\n".join(lines), disable_web_page_preview=True)


COMMANDS: list[Command] = [
    Command("start", "what this bot does", cmd_start),
    Command("help", "how to use it", cmd_help),
]


def menu() -> list[BotCommand]:
    """The public command menu (setMyCommands)."""
    return [BotCommand(c.name, c.description) for c in COMMANDS if not c.admin]
