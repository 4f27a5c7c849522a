"""Staying inside Telegram's published limits before it complains.

About 1 message/s per chat (short bursts pass), 20 messages/min per group,
30 messages/s overall. `Pacer.delay` is pure over an injected clock; `wait`
sleeps only for short gaps. A wait longer than `max_wait` raises
`RateLimited`, so the worker hands the chat to the queue's "not before"
instead of sleeping while it holds a lease.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable

import attrs

from xbot.errors import RateLimited

PER_CHAT_INTERVAL = 1.0
GROUP_WINDOW = 60.0
GROUP_MAX = 20
GLOBAL_WINDOW = 1.0
GLOBAL_MAX = 30


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

    def record(self, chat_id: int, *, group: bool, now: float, messages: int = 1) -> None:
        if not self.enabled:
            return
        self._last[chat_id] = now
        if group:
            window = self._groups.setdefault(chat_id, deque())
            window.extend([now] * messages)
        self._global.extend([now] * messages)
        if len(self._last) > 10_000:  # bounded memory: forget the oldest chats
            for key in list(self._last)[:5000]:
                self._last.pop(key, None)
                self._groups.pop(key, None)

    async def wait(self, chat_id: int, *, group: bool, messages: int = 1) -> None:
        """Sleep the short gap before sending, or raise `RateLimited` for a long one."""
        for _ in range(5):  # bounded: another coroutine may take the slot we waited for
            now = self.clock()
            delay = self.delay(chat_id, group=group, now=now)
            if delay <= 0:
                self.record(chat_id, group=group, now=now, messages=messages)
                return
            if delay > self.max_wait:
                raise RateLimited(delay)
            await asyncio.sleep(delay)
        self.record(chat_id, group=group, now=self.clock(), messages=messages)


def _trim(window: deque[float], before: float) -> None:
    while window and window[0] < before:
        window.popleft()
