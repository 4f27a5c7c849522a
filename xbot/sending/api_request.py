"""Every Bot API call's result, seen where PTB makes the HTTP request.

`CountingRequest` wraps PTB's request object (the seam PTB itself offers,
`telegram.request.BaseRequest`) and tells `on_result` the method and how the
call went: ``ok``, ``429``, ``4xx``, ``5xx`` or ``network`` (no HTTP answer),
and for a 429 the ``retry_after`` Telegram asked for. Nothing else changes:
the inner request does the work and PTB raises what it always raised.

Built once in `xbot.app`, for the requests of the bot and of getUpdates, so
no sender, handler or poller needs to know it exists. What it reports goes to the
metrics and to Telegram's health (`TelegramHealth.observed`: the one owner of
whether Telegram answers, which hears here the calls that go around its hold).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from telegram.error import NetworkError
from telegram.request import BaseRequest, RequestData

__all__ = ["UNANSWERED", "CountingRequest", "ResultHook", "result_of"]

# (method, result, retry_after seconds)
ResultHook = Callable[[str, str, float], None]
UNANSWERED = frozenset({"5xx", "network"})  # the results that are no answer from Telegram


def result_of(status: int) -> str:
    """An HTTP status as one of the few results the metrics keep."""
    if 200 <= status < 300:
        return "ok"
    if status == 429:
        return "429"
    if status >= 500:
        return "5xx"
    return "4xx"


def _retry_after(payload: bytes) -> float:
    """``parameters.retry_after`` of a 429's JSON body (0 when it has none)."""
    try:
        value = json.loads(payload).get("parameters", {}).get("retry_after", 0)
        return max(0.0, float(value))
    except (ValueError, TypeError, AttributeError):
        return 0.0


class CountingRequest(BaseRequest):
    """A `BaseRequest` that hands each call to `inner` and reports its result.

    Args:
        inner: the request that talks HTTP (PTB's `HTTPXRequest`, or another).
        method_of: the Bot API method of a request URL (`xbot.metrics.api_method`).
        on_result: told (method, result, retry_after) after every call.
    """

    def __init__(
        self, inner: BaseRequest, method_of: Callable[[str], str], on_result: ResultHook
    ) -> None:
        self._inner = inner
        self._method_of = method_of
        self._on_result = on_result

    @property
    def read_timeout(self) -> float | None:
        return self._inner.read_timeout

    async def initialize(self) -> None:
        await self._inner.initialize()

    async def shutdown(self) -> None:
        await self._inner.shutdown()

    async def do_request(
        self,
        url: str,
        method: str,
        request_data: RequestData | None = None,
        *args: Any,
        **kwargs: Any,
    ) -> tuple[int, bytes]:
        name = self._method_of(url)
        try:
            status, payload = await self._inner.do_request(
                url, method, request_data, *args, **kwargs
            )
        except NetworkError:  # PTB's own: TimedOut and every transport failure
            self._on_result(name, "network", 0.0)
            raise
        result = result_of(status)
        self._on_result(name, result, _retry_after(payload) if result == "429" else 0.0)
        return status, payload
