"""The bot's own queue, called from sync code: other processes, the CLI's tests, the stateful model.

`SyncQueue` is no second front door: each of its methods is `TaskQueue`'s, run on
`OneConnection` (every operation in a transaction of its own, on the caller's
thread). On one connection nothing ever waits, so the coroutine finishes on its
first step and needs no event loop: ``q.lease_next(now)`` is
``TaskQueue.lease_next`` with the same arguments, burials logged the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import apsw
import attrs

from xbot.storage.queue import OneConnection, TaskQueue

T = TypeVar("T")


def at_once(step: Coroutine[Any, Any, T]) -> T:
    """The value of a coroutine that never waits; one that does is a bug here."""
    try:
        step.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    step.close()
    raise RuntimeError("a queue operation waited on one connection")


@attrs.define
class SyncQueue:
    """`TaskQueue`'s methods, each run to its end at once on one connection.

    One thread at a time per connection.

    Attributes:
        conn: an open, migrated connection (`xbot.storage.db.connect`).
    """

    conn: apsw.Connection
    queue: TaskQueue = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.queue = TaskQueue(OneConnection(self.conn))

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_") or name in ("conn", "queue"):
            raise AttributeError(name)
        method = getattr(self.queue, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            return at_once(method(*args, **kwargs))

        return call
