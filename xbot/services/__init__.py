"""The services a handler may use, and the typed PTB context that carries them.

`xbot.app` builds one `Services` and stores it on the Application; handlers
reach it as ``context.services`` (typed), never through string keys.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs
from telegram.ext import Application, CallbackContext, ExtBot

from xbot.clock import SystemClocks, TimeLine
from xbot.config import Settings
from xbot.logs import kv

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    import httpx

    from xbot.sending.sender import Sender
    from xbot.services.auth import Authority
    from xbot.services.inline_fetch import InlineFetches
    from xbot.sources import SourceRouter
    from xbot.sources.canary import Canary
    from xbot.storage.db import DbPool
    from xbot.storage.link_cache import LinkCache
    from xbot.storage.queue import TaskQueue
    from xbot.storage.state import ChatStore
    from xbot.tasks.alerts import AlertWatch
    from xbot.tasks.delivery import Delivery
    from xbot.tasks.forwarding import Forwarding
    from xbot.tasks.vitals import Vitals
    from xbot.tasks.worker import Workers

_KEY = "xbot.services"


@attrs.define
class Services:
    """Everything wired by the composition root (`xbot.app`).

    Attributes:
        forwarding: forward prompts, presses and the forward task.
        authority: who may do what (admin lists from the Bot API, cached).
        sources: which source fetches a link (/debug asks it too).
        mover: moves everything a chat owns when a group becomes a supergroup.
        inline: posts fetched for inline queries, within Telegram's answer window.
        alerts: watches the bot for the operators' alerts (None: no XBOT_ADMIN_IDS).
        canary: fetches a known post from every source now and then (None: off).
        vitals: what the alerts and the operator's metrics watch (one value for both).
        line: the bot's time line (`xbot.clock`): stored times and ``now`` are on it.
        clock: ``now`` on the line (``line.now``; a test's clock in tests).
        started_at: when the bot started, on the line (/stats' uptime).
    """

    settings: Settings
    pool: DbPool
    queue: TaskQueue
    chats: ChatStore
    cache: LinkCache
    sender: Sender
    delivery: Delivery
    workers: Workers
    forwarding: Forwarding
    authority: Authority
    sources: SourceRouter
    mover: ChatMover
    x_client: httpx.AsyncClient
    guarded: httpx.AsyncClient
    inline: InlineFetches
    vitals: Vitals
    alerts: AlertWatch | None = None
    canary: Canary | None = None
    line: TimeLine = attrs.field(factory=lambda: TimeLine.from_wall(SystemClocks()))
    clock: Callable[[], float] = attrs.field(
        default=attrs.Factory(lambda self: self.line.now, takes_self=True)
    )
    started_at: float = attrs.field(
        default=attrs.Factory(lambda self: self.clock(), takes_self=True)
    )

    def attach(self, application: Application[Any, Any, Any, Any, Any, Any]) -> None:
        application.bot_data[_KEY] = self


@attrs.define
class ChatMover:
    """A group became a supergroup: its tasks, hold, settings, records and cached admin
    list follow it. The one place that knows all of them (the worker meeting
    `ChatMoved` and the two service messages all call `move`).

    Each step is a no-op when repeated, so the service messages (``migrate_to``
    in the old group, ``migrate_from`` in the new one) and a worker may all do it.
    """

    queue: TaskQueue
    chats: ChatStore
    authority: Authority
    clock: Callable[[], float]

    async def move(self, old_id: int, new_id: int) -> None:
        moved = await self.queue.move_chat(old_id, new_id)
        await self.chats.move_chat(old_id, new_id, self.clock())
        self.authority.forget(old_id)
        log.info("chat moved %s", kv(old=old_id, new=new_id, tasks=moved))


class XContext(CallbackContext[ExtBot[None], dict[Any, Any], dict[Any, Any], dict[Any, Any]]):
    """PTB's context with a typed door to our services."""

    @property
    def services(self) -> Services:
        services = self.application.bot_data.get(_KEY)
        if not isinstance(services, Services):
            raise RuntimeError("xbot services are not attached to this application")
        return services
