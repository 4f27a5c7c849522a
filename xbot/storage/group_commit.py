"""Group commit: concurrent writers share one transaction on the pool.

While one batch is in the database, new operations gather and go together in
the next. A result is handed out only after its
batch committed, so each caller sees what a transaction of its own would have
given (a batch is one serial order of concurrent calls). One thread hop and
one commit then serve several workers; see docs/benchmarks.md ("Queue").

An operation is a plain function of a connection. One that raises an
ordinary exception (`LeaseLost`) before writing anything hands it to its
caller alone; a database error, or an exception after a write, aborts the
batch, and then each operation runs again alone so each caller gets its own
outcome.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, Final, TypeVar

import apsw
import attrs

from xbot.storage.db import DbPool, is_database_error, settle_future

T = TypeVar("T")

# At most this many operations share one transaction: bounds how long a batch
# holds the write lock (a lease costs tens of microseconds).
BATCH_MAX: Final = 64


@attrs.define(eq=False)
class _Op:
    fn: Callable[[apsw.Connection], Any]
    fut: asyncio.Future[Any]


class _BatchAborted(Exception):
    """An operation of a batch raised a database error; the whole batch rolled back."""


def _apply_batch(
    conn: apsw.Connection, fns: builtins.list[Callable[[apsw.Connection], Any]]
) -> builtins.list[tuple[Any, Exception | None]]:
    """The operations one after another; one that fails (LeaseLost) leaves the others.

    The queue's operations raise before they write (a fenced UPDATE that
    matched nothing): such a failure needs nothing undone, so no savepoint
    is paid per operation (two statements, a tenth of a lease). One that
    wrote and then raised (the change counter moved) could only be undone by
    a rollback: the batch aborts and each operation runs again alone.
    """
    outcomes: builtins.list[tuple[Any, Exception | None]] = []
    for fn in fns:
        changes = conn.total_changes()
        try:
            value = fn(conn)
        except Exception as exc:  # handed to its caller, like its own transaction
            if is_database_error(exc) or conn.total_changes() != changes:
                raise _BatchAborted from exc
            outcomes.append((None, exc))
        else:
            outcomes.append((value, None))
    return outcomes


async def _settle(op: _Op, work: Awaitable[object]) -> None:
    try:
        value = await work
    except Exception as exc:  # noqa: BLE001 - handed to the one caller it belongs to
        settle_future(op.fut, None, exc)
    else:
        settle_future(op.fut, value, None)


@attrs.define
class GroupCommit:
    """Writes on a `DbPool`, batched while the database is busy.

    Attributes:
        pool: the open pool; every batch is one ``BEGIN IMMEDIATE`` on it.
    """

    _pool: DbPool
    _ops: builtins.list[_Op] = attrs.field(factory=list, init=False)
    _flusher: asyncio.Task[None] | None = attrs.field(default=None, init=False)
    _direct: bool = attrs.field(default=False, init=False)
    _alone: bool = attrs.field(default=True, init=False)

    async def write(self, fn: Callable[[apsw.Connection], T]) -> T:
        """Run ``fn`` in a write transaction, with what other callers asked meanwhile.

        Group commit: while one batch is in the database, new operations
        gather and go together in the next. A
        result is handed out only after its batch committed, so each caller
        sees what a transaction of its own would have given (a batch is one
        serial order of concurrent calls). One thread hop and one commit then
        serve several workers; see docs/benchmarks.md.

        A caller that was alone last time goes straight to the pool, without
        a flusher task; whoever comes meanwhile waits for the next batch.
        """
        if self._alone and self._flusher is None and not self._direct:
            self._direct = True
            try:
                return await self._pool.write(fn)
            finally:
                self._direct = False
                if self._ops and self._flusher is None:
                    self._flusher = asyncio.create_task(self._flush())
        fut: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._ops.append(_Op(fn, fut))
        if self._flusher is None and not self._direct:
            self._flusher = asyncio.create_task(self._flush())
        return await fut

    async def _flush(self) -> None:
        try:
            while self._ops:
                batch = self._ops[:BATCH_MAX]
                del self._ops[: len(batch)]
                self._alone = len(batch) == 1
                await self._run_batch(batch)
        finally:
            # No await between the last look at _ops and this line: a caller
            # that appends later sees None and starts a new flusher.
            self._flusher = None

    async def _run_batch(self, batch: builtins.list[_Op]) -> None:
        if len(batch) == 1:
            await _settle(batch[0], self._pool.write(batch[0].fn))
            return
        try:
            outcomes = await self._pool.write(partial(_apply_batch, fns=[op.fn for op in batch]))
        except _BatchAborted:
            # A database error rolled the batch back: run each operation alone
            # so each caller gets its own outcome (translated by the pool).
            for op in batch:
                await _settle(op, self._pool.write(op.fn))
            return
        except Exception as failed:  # noqa: BLE001 - BEGIN or COMMIT failed: nothing written
            for op in batch:
                settle_future(op.fut, None, failed)
            return
        for op, (value, exc) in zip(batch, outcomes, strict=True):
            settle_future(op.fut, value, exc)
