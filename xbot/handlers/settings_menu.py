"""The ``/settings`` menu: its text, its buttons and what each button changes.

Pure functions of `ChatSettings` and a `MenuContext` (what the chat is and
what the bot may do there), no I/O: the handler sends or edits the message,
answers the press and writes the change. Each toggle is one button carrying
``v1:set:<code>``; the code names the toggle, never a value, so a press
always applies to the settings as they are in the database now, and a
forged or stale press can at worst flip what an admin could flip anyway.

Every sentence comes from the message catalogue (`xbot.i18n`), in the
chat's language: a private chat's user's own, a group's as its settings say
(the ``lang`` toggle, offered outside private chats, steps through the
languages; each language's button shows its own name).
"""

from __future__ import annotations

import html
from typing import Final

import attrs
from telegram import InlineKeyboardButton, InlineKeyboardMarkup

from xbot.i18n import LANGUAGES, N_, Translator, chat_language, translator
from xbot.storage.state import (
    CAPTION_STYLES,
    VIDEO_QUALITIES,
    CaptionStyle,
    ChatSettings,
    VideoQuality,
)
from xbot.tasks.callback_data import Action, CallbackData, encode

__all__ = [
    "CLOSE",
    "CODES",
    "MenuContext",
    "change_note",
    "closed_text",
    "menu_buttons",
    "menu_language",
    "menu_markup",
    "menu_text",
    "offered",
    "toggle",
]

# Toggle codes, in menu order.
CODES: Final = (
    "ytdlp", "quality", "audio", "style", "longtext", "docs", "delete", "spoiler", "r18",
    "editfwd", "lang",
)  # fmt: skip
CLOSE: Final = encode(CallbackData(Action.MENU, ("close",)))

_STYLE_NAMES: Final[dict[CaptionStyle, str]] = {
    # Translators: a caption style, shown in the /settings button "Caption: {style}".
    "full": N_("full text"),
    "short": N_("short"),
    "none": N_("link only"),
}
_QUALITY_NAMES: Final[dict[VideoQuality, str]] = {
    # Translators: a video quality, shown in the /settings button "Video quality: {quality}".
    "best": N_("best that fits"),
    "720": N_("at most 720p"),
    "480": N_("at most 480p"),
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
        user_language: the Telegram ``language_code`` of whoever opened or pressed
            the menu (a private chat's menu is in it).
        sensitive_works: R-18 works can be fetched at all (the operator's pixiv login).
    """

    chat_type: str
    can_delete: bool = False
    other_sites: bool = True
    documents: bool = False
    user_language: str | None = None
    sensitive_works: bool = False


def offered(code: str, ctx: MenuContext) -> bool:
    """Whether the menu shows this toggle (and so whether a press on it counts)."""
    if code in ("ytdlp", "quality", "audio"):
        return ctx.other_sites
    if code == "docs":
        return ctx.documents
    if code == "r18":
        return ctx.sensitive_works
    if code == "delete":
        # Deleting the link message only makes sense in groups, and only with the right to.
        return ctx.chat_type in _GROUPS and ctx.can_delete
    if code == "lang":
        # A private chat follows its user's Telegram language; a group or channel is
        # many people, so an admin picks one.
        return ctx.chat_type != "private"
    return code in CODES


def menu_language(settings: ChatSettings, ctx: MenuContext) -> str:
    """The language the menu (and the chat) is answered in."""
    return chat_language(
        ctx.chat_type,
        user_language=ctx.user_language,
        chat_setting=settings.language,
        adder_language=settings.adder_language,
    )


def _tr(settings: ChatSettings, ctx: MenuContext) -> Translator:
    return translator(menu_language(settings, ctx))


def _on(value: bool, tr: Translator) -> str:
    return tr.gettext("on") if value else tr.gettext("off")


def _next_language(lang: str) -> str:
    order = list(LANGUAGES)
    return order[(order.index(lang) + 1) % len(order)]


def _next_style(style: CaptionStyle) -> CaptionStyle:
    return CAPTION_STYLES[(CAPTION_STYLES.index(style) + 1) % len(CAPTION_STYLES)]


def _next_quality(quality: VideoQuality) -> VideoQuality:
    return VIDEO_QUALITIES[(VIDEO_QUALITIES.index(quality) + 1) % len(VIDEO_QUALITIES)]


def toggle(settings: ChatSettings, code: str, ctx: MenuContext) -> dict[str, object] | None:
    """The settings change a press on `code` makes; None for a toggle not offered here."""
    if not offered(code, ctx):
        return None
    if code == "ytdlp":
        return {"ytdlp": not settings.ytdlp_enabled(ctx.chat_type)}
    if code == "quality":
        return {"video_quality": _next_quality(settings.video_quality)}
    if code == "audio":
        return {"ytdlp_audio": not settings.ytdlp_audio}
    if code == "style":
        return {"caption_style": _next_style(settings.caption_style)}
    if code == "longtext":
        return {"long_text": not settings.long_text}
    if code == "docs":
        return {"photos_as_documents": not settings.photos_as_documents}
    if code == "delete":
        return {"delete_original": not settings.delete_original}
    if code == "spoiler":
        return {"spoiler_sensitive": not settings.spoiler_sensitive}
    if code == "r18":
        return {"sensitive_works": not settings.sensitive_works_on(ctx.chat_type)}
    if code == "editfwd":
        return {"edit_before_forward": not settings.edit_before_forward}
    if code == "lang":
        return {"language": _next_language(menu_language(settings, ctx))}
    return None


def _label(settings: ChatSettings, code: str, ctx: MenuContext) -> str:
    tr = _tr(settings, ctx)
    _ = tr.gettext
    if code == "ytdlp":
        return _("Other sites: {state}").format(
            state=_on(settings.ytdlp_enabled(ctx.chat_type), tr)
        )
    if code == "quality":
        # Translators: a /settings button: how good the video from other sites is.
        return _("Video quality: {quality}").format(
            quality=_(_QUALITY_NAMES[settings.video_quality])
        )
    if code == "audio":
        # Translators: a /settings button: links to other sites bring their sound alone.
        label = _("Audio only from other sites: {state}").format(
            state=_on(settings.ytdlp_audio, tr)
        )
        return f"🎵 {label}"
    if code == "style":
        return _("Caption: {style}").format(style=_(_STYLE_NAMES[settings.caption_style]))
    if code == "longtext":
        # Translators: a /settings button: long posts get their whole text after the media.
        return _("Whole text of long posts: {state}").format(state=_on(settings.long_text, tr))
    if code == "docs":
        return _("Photos as files: {state}").format(state=_on(settings.photos_as_documents, tr))
    if code == "delete":
        return _("Delete link message: {state}").format(state=_on(settings.delete_original, tr))
    if code == "spoiler":
        return _("Spoiler for sensitive: {state}").format(state=_on(settings.spoiler_sensitive, tr))
    if code == "r18":
        # Translators: a /settings button: pixiv works marked R-18 are sent in this chat.
        return _("R-18 works: {state}").format(
            state=_on(settings.sensitive_works_on(ctx.chat_type), tr)
        )
    if code == "editfwd":
        return _("Edit before forwarding: {state}").format(
            state=_on(settings.edit_before_forward, tr)
        )
    if code == "lang":
        # Translators: {language} is the language's own name (Deutsch, 日本語, ...).
        return _("Language: {language}").format(language=LANGUAGES[menu_language(settings, ctx)])
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
    rows.append([(_tr(settings, ctx).gettext("Close"), CLOSE)])
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
    _ = _tr(settings, ctx).gettext
    lines = [_("<b>Settings for this chat</b>"), _("Tap a button to change it.")]
    if settings.channel_id is not None:
        title = html.escape(settings.channel_title or str(settings.channel_id))
        lines.append(
            _("Linked channel: <b>{title}</b> (/channel off to unlink)").format(title=title)
        )
    else:
        lines.append(_("No linked channel: /channel @name links one."))
    if settings.caption_template is not None:
        lines.append(_("Captions use your /format template (/format reset drops it)."))
    if ctx.chat_type in _GROUPS and not ctx.can_delete:
        lines.append(_("Make me an admin allowed to delete messages to remove link messages."))
    return "\n".join(lines)


def closed_text(settings: ChatSettings, ctx: MenuContext) -> str:
    """What the menu's message says once Close is pressed."""
    return _tr(settings, ctx).gettext("Settings closed. /settings opens them again.")
