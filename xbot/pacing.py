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
the call fails: a URL Telegram could not fetch, a 429, a timeout — none of
them reached the chat, so none may delay the next message. A 429 holds the
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

PER_CHAT_INTERVAL = 1.0
GROUP_WINDOW = 60.0
GROUP_MAX = 20
GLOBAL_WINDOW = 1.0
GLOBAL_MAX = 30


@attrs.frozen
class Slot:
    """A send's place in the windows while its call is out.

    Attributes:
        chat_id: where it goes.
        group: whether the group window holds it.
        messages: how many messages it counts as (an album's items).
        at: the stamp it holds in the windows.
        last_before: the chat's last send before this one (restored when freed).
    """

    chat_id: int
    group: bool
    messages: int
    at: float
    last_before: float | None


@attrs.define
class Pacer:
    """Sliding windows of recent sends, per chat and overall.

    Attributes:
        enabled: off in benchmarks against a stand-in with its limits off.
        max_wait: the longest sleep; beyond it the chat is held through the queue.
    """

    enabled: bool = True
    max_wait: float = 3.0
    clock: Callable[[], float] = time.monotonic
    _last: dict[int, float] = attrs.field(factory=dict, init=False)
    _groups: dict[int, deque[float]] = attrs.field(factory=dict, init=False)
    _global: deque[float] = attrs.field(factory=deque, init=False)
    _holds: dict[int, float] = attrs.field(factory=dict, init=False)

    def hold(self, chat_id: int, until: float) -> None:
        """Telegram said retry_after for this chat: nothing goes there before `until`.

        The queue holds the chat's tasks durably; this holds what the process
        sends meanwhile on its own (the chat-action refresher, a status edit).
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

    def delay(self, chat_id: int, *, group: bool, now: float) -> float:
        """Seconds until one more message to `chat_id` stays inside every limit."""
        wait = self.held(chat_id, now)  # Telegram's word counts even with pacing off
        if not self.enabled:
            return wait
        last = self._last.get(chat_id)
        if last is not None:
            wait = max(wait, last + PER_CHAT_INTERVAL - now)
        if group:
            window = self._groups.get(chat_id)
            if window is not None:
                _trim(window, now - GROUP_WINDOW)
                if len(window) >= GROUP_MAX:
                    wait = max(wait, window[len(window) - GROUP_MAX] + GROUP_WINDOW - now)
        _trim(self._global, now - GLOBAL_WINDOW)
        if len(self._global) >= GLOBAL_MAX:
            wait = max(wait, self._global[len(self._global) - GLOBAL_MAX] + GLOBAL_WINDOW - now)
        return max(wait, 0.0)

    def record(self, chat_id: int, *, group: bool, now: float, messages: int = 1) -> Slot:
        """Count a send at ``now`` (a reservation until `confirm` or `release`)."""
        slot = Slot(chat_id, group, messages, now, self._last.get(chat_id))
        if not self.enabled:
            return slot
        self._last[chat_id] = now
        if group:
            window = self._groups.setdefault(chat_id, deque())
            window.extend([now] * messages)
        self._global.extend([now] * messages)
        if len(self._last) > 10_000:  # bounded memory: forget the oldest chats
            for key in list(self._last)[:5000]:
                self._last.pop(key, None)
                self._groups.pop(key, None)
        return slot

    def confirm(self, slot: Slot, now: float) -> None:
        """Telegram accepted the send: it counts from ``now``, when Telegram said so."""
        if not self.enabled:
            return
        self._unstamp(slot)
        self.record(slot.chat_id, group=slot.group, now=max(now, slot.at), messages=slot.messages)

    def release(self, slot: Slot) -> None:
        """The send did not reach the chat (refused, 429, failed): it counts for nothing."""
        if not self.enabled:
            return
        self._unstamp(slot)
        if self._last.get(slot.chat_id) == slot.at:
            if slot.last_before is None:
                self._last.pop(slot.chat_id, None)
            else:
                self._last[slot.chat_id] = slot.last_before

    def _unstamp(self, slot: Slot) -> None:
        windows = [self._global]
        if slot.group and slot.chat_id in self._groups:
            windows.append(self._groups[slot.chat_id])
        for window in windows:
            for _ in range(slot.messages):
                try:
                    window.remove(slot.at)
                except ValueError:  # trimmed already, or forgotten: nothing left to free
                    break

    async def reserve(self, chat_id: int, *, group: bool, messages: int = 1) -> Slot:
        """Sleep the short gap, then hold a slot; `RateLimited` for a long gap."""
        for _ in range(5):  # bounded: another coroutine may take the slot we waited for
            now = self.clock()
            delay = self.delay(chat_id, group=group, now=now)
            if delay <= 0:
                return self.record(chat_id, group=group, now=now, messages=messages)
            if delay > self.max_wait:
                raise RateLimited(delay)
            await asyncio.sleep(delay)
        return self.record(chat_id, group=group, now=self.clock(), messages=messages)

    @contextlib.asynccontextmanager
    async def sending(self, chat_id: int, *, group: bool, messages: int = 1) -> AsyncIterator[Slot]:
        """Around one Bot API send: the slot is kept if the body returns, freed if it raises."""
        slot = await self.reserve(chat_id, group=group, messages=messages)
        try:
            yield slot
        except BaseException:
            self.release(slot)
            raise
        self.confirm(slot, self.clock())

    async def wait(self, chat_id: int, *, group: bool, messages: int = 1) -> None:
        """`reserve`, counted at once whatever the call's fate (prefer `sending`)."""
        await self.reserve(chat_id, group=group, messages=messages)


def _trim(window: deque[float], before: float) -> None:
    while window and window[0] < before:
        window.popleft()
