"""Every command's happy and unhappy answers, end to end against the Bot API stand-in."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from standins.bskyapi import did_for
from standins.harness import Harness
from xbot.handlers.commands import COMMANDS, format_problems, help_text
from xbot.handlers.messages import NOT_ALLOWED
from xbot.i18n import LANGUAGES
from xbot.links import SITES

USER = 1001
GROUP = -600
MEMBER, ADMIN = 2001, 2002
OPERATOR = 4242
CHANNEL = -1009001
Json = dict[str, Any]

ONLY_ADMINS = "Only admins can do that."
ONLY_OPERATORS = "That command is for the bot's operators."


async def start(tmp_path: Path, **overrides: Any) -> Harness:
    h = await Harness.start(
        tmp_path / "data", start_bot=False, admin_ids=frozenset({OPERATOR}), **overrides
    )
    api = h.api
    api.add_chat(CHANNEL, "channel", title="My Channel", username="mychan", creator=USER,
                 admins=[ADMIN])  # fmt: skip
    api.add_chat(-1009002, "channel", title="Not Mine", username="notmine", creator=999)
    api.add_chat(-1009003, "channel", title="No Rights", username="norights", creator=USER,
                 bot_can_post=False)  # fmt: skip
    api.add_chat(-1009004, "channel", title="Without Bot", username="withoutbot", creator=USER,
                 bot_is_admin=False)  # fmt: skip
    api.add_chat(-1009005, "supergroup", title="A Group", username="agroup", creator=USER)
    api.add_chat(GROUP, "supergroup", title="The Group", admins=[ADMIN])
    await h.start_bot()
    return h


@pytest.fixture
async def h(tmp_path: Path) -> AsyncIterator[Harness]:
    harness = await start(tmp_path)
    try:
        yield harness
    finally:
        await harness.stop()


async def ask(h: Harness, chat: int, text: str, **kw: Any) -> Json:
    """Send `text` to the bot; returns its answer (the next message it sends in `chat`)."""
    if chat < 0:
        kw.setdefault("chat_type", "supergroup")
    before = len(h.sent(chat))
    h.api.user_message(chat, text, **kw)
    await h.api.wait_for(lambda: len(h.sent(chat)) > before, 5)
    return h.sent(chat)[before]


async def said(h: Harness, chat: int, text: str, **kw: Any) -> str:
    return str((await ask(h, chat, text, **kw))["text"])


async def settings_of(h: Harness, chat: int) -> Any:
    return (await h.services.chats.get(chat, h.clock())).settings


# --- everyone ---------------------------------------------------------------------------------


async def test_start_and_help(h: Harness) -> None:
    start_text = await said(h, USER, "/start")
    assert "https://x.com/" in start_text
    help_text = await said(h, USER, "/help")
    for command in COMMANDS:
        assert (f"/{command.name} " in help_text) == (not command.admin), command.name


@pytest.mark.parametrize("lang", sorted(LANGUAGES))
def test_help_names_every_site_a_post_source_serves(lang: str) -> None:
    """Every site of the registry (X, Bluesky, pixiv), with the hosts its entry names,
    in every language: the help is one sentence for translators, so a new site's hosts
    go into it (README, "Adding a site")."""
    text = help_text(lang)
    hosts = [host for site in SITES for host in site.hosts]
    assert {"x.com", "twitter.com", "bsky.app", "fxbsky.app", "pixiv.net", "phixiv.net"} <= set(
        hosts
    )
    for host in hosts:
        assert host in text, (lang, host)


async def test_the_command_menu_is_the_public_table(h: Harness) -> None:
    """One setMyCommands per language (the default one is English), each the public
    commands of the one table, described in that language."""
    # The menus go out beside polling (start-up does not wait for them): wait for the nine.
    await h.api.wait_for(lambda: len(h.api.calls_for("setMyCommands")) >= 9, 10)
    calls = {c.params.get("language_code"): c for c in h.api.calls_for("setMyCommands")}
    assert set(calls) == {None, "ru", "es", "pt", "de", "tr", "id", "ja", "fa"}
    for call in calls.values():
        names = [c["command"] for c in call.params["commands"]]
        assert names == [c.name for c in COMMANDS if not c.admin]
    assert {"start", "help", "settings", "channel", "format", "cancel"} <= set(names)
    described = {lang: call.params["commands"][0]["description"] for lang, call in calls.items()}
    assert described[None] == "what this bot does"
    assert described["de"] == "was dieser Bot macht"
    assert len(set(described.values())) == len(described)  # each in its own words


async def test_commands_in_groups_work_with_the_bot_name(h: Harness) -> None:
    text = await said(h, GROUP, "/help@xbot_standin_bot", user_id=MEMBER)
    assert "Commands:" in text


# --- /settings --------------------------------------------------------------------------------


async def test_settings_private(h: Harness) -> None:
    menu = await ask(h, USER, "/settings")
    assert "Settings for this chat" in menu["text"]
    assert menu["reply_markup"]["inline_keyboard"]


async def test_settings_in_groups_are_for_admins(h: Harness) -> None:
    for who, allowed in [
        ({"user_id": MEMBER}, False),
        ({"user_id": ADMIN}, True),
        ({"sender_chat": GROUP}, True),  # an anonymous admin
        ({"sender_chat": CHANNEL}, False),  # someone posting as a channel
    ]:
        answer = await ask(h, GROUP, "/settings", **who)
        if allowed:
            assert "Settings for this chat" in answer["text"], who
        else:
            assert answer["text"] == ONLY_ADMINS, who
            assert "reply_markup" not in answer


# --- /channel ---------------------------------------------------------------------------------


CHANNEL_CASES = [
    ("@mychan", "Linked to My Channel.", CHANNEL),
    ("-1009001", "Linked to My Channel.", CHANNEL),
    ("https://t.me/mychan", "Linked to My Channel.", CHANNEL),
    ("@notmine", "You need to be an admin of Not Mine", None),
    ("@norights", "I cannot post in No Rights", None),
    ("@withoutbot", "I cannot post in Without Bot", None),
    ("@nosuchchannel", "I cannot find that channel", None),
    ("@agroup", "A Group is not a channel.", None),
    ("not-a-channel!", "Usage: /channel @name", None),
    ("12345", "Usage: /channel @name", None),
    ("@mychan extra", "Usage: /channel @name", None),
]


async def test_channel(h: Harness) -> None:
    """One bot for the whole table (a bot per case costs more than the cases)."""
    for arg, expected, linked in CHANNEL_CASES:
        await h.services.chats.set_settings(USER, h.clock(), channel_id=None, channel_title=None)
        text = await said(h, USER, f"/channel {arg}")
        assert text.startswith(expected), (arg, text)
        assert (await settings_of(h, USER)).channel_id == linked, arg


async def test_channel_without_args_says_what_is_linked(h: Harness) -> None:
    assert (await said(h, USER, "/channel")).startswith("No channel is linked.")
    await said(h, USER, "/channel @mychan")
    assert await said(h, USER, "/channel") == "Linked to My Channel. /channel off unlinks it."


async def test_channel_off(h: Harness) -> None:
    await said(h, USER, "/channel @mychan")
    assert (await said(h, USER, "/channel off")).startswith("Unlinked")
    settings = await settings_of(h, USER)
    assert (settings.channel_id, settings.channel_title) == (None, None)


async def test_channel_in_a_group(h: Harness) -> None:
    assert await said(h, GROUP, "/channel @mychan", user_id=MEMBER) == ONLY_ADMINS
    anonymous = await said(h, GROUP, "/channel @mychan", sender_chat=GROUP)
    assert anonymous.startswith("Send /channel as yourself")
    assert (await settings_of(h, GROUP)).channel_id is None
    assert await said(h, GROUP, "/channel @mychan", user_id=ADMIN) == (
        "Linked to My Channel. After each post I send here, I offer to forward it there."
    )
    assert (await settings_of(h, GROUP)).channel_id == CHANNEL
    assert await said(h, GROUP, "/channel off", user_id=MEMBER) == ONLY_ADMINS
    assert (await settings_of(h, GROUP)).channel_id == CHANNEL


# --- /format ----------------------------------------------------------------------------------


async def test_format_saves_a_template_that_captions_use(h: Harness) -> None:
    text = await said(h, USER, "/format {author} says: {text}\n{url}")
    assert text.startswith("Saved.")
    assert "Alice says: Hello from the sample post." in text
    assert (await settings_of(h, USER)).caption_template == "{author} says: {text}\n{url}"
    h.fx.add_post("50", author=("Bob B", "bob"), text="hi there", photos=[h.photo("f")])
    h.api.user_message(USER, "https://x.com/bob/status/50")
    await h.api.wait_for(lambda: any("photo" in m for m in h.sent(USER)), 10)
    caption = next(m for m in h.sent(USER) if "photo" in m)["caption"]
    assert caption.startswith("Bob B says: hi there\nhttps://x.com/bob/status/50")


FORMAT_REFUSALS = [
    ("{author} {foo}", "Unknown placeholder: {foo}. Known placeholders: {author} {handle} "
                       "{text} {url}."),
    ("{a} {b}", "Unknown placeholders: {a} {b}."),
    ("{text", "unbalanced braces"),
    ("{author.__class__}", "Unknown placeholder: {author.__class__}."),
    ("x" * 600, "longer than 512 characters"),
]  # fmt: skip


async def test_format_refuses_bad_templates(h: Harness) -> None:
    for template, expected in FORMAT_REFUSALS:
        text = await said(h, USER, f"/format {template}")
        assert expected in text, (template, text)
        assert "Known placeholders: {author} {handle} {text} {url}." in text
        assert (await settings_of(h, USER)).caption_template is None


async def test_format_reset_and_show(h: Harness) -> None:
    assert (await said(h, USER, "/format")).startswith("Captions use the built-in format.")
    await said(h, USER, "/format {url}")
    assert (await said(h, USER, "/format")).startswith("Your caption template:\n{url}")
    assert await said(h, USER, "/format reset") == "Captions use the built-in format again."
    assert (await settings_of(h, USER)).caption_template is None


async def test_format_in_a_group_is_for_admins(h: Harness) -> None:
    assert await said(h, GROUP, "/format {url}", user_id=MEMBER) == ONLY_ADMINS
    assert (await settings_of(h, GROUP)).caption_template is None
    assert (await said(h, GROUP, "/format {url}", user_id=ADMIN)).startswith("Saved.")


def test_format_problems_always_list_the_known_placeholders() -> None:
    assert format_problems([]).endswith("Known placeholders: {author} {handle} {text} {url}.")


# --- /cancel ----------------------------------------------------------------------------------


async def test_cancel_without_an_edit(h: Harness) -> None:
    assert await said(h, USER, "/cancel") == "There is no caption edit to cancel."


async def test_cancel_drops_the_edit_and_reopens_the_prompt(h: Harness) -> None:
    await h.services.chats.set_settings(USER, h.clock(), channel_id=CHANNEL,
                                        channel_title="My Channel")  # fmt: skip
    h.fx.add_post("51", text="c", photos=[h.photo("c")])
    h.api.user_message(USER, "https://x.com/a/status/51")

    def prompt() -> Json | None:
        return next((m for m in h.sent(USER) if "reply_markup" in m), None)

    await h.api.wait_for(prompt, 10)
    await h.wait_idle()  # the prompt's record is written right after the prompt is sent
    first = prompt()
    assert first is not None
    edit = next(
        b["callback_data"]
        for row in first["reply_markup"]["inline_keyboard"]
        for b in row
        if b["text"] == "Edit caption"
    )
    update = h.api.callback_query(USER, first["message_id"], edit)
    await h.api.wait_for(lambda: update["callback_query"]["id"] in h.api.callback_answers, 5)
    await h.api.wait_for(lambda: "Send me" in h.api.message(USER, first["message_id"])["text"], 5)  # type: ignore[index]
    assert await said(h, USER, "/cancel") == "Caption edit cancelled; nothing was forwarded."
    reopened = h.api.message(USER, first["message_id"])
    assert reopened is not None
    assert reopened["text"] == first["text"]
    assert reopened["reply_markup"] == first["reply_markup"]
    # The next text is an ordinary message again.
    assert await said(h, USER, "/cancel") == "There is no caption edit to cancel."


# --- operators --------------------------------------------------------------------------------


async def test_operator_commands_refuse_everyone_else(h: Harness) -> None:
    for command in ("/stats", "/clear_cache", "/debug https://x.com/a/status/1", "/dead"):
        assert await said(h, USER, command) == ONLY_OPERATORS, command
        assert await said(h, GROUP, command, user_id=ADMIN) == ONLY_OPERATORS, command


async def test_stats(h: Harness) -> None:
    h.fx.add_post("52", text="s", photos=[h.photo("s")])
    h.api.user_message(USER, "https://x.com/a/status/52")
    await h.api.wait_for(lambda: h.sent(USER), 10)
    await h.wait_idle()
    text = await said(h, OPERATOR, "/stats")
    assert text.startswith("xbot ")
    assert "Uptime: " in text
    assert "Tasks: pending 0, running 0, done 1, dead 0" in text
    assert "Oldest pending: none" in text
    assert "Dead letters: 0" in text
    assert "Link cache: 1 entries, hit rate 0% (0 hits, 1 misses)" in text
    assert h.api.token not in text


async def test_clear_cache(h: Harness) -> None:
    h.fx.add_post("53", text="c", photos=[h.photo("cc")])
    h.api.user_message(USER, "https://x.com/a/status/53")
    await h.api.wait_for(lambda: h.sent(USER), 10)
    await h.wait_idle()
    assert await said(h, OPERATOR, "/clear_cache https://x.com/a/status/9") == (
        "https://x.com/a/status/9 was not in the link cache."
    )
    assert await said(h, OPERATOR, "/clear_cache https://fxtwitter.com/a/status/53") == (
        "Removed https://x.com/a/status/53 from the link cache."
    )
    assert await h.services.cache.count() == 0
    assert (await said(h, OPERATOR, "/clear_cache nonsense")).startswith("That is not a link")
    assert await said(h, OPERATOR, "/clear_cache") == "Link cache cleared: 0 entries removed."


async def test_clear_cache_forgets_the_post_as_files_too(h: Harness) -> None:
    """A chat that wants photos as files has its own entry (other file_ids): clearing
    the link removes that one as well, so the next request downloads afresh."""
    h.fx.add_post("54", text="d", photos=[h.photo("cd")])
    await h.services.chats.set_settings(USER, h.clock(), photos_as_documents=True)
    h.api.user_message(USER, "https://x.com/a/status/54")
    await h.api.wait_for(lambda: h.sent(USER), 10)
    await h.wait_idle()
    assert await h.services.cache.count() == 1
    assert await said(h, OPERATOR, "/clear_cache https://x.com/a/status/54") == (
        "Removed https://x.com/a/status/54 from the link cache."
    )
    assert await h.services.cache.count() == 0
    hits = h.media_hits()
    h.api.user_message(USER, "https://x.com/a/status/54")
    await h.api.wait_for(lambda: len(h.sent(USER)) == 2, 10)
    await h.wait_idle()
    assert h.media_hits() > hits, "fetched afresh, not answered from the cache"


async def test_debug_shows_what_the_fetcher_sees_without_sending(h: Harness) -> None:
    h.fx.add_post("54", author=("Deb", "deb"), text="words", photos=[h.photo("d1")],
                  videos=[h.video("d2")])  # fmt: skip
    text = await said(h, OPERATOR, "/debug https://x.com/deb/status/54")
    assert "Link: https://x.com/deb/status/54" in text
    assert "Author: Deb (@deb)" in text
    assert "Media: 2 item(s)" in text
    assert "1. photo" in text
    assert "2. video" in text
    assert "Cache: no entry" in text
    assert h.api.token not in text
    media = [c for c in h.api.calls if c.method in ("sendPhoto", "sendVideo", "sendMediaGroup")]
    assert media == []
    assert h.media_hits() == 0, "nothing downloaded"


async def test_debug_unhappy(h: Harness) -> None:
    for arg, expected in [
        ("", "Usage: /debug <link to a post>"),
        ("hello", "Usage: /debug <link to a post>"),
        ("https://x.com/a/status/404404", "Fetcher: PostUnavailable"),
        ("https://example.com/video", "No post source serves this kind"),
        (
            "https://bsky.app/profile/nobody.example.com/post/3lbnobody1234",
            "Resolve: PostUnavailable: This Bluesky account does not exist",
        ),
    ]:
        text = await said(h, OPERATOR, f"/debug {arg}".strip())
        assert expected in text, (arg, text)


async def test_debug_resolves_a_bluesky_handle_before_asking_the_cache(h: Harness) -> None:
    """A handle link finds the entry the delivery stored under the DID, and /debug
    shows what the Bluesky source fetched: the quote too. /clear_cache finds it too."""
    quoted = h.bsky.build_post("bob.bsky.social", "3lbquoted1234", name="Bob", text="q",
                               images=[h.photo("bq")])  # fmt: skip
    h.bsky.add_post("deb.bsky.social", "3lbdebug12345", name="Deb", text="words",
                    images=[h.photo("b1")], quote=quoted)  # fmt: skip
    link = "https://bsky.app/profile/deb.bsky.social/post/3lbdebug12345"
    h.api.user_message(USER, link)
    await h.api.wait_for(lambda: h.sent(USER), 10)
    await h.wait_idle()
    text = await said(h, OPERATOR, f"/debug {link}")
    did = did_for("deb.bsky.social")
    assert f"Kind: bsky, key: bsky:{did}/3lbdebug12345" in text
    assert f"Cache: 2 items by file_id (bsky:{did}/3lbdebug12345)" in text
    assert "Source: bsky" in text
    assert "Author: Deb (@deb.bsky.social)" in text
    assert "Quotes: Bob (@bob.bsky.social) https://bsky.app/profile/bob.bsky.social/post/" in text
    assert "Media: 2 item(s), 1 its own" in text

    assert await said(h, OPERATOR, f"/clear_cache {link}") == f"Removed {link} from the link cache."
    assert await h.services.cache.count() == 0, "the entry under the DID is gone"


async def test_debug_shows_a_pixiv_work(h: Harness) -> None:
    h.pixiv.add_work("120000077", title="Debug me", pages=2)
    text = await said(h, OPERATOR, "/debug https://www.pixiv.net/en/artworks/120000077")
    assert "Kind: pixiv, key: pixiv:120000077" in text
    assert "Cache: no entry" in text
    assert "Source: pixiv" in text
    assert "Title: Debug me" in text
    assert "Media: 2 item(s)" in text
    assert h.media_hits() == 0, "nothing downloaded"


async def test_dead_lists_dead_letters(h: Harness) -> None:
    assert await said(h, OPERATOR, "/dead") == "No dead letters."
    task = await h.services.queue.enqueue("deliver", '{"v": 1, "url": "https://x.com/q"}',
                                          USER, now=h.clock())  # fmt: skip
    h.services.workers.wake()
    await h.wait_idle()
    answer = await ask(h, OPERATOR, "/dead")
    assert f"#{task.id} deliver chat {USER} https://x.com/q" in answer["text"]
    rows = answer["reply_markup"]["inline_keyboard"]
    assert [b["text"] for row in rows for b in row] == [f"Retry #{task.id}"]


# --- the allow-list ---------------------------------------------------------------------------


@pytest.fixture
async def private_bot(tmp_path: Path) -> AsyncIterator[Harness]:
    harness = await start(tmp_path, allowed_chat_ids=frozenset({USER}))
    try:
        yield harness
    finally:
        await harness.stop()


async def test_allow_list(private_bot: Harness) -> None:
    h = private_bot
    stranger = 3003
    assert await said(h, stranger, "/start") == NOT_ALLOWED
    assert await said(h, stranger, "/settings") == NOT_ALLOWED
    assert await said(h, stranger, "https://x.com/a/status/1") == NOT_ALLOWED
    assert (await h.services.queue.stats(h.clock())).counts_by_state["pending"] == 0
    assert await h.services.queue.list() == []
    assert "https://x.com/" in await said(h, USER, "/start")
    # The operator's commands are not the allow-list's business.
    assert (await said(h, OPERATOR, "/stats")).startswith("xbot ")


async def test_allow_list_buttons(private_bot: Harness) -> None:
    h = private_bot
    stranger = 3003
    await h.services.chats.set_settings(stranger, h.clock(), caption_style="short")
    update = h.api.callback_query(stranger, 77, "v1:set:style")
    query_id = update["callback_query"]["id"]
    await h.api.wait_for(lambda: query_id in h.api.callback_answers, 5)
    assert h.api.callback_answers[query_id]["text"] == NOT_ALLOWED
    assert (await settings_of(h, stranger)).caption_style == "short"


def test_commands_table_is_well_formed() -> None:
    names = [c.name for c in COMMANDS]
    assert len(names) == len(set(names))
    for command in COMMANDS:
        assert 1 <= len(command.description) <= 256
        assert command.name.islower()
    json.dumps([c.name for c in COMMANDS])
