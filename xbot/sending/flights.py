"""One piece of work in flight per key, the others waiting their turn.

The same link in five chats downloads once: the first caller for a link's
key does the work; the others wait for it, then read the link cache again
(which now answers by file_id). The `Sender` keys its Bot API calls by chat
the same way. Locks are dropped when nobody holds or waits for them, so the
map stays as small as the work in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Hashable

import attrs


@attrs.define
class Flights:
    _locks: dict[Hashable, asyncio.Lock] = attrs.field(factory=dict, init=False)
    _users: dict[Hashable, int] = attrs.field(factory=dict, init=False)

    def busy(self, key: Hashable) -> bool:
        """Someone holds or waits for ``key``."""
        return key in self._users

    @contextlib.asynccontextmanager
    async def hold(self, key: Hashable) -> AsyncIterator[None]:
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
