"""Groups that keep Telegram's privacy mode on: ``/get`` and mentions bring the post.

The real PTB client against the Bot API stand-in in privacy mode (getMe says
``can_read_all_group_messages: false``, and in a group where the bot is no admin it
delivers only what Telegram would: commands, mentions, replies to the bot; see
`standins.botapi._privacy`). Each way of asking is answered once, in reply to
the message that holds the link (or the command), in the topic it came from; a plain
link in such a group never reaches the bot.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from standins import topic_of
from standins.harness import Harness
from xbot.handlers.commands import PRIVACY_HINT
from xbot.handlers.messages import GET_USAGE

GROUP = -700
FORUM = -701
MEMBER, OTHER = 2001, 2002
BOT = "xbot_standin_bot"
Json = dict[str, Any]


@pytest.fixture
async def h(tmp_path: Path) -> AsyncIterator[Harness]:
    harness = await Harness.start(tmp_path / "data", start_bot=False, privacy_mode=True)
    # The bot is a plain member, as in a group whose admins will not give it every message.
    harness.api.add_chat(GROUP, "supergroup", title="Privacy group", bot_is_admin=False)
    harness.api.add_forum(FORUM, "Privacy forum", bot_is_admin=False)
    for n in range(1, 6):
        harness.add_post(f"90{n}", author=("Ann", "ann"), text=f"post {n}",
                         photos=[harness.photo(f"p{n}")])  # fmt: skip
    await harness.start_bot()
    try:
        yield harness
    finally:
        await harness.stop()


def photos_in(h: Harness, chat: int) -> list[Json]:
    return [m for m in h.sent(chat) if "photo" in m]


def replied_id(message: Json) -> int | None:
    replied = message.get("reply_to_message")
    return None if replied is None else int(replied["message_id"])


async def answered(h: Harness, chat: int, before: int) -> Json:
    """The one photo the bot sent in `chat` after `before` photos, once the queue is idle."""
    await h.api.wait_for(lambda: len(photos_in(h, chat)) > before, 10)
    await h.wait_idle()
    new = photos_in(h, chat)[before:]
    assert len(new) == 1, new
    return new[0]


async def test_getme_says_privacy_mode_is_on(h: Harness) -> None:
    me = await h.bot.application.bot.get_me()  # type: ignore[union-attr]
    assert me.can_read_all_group_messages is False


async def test_a_plain_link_is_never_seen_and_each_way_of_asking_is_answered_once(
    h: Harness,
) -> None:
    # 1. A plain link: Telegram keeps it from the bot (the stand-in shows it withheld).
    plain = h.api.user_message(GROUP, "look https://x.com/ann/status/901", user_id=MEMBER)
    plain_msg = plain["message"]
    assert "update_id" not in plain
    assert [m["message_id"] for m in h.api.withheld] == [plain_msg["message_id"]]

    # 2. /get <link>: answered in reply to the command.
    cmd = h.api.user_message(GROUP, "/get https://x.com/ann/status/902", user_id=OTHER)
    got = await answered(h, GROUP, 0)
    assert "post 2" in got["caption"]
    assert replied_id(got) == cmd["message"]["message_id"]

    # 3. /get@botname <link>.
    cmd = h.api.user_message(GROUP, f"/get@{BOT} https://x.com/ann/status/903", user_id=OTHER)
    got = await answered(h, GROUP, 1)
    assert "post 3" in got["caption"]
    assert replied_id(got) == cmd["message"]["message_id"]

    # 4. /get in reply to the plain link the bot never received: answered in reply to it.
    h.api.user_message(GROUP, "/get", user_id=OTHER, reply_to=plain_msg["message_id"])
    got = await answered(h, GROUP, 2)
    assert "post 1" in got["caption"]
    assert replied_id(got) == plain_msg["message_id"]

    # 5. A mention with a link.
    cmd = h.api.user_message(GROUP, f"@{BOT} https://x.com/ann/status/904", user_id=MEMBER)
    got = await answered(h, GROUP, 3)
    assert "post 4" in got["caption"]
    assert replied_id(got) == cmd["message"]["message_id"]

    # Each asked once: one photo per post, nothing else said, and only the plain link
    # was kept from the bot.
    assert len(photos_in(h, GROUP)) == 4
    assert [m for m in h.sent(GROUP) if "photo" not in m] == []
    assert len(h.api.withheld) == 1


async def test_a_get_reply_with_a_text_link_in_a_caption_lands_in_the_topic(h: Harness) -> None:
    topic = h.api.create_topic(FORUM, "Links")
    # A captioned photo whose link hides behind words (a text_link entity).
    words = "have a look"
    linked = h.api.user_message(
        FORUM,
        words,
        user_id=MEMBER,
        topic_id=topic,
        caption=True,
        entities=[{"type": "text_link", "offset": 7, "length": 4,
                   "url": "https://x.com/ann/status/905"}],
    )  # fmt: skip
    assert "update_id" not in linked  # privacy mode kept it from the bot
    h.api.user_message(
        FORUM, "/get", user_id=OTHER, topic_id=topic, reply_to=linked["message"]["message_id"]
    )
    got = await answered(h, FORUM, 0)
    assert "post 5" in got["caption"]
    assert topic_of(got) == topic
    assert replied_id(got) == linked["message"]["message_id"]


async def test_get_with_nothing_to_get_says_how_to_use_it(h: Harness) -> None:
    topic = h.api.create_topic(FORUM, "Chat")
    bare = h.api.user_message(FORUM, "/get", user_id=MEMBER, topic_id=topic)
    await h.api.wait_for(lambda: h.sent(FORUM), 5)
    (answer,) = h.sent(FORUM)
    assert answer["text"] == GET_USAGE
    assert topic_of(answer) == topic
    assert replied_id(answer) == bare["message"]["message_id"]
    # In reply to a message without a link: the same line.
    words = h.api.user_message(FORUM, "no links here", user_id=OTHER, topic_id=topic)
    h.api.user_message(
        FORUM, "/get", user_id=MEMBER, topic_id=topic, reply_to=words["message"]["message_id"]
    )
    await h.api.wait_for(lambda: len(h.sent(FORUM)) == 2, 5)
    assert h.sent(FORUM)[1]["text"] == GET_USAGE


async def test_help_says_how_to_use_the_bot_in_a_privacy_group_only(h: Harness) -> None:
    h.api.user_message(GROUP, "/help", user_id=MEMBER)
    h.api.user_message(GROUP, "/start", user_id=MEMBER)
    h.api.user_message(MEMBER, "/help")
    await h.api.wait_for(lambda: len(h.sent(GROUP)) == 2 and h.sent(MEMBER), 5)
    help_group, start_group = h.sent(GROUP)
    assert PRIVACY_HINT in help_group["text"]
    assert PRIVACY_HINT in start_group["text"]
    assert "/get" in help_group["text"]
    assert PRIVACY_HINT not in h.sent(MEMBER)[0]["text"]


async def test_with_privacy_mode_off_help_is_unchanged(tmp_path: Path) -> None:
    h = await Harness.start(tmp_path / "data", start_bot=False)
    h.api.add_chat(GROUP, "supergroup", title="Open group", bot_is_admin=False)
    await h.start_bot()
    try:
        h.api.user_message(GROUP, "/help", user_id=MEMBER)
        await h.api.wait_for(lambda: h.sent(GROUP), 5)
        assert PRIVACY_HINT not in h.sent(GROUP)[0]["text"]
    finally:
        await h.stop()


async def test_several_bots_a_bare_command_goes_to_the_bot_that_spoke_last(h: Harness) -> None:
    h.api.add_group_bot(GROUP, "other_bot")
    h.api.other_bot_message(GROUP, "other_bot", "hello, I am another bot")
    # Another bot spoke last: Telegram gives it the bare command, not us.
    bare = h.api.user_message(GROUP, "/get https://x.com/ann/status/902", user_id=MEMBER)
    assert "update_id" not in bare
    # Addressed to us by name, it is ours.
    h.api.user_message(GROUP, f"/get@{BOT} https://x.com/ann/status/902", user_id=MEMBER)
    await answered(h, GROUP, 0)
    # We spoke last now: a bare command is ours again.
    h.api.user_message(GROUP, "/get https://x.com/ann/status/903", user_id=MEMBER)
    await answered(h, GROUP, 1)
    # A command for the other bot, or a reply to its message, never is.
    other = h.api.user_message(GROUP, "/get@other_bot https://x.com/ann/status/904")
    assert "update_id" not in other
    said = h.api.other_bot_message(GROUP, "other_bot", "https://x.com/ann/status/904")
    reply = h.api.user_message(GROUP, f"/get@{BOT}", reply_to=said["message_id"])
    assert "update_id" not in reply
