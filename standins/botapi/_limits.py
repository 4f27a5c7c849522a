"""Telegram's flood limits, enforced: the Bot API stand-in's rate-limit mode.

Off by default; `BotApiServer.set_telegram_limits(TelegramLimits())` turns it
on. A send that would go past a limit is answered 429 with ``retry_after``
(whole seconds, rounded up, as Telegram says them) and is not counted; a
send that passes is counted when it arrives, and given back if the method
then fails (a URL Telegram could not fetch, a bad request): only what was
delivered counts, which is what Telegram's limits are about.

The limits, from the Bot FAQ ("My bot is hitting limits, how do I avoid
this?", https://core.telegram.org/bots/faq#my-bot-is-hitting-limits-how-do-i-avoid-this):

- in one chat, "avoid sending more than one message per second. We may allow
  short bursts that go over this limit": a bucket of ``chat_burst`` requests
  refilled at ``chat_rate`` per second. An album is one request here: its
  items are delivered together (a per-item 1/s rule would refuse every album
  of more than ``chat_burst`` items, which Telegram does not);
- "not more than 20 messages per minute to the same group": a sliding 60 s
  window, where an album counts as its items. The Bot API sends an album as
  one message per item and flood-controls each: a 429 inside
  ``sendMediaGroup`` is reported as "failed to send message #1 with the error
  message Too Many Requests: retry after 8"
  (https://github.com/rubenlagus/TelegramBots/issues/1520);
- "the API will not allow more than 30 messages per second or so" across
  chats: a sliding 1 s window over the bot, albums again as their items.

Groups, supergroups and channels are the chats with a negative id.
"""

from __future__ import annotations

import math
from collections import deque

import attrs

# The methods that post messages, and so count against the limits (edits,
# chat actions and callback answers do not post one).
COUNTED_METHODS = frozenset(
    {
        "sendMessage",
        "sendPhoto",
        "sendVideo",
        "sendAnimation",
        "sendDocument",
        "sendAudio",
        "sendMediaGroup",
        "copyMessage",
        "forwardMessage",
    }
)


@attrs.frozen
class Admission:
    """A send let through: what to give back if the method then fails."""

    chat_id: int
    items: int
    at: float


@attrs.define
class TelegramLimits:
    """The limits above, over an injected clock (the stand-in passes its arrival times).

    Attributes:
        chat_rate: requests per second refilled in one chat's bucket.
        chat_burst: the bucket's size (the "short bursts").
        group_max: messages per ``group_window`` seconds in one group.
        global_max: messages per ``global_window`` seconds across the bot.
        refusals: the 429s answered: (chat, arrival time).
    """

    chat_rate: float = 1.0
    chat_burst: int = 3
    group_max: int = 20
    group_window: float = 60.0
    global_max: int = 30
    global_window: float = 1.0
    refusals: list[tuple[int, float]] = attrs.field(factory=list)
    _buckets: dict[int, tuple[float, float]] = attrs.field(factory=dict, init=False)
    _groups: dict[int, deque[float]] = attrs.field(factory=dict, init=False)
    _global: deque[float] = attrs.field(factory=deque, init=False)

    def admit(self, method: str, chat_id: int | None, items: int, at: float) -> Admission | int:
        """Count the send, or return the ``retry_after`` (whole seconds) of its 429."""
        if method not in COUNTED_METHODS or chat_id is None:
            return Admission(0, 0, at)
        wait = self.wait(chat_id, items, at)
        if wait > 0:
            self.refusals.append((chat_id, at))
            return max(1, math.ceil(wait))
        tokens, _ = self._bucket(chat_id, at)
        self._buckets[chat_id] = (tokens - 1.0, at)
        if chat_id < 0:
            self._groups.setdefault(chat_id, deque()).extend([at] * items)
        self._global.extend([at] * items)
        return Admission(chat_id, items, at)

    def give_back(self, admission: Admission) -> None:
        """The method failed after its admission: nothing was delivered, nothing counts."""
        if not admission.items:
            return
        tokens, last = self._buckets.get(admission.chat_id, (float(self.chat_burst), 0.0))
        self._buckets[admission.chat_id] = (min(float(self.chat_burst), tokens + 1.0), last)
        for window in (self._groups.get(admission.chat_id), self._global):
            if window is None:
                continue
            for _ in range(admission.items):
                try:
                    window.remove(admission.at)
                except ValueError:
                    break

    def _bucket(self, chat_id: int, at: float) -> tuple[float, float]:
        tokens, last = self._buckets.get(chat_id, (float(self.chat_burst), at))
        return min(float(self.chat_burst), tokens + (at - last) * self.chat_rate), at

    def wait(self, chat_id: int, items: int, at: float) -> float:
        """Seconds until ``items`` more to ``chat_id`` pass every limit (0: now)."""
        tokens, _ = self._bucket(chat_id, at)
        wait = 0.0 if tokens >= 1.0 else (1.0 - tokens) / self.chat_rate
        if chat_id < 0:
            window = self._groups.get(chat_id)
            if window is not None:
                wait = max(wait, _window_wait(window, items, self.group_max, self.group_window, at))
        return max(wait, _window_wait(self._global, items, self.global_max, self.global_window, at))


def _window_wait(window: deque[float], items: int, limit: int, span: float, at: float) -> float:
    """Seconds until ``items`` more fit in a sliding window of ``limit`` per ``span``."""
    while window and window[0] <= at - span:
        window.popleft()
    over = len(window) + items - limit
    if over <= 0:
        return 0.0
    if items > limit:
        return span  # never fits; Telegram would say so as a long wait
    return window[over - 1] + span - at


def ideal_makespan(
    sends: list[tuple[int, int]], limits: TelegramLimits | None = None, *, step: float = 0.01
) -> float:
    """The earliest the limits let ``sends`` ((chat, items), each chat in order) all arrive.

    All released at 0, no processing time: each chat's sends go in their order,
    each as soon as every limit lets it. A greedy simulation on a ``step`` grid.
    """
    model = attrs.evolve(limits, refusals=[]) if limits is not None else TelegramLimits()
    queues: dict[int, deque[int]] = {}
    for chat, items in sends:
        queues.setdefault(chat, deque()).append(items)
    now, last = 0.0, 0.0
    for _ in range(10_000_000):  # bounded
        if not any(queues.values()):
            return last
        for chat, todo in queues.items():
            while todo:
                got = model.admit("sendMessage", chat, todo[0], now)
                if not isinstance(got, Admission):
                    break
                todo.popleft()
                last = now
        now += step
    raise RuntimeError("ideal_makespan: the sends never fit")
