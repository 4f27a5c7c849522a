"""The /settings menu is a pure function of the chat's settings and what the bot may do."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from xbot.handlers.settings_menu import (
    CLOSE,
    CODES,
    MenuContext,
    change_note,
    menu_buttons,
    menu_markup,
    menu_text,
    offered,
    toggle,
)
from xbot.storage.state import CAPTION_STYLES, VIDEO_QUALITIES, ChatSettings
from xbot.tasks.callback_data import Action, decode

PRIVATE = MenuContext("private")
GROUP = MenuContext("supergroup", can_delete=True)
GROUP_NO_RIGHTS = MenuContext("supergroup", can_delete=False)
NO_YTDLP = MenuContext("private", other_sites=False)
WITH_DOCS = MenuContext("private", documents=True)
R18_PRIVATE = MenuContext("private", sensitive_works=True)
R18_GROUP = MenuContext("supergroup", can_delete=True, sensitive_works=True)


def codes_shown(settings: ChatSettings, ctx: MenuContext) -> list[str]:
    out = []
    for row in menu_buttons(settings, ctx):
        for _, data in row:
            decoded = decode(data)
            assert decoded is not None
            out.append(str(decoded.args[0]))
    return out


@pytest.mark.parametrize(
    ("ctx", "expected"),
    [
        (PRIVATE, ["ytdlp", "quality", "audio", "style", "longtext", "spoiler", "editfwd",
                   "close"]),
        (GROUP, ["ytdlp", "quality", "audio", "style", "longtext", "delete", "spoiler",
                 "editfwd", "lang", "close"]),
        (GROUP_NO_RIGHTS, ["ytdlp", "quality", "audio", "style", "longtext", "spoiler",
                           "editfwd", "lang", "close"]),
        (MenuContext("private", can_delete=True), ["ytdlp", "quality", "audio", "style",
                                                   "longtext", "spoiler", "editfwd", "close"]),
        (NO_YTDLP, ["style", "longtext", "spoiler", "editfwd", "close"]),
        (WITH_DOCS, ["ytdlp", "quality", "audio", "style", "longtext", "docs", "spoiler",
                     "editfwd", "close"]),
        (R18_GROUP, ["ytdlp", "quality", "audio", "style", "longtext", "delete", "spoiler",
                     "r18", "editfwd", "lang", "close"]),
    ],
    ids=["private", "group-can-delete", "group-no-rights", "private-never-delete", "no-ytdlp",
         "documents", "r18-with-a-pixiv-login"],
)  # fmt: skip
def test_which_toggles_are_offered(ctx: MenuContext, expected: list[str]) -> None:
    assert codes_shown(ChatSettings(), ctx) == expected


@pytest.mark.parametrize(
    ("settings", "code", "ctx", "change"),
    [
        (ChatSettings(), "ytdlp", PRIVATE, {"ytdlp": False}),
        (ChatSettings(), "ytdlp", GROUP, {"ytdlp": True}),
        (ChatSettings(ytdlp=True), "ytdlp", GROUP, {"ytdlp": False}),
        (ChatSettings(), "style", PRIVATE, {"caption_style": "short"}),
        (ChatSettings(caption_style="short"), "style", PRIVATE, {"caption_style": "none"}),
        (ChatSettings(caption_style="none"), "style", PRIVATE, {"caption_style": "full"}),
        (ChatSettings(), "delete", GROUP, {"delete_original": True}),
        (ChatSettings(delete_original=True), "delete", GROUP, {"delete_original": False}),
        (ChatSettings(), "delete", GROUP_NO_RIGHTS, None),
        (ChatSettings(), "delete", PRIVATE, None),
        (ChatSettings(), "spoiler", PRIVATE, {"spoiler_sensitive": False}),
        (ChatSettings(), "editfwd", PRIVATE, {"edit_before_forward": True}),
        (ChatSettings(), "longtext", GROUP, {"long_text": False}),
        (ChatSettings(long_text=False), "longtext", PRIVATE, {"long_text": True}),
        (ChatSettings(), "docs", PRIVATE, None),
        (ChatSettings(), "docs", WITH_DOCS, {"photos_as_documents": True}),
        (ChatSettings(), "ytdlp", NO_YTDLP, None),
        (ChatSettings(), "quality", GROUP, {"video_quality": "720"}),
        (ChatSettings(video_quality="720"), "quality", PRIVATE, {"video_quality": "480"}),
        (ChatSettings(video_quality="480"), "quality", PRIVATE, {"video_quality": "best"}),
        (ChatSettings(), "quality", NO_YTDLP, None),
        (ChatSettings(), "audio", PRIVATE, {"ytdlp_audio": True}),
        (ChatSettings(ytdlp_audio=True), "audio", GROUP, {"ytdlp_audio": False}),
        (ChatSettings(), "audio", NO_YTDLP, None),
        (ChatSettings(), "nonsense", PRIVATE, None),
        (ChatSettings(), "channel_id", PRIVATE, None),
        (ChatSettings(), "r18", GROUP, None),
        (ChatSettings(), "r18", R18_GROUP, {"sensitive_works": True}),
        (ChatSettings(), "r18", R18_PRIVATE, {"sensitive_works": False}),
        (ChatSettings(sensitive_works=True), "r18", R18_GROUP, {"sensitive_works": False}),
    ],
    ids=["ytdlp-private-default-on", "ytdlp-group-default-off", "ytdlp-explicit",
         "style-full-short", "style-short-none", "style-none-full", "delete-on", "delete-off",
         "delete-no-rights", "delete-private", "spoiler", "editfwd", "longtext-off",
         "longtext-on", "docs-not-offered",
         "docs-offered", "ytdlp-not-wired", "quality-best-720", "quality-720-480",
         "quality-480-best", "quality-not-wired", "audio-on", "audio-off",
         "audio-not-wired", "unknown-code", "not-a-toggle",
         "r18-no-pixiv-login", "r18-group-default-off", "r18-private-default-on", "r18-off"],
)  # fmt: skip
def test_toggle(
    settings: ChatSettings, code: str, ctx: MenuContext, change: dict[str, object] | None
) -> None:
    assert toggle(settings, code, ctx) == change


@given(
    st.builds(
        ChatSettings,
        ytdlp=st.none() | st.booleans(),
        caption_style=st.sampled_from(CAPTION_STYLES),
        delete_original=st.booleans(),
        spoiler_sensitive=st.booleans(),
        edit_before_forward=st.booleans(),
        long_text=st.booleans(),
        video_quality=st.sampled_from(VIDEO_QUALITIES),
        sensitive_works=st.none() | st.booleans(),
        ytdlp_audio=st.booleans(),
    ),
    st.sampled_from(CODES),
    st.sampled_from([PRIVATE, GROUP, GROUP_NO_RIGHTS, NO_YTDLP, WITH_DOCS, R18_GROUP]),
)
def test_every_offered_toggle_changes_its_label_and_valid_settings(
    settings: ChatSettings, code: str, ctx: MenuContext
) -> None:
    change = toggle(settings, code, ctx)
    assert (change is not None) == offered(code, ctx)
    if change is None:
        return
    after = ChatSettings(**{**settings.to_dict(), **change})  # validators accept it
    assert change_note(after, code, ctx) != change_note(settings, code, ctx)
    # Every button fits Telegram's 64 bytes and decodes to what the menu means.
    for row in menu_buttons(after, ctx):
        for _, data in row:
            assert len(data.encode()) <= 64
            assert decode(data) is not None


def test_labels_say_the_state() -> None:
    labels = [label for row in menu_buttons(ChatSettings(), GROUP) for label, _ in row]
    assert labels == [
        "Other sites: off",
        "Video quality: best that fits",
        "🎵 Audio only from other sites: off",
        "Caption: full text",
        "Whole text of long posts: on",
        "Delete link message: off",
        "Spoiler for sensitive: on",
        "Edit before forwarding: off",
        "Language: English",
        "Close",
    ]


def test_close_is_a_menu_action() -> None:
    decoded = decode(CLOSE)
    assert decoded is not None
    assert decoded.action == Action.MENU
    assert decoded.args == ("close",)


@pytest.mark.parametrize(
    ("settings", "ctx", "present", "absent"),
    [
        (ChatSettings(), PRIVATE, ["No linked channel"], ["Linked channel", "template"]),
        (ChatSettings(channel_id=-100, channel_title="<Mine>"), PRIVATE,
         ["Linked channel: <b>&lt;Mine&gt;</b>"], ["No linked channel"]),
        (ChatSettings(caption_template="{url}"), PRIVATE, ["/format template"], []),
        (ChatSettings(), GROUP_NO_RIGHTS, ["allowed to delete messages"], []),
        (ChatSettings(), GROUP, [], ["allowed to delete messages"]),
    ],
    ids=["plain", "channel-escaped", "template", "group-without-rights", "group-with-rights"],
)  # fmt: skip
def test_menu_text(
    settings: ChatSettings, ctx: MenuContext, present: list[str], absent: list[str]
) -> None:
    text = menu_text(settings, ctx)
    for fragment in present:
        assert fragment in text
    for fragment in absent:
        assert fragment not in text


def test_markup_matches_buttons() -> None:
    markup = menu_markup(ChatSettings(), GROUP)
    flat = [(b.text, b.callback_data) for row in markup.inline_keyboard for b in row]
    assert flat == [pair for row in menu_buttons(ChatSettings(), GROUP) for pair in row]
