"""One fetch in flight per key: the same link in five chats downloads once.

The first caller for a key does the work; the others wait for it, then read
the link cache again (which now answers by file_id). Locks are dropped when
nobody holds or waits for them, so the map stays as small as the work in
flight.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import attrs


@attrs.define
class Flights:
    _locks: dict[str, asyncio.Lock] = attrs.field(factory=dict, init=False)
    _users: dict[str, int] = attrs.field(factory=dict, init=False)

    @contextlib.asynccontextmanager
    async def hold(self, key: str) -> AsyncIterator[None]:
        lock = self._locks.setdefault(key, asyncio.Lock())
        self._users[key] = self._users.get(key, 0) + 1
        try:
            async with lock:
                yield
        finally:
            self._users[key] -= 1
            if self._users[key] == 0:
                del self._users[key]
                del self._locks[key]

    def __len__(self) -> int:
        return len(self._locks)
