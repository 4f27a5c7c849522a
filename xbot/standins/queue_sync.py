"""The queue's operations on one connection, each in its own transaction.

For other processes and tests; the bot uses `xbot.storage.queue.TaskQueue`, which
batches the very same functions on the pool.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, TypeVar

import apsw
import attrs

from xbot.storage.chat_holds import _hold_chat
from xbot.storage.db import write_sync
from xbot.storage.dead_letters import log_burials
from xbot.storage.lease_repair import _reclaim, _repair
from xbot.storage.queue import (
    DEFAULT_LEASE,
    _dead_letter,
    _delete,
    _heartbeat,
    _lease_next,
    _mark_done,
    _replace_payload,
    _reschedule,
    _save_progress,
)
from xbot.storage.queue_admin import QueueStats, _get, _stats
from xbot.storage.task_rows import Lease, Task, _encode, _enqueue, _enqueue_fields

T = TypeVar("T")


@attrs.define
class SyncQueue:
    """The same operations on one connection, each in its own transaction.

    For other processes, the CLI and tests: one thread at a time per connection.

    Attributes:
        conn: an open, migrated connection (`xbot.storage.db.connect`).
    """

    conn: apsw.Connection

    def _write(self, fn: Callable[[apsw.Connection], T]) -> T:
        return write_sync(self.conn, fn)

    def enqueue(
        self,
        kind: str,
        payload: Mapping[str, Any] | str,
        chat_id: int,
        *,
        now: float,
        run_after: float | None = None,
        dedup_key: str | None = None,
        max_attempts: int = 5,
    ) -> Task:
        fields = _enqueue_fields(
            kind=kind,
            payload=payload,
            chat_id=chat_id,
            now=now,
            run_after=run_after,
            dedup_key=dedup_key,
            max_attempts=max_attempts,
        )
        return self._write(partial(_enqueue, fields=fields))

    def lease_next(self, now: float, lease_for: float = DEFAULT_LEASE) -> Task | None:
        task, buried = self._write(partial(_lease_next, now=now, lease_for=lease_for))
        log_burials(buried, "lease repair")
        return task

    def heartbeat(self, lease: Lease, now: float, lease_for: float = DEFAULT_LEASE) -> float:
        return self._write(partial(_heartbeat, lease=lease, now=now, lease_for=lease_for))

    def mark_done(self, lease: Lease, now: float) -> None:
        self._write(partial(_mark_done, lease=lease, now=now))

    def reschedule(
        self, lease: Lease, now: float, delay: float, error: str, count_attempt: bool = True
    ) -> Task:
        fn = partial(_reschedule, lease=lease, now=now, delay=delay, error=error)
        task, burial = self._write(partial(fn, count=count_attempt))
        log_burials([burial] if burial else [], "out of attempts")
        return task

    def dead_letter(self, lease: Lease, now: float, error: str) -> Task:
        fn = partial(_dead_letter, lease=lease, now=now, error=error, op="dead_letter")
        burial = self._write(fn)
        log_burials([burial], "dead letter")
        return burial.task

    def replace_payload(self, lease: Lease, payload: Mapping[str, Any] | str, now: float) -> None:
        self._write(partial(_replace_payload, lease=lease, payload=_encode(payload), now=now))

    def delete(self, lease: Lease) -> None:
        self._write(partial(_delete, lease=lease))

    def hold_chat(self, chat_id: int, until: float) -> float:
        return self._write(partial(_hold_chat, chat_id=chat_id, until=until))

    def repair_expired(self, now: float) -> int:
        written, buried = self._write(partial(_repair, now=now))
        log_burials(buried, "sweep repair")
        return len(written)

    def reclaim_orphans(self, now: float) -> int:
        written, buried = self._write(partial(_reclaim, now=now))
        log_burials(buried, "startup reclaim")
        return len(written)

    def save_progress(self, lease: Lease, now: float, payload: str | None = None) -> None:
        self._write(partial(_save_progress, lease=lease, now=now, payload=payload, effects=()))

    def stats(self, now: float) -> QueueStats:
        return self._write(partial(_stats, now=now))

    def get(self, task_id: int) -> Task | None:
        return _get(self.conn, task_id)
