"""The ``/settings`` menu: its text, its buttons and what each button changes.

Pure functions of `ChatSettings` and a `MenuContext` (what the chat is and
what the bot may do there), no I/O: the handler sends or edits the message,
answers the press and writes the change. Each toggle is one button carrying
``v1:set:<code>``; the code names the toggle, never a value, so a press
always applies to the settings as they are in the database now, and a
forged or stale press can at worst flip what an admin could flip anyway.
"""

from __future__ import annotations

import html
from typing import Final

import attrs
from telegram import InlineKeyboardButton, InlineKeyboardMarkup

from xbot.callback_data import Action, CallbackData, encode
from xbot.state import CAPTION_STYLES, CaptionStyle, ChatSettings

__all__ = [
    "CLOSE",
    "CODES",
    "MenuContext",
    "change_note",
    "menu_buttons",
    "menu_markup",
    "menu_text",
    "offered",
    "toggle",
]

# Toggle codes, in menu order.
CODES: Final = ("ytdlp", "style", "docs", "delete", "spoiler", "editfwd")
CLOSE: Final = encode(CallbackData(Action.MENU, ("close",)))

_STYLE_NAMES: Final[dict[CaptionStyle, str]] = {
    "full": "full text",
    "short": "short",
    "none": "link only",
}
_GROUPS = frozenset({"group", "supergroup"})


@attrs.frozen
class MenuContext:
    """What decides which toggles a chat is offered.

    Attributes:
        chat_type: ``private``, ``group``, ``supergroup`` or ``channel``.
        can_delete: the bot may delete messages here (an admin with that right).
        other_sites: links to other sites can be served at all (yt-dlp wired in).
        documents: sending photos as documents is implemented by the delivery.
    """

    chat_type: str
    can_delete: bool = False
    other_sites: bool = True
    documents: bool = False


def offered(code: str, ctx: MenuContext) -> bool:
    """Whether the menu shows this toggle (and so whether a press on it counts)."""
    if code == "ytdlp":
        return ctx.other_sites
    if code == "docs":
        return ctx.documents
    if code == "delete":
        # Deleting the link message only makes sense in groups, and only with the right to.
        return ctx.chat_type in _GROUPS and ctx.can_delete
    return code in CODES


def _on(value: bool) -> str:
    return "on" if value else "off"


def _next_style(style: CaptionStyle) -> CaptionStyle:
    return CAPTION_STYLES[(CAPTION_STYLES.index(style) + 1) % len(CAPTION_STYLES)]


def toggle(settings: ChatSettings, code: str, ctx: MenuContext) -> dict[str, object] | None:
    """The settings change a press on `code` makes; None for a toggle not offered here."""
    if not offered(code, ctx):
        return None
    if code == "ytdlp":
        return {"ytdlp": not settings.ytdlp_enabled(ctx.chat_type)}
    if code == "style":
        return {"caption_style": _next_style(settings.caption_style)}
    if code == "docs":
        return {"photos_as_documents": not settings.photos_as_documents}
    if code == "delete":
        return {"delete_original": not settings.delete_original}
    if code == "spoiler":
        return {"spoiler_sensitive": not settings.spoiler_sensitive}
    if code == "editfwd":
        return {"edit_before_forward": not settings.edit_before_forward}
    return None


def _label(settings: ChatSettings, code: str, ctx: MenuContext) -> str:
    if code == "ytdlp":
        return f"Other sites: {_on(settings.ytdlp_enabled(ctx.chat_type))}"
    if code == "style":
        return f"Caption: {_STYLE_NAMES[settings.caption_style]}"
    if code == "docs":
        return f"Photos as files: {_on(settings.photos_as_documents)}"
    if code == "delete":
        return f"Delete link message: {_on(settings.delete_original)}"
    if code == "spoiler":
        return f"Spoiler for sensitive: {_on(settings.spoiler_sensitive)}"
    if code == "editfwd":
        return f"Edit before forwarding: {_on(settings.edit_before_forward)}"
    raise ValueError(f"unknown toggle {code!r}")


def change_note(settings: ChatSettings, code: str, ctx: MenuContext) -> str:
    """The short answer to a press, naming the toggle's new state."""
    return _label(settings, code, ctx)


def menu_buttons(settings: ChatSettings, ctx: MenuContext) -> list[list[tuple[str, str]]]:
    """Rows of (label, callback data): one toggle a row, then Close."""
    rows = [
        [(_label(settings, code, ctx), encode(CallbackData(Action.SETTING, (code,))))]
        for code in CODES
        if offered(code, ctx)
    ]
    rows.append([("Close", CLOSE)])
    return rows


def menu_markup(settings: ChatSettings, ctx: MenuContext) -> InlineKeyboardMarkup:
    return InlineKeyboardMarkup(
        [
            [InlineKeyboardButton(label, callback_data=data) for label, data in row]
            for row in menu_buttons(settings, ctx)
        ]
    )


def menu_text(settings: ChatSettings, ctx: MenuContext) -> str:
    """The menu's message (HTML): what the buttons cannot say."""
    lines = ["<b>Settings for this chat</b>", "Tap a button to change it."]
    if settings.channel_id is not None:
        title = html.escape(settings.channel_title or str(settings.channel_id))
        lines.append(f"Linked channel: <b>{title}</b> (/channel off to unlink)")
    else:
        lines.append("No linked channel: /channel @name links one.")
    if settings.caption_template is not None:
        lines.append("Captions use your /format template (/format reset drops it).")
    if ctx.chat_type in _GROUPS and not ctx.can_delete:
        lines.append("Make me an admin allowed to delete messages to remove link messages.")
    return "\n".join(lines)
