"""The services a handler may use, and the typed PTB context that carries them.

`xbot.app` builds one `Services` and stores it on the Application; handlers
reach it as ``context.services`` (typed), never through string keys.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import attrs
from telegram.ext import Application, CallbackContext, ExtBot

from xbot.config import Settings

if TYPE_CHECKING:
    import httpx

    from xbot.db import DbPool
    from xbot.delivery import Delivery
    from xbot.forwarding import Forwarding
    from xbot.handlers.auth import Authority
    from xbot.inline_fetch import InlineFetches
    from xbot.link_cache import LinkCache
    from xbot.queue import TaskQueue
    from xbot.sender import Sender
    from xbot.state import ChatStore
    from xbot.worker import Workers

_KEY = "xbot.services"


@attrs.define
class Services:
    """Everything wired by the composition root (`xbot.app`).

    Attributes:
        forwarding: forward prompts, presses and the forward task.
        authority: who may do what (admin lists from the Bot API, cached).
        inline: posts fetched for inline queries, within Telegram's answer window.
        started_at: wall-clock start, for /stats' uptime.
        clock: the wall clock (injected in tests).
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
    x_client: httpx.AsyncClient
    guarded: httpx.AsyncClient
    inline: InlineFetches
    started_at: float = attrs.field(factory=time.time)
    clock: Any = time.time

    def attach(self, application: Application[Any, Any, Any, Any, Any, Any]) -> None:
        application.bot_data[_KEY] = self


class XContext(CallbackContext[ExtBot[None], dict[Any, Any], dict[Any, Any], dict[Any, Any]]):
    """PTB's context with a typed door to our services."""

    @property
    def services(self) -> Services:
        services = self.application.bot_data.get(_KEY)
        if not isinstance(services, Services):
            raise RuntimeError("xbot services are not attached to this application")
        return services
