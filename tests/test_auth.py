"""Who may do what: the pure rule, and the admin list from the Bot API (cached briefly)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import telegram

from xbot.handlers.auth import Actor, Authority, ChatAdmins, decide, is_operator
from xbot.sender import Sender
from xbot.testing.botapi import BotApiServer

GROUP = -500
ADMIN, OWNER, OTHER = 11, 22, 33
ADMINS = ChatAdmins(frozenset({ADMIN}))


@pytest.mark.parametrize(
    ("chat_type", "actor", "owner", "admins", "expected"),
    [
        ("private", Actor(OTHER), None, None, True),
        ("channel", Actor(None, GROUP), None, None, True),
        ("supergroup", Actor(OWNER), OWNER, None, True),
        ("supergroup", Actor(OTHER), OWNER, None, None),
        ("supergroup", Actor(OTHER), OWNER, ADMINS, False),
        ("supergroup", Actor(ADMIN), OWNER, ADMINS, True),
        ("group", Actor(ADMIN), None, ADMINS, True),
        ("group", Actor(OTHER), None, ADMINS, False),
        ("supergroup", Actor(None, GROUP), None, None, True),
        ("supergroup", Actor(None, -100999), None, ADMINS, False),
        ("supergroup", Actor(ADMIN, -100999), None, ADMINS, False),
        ("supergroup", Actor(None), None, ADMINS, False),
        ("supergroup", Actor(OTHER), None, ChatAdmins(), False),
    ],
    ids=["private-anyone", "channel-post", "owner-own-button", "other-needs-list",
         "other-not-admin", "admin-presses-others", "admin-settings", "member-settings",
         "anonymous-admin", "channel-posting-in-group", "sender-chat-wins-over-user",
         "nobody", "empty-admin-list"],
)  # fmt: skip
def test_decide(
    chat_type: str, actor: Actor, owner: int | None, admins: ChatAdmins | None, expected: object
) -> None:
    assert decide(chat_type, GROUP, actor, owner, admins) is expected


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
    assert await auth.may("supergroup", GROUP, Actor(ADMIN))
    assert await auth.may("supergroup", GROUP, Actor(OWNER))
    assert not await auth.may("supergroup", GROUP, Actor(OTHER))
    assert len(api.calls_for("getChatAdministrators")) == 1, "cached within the TTL"
    chat = api.chat(GROUP)
    assert chat is not None
    chat.admins.append(OTHER)  # promoted
    assert not await auth.may("supergroup", GROUP, Actor(OTHER))
    now[0] = 61.0
    assert await auth.may("supergroup", GROUP, Actor(OTHER))
    assert len(api.calls_for("getChatAdministrators")) == 2


async def test_no_api_call_when_the_answer_is_known(api: BotApiServer, bot: telegram.Bot) -> None:
    api.add_chat(GROUP, "supergroup", admins=[ADMIN])
    auth = Authority(Sender(bot))
    assert await auth.may("private", 5, Actor(5))
    assert await auth.may("supergroup", GROUP, Actor(OWNER), owner_id=OWNER)
    assert await auth.may("supergroup", GROUP, Actor(None, GROUP))
    assert api.calls_for("getChatAdministrators") == []


async def test_bot_rights_come_from_the_admin_list(api: BotApiServer, bot: telegram.Bot) -> None:
    api.add_chat(GROUP, "supergroup", admins=[ADMIN], bot_is_admin=True)
    api.add_chat(GROUP - 1, "supergroup", admins=[ADMIN], bot_is_admin=False)
    auth = Authority(Sender(bot))
    assert (await auth.admins(GROUP)).bot_can_delete
    assert not (await auth.admins(GROUP - 1)).bot_can_delete


async def test_a_chat_telegram_refuses_trusts_nobody(api: BotApiServer, bot: telegram.Bot) -> None:
    auth = Authority(Sender(bot))
    assert not await auth.may("supergroup", -404, Actor(ADMIN))
    api.add_chat(GROUP, "supergroup", admins=[ADMIN])
    api.block_bot(GROUP)
    assert not await auth.may("supergroup", GROUP, Actor(ADMIN))
