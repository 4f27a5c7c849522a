"""The queue's two front doors: `TaskQueue` on the pool, `OneConnection` for sync code.

Every method runs one operation of the queue (a plain function of a connection,
beside this module) in a transaction, and logs the burials it made once it
committed. The rules they keep are in the package's docstring (`xbot.storage.queue`).
SQL here is assembled only from this module's constants, never from input
(hence the ``noqa: S608``).
"""

from __future__ import annotations

import builtins
import secrets
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, Final, TypeVar

import apsw
import attrs

from xbot.errors import LeaseLost
from xbot.storage.db import DbPool, read_sync, write_sync
from xbot.storage.group_commit import GroupCommit
from xbot.storage.queue._admin import (
    QueueStats,
    counts_by_kind,
    get_task,
    list_tasks,
    purge_dead,
    read_stats,
    retry_dead,
)
from xbot.storage.queue._chat_holds import hold_chat, move_chat, release_expired_holds
from xbot.storage.queue._dead_letters import (
    Burial,
    bury,
    log_burials,
    queue_notice,
)
from xbot.storage.queue._lease_repair import reclaim, repair
from xbot.storage.queue._rows import (
    COLUMNS,
    FREE,
    Lease,
    Task,
    encode_payload,
    enqueue,
    enqueue_fields,
    task_from_row,
)
from xbot.storage.time_line import LONGEST_DELAY

T = TypeVar("T")

# A write that belongs with a task's progress record (e.g. the link cache entry
# of what was just sent): run inside the record's own transaction.
Effect = Callable[[apsw.Connection], object]

DEFAULT_LEASE: Final = 90.0
# prune_done deletes in chunks so a big backlog of done rows never holds the
# write lock for long; leases interleave between the chunks.
PRUNE_CHUNK: Final = 2000


# --- the operations: plain functions of a connection, run inside a transaction -----------


# The claim, in one statement. It walks chat lanes (one row per chat with
# pending work, naming its head; see migrations_sql/0002_chat_lanes.sql)
# oldest head first and skips chats with a live lease or a hold: one row per
# busy or held chat, whatever their backlogs. Claiming only heads keeps each
# chat in (run_after, id) order; the lane triggers move the head along.
# INDEXED BY: without statistics the planner preferred a full sort. ``+:now``:
# once PRAGMA optimize has gathered STAT4 samples, SQLite re-prepares a
# statement each time a parameter used in a range constraint changes value
# (and :now always does): the claim and its trigger programs were compiled
# again on every call (docs/benchmarks.md, "Queue"). The unary plus hides the value from the
# planner; the plan is pinned by INDEXED BY anyway.
_CLAIM_SQL: Final = f"""
UPDATE tasks SET
    state = 'running', lease_token = :token, lease_expires = :expires,
    attempts = attempts + 1, progressed = 0, updated_at = :now
WHERE state = 'pending' AND id = (
    SELECT l.head_id FROM chat_lanes AS l INDEXED BY chat_lanes_order
    WHERE l.head_run_after <= +:now
      AND NOT EXISTS (
        SELECT 1 FROM tasks AS r INDEXED BY tasks_running_chat
        WHERE r.state = 'running' AND r.chat_id = l.chat_id AND r.lease_expires > +:now)
      AND NOT EXISTS (
        SELECT 1 FROM chat_holds AS h WHERE h.chat_id = l.chat_id AND h.not_before > +:now)
    ORDER BY l.head_run_after, l.head_id
    LIMIT 1)
RETURNING {COLUMNS}
"""  # noqa: S608

_FENCE: Final = "id = :id AND lease_token = :token AND state = 'running'"


Leased = tuple[Task | None, builtins.list[Burial]]


def _lease_next(conn: apsw.Connection, now: float, lease_for: float) -> Leased:
    """The inline repair, then the claim; returns the task and whatever the repair buried."""
    _, buried = repair(conn, now)
    params = {"token": secrets.token_hex(16), "expires": now + lease_for, "now": now}
    # fetchall(), always: an unfinished RETURNING statement keeps the write lock.
    rows = conn.execute(_CLAIM_SQL, params).fetchall()
    return (task_from_row(rows[0]) if rows else None), buried


def _fenced(
    conn: apsw.Connection, lease: Lease, op: str, sets: str, params: dict[str, Any]
) -> Task:
    """One fenced UPDATE; 0 rows matched means someone else holds the task now."""
    sql = f"UPDATE tasks SET {sets} WHERE {_FENCE} RETURNING {COLUMNS}"  # noqa: S608
    rows = conn.execute(sql, {"id": lease.task_id, "token": lease.token, **params}).fetchall()
    if not rows:
        raise LeaseLost(lease.task_id, op)
    return task_from_row(rows[0])


def _heartbeat(conn: apsw.Connection, lease: Lease, now: float, lease_for: float) -> float:
    sets = "lease_expires = :expires, updated_at = :now"
    task = _fenced(conn, lease, "heartbeat", sets, {"expires": now + lease_for, "now": now})
    assert task.lease_expires is not None
    return task.lease_expires


_DONE_SQL: Final = (
    f"UPDATE tasks SET state = 'done', payload = coalesce(:payload, payload), {FREE}"  # noqa: S608
    f" WHERE {_FENCE}"
)


def _mark_done(conn: apsw.Connection, lease: Lease, now: float, payload: str | None = None) -> None:
    # With a payload: the task's last progress record rides on its done mark.
    # No RETURNING: the statement runs to its end inside execute(), and
    # changes() counts the rows it matched itself (never a trigger's).
    params = {"id": lease.task_id, "token": lease.token, "now": now, "payload": payload}
    conn.execute(_DONE_SQL, params)
    if conn.changes() != 1:
        raise LeaseLost(lease.task_id, "mark_done")


def _done_and_lease_next(
    conn: apsw.Connection, lease: Lease, now: float, lease_for: float, payload: str | None = None
) -> Leased:
    _mark_done(conn, lease, now, payload)  # raises before anything is written
    return _lease_next(conn, now, lease_for)


def _reschedule(
    conn: apsw.Connection,
    lease: Lease,
    *,
    now: float,
    delay: float,
    error: str,
    count: bool,
    notice: str | None = None,
) -> tuple[Task, Burial | None]:
    # Out of attempts: that was the last try, so the task dies here rather
    # than being leased once more than it may be.
    sets = f"""attempts = attempts - :give_back,
        state = CASE WHEN attempts - :give_back >= max_attempts THEN 'dead' ELSE 'pending' END,
        run_after = :run_after, last_error = :error, {FREE}"""
    params = {
        "give_back": 0 if count else 1,
        "run_after": now + min(max(0.0, delay), LONGEST_DELAY),
        "error": error,
        "now": now,
    }
    task = _fenced(conn, lease, "reschedule", sets, params)
    if task.state == "dead":
        return task, bury(conn, task, error, now)
    if notice is not None:
        queue_notice(conn, task, notice, now, dedup_key=f"told:{task.id}")
    return task, None


def _dead_letter(
    conn: apsw.Connection,
    lease: Lease,
    now: float,
    error: str,
    op: str,
    *,
    tell: str | None = None,
    untold: str | None = None,
) -> Burial:
    sets = f"state = 'dead', last_error = :error, {FREE}"
    task = _fenced(conn, lease, op, sets, {"error": error, "now": now})
    return bury(conn, task, error, now, tell=tell, untold=untold)


def _replace_payload(conn: apsw.Connection, lease: Lease, payload: str, now: float) -> None:
    sets = "payload = :payload, updated_at = :now"
    _fenced(conn, lease, "replace_payload", sets, {"payload": payload, "now": now})


def _save_progress(
    conn: apsw.Connection,
    lease: Lease,
    now: float,
    payload: str | None,
    effects: tuple[Effect, ...],
) -> None:
    """The payload (if any) and other writes in one transaction, all under the lease.

    Recorded progress: a lease lost after it is not held against the task.
    """
    sets = "payload = coalesce(:payload, payload), progressed = 1, updated_at = :now"
    _fenced(conn, lease, "save_progress", sets, {"payload": payload, "now": now})
    for effect in effects:
        effect(conn)


def _delete(conn: apsw.Connection, lease: Lease) -> None:
    rows = conn.execute(
        f"DELETE FROM tasks WHERE {_FENCE} RETURNING id",  # noqa: S608
        {"id": lease.task_id, "token": lease.token},
    ).fetchall()
    if not rows:
        raise LeaseLost(lease.task_id, "delete")


def _rate_limited(
    conn: apsw.Connection, lease: Lease, now: float, until: float, error: str
) -> Task | None:
    """Hold the chat, then put the task back; None (hold kept) if the lease was lost."""
    until = min(until, now + LONGEST_DELAY)
    row = conn.execute("SELECT chat_id FROM tasks WHERE id = ?", (lease.task_id,)).fetchall()
    if row:
        # The hold stands even if this lease was lost: Telegram said so for the chat.
        until = hold_chat(conn, int(row[0][0]), until)  # type: ignore[arg-type]
    try:
        task, _ = _reschedule(conn, lease, now=now, delay=until - now, error=error, count=False)
    except LeaseLost:
        return None
    return task  # an attempt given back never makes a task dead


def _put_back(conn: apsw.Connection, lease: Lease, now: float, error: str, ambiguous: bool) -> Task:
    """Back to pending in its place (``run_after`` kept: first of its chat again), its
    attempt given back; an ambiguous send counted (``ambiguous_sends``)."""
    sets = f"""attempts = attempts - 1, state = 'pending', last_error = :error,
        ambiguous_sends = ambiguous_sends + :ambiguous, {FREE}"""
    params = {"error": error, "ambiguous": int(ambiguous), "now": now}
    return _fenced(conn, lease, "put_back", sets, params)


def _prune_done_chunk(conn: apsw.Connection, before: float, chunk: int) -> int:
    rows = conn.execute(
        "DELETE FROM tasks WHERE id IN (SELECT id FROM tasks INDEXED BY tasks_done_updated"
        " WHERE state = 'done' AND updated_at < ? LIMIT ?) RETURNING 1",
        (before, chunk),
    )
    return len(rows.fetchall())


# --- the two front doors --------------------------------------------------------------------


@attrs.define
class OneConnection:
    """The queue's transactions on one plain connection, on the caller's thread.

    For sync code (`xbot.standins.queue_sync.SyncQueue`: other processes, tests):
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
    ) -> Task:
        """Add a task; with a ``dedup_key`` already pending or running, return that task."""
        fields = enqueue_fields(
            kind=kind,
            payload=payload,
            chat_id=chat_id,
            now=now,
            run_after=run_after,
            dedup_key=dedup_key,
            max_attempts=max_attempts,
        )
        return await self._write(partial(enqueue, fields=fields))

    async def lease_next(self, now: float, lease_for: float = DEFAULT_LEASE) -> Task | None:
        """Hand back expired leases, then claim the oldest runnable task (or None)."""
        task, buried = await self._write(partial(_lease_next, now=now, lease_for=lease_for))
        log_burials(buried, "lease repair")
        return task

    async def heartbeat(self, lease: Lease, now: float, lease_for: float = DEFAULT_LEASE) -> float:
        """Extend the lease to ``now + lease_for``; returns the new expiry."""
        return await self._write(partial(_heartbeat, lease=lease, now=now, lease_for=lease_for))

    async def mark_done(self, lease: Lease, now: float, *, payload: str | None = None) -> None:
        """Done; with ``payload``, the task's last progress record is written with it."""
        await self._write(partial(_mark_done, lease=lease, now=now, payload=payload))

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
            _done_and_lease_next, lease=lease, now=now, lease_for=lease_for, payload=payload
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
        fn = partial(_save_progress, lease=lease, now=now, payload=payload, effects=effects)
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
        fn = partial(_reschedule, lease=lease, now=now, delay=delay, error=error, notice=notice)
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
        fn = partial(_put_back, lease=lease, now=now, error=error, ambiguous=ambiguous)
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
        fn = partial(_dead_letter, lease=lease, now=now, error=error, op="dead_letter")
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
        fn = partial(_dead_letter, lease=lease, now=now, error=error, op="dead_letter_raw")
        burial = await self._write(partial(fn, tell=tell))
        log_burials([burial], "unreadable payload")
        return burial.task

    async def replace_payload(
        self, lease: Lease, payload: Mapping[str, Any] | str, now: float
    ) -> None:
        """Rewrite a running task's payload (two-phase delivery); the lease goes on."""
        fn = partial(_replace_payload, lease=lease, payload=encode_payload(payload), now=now)
        await self._write(fn)

    async def delete(self, lease: Lease) -> None:
        await self._write(partial(_delete, lease=lease))

    async def hold_chat(self, chat_id: int, until: float) -> float:
        """No task of the chat starts before ``until`` (the later of old and new); returns it."""
        return await self._write(partial(hold_chat, chat_id=chat_id, until=until))

    async def rate_limited(self, lease: Lease, now: float, until: float, error: str) -> Task:
        """Telegram said retry_after: hold the chat and put the task back, attempt not counted.

        The hold is written even when the lease was lost (then `LeaseLost` is raised).
        """
        fn = partial(_rate_limited, lease=lease, now=now, until=until, error=error)
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
            fn = partial(_prune_done_chunk, before=now - older_than, chunk=PRUNE_CHUNK)
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
