"""Who may do what. Authority comes from our settings, the database and the Bot API —
never from callback data or anything else a client sends.

The rule is `decide`, a table of who (`Actor`, with the chat and the Bot API's admin
list) may do what (`Act`):

- The bot's operators (``XBOT_ADMIN_IDS``) alone may `Act.OPERATE` (retry a dead
  letter, mute an alert, the operator commands); anywhere else they are users like
  any other.
- In a private chat its one user may do everything there.
- Asking for media (`Act.FETCH`: the 🎵 button under another site's video) is what
  pasting a link does: anyone in a group, only admins in a channel.
- In groups only the chat's administrators change settings, and only they speak for
  the linked channel: forward to it or choose its caption (issue 30: a member
  forwarded his own media to the admins' channel). The member who sent a link may
  still dismiss the answer's buttons. An anonymous admin posts as the group itself
  (``sender_chat`` is the chat): only admins can do that, so it counts.
- In a channel only its admins act: a post as the channel is one of them (only admins
  post there); a button press names the person, who is checked against the channel's
  admin list (a subscriber's press is refused).

Speaking for a channel needs one more thing, checked at every press that leads
there (`channel_refusal`): the presser is still an admin of that channel allowed to
post, and so is the bot. Telegram names the real person behind every button press,
anonymous admins included, so a press is always checked as that person; an anonymous
admin's reply only sets the caption, and the forward still waits for a named press.

Admin lists come from ``getChatAdministrators`` (it lists the bot itself too, with
its rights), cached for a short while per chat: the group's for its own rule, the
channel's for the right to post there. `decide` is pure (table-tested); `Authority`
feeds it from the Bot API.
"""

from __future__ import annotations

import enum
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
# Said when a press would speak for the linked channel (plain text: a callback answer).
NOT_A_POSTER = N_("Only admins of {channel} who may post there can forward to it.")
BOT_CANNOT_POST = N_("I cannot post in {channel}: make me an admin there allowed to post messages.")
ADMIN_TTL = 60.0  # seconds a chat's admin list is trusted; promotions show up within this

_GROUPS = frozenset({"group", "supergroup"})


class Act(enum.StrEnum):
    """What someone does, as far as who may do it goes."""

    MANAGE = "manage"  # settings toggles and the menu; /settings, /channel, /format
    DISMISS = "dismiss"  # Skip under a forward prompt
    CAPTION = "caption"  # Edit caption, Keep caption, a caption sent as text
    FORWARD = "forward"  # Forward to channel, Forward after a caption edit
    OPERATE = "operate"  # retry a dead letter, mute an alert, the operator commands
    FETCH = "fetch"  # ask for media as a link does: the 🎵 button (the sound alone)


# What the owner of a message (who sent the link) may do on it without being an admin.
# Speaking for the linked channel is not among them: that is the admins' alone.
OWNERS_MAY: frozenset[Act] = frozenset({Act.DISMISS})
# The acts that speak for the linked channel: `channel_refusal` is asked at each press.
FOR_THE_CHANNEL: frozenset[Act] = frozenset({Act.CAPTION, Act.FORWARD})


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
        posters: in a channel, those who may post there: the creator and the
            administrators with ``can_post_messages`` (the bot included).
        bot_can_post: the bot is among `posters`.
    """

    user_ids: frozenset[int] = frozenset()
    bot_can_delete: bool = False
    posters: frozenset[int] = frozenset()
    bot_can_post: bool = False


def is_operator(operator_ids: frozenset[int], user_id: int | None) -> bool:
    """One of the bot's admins (``XBOT_ADMIN_IDS``)."""
    return user_id is not None and user_id in operator_ids


def decide(
    chat_type: str,
    chat_id: int,
    actor: Actor,
    act: Act,
    *,
    owner_id: int | None = None,
    admins: ChatAdmins | None = None,
    operators: frozenset[int] = frozenset(),
) -> bool | None:
    """May `actor` do `act` in this chat, on something of `owner_id` (None: of the chat)?

    Returns None when the answer depends on the chat's admin list and `admins` is None.
    """
    if act is Act.OPERATE:
        return is_operator(operators, actor.user_id)
    if chat_type == "private":
        # Its one user: a private chat's id is its user's id.
        return actor.sender_chat_id is None and actor.user_id == chat_id
    if chat_type not in (*_GROUPS, "channel"):
        return False  # a chat type Telegram may add one day: nobody, until we know it
    if actor.sender_chat_id is not None:
        # Posted as the chat itself: an anonymous admin in a group, the channel's own post
        # (only admins post in a channel). Another chat posting into a group is not one.
        return actor.sender_chat_id == chat_id
    if actor.user_id is None:
        return False
    if act is Act.FETCH and chat_type in _GROUPS:
        # Any member may paste a link and have it answered; a press asks for no more
        # (the queue bounds each user's work in flight either way).
        return True
    if act in OWNERS_MAY and owner_id is not None and actor.user_id == owner_id:
        return True
    if admins is None:
        return None
    return actor.user_id in admins.user_ids


def channel_refusal(channel: ChatAdmins, user_id: int | None) -> str | None:
    """Why `user_id` may not speak for this channel now (a msgid with ``{channel}``), or
    None when he may: he and the bot are both among its posters."""
    if not channel.bot_can_post:
        return BOT_CANNOT_POST
    if user_id is None or user_id not in channel.posters:
        return NOT_A_POSTER
    return None


def _may_post(member: telegram.ChatMember) -> bool:
    if isinstance(member, telegram.ChatMemberOwner):
        return True
    return isinstance(member, telegram.ChatMemberAdministrator) and bool(member.can_post_messages)


def admins_from(members: tuple[telegram.ChatMember, ...], bot_id: int) -> ChatAdmins:
    ids = frozenset(m.user.id for m in members)
    bot_can_delete = any(
        m.user.id == bot_id
        and isinstance(m, telegram.ChatMemberAdministrator)
        and m.can_delete_messages
        for m in members
    )
    posters = frozenset(m.user.id for m in members if _may_post(m))
    return ChatAdmins(ids, bot_can_delete, posters, bot_id in posters)


@attrs.define
class Authority:
    """The Bot API side of `decide`: admin lists, cached for `ttl` seconds per chat.

    Attributes:
        sender: asks the Bot API (``getChatAdministrators``), its errors translated.
        operators: the bot's operators (``XBOT_ADMIN_IDS``).
        ttl: how long an admin list is trusted.
        clock: monotonic seconds (injected in tests).
    """

    sender: Sender
    operators: frozenset[int] = frozenset()
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
        self,
        chat_type: str,
        chat_id: int,
        actor: Actor,
        act: Act,
        owner_id: int | None = None,
    ) -> bool:
        """`decide`, asking Telegram for the admin list only when it matters."""
        quick = decide(chat_type, chat_id, actor, act, owner_id=owner_id, operators=self.operators)
        if quick is not None:
            return quick
        admins = await self.admins(chat_id)
        return bool(decide(chat_type, chat_id, actor, act, owner_id=owner_id, admins=admins))

    async def refusal_in(self, channel_id: int, user_id: int | None) -> str | None:
        """`channel_refusal` from the channel's admin list now (cached briefly)."""
        return channel_refusal(await self.admins(channel_id), user_id)
