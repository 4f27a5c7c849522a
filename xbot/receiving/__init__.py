"""Telegram updates coming in: the durable poller (`polling`), the webhook listener
(`webhook`) and how an update came in (`intake`: may Telegram send it again?).

Each confirms an update to Telegram only after its handlers stored the work.
"""

from typing import Protocol

__all__ = ["Receiver"]


class Receiver(Protocol):
    """How updates come in (`polling.DurablePoller`, `webhook.WebhookListener`)."""

    @property
    def running(self) -> bool: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...
