"""The queue's two front doors: `TaskQueue` on the pool, `OneConnection` for sync code.

Every method runs one operation of the queue (a plain function of a connection:
`_lease`, `_lost_leases`, `_chat_holds`, `_admin`, `_rows`) in a write or read
transaction, and logs the burials it made once that committed (`log_burials`).
No SQL here. The rules they keep are in the package's docstring (`xbot.storage.queue`).
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, Final, TypeVar

import apsw
import attrs

from xbot.errors import LeaseLost
from xbot.storage.db import DbPool, read_sync, write_sync
from xbot.storage.group_commit import GroupCommit
from xbot.storage.queue import _lease
from xbot.storage.queue._admin import (
    QueueStats,
    counts_by_kind,
    get_task,
    list_tasks,
    prune_done_chunk,
    purge_dead,
    read_stats,
    retry_dead,
)
from xbot.storage.queue._chat_holds import hold_chat, move_chat, release_expired_holds
from xbot.storage.queue._dead_letters import log_burials
from xbot.storage.queue._lease import Effect
from xbot.storage.queue._lost_leases import reclaim, repair
from xbot.storage.queue._rows import Lease, Task, encode_payload, enqueue, enqueue_fields

T = TypeVar("T")

DEFAULT_LEASE: Final = 90.0
# prune_done deletes in chunks so a big backlog of done rows never holds the
# write lock for long; leases interleave between the chunks.
PRUNE_CHUNK: Final = 2000


@attrs.define
class OneConnection:
    """The queue's transactions on one plain connection, on the caller's thread.

    For sync code (`standins.queue_sync.SyncQueue`: other processes, tests):
    each operation in a transaction of its own. The methods are coroutines only so
    that `TaskQueue`'s one front door runs on them too; none of them ever waits.

    Attributes:
        conn: an open, migrated connection (`xbot.storage.db.connect`).
    """

    conn: apsw.Connection

    async def write(self, fn: Callable[[apsw.Connection], T]) -> T:
        return write_sync(self.conn, fn)

    async def read(self, fn: Callable[[apsw.Connection], T]) -> T:
        return read_sync(self.conn, fn)

    async def run(self, fn: Callable[[apsw.Connection], T]) -> T:
        return fn(self.conn)


@attrs.define
class TaskQueue:
    """The queue on the asyncio pool, as the bot uses it (or on `OneConnection`).

    Attributes:
        pool: the open `DbPool`; concurrent writes share a transaction (`GroupCommit`).
            On `OneConnection` nothing is concurrent and each write is its own.
    """

    _pool: DbPool | OneConnection
    _commits: GroupCommit | OneConnection = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        pool = self._pool
        self._commits = GroupCommit(pool) if isinstance(pool, DbPool) else pool

    async def _write(self, fn: Callable[[apsw.Connection], T]) -> T:
        """Run ``fn`` in a write transaction, batched with concurrent callers."""
        return await self._commits.write(fn)

    async def enqueue(
        self,
        kind: str,
        payload: Mapping[str, Any] | str,
        chat_id: int,
        *,
        now: float,
        run_after: float | None = None,
        dedup_key: str | None = None,
        max_attempts: int = 5,
        user_id: int | None = None,
    ) -> Task:
        """Add a task; with a ``dedup_key`` already pending or running, return that task.

        ``user_id``: who asked for it (their leases are bounded by `USER_LEASES`).
        """
        fields = enqueue_fields(
            kind=kind,
            payload=payload,
            chat_id=chat_id,
            now=now,
            run_after=run_after,
            dedup_key=dedup_key,
            max_attempts=max_attempts,
            user_id=user_id,
        )
        return await self._write(partial(enqueue, fields=fields))

    async def lease_next(self, now: float, lease_for: float = DEFAULT_LEASE) -> Task | None:
        """Hand back expired leases, then claim the oldest runnable task (or None)."""
        task, buried = await self._write(partial(_lease.lease_next, now=now, lease_for=lease_for))
        log_burials(buried, "lease repair")
        return task

    async def heartbeat(self, lease: Lease, now: float, lease_for: float = DEFAULT_LEASE) -> float:
        """Extend the lease to ``now + lease_for``; returns the new expiry."""
        return await self._write(
            partial(_lease.heartbeat, lease=lease, now=now, lease_for=lease_for)
        )

    async def mark_done(self, lease: Lease, now: float, *, payload: str | None = None) -> None:
        """Done; with ``payload``, the task's last progress record is written with it."""
        await self._write(partial(_lease.mark_done, lease=lease, now=now, payload=payload))

    async def mark_done_and_lease_next(
        self,
        lease: Lease,
        now: float,
        lease_for: float = DEFAULT_LEASE,
        *,
        payload: str | None = None,
    ) -> Task | None:
        """`mark_done`, then `lease_next`, in one transaction (how a worker goes on).

        A lost lease writes and leases nothing (`LeaseLost`).
        """
        fn = partial(
            _lease.done_and_lease_next, lease=lease, now=now, lease_for=lease_for, payload=payload
        )
        task, buried = await self._write(fn)
        log_burials(buried, "lease repair")
        return task

    async def save_progress(
        self,
        lease: Lease,
        now: float,
        *,
        payload: str | None = None,
        effects: tuple[Effect, ...] = (),
    ) -> None:
        """Record progress (the payload, if given) and ``effects`` in one fenced transaction."""
        fn = partial(_lease.save_progress, lease=lease, now=now, payload=payload, effects=effects)
        await self._write(fn)

    async def reschedule(
        self,
        lease: Lease,
        now: float,
        delay: float,
        error: str,
        count_attempt: bool = True,
        *,
        notice: str | None = None,
    ) -> Task:
        """Back to pending at ``now + delay``; dead instead if that was the last attempt.

        ``count_attempt=False`` gives back the attempt counted at lease time.
        Dead (out of attempts): its notice is queued in the same transaction.
        ``notice`` (a notice payload): queued with the retry, in the same
        transaction, once per task (the outage's "I will send this when it is back").
        """
        fn = partial(
            _lease.reschedule, lease=lease, now=now, delay=delay, error=error, notice=notice
        )
        task, burial = await self._write(partial(fn, count=count_attempt))
        log_burials([burial] if burial else [], "out of attempts")
        return task

    async def put_back(
        self, lease: Lease, now: float, error: str, *, ambiguous: bool = False
    ) -> Task:
        """Telegram unreachable: pending again in its place, no attempt counted.

        Its ``run_after`` is kept, so it stays first of its chat and the chat's
        order holds when the backlog drains; ``ambiguous`` counts a send that may
        have reached the chat (a timeout) in ``ambiguous_sends``.
        """
        fn = partial(_lease.put_back, lease=lease, now=now, error=error, ambiguous=ambiguous)
        return await self._write(fn)

    async def dead_letter(
        self,
        lease: Lease,
        now: float,
        error: str,
        *,
        tell: str | None = None,
        untold: str | None = None,
    ) -> Task:
        """Dead now; its notice queued in the same transaction.

        ``tell``: the reason in the chat's words (default ``error``). ``untold``:
        why no notice goes (the chat is gone; the task told the chat itself).
        """
        fn = partial(_lease.dead_letter, lease=lease, now=now, error=error, op="dead_letter")
        burial = await self._write(partial(fn, tell=tell, untold=untold))
        log_burials([burial], "dead letter")
        return burial.task

    async def dead_letter_raw(
        self, lease: Lease, now: float, error: str, *, tell: str | None = None
    ) -> Task:
        """Dead-letter a task whose payload does not parse.

        The returned row names it (id, chat, kind); its notice names the post
        from what `xbot.tasks.payloads.payload_identity` can read of the payload.
        """
        fn = partial(_lease.dead_letter, lease=lease, now=now, error=error, op="dead_letter_raw")
        burial = await self._write(partial(fn, tell=tell))
        log_burials([burial], "unreadable payload")
        return burial.task

    async def replace_payload(
        self, lease: Lease, payload: Mapping[str, Any] | str, now: float
    ) -> None:
        """Rewrite a running task's payload (two-phase delivery); the lease goes on."""
        fn = partial(_lease.replace_payload, lease=lease, payload=encode_payload(payload), now=now)
        await self._write(fn)

    async def delete(self, lease: Lease) -> None:
        await self._write(partial(_lease.delete, lease=lease))

    async def hold_chat(self, chat_id: int, until: float) -> float:
        """No task of the chat starts before ``until`` (the later of old and new); returns it."""
        return await self._write(partial(hold_chat, chat_id=chat_id, until=until))

    async def rate_limited(self, lease: Lease, now: float, until: float, error: str) -> Task:
        """Telegram said retry_after: hold the chat and put the task back, attempt not counted.

        The hold is written even when the lease was lost (then `LeaseLost` is raised).
        """
        fn = partial(_lease.rate_limited, lease=lease, now=now, until=until, error=error)
        task = await self._write(fn)
        if task is None:
            raise LeaseLost(lease.task_id, "rate_limited")
        return task

    async def release_expired_holds(self, now: float) -> int:
        return await self._write(partial(release_expired_holds, now=now))

    async def repair_expired(self, now: float) -> int:
        """Hand expired leases back (`judge_lost_lease`); returns how many."""
        written, buried = await self._write(partial(repair, now=now))
        log_burials(buried, "sweep repair")
        return len(written)

    async def reclaim_orphans(self, now: float) -> int:
        """At startup, under the instance lock: hand back every lease, expired or not.

        A process death is not the task's failure: the attempt is given back
        and the loss judged by `judge_lost_lease`, so a task that kills the
        process every time still dies, with its notice, and one caught in a
        crash loop does not.
        """
        written, buried = await self._write(partial(reclaim, now=now))
        log_burials(buried, "startup reclaim")
        return len(written)

    async def prune_done(self, now: float, older_than: float = 86400.0) -> int:
        """Delete done tasks last touched before ``now - older_than``, in short chunks."""
        total = 0
        while True:
            fn = partial(prune_done_chunk, before=now - older_than, chunk=PRUNE_CHUNK)
            n = await self._write(fn)
            total += n
            if n < PRUNE_CHUNK:
                return total

    async def stats(self, now: float) -> QueueStats:
        return await self._pool.read(partial(read_stats, now=now))

    async def counts_by_kind(self) -> dict[tuple[str, str], int]:
        """(kind, state) -> tasks, for the states still in the queue (not done)."""
        return await self._pool.read(counts_by_kind)

    async def list(
        self, state: str | None = None, chat_id: int | None = None, limit: int = 50
    ) -> builtins.list[Task]:
        """Newest first, filtered by state and/or chat."""
        return await self._pool.read(partial(list_tasks, state=state, chat_id=chat_id, limit=limit))

    async def get(self, task_id: int) -> Task | None:
        return await self._pool.run(partial(get_task, task_id=task_id))

    async def retry(self, task_id: int, now: float) -> bool:
        """A dead task back to pending with fresh attempts.

        False if it is not dead, or a live task with its dedup key does its job.
        """
        return await self._write(partial(retry_dead, task_id=task_id, now=now))

    async def purge_dead(self, now: float, older_than: float | None = None) -> int:
        """Delete dead tasks (those older than ``older_than`` seconds, if given)."""
        return await self._write(partial(purge_dead, now=now, older_than=older_than))

    async def move_chat(self, old_chat_id: int, new_chat_id: int) -> int:
        fn = partial(move_chat, old_chat_id=old_chat_id, new_chat_id=new_chat_id)
        return await self._write(fn)
