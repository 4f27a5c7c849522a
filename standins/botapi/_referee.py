"""The Bot API stand-in's referee: injected faults, rate limits, and who came too early.

Before a method runs, `gate` applies, in order: the rate-limit referee (after a 429 a
chat has a "not before"; a request for it that comes sooner is recorded in
`early_requests` and, like Telegram, answered with another 429), the faults a test
asked for (`fail_next`), a storm of 429s (`set_rate_limit_storm`) and 502s from the
front end (`set_5xx`). Then `admit` counts the send against Telegram's flood limits
when they are enforced (`set_telegram_limits`, `_limits`), and `give_back` returns the
count of a send that failed after all.

`Referee` owns this configuration and the "not before" of each chat, under the state's
lock.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable

import attrs

from standins._http import Response
from standins.botapi._limits import COUNTED_METHODS, Admission, TelegramLimits
from standins.botapi._outage import nginx_502
from standins.botapi._state import BotApiState
from standins.botapi._wire import JSON, ApiError, EarlyRequest

# The methods a rate-limit storm hits by default: those that post messages (the ones
# the flood limits count, and copyMessages, which they do not) or change them.
SEND_METHODS = COUNTED_METHODS | {
    "copyMessages",
    "editMessageText",
    "editMessageCaption",
    "editMessageReplyMarkup",
}


@attrs.define
class _FailRule:
    method: str
    status: int
    description: str
    retry_after: int | None
    remaining: int
    chat_id: int | None
    skip: int = 0


@attrs.frozen
class _Storm:
    probability: float
    retry_after_range: tuple[int, int]
    methods: frozenset[str]


class Referee:
    """Faults on request and Telegram's rate limits, judged before each method runs.

    Attributes:
        enforce_not_before: answer a request that comes before its chat's 429 ran out
            with another 429 (Telegram does); it is recorded either way.
        early_tolerance: seconds of slack before a request counts as early.
    """

    def __init__(
        self, state: BotApiState, *, enforce_not_before: bool, early_tolerance: float
    ) -> None:
        self._state = state
        self.enforce_not_before = enforce_not_before
        self.early_tolerance = early_tolerance
        self._early: list[EarlyRequest] = []
        self._not_before: dict[int, float] = {}
        self._faults: list[_FailRule] = []
        self._storm: _Storm | None = None
        self._limits: TelegramLimits | None = None
        self._latency = 0.0
        self._p5xx = 0.0
        self._methods_5xx: frozenset[str] | None = None

    @property
    def early_requests(self) -> list[EarlyRequest]:
        with self._state.lock:
            return list(self._early)

    @property
    def latency(self) -> float:
        with self._state.lock:
            return self._latency

    def fail_next(
        self,
        method: str,
        status: int,
        description: str,
        *,
        retry_after: int | None = None,
        count: int = 1,
        chat_id: int | None = None,
        skip: int = 0,
    ) -> None:
        """Answer the next `count` calls of `method` (for `chat_id`, if given) with this error,
        after letting `skip` of them through.

        A 429 without `retry_after` gets 1 s, since Telegram always says how long.
        """
        if status == 429 and retry_after is None:
            retry_after = 1
        with self._state.lock:
            self._faults.append(
                _FailRule(method, status, description, retry_after, count, chat_id, skip)
            )

    def set_rate_limit_storm(
        self,
        probability: float,
        retry_after_range: tuple[int, int] = (1, 3),
        methods: Iterable[str] = SEND_METHODS,
        seed: int | None = None,
    ) -> None:
        """Answer each call of `methods` with a 429 with this probability (0 turns it off)."""
        with self._state.lock:
            if seed is not None:
                self._state.rng.seed(seed)
            self._storm = (
                _Storm(probability, retry_after_range, frozenset(methods))
                if probability > 0
                else None
            )

    def set_telegram_limits(self, limits: TelegramLimits | None) -> None:
        """Enforce Telegram's flood limits (`_limits`): 429 past them; None turns off."""
        with self._state.lock:
            self._limits = limits

    def set_latency(self, seconds: float) -> None:
        with self._state.lock:
            self._latency = max(0.0, seconds)

    def set_5xx(self, probability: float, methods: Iterable[str] | None = None) -> None:
        """Answer 502 from the "front end" with this probability (by default not getUpdates)."""
        with self._state.lock:
            self._p5xx = probability
            self._methods_5xx = frozenset(methods) if methods is not None else None

    def gate(self, method: str, chat_id: int | None, at: float) -> Response | None:
        """Rate-limit referee and injected faults, before the method runs."""
        rng = self._state.rng
        with self._state.lock:
            if chat_id is not None and method != "getUpdates":
                not_before = self._not_before.get(chat_id, 0.0)
                if at < not_before - self.early_tolerance:
                    self._early.append(EarlyRequest(method, chat_id, at, not_before))
                    if self.enforce_not_before:
                        wait = max(1, math.ceil(not_before - at))
                        raise _too_many(wait)
            for rule in self._faults:
                if rule.method == method and rule.chat_id in (None, chat_id):
                    if rule.skip > 0:
                        rule.skip -= 1
                        continue
                    rule.remaining -= 1
                    if rule.remaining <= 0:
                        self._faults.remove(rule)
                    params = {"retry_after": rule.retry_after} if rule.retry_after else None
                    raise ApiError(rule.status, rule.description, params)
            storm = self._storm
            if storm and method in storm.methods and rng.random() < storm.probability:
                raise _too_many(rng.randint(*storm.retry_after_range))
            in_scope = (
                method != "getUpdates" if self._methods_5xx is None else method in self._methods_5xx
            )
            if self._p5xx and in_scope and rng.random() < self._p5xx:
                return nginx_502()
        return None

    def admit(self, method: str, chat_id: int | None, params: JSON, at: float) -> Admission | None:
        """Telegram's limits, when enforced: a 429 past them, else the send counted."""
        with self._state.lock:
            limits = self._limits
            if limits is None:
                return None
            got = limits.admit(method, chat_id, _items(method, params), at)
        if isinstance(got, int):
            raise _too_many(got)
        return got

    def give_back(self, admitted: Admission | None) -> None:
        with self._state.lock:
            if admitted is not None and self._limits is not None:
                self._limits.give_back(admitted)

    def refused(self, chat_id: int, retry_after: float) -> None:
        """A 429 went out for `chat_id`: nothing for it before `retry_after` seconds."""
        with self._state.lock:
            self._not_before[chat_id] = max(
                self._not_before.get(chat_id, 0.0), time.monotonic() + retry_after
            )


def _items(method: str, params: JSON) -> int:
    """Messages a send posts: an album's items, else one."""
    if method != "sendMediaGroup":
        return 1
    media = params.get("media")
    if isinstance(media, str):
        try:
            media = json.loads(media)
        except ValueError:
            return 1
    return max(1, len(media)) if isinstance(media, list) else 1


def _too_many(retry_after: int) -> ApiError:
    return ApiError(
        429,
        f"Too Many Requests: retry after {retry_after}",
        {"retry_after": retry_after},
    )
