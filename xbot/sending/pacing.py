"""Staying inside Telegram's published limits before it complains.

About 1 message/s per chat (short bursts pass), 20 messages/min per group,
30 messages/s overall (the Bot FAQ: https://core.telegram.org/bots/faq
#my-bot-is-hitting-limits-how-do-i-avoid-this). An album counts as its items
in the group and overall windows: the Bot API posts it as one message per
item and flood-controls each ("failed to send message #1 with the error
message Too Many Requests", https://github.com/rubenlagus/TelegramBots/issues/1520);
in the chat's own 1/s spacing it is one send.

Only what Telegram accepted is spent. `sending` reserves the slot while the
call is out (so concurrent sends cannot overbook a window), keeps it, stamped
with the time Telegram answered, when the call succeeds, and frees it when
the call fails: a URL Telegram could not fetch, a 429, a refusal — none of
them reached the chat, so none may delay the next message. A call with no
answer (a timeout) may have reached it: the caller marks it
(`Slot.maybe_delivered`) and it is kept. A 429 holds the
chat for exactly its ``retry_after`` (`hold`); the refused call leaves no
window behind it.

`Pacer.delay` is pure over an injected clock; waiting sleeps only for short
gaps. A wait longer than `max_wait` raises `RateLimited`, so the worker
hands the chat to the queue's "not before" instead of sleeping while it
holds a lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import AsyncIterator, Callable

import attrs

from xbot.errors import RateLimited

# One chat: about 1 message/s, short bursts allowed (the FAQ): a bucket of
# PER_CHAT_BURST sends refilled at one per PER_CHAT_INTERVAL. An album is one
# send here (its items arrive together).
PER_CHAT_INTERVAL = 1.0
PER_CHAT_BURST = 3
GROUP_WINDOW = 60.0
GROUP_MAX = 20
GLOBAL_WINDOW = 1.0
GLOBAL_MAX = 30
# While sends in flight alone fill a window, look again this often.
IN_FLIGHT_POLL = 0.05


@attrs.define
class Slot:
    """A send in flight: what it holds until Telegram answers.

    Attributes:
        chat_id: where it goes.
        group: whether it counts in the chat's group window.
        messages: how many messages it counts as (an album's items).
        at: when it was reserved.
        maybe_delivered: set by the caller when the call failed without an
            answer (a timeout): Telegram may have sent it, so it stays counted.
    """

    chat_id: int
    group: bool
    messages: int
    at: float
    maybe_delivered: bool = False


@attrs.define
class Pacer:
    """Per-chat buckets and sliding windows of accepted sends, per group and overall.

    A send in flight counts in every window as if it arrived just now (it
    may reach Telegram any moment), and from Telegram's answer as a send of
    that moment; a send that fails counts for nothing (its token goes back).

    Attributes:
        enabled: off in benchmarks against a stand-in with its limits off.
        max_wait: the longest sleep; beyond it the chat is held through the queue.
    """

    enabled: bool = True
    max_wait: float = 3.0
    clock: Callable[[], float] = time.monotonic
    _buckets: dict[int, tuple[float, float]] = attrs.field(factory=dict, init=False)
    _groups: dict[int, deque[float]] = attrs.field(factory=dict, init=False)
    _global: deque[float] = attrs.field(factory=deque, init=False)
    _out_groups: dict[int, int] = attrs.field(factory=dict, init=False)
    _out_global: int = attrs.field(default=0, init=False)
    _holds: dict[int, float] = attrs.field(factory=dict, init=False)

    def hold(self, chat_id: int, until: float) -> None:
        """Telegram said retry_after for this chat: nothing goes there before `until`.

        The queue holds the chat's tasks durably; this holds what the process
        sends meanwhile on its own (the chat-action refresher, a status edit).
        The hold is all the chat waits: the refused send left nothing behind.
        """
        self._holds[chat_id] = max(self._holds.get(chat_id, 0.0), until)

    def held(self, chat_id: int, now: float) -> float:
        """Seconds left of the chat's hold (0 when there is none)."""
        until = self._holds.get(chat_id)
        if until is None:
            return 0.0
        if until <= now:
            del self._holds[chat_id]
            return 0.0
        return until - now

    def _tokens(self, chat_id: int, now: float) -> float:
        tokens, at = self._buckets.get(chat_id, (float(PER_CHAT_BURST), now))
        return min(float(PER_CHAT_BURST), tokens + max(0.0, now - at) / PER_CHAT_INTERVAL)

    def delay(self, chat_id: int, *, group: bool, now: float, messages: int = 1) -> float:
        """Seconds until `messages` more to `chat_id` stay inside every limit."""
        wait = self.held(chat_id, now)  # Telegram's word counts even with pacing off
        if not self.enabled:
            return wait
        tokens = self._tokens(chat_id, now)
        if tokens < 1.0:
            wait = max(wait, (1.0 - tokens) * PER_CHAT_INTERVAL)
        if group:
            window = self._groups.get(chat_id, deque())
            out = self._out_groups.get(chat_id, 0)
            wait = max(wait, _window_wait(window, out, messages, GROUP_MAX, GROUP_WINDOW, now))
        out = self._out_global
        return max(wait, _window_wait(self._global, out, messages, GLOBAL_MAX, GLOBAL_WINDOW, now))

    def record(self, chat_id: int, *, group: bool, now: float, messages: int = 1) -> None:
        """A send Telegram accepted at ``now``."""
        self.confirm(self.take(chat_id, group=group, now=now, messages=messages), now)

    def take(self, chat_id: int, *, group: bool, now: float, messages: int = 1) -> Slot:
        """Take the chat's token and hold the windows' places: a send going out at ``now``."""
        slot = Slot(chat_id, group, messages, now)
        if not self.enabled:
            return slot
        self._buckets[chat_id] = (self._tokens(chat_id, now) - 1.0, now)
        if group:
            self._out_groups[chat_id] = self._out_groups.get(chat_id, 0) + messages
        self._out_global += messages
        if len(self._buckets) > 10_000:  # bounded memory: forget the oldest chats
            for key in list(self._buckets)[:5000]:
                if key not in self._out_groups:
                    self._buckets.pop(key, None)
                    self._groups.pop(key, None)
        return slot

    def _land(self, slot: Slot) -> None:
        if slot.group:
            left = self._out_groups.get(slot.chat_id, 0) - slot.messages
            if left > 0:
                self._out_groups[slot.chat_id] = left
            else:
                self._out_groups.pop(slot.chat_id, None)
        self._out_global = max(0, self._out_global - slot.messages)

    def confirm(self, slot: Slot, now: float) -> None:
        """Telegram accepted the send: it counts from ``now``, when Telegram said so."""
        if not self.enabled:
            return
        self._land(slot)
        if slot.group:
            self._groups.setdefault(slot.chat_id, deque()).extend([now] * slot.messages)
        self._global.extend([now] * slot.messages)
        # The chat's bucket refills from the answer, not from when the call left.
        tokens, _ = self._buckets.get(slot.chat_id, (0.0, now))
        self._buckets[slot.chat_id] = (tokens, max(now, slot.at))

    def release(self, slot: Slot) -> None:
        """The send did not reach the chat (refused, 429, failed): it counts for nothing."""
        if not self.enabled:
            return
        self._land(slot)
        now = self.clock()
        tokens = min(float(PER_CHAT_BURST), self._tokens(slot.chat_id, now) + 1.0)
        self._buckets[slot.chat_id] = (tokens, now)

    async def reserve(self, chat_id: int, *, group: bool, messages: int = 1) -> Slot:
        """Sleep the short gap, then hold a slot; `RateLimited` for a long gap."""
        for _ in range(100):  # bounded: in-flight sends and other coroutines move the gap
            now = self.clock()
            delay = self.delay(chat_id, group=group, now=now, messages=messages)
            if delay <= 0:
                return self.take(chat_id, group=group, now=now, messages=messages)
            if delay > self.max_wait:
                raise RateLimited(delay)
            await asyncio.sleep(delay)
        return self.take(chat_id, group=group, now=self.clock(), messages=messages)

    @contextlib.asynccontextmanager
    async def sending(self, chat_id: int, *, group: bool, messages: int = 1) -> AsyncIterator[Slot]:
        """Around one Bot API send: the slot is kept if the body returns, freed if it raises
        (kept still if the body marked it `Slot.maybe_delivered`)."""
        slot = await self.reserve(chat_id, group=group, messages=messages)
        try:
            yield slot
        except BaseException:
            if slot.maybe_delivered:
                self.confirm(slot, self.clock())
            else:
                self.release(slot)
            raise
        self.confirm(slot, self.clock())

    async def wait(self, chat_id: int, *, group: bool, messages: int = 1) -> None:
        """`reserve`, counted as accepted at once whatever the call's fate (prefer `sending`)."""
        slot = await self.reserve(chat_id, group=group, messages=messages)
        self.confirm(slot, slot.at)


def _window_wait(  # noqa: PLR0917 - one call per window, each argument a number
    window: deque[float], out: int, messages: int, limit: int, span: float, now: float
) -> float:
    """Seconds until ``messages`` more fit beside ``window`` (accepted) and ``out`` (in flight)."""
    _trim(window, now - span)
    over = len(window) + out + messages - limit
    if over <= 0:
        return 0.0
    if over > len(window):
        # In flight alone fills it (or one album is over the limit): wait for answers.
        return IN_FLIGHT_POLL if out else span
    return window[over - 1] + span - now


def _trim(window: deque[float], before: float) -> None:
    while window and window[0] < before:
        window.popleft()
