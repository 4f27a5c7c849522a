"""Who may do what. Authority comes from our settings, the database and the Bot API —
never from callback data or anything else a client sends.

- The bot's admins (``XBOT_ADMIN_IDS``) may use the operator commands anywhere.
- In a private chat its one user may do everything there.
- In groups only the chat's administrators may change settings, link a channel
  or press another person's buttons. An anonymous admin posts as the group
  itself (``sender_chat`` is the chat): only admins can do that, so it counts.
  The admin list comes from ``getChatAdministrators``, cached for a short while.
- In a channel only its admins can post at all, so a post there is an admin's.

`decide` is the pure rule (table-tested); `Authority` feeds it from the Bot API.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import attrs
import telegram

from xbot.errors import XbotError
from xbot.i18n import N_
from xbot.logs import kv
from xbot.sending.sender import Sender

log = logging.getLogger(__name__)

ONLY_ADMINS = N_("Only admins can do that.")
ONLY_OPERATORS = N_("That command is for the bot's operators.")
ADMIN_TTL = 60.0  # seconds a chat's admin list is trusted; promotions show up within this

_GROUPS = frozenset({"group", "supergroup"})


@attrs.frozen
class Actor:
    """Who is acting, as Telegram says.

    Attributes:
        user_id: the user behind a message or button press (None when unknown).
        sender_chat_id: the chat a message was sent on behalf of, if any (an
            anonymous admin: the group itself; a channel: the channel).
    """

    user_id: int | None
    sender_chat_id: int | None = None


@attrs.frozen
class ChatAdmins:
    """A chat's administrators as ``getChatAdministrators`` listed them.

    Attributes:
        user_ids: the creator and every administrator (bots included).
        bot_can_delete: the bot is an administrator allowed to delete messages.
    """

    user_ids: frozenset[int] = frozenset()
    bot_can_delete: bool = False


def is_operator(operator_ids: frozenset[int], user_id: int | None) -> bool:
    """One of the bot's admins (``XBOT_ADMIN_IDS``)."""
    return user_id is not None and user_id in operator_ids


def decide(
    chat_type: str,
    chat_id: int,
    actor: Actor,
    owner_id: int | None,
    admins: ChatAdmins | None,
) -> bool | None:
    """May `actor` act on something of `owner_id` (None: of the chat) in this chat?

    Returns None when the answer depends on the admin list and `admins` is None.
    """
    if chat_type not in _GROUPS:
        # Private: the one user. Channel: only admins post there at all.
        return True
    if actor.sender_chat_id is not None:
        # An anonymous admin posts as the group; a channel posting into the group is not one.
        return actor.sender_chat_id == chat_id
    if actor.user_id is None:
        return False
    if owner_id is not None and actor.user_id == owner_id:
        return True
    if admins is None:
        return None
    return actor.user_id in admins.user_ids


def admins_from(members: tuple[telegram.ChatMember, ...], bot_id: int) -> ChatAdmins:
    ids = frozenset(m.user.id for m in members)
    bot_can_delete = any(
        m.user.id == bot_id
        and isinstance(m, telegram.ChatMemberAdministrator)
        and m.can_delete_messages
        for m in members
    )
    return ChatAdmins(ids, bot_can_delete)


@attrs.define
class Authority:
    """The Bot API side of `decide`: admin lists, cached for `ttl` seconds per chat.

    Attributes:
        sender: asks the Bot API (``getChatAdministrators``), its errors translated.
        ttl: how long an admin list is trusted.
        clock: monotonic seconds (injected in tests).
    """

    sender: Sender
    ttl: float = ADMIN_TTL
    clock: Callable[[], float] = time.monotonic
    _cache: dict[int, tuple[float, ChatAdmins]] = attrs.field(factory=dict, init=False)

    async def admins(self, chat_id: int) -> ChatAdmins:
        """The chat's admins; an empty list when Telegram will not say (nobody is trusted)."""
        now = self.clock()
        hit = self._cache.get(chat_id)
        if hit is not None and now - hit[0] < self.ttl:
            return hit[1]
        try:
            members = await self.sender.get_chat_administrators(chat_id)
        except XbotError as exc:
            log.warning("admin list failed %s", kv(chat=chat_id, error=type(exc).__name__))
            return ChatAdmins()
        found = admins_from(tuple(members), self.sender.bot.id)
        if len(self._cache) > 10_000:  # a bound, not a policy: drop the oldest half
            for key, _ in sorted(self._cache.items(), key=lambda kv_: kv_[1][0])[:5_000]:
                del self._cache[key]
        self._cache[chat_id] = (now, found)
        return found

    def forget(self, chat_id: int) -> None:
        self._cache.pop(chat_id, None)

    async def may(
        self, chat_type: str, chat_id: int, actor: Actor, owner_id: int | None = None
    ) -> bool:
        """`decide`, asking Telegram for the admin list only when it matters."""
        quick = decide(chat_type, chat_id, actor, owner_id, None)
        if quick is not None:
            return quick
        return bool(decide(chat_type, chat_id, actor, owner_id, await self.admins(chat_id)))
