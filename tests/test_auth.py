"""Who may do what: the pure rule, and the admin list from the Bot API (cached briefly)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import attrs
import pytest
import telegram

from standins.botapi import BotApiServer
from xbot.sending.sender import Sender
from xbot.services.auth import (
    BOT_CANNOT_POST,
    NOT_A_POSTER,
    Act,
    Actor,
    Authority,
    ChatAdmins,
    channel_refusal,
    decide,
    is_operator,
)

GROUP = -500
CHANNEL = -100500
ADMIN, OWNER, OTHER = 11, 22, 33
CHANNEL_ADMIN, SUBSCRIBER, OPERATOR, USER = 44, 55, 66, 77
ANONYMOUS_BOT = 1087968824  # "from" of an anonymous admin's message: GroupAnonymousBot
BOT = 999
ADMINS = ChatAdmins(frozenset({ADMIN}))
CHANNEL_ADMINS = ChatAdmins(frozenset({CHANNEL_ADMIN}))

# role -> (chat type, chat id, actor, the chat's admin list as getChatAdministrators says)
ROLES: dict[str, tuple[str, int, Actor, ChatAdmins]] = {
    "private user": ("private", USER, Actor(USER), ChatAdmins()),
    "someone else in a private chat": ("private", USER, Actor(OTHER), ChatAdmins()),
    "group member who owns the message": ("supergroup", GROUP, Actor(OWNER), ADMINS),
    "other group member": ("supergroup", GROUP, Actor(OTHER), ADMINS),
    "group admin": ("supergroup", GROUP, Actor(ADMIN), ADMINS),
    "admin of a basic group": ("group", GROUP, Actor(ADMIN), ADMINS),
    "anonymous admin": ("supergroup", GROUP, Actor(ANONYMOUS_BOT, GROUP), ADMINS),
    "channel posting in the group": ("supergroup", GROUP, Actor(None, -100999), ADMINS),
    "admin posting as another chat": ("supergroup", GROUP, Actor(ADMIN, -100999), ADMINS),
    "nobody named": ("supergroup", GROUP, Actor(None), ADMINS),
    "member when Telegram lists no admins": ("supergroup", GROUP, Actor(OTHER), ChatAdmins()),
    "channel subscriber": ("channel", CHANNEL, Actor(SUBSCRIBER), CHANNEL_ADMINS),
    "channel admin": ("channel", CHANNEL, Actor(CHANNEL_ADMIN), CHANNEL_ADMINS),
    "the channel's own post": ("channel", CHANNEL, Actor(None, CHANNEL), CHANNEL_ADMINS),
    "operator as a group member": ("supergroup", GROUP, Actor(OPERATOR), ADMINS),
    "operator in his private chat": ("private", OPERATOR, Actor(OPERATOR), ChatAdmins()),
    "operator as a channel subscriber": ("channel", CHANNEL, Actor(OPERATOR), CHANNEL_ADMINS),
    "admin in a chat type unknown to us": ("secret", GROUP, Actor(ADMIN), ADMINS),
}
ACTS = (Act.MANAGE, Act.DISMISS, Act.CAPTION, Act.FORWARD, Act.OPERATE, Act.FETCH)
# role -> may they: manage (settings), dismiss (Skip), caption, forward, operate, fetch
# (the 🎵 button: ask for media as a pasted link does).
# The owner of a message is OWNER (who sent the link).
RULE: dict[str, str] = {
    #                                       manage dismiss caption forward operate fetch
    "private user":                         "yes    yes     yes     yes     no      yes",
    "someone else in a private chat":       "no     no      no      no      no      no",
    "group member who owns the message":    "no     yes     no      no      no      yes",
    "other group member":                   "no     no      no      no      no      yes",
    "group admin":                          "yes    yes     yes     yes     no      yes",
    "admin of a basic group":               "yes    yes     yes     yes     no      yes",
    "anonymous admin":                      "yes    yes     yes     yes     no      yes",
    "channel posting in the group":         "no     no      no      no      no      no",
    "admin posting as another chat":        "no     no      no      no      no      no",
    "nobody named":                         "no     no      no      no      no      no",
    "member when Telegram lists no admins": "no     no      no      no      no      yes",
    "channel subscriber":                   "no     no      no      no      no      no",
    "channel admin":                        "yes    yes     yes     yes     no      yes",
    "the channel's own post":               "yes    yes     yes     yes     no      yes",
    "operator as a group member":           "no     no      no      no      yes     yes",
    "operator in his private chat":         "yes    yes     yes     yes     yes     yes",
    "operator as a channel subscriber":     "no     no      no      no      yes     no",
    "admin in a chat type unknown to us":   "no     no      no      no      no      no",
}  # fmt: skip
CASES = [
    (role, act, answer == "yes")
    for role, row in RULE.items()
    for act, answer in zip(ACTS, row.split(), strict=True)
]


def test_the_rule_covers_every_role_and_act() -> None:
    assert set(RULE) == set(ROLES)
    assert set(ACTS) == set(Act)


@pytest.mark.parametrize(
    ("role", "act", "expected"), CASES, ids=[f"{role}-{act}" for role, act, _ in CASES]
)
def test_decide(role: str, act: Act, expected: bool) -> None:
    chat_type, chat_id, actor, admins = ROLES[role]
    owner = OWNER if act in (Act.DISMISS, Act.CAPTION, Act.FORWARD) else None
    operators = frozenset({OPERATOR})
    quick = decide(chat_type, chat_id, actor, act, owner_id=owner, operators=operators)
    full = decide(
        chat_type, chat_id, actor, act, owner_id=owner, admins=admins, operators=operators
    )
    assert full is expected
    # Without the admin list the answer is the same, or "ask Telegram" (None).
    assert quick in (expected, None)


@pytest.mark.parametrize(
    ("role", "act"),
    [("other group member", Act.DISMISS), ("group member who owns the message", Act.FORWARD),
     ("group admin", Act.MANAGE), ("channel subscriber", Act.MANAGE)],
    ids=["someone else's button", "owner forwarding", "admin settings", "channel press"],
)  # fmt: skip
def test_a_list_is_asked_for_only_when_it_matters(role: str, act: Act) -> None:
    chat_type, chat_id, actor, _ = ROLES[role]
    assert decide(chat_type, chat_id, actor, act, owner_id=OWNER) is None


POSTERS = ChatAdmins(
    frozenset({CHANNEL_ADMIN, OTHER, BOT}), posters=frozenset({CHANNEL_ADMIN, BOT}),
    bot_can_post=True,
)  # fmt: skip


@pytest.mark.parametrize(
    ("channel", "user", "expected"),
    [(POSTERS, CHANNEL_ADMIN, None),
     (POSTERS, OTHER, NOT_A_POSTER),
     (POSTERS, SUBSCRIBER, NOT_A_POSTER),
     (POSTERS, None, NOT_A_POSTER),
     (attrs.evolve(POSTERS, bot_can_post=False), CHANNEL_ADMIN, BOT_CANNOT_POST),
     (ChatAdmins(), CHANNEL_ADMIN, BOT_CANNOT_POST)],
    ids=["admin who may post", "admin who may not post", "subscriber", "nobody named",
         "the bot lost its right", "Telegram would not say"],
)  # fmt: skip
def test_channel_refusal(channel: ChatAdmins, user: int | None, expected: str | None) -> None:
    assert channel_refusal(channel, user) == expected


@pytest.mark.parametrize(
    ("ids", "user", "expected"),
    [(frozenset({1}), 1, True), (frozenset({1}), 2, False), (frozenset(), 1, False),
     (frozenset({1}), None, False)],
    ids=["listed", "not-listed", "no-operators", "no-user"],
)  # fmt: skip
def test_is_operator(ids: frozenset[int], user: int | None, expected: bool) -> None:
    assert is_operator(ids, user) is expected


@pytest.fixture
async def api() -> AsyncIterator[BotApiServer]:
    server = await BotApiServer().start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def bot(api: BotApiServer) -> AsyncIterator[telegram.Bot]:
    b = telegram.Bot(api.token, base_url=f"{api.url}/bot", base_file_url=f"{api.url}/file/bot")
    async with b:
        yield b


async def test_admin_list_is_cached_then_refreshed(api: BotApiServer, bot: telegram.Bot) -> None:
    api.add_chat(GROUP, "supergroup", admins=[ADMIN], creator=OWNER)
    now = [0.0]
    auth = Authority(Sender(bot), ttl=60.0, clock=lambda: now[0])
    assert await auth.may("supergroup", GROUP, Actor(ADMIN), Act.MANAGE)
    assert await auth.may("supergroup", GROUP, Actor(OWNER), Act.MANAGE)
    assert not await auth.may("supergroup", GROUP, Actor(OTHER), Act.MANAGE)
    assert len(api.calls_for("getChatAdministrators")) == 1, "cached within the TTL"
    chat = api.chat(GROUP)
    assert chat is not None
    chat.admins.append(OTHER)  # promoted
    assert not await auth.may("supergroup", GROUP, Actor(OTHER), Act.MANAGE)
    now[0] = 61.0
    assert await auth.may("supergroup", GROUP, Actor(OTHER), Act.MANAGE)
    assert len(api.calls_for("getChatAdministrators")) == 2


async def test_no_api_call_when_the_answer_is_known(api: BotApiServer, bot: telegram.Bot) -> None:
    api.add_chat(GROUP, "supergroup", admins=[ADMIN])
    auth = Authority(Sender(bot), operators=frozenset({OPERATOR}))
    assert await auth.may("private", 5, Actor(5), Act.FORWARD)
    assert await auth.may("supergroup", GROUP, Actor(OWNER), Act.DISMISS, owner_id=OWNER)
    assert await auth.may("supergroup", GROUP, Actor(None, GROUP), Act.MANAGE)
    assert await auth.may("supergroup", GROUP, Actor(OPERATOR), Act.OPERATE)
    assert not await auth.may("supergroup", GROUP, Actor(OWNER), Act.OPERATE)
    assert api.calls_for("getChatAdministrators") == []


async def test_bot_rights_come_from_the_admin_list(api: BotApiServer, bot: telegram.Bot) -> None:
    api.add_chat(GROUP, "supergroup", admins=[ADMIN], bot_is_admin=True)
    api.add_chat(GROUP - 1, "supergroup", admins=[ADMIN], bot_is_admin=False)
    auth = Authority(Sender(bot))
    assert (await auth.admins(GROUP)).bot_can_delete
    assert not (await auth.admins(GROUP - 1)).bot_can_delete


async def test_a_chat_telegram_refuses_trusts_nobody(api: BotApiServer, bot: telegram.Bot) -> None:
    auth = Authority(Sender(bot))
    assert not await auth.may("supergroup", -404, Actor(ADMIN), Act.MANAGE)
    api.add_chat(GROUP, "supergroup", admins=[ADMIN])
    api.block_bot(GROUP)
    assert not await auth.may("supergroup", GROUP, Actor(ADMIN), Act.MANAGE)
    assert await auth.refusal_in(-404, ADMIN) == BOT_CANNOT_POST


async def test_the_right_to_post_comes_from_the_channels_admin_list_now(
    api: BotApiServer, bot: telegram.Bot
) -> None:
    """What getChatAdministrators says of a channel: the creator and the admins with
    can_post_messages may post, an admin without it and a subscriber may not; a right
    taken away shows within the TTL, and so does the bot's own."""
    api.add_chat(CHANNEL, "channel", creator=OWNER, admins=[CHANNEL_ADMIN, OTHER],
                 cannot_post=[OTHER], members={SUBSCRIBER: "member"})  # fmt: skip
    now = [0.0]
    auth = Authority(Sender(bot), ttl=60.0, clock=lambda: now[0])
    assert await auth.refusal_in(CHANNEL, OWNER) is None
    assert await auth.refusal_in(CHANNEL, CHANNEL_ADMIN) is None
    assert await auth.refusal_in(CHANNEL, OTHER) == NOT_A_POSTER
    assert await auth.refusal_in(CHANNEL, SUBSCRIBER) == NOT_A_POSTER
    assert not await auth.may("channel", CHANNEL, Actor(SUBSCRIBER), Act.MANAGE)
    assert await auth.may("channel", CHANNEL, Actor(OTHER), Act.MANAGE), "an admin all the same"
    assert len(api.calls_for("getChatAdministrators")) == 1, "one list answers them all"
    chat = api.chat(CHANNEL)
    assert chat is not None
    chat.admins.remove(CHANNEL_ADMIN)  # demoted
    chat.bot_can_post = False
    now[0] = 61.0
    assert await auth.refusal_in(CHANNEL, OWNER) == BOT_CANNOT_POST
    chat.bot_can_post = True
    now[0] = 122.0
    assert await auth.refusal_in(CHANNEL, CHANNEL_ADMIN) == NOT_A_POSTER
