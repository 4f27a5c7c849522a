"""The rows outside any lease: the operator's queries and the sweep's pruning of done rows.

Stats, list, get, retry and purge of dead letters, and `prune_done_chunk`. Plain
functions of a connection, as in `_lease`; `TaskQueue` (`_task_queue`) runs them.
SQL here is assembled only from this module's constants, never from input (hence
the ``noqa: S608``).
"""

from __future__ import annotations

import builtins
from typing import Any, Final

import apsw
import attrs

from xbot.storage.queue._rows import COLUMNS, FREE, STATES, Task, task_from_row


@attrs.frozen
class QueueStats:
    """What an operator asks first.

    Attributes:
        counts_by_state: every state, with 0 for an empty one.
        oldest_pending_age: seconds the most overdue pending task has been
            runnable (``now - run_after``, at least 0); None when none is pending.
        dead: dead letters waiting for an operator.
        held_chats: chats on hold (Telegram's retry_after) at ``now``.
    """

    counts_by_state: dict[str, int]
    oldest_pending_age: float | None
    dead: int
    held_chats: int


def _scalar(conn: apsw.Connection, sql: str, params: tuple[Any, ...] = ()) -> Any:
    return conn.execute(sql, params).fetchall()[0][0]


# Each state is counted on its own partial index (tasks_chat_pending,
# tasks_running_chat, tasks_done_updated, tasks_dead_updated): the state
# must be a literal for SQLite to use a partial index, so one statement each.
_COUNT_SQL: Final = {
    state: f"SELECT count(*) FROM tasks WHERE state = '{state}'"  # noqa: S608
    for state in STATES
}


def read_stats(conn: apsw.Connection, now: float) -> QueueStats:
    counts = {state: int(_scalar(conn, sql)) for state, sql in _COUNT_SQL.items()}
    # A lane's head is its chat's first pending task by (run_after, id), so
    # the oldest head is the oldest pending task: one seek in chat_lanes_order.
    oldest = _scalar(conn, "SELECT min(head_run_after) FROM chat_lanes")
    age = None if oldest is None else max(0.0, now - float(oldest))
    held = int(_scalar(conn, "SELECT count(*) FROM chat_holds WHERE not_before > ?", (now,)))
    return QueueStats(counts, age, counts["dead"], held)


# The same partial indexes, by kind: every state but done (done rows are what the
# sweep prunes; their count is the metrics' running total of finished tasks instead).
_KIND_SQL: Final = {
    state: f"SELECT kind, count(*) FROM tasks WHERE state = '{state}' GROUP BY kind"  # noqa: S608
    for state in STATES
    if state != "done"
}


def counts_by_kind(conn: apsw.Connection) -> dict[tuple[str, str], int]:
    """(kind, state) -> tasks, for every live state (pending, running, dead)."""
    return {
        (str(kind), state): int(n or 0)
        for state, sql in _KIND_SQL.items()
        for kind, n in conn.execute(sql).fetchall()
    }


def list_tasks(
    conn: apsw.Connection, state: str | None, chat_id: int | None, limit: int
) -> builtins.list[Task]:
    where: builtins.list[str] = []
    params: builtins.list[object] = []
    if state in STATES:
        # A literal, so the state's partial index serves it (tasks_dead_updated …).
        where.append(f"state = '{state}'")
    elif state is not None:
        where.append("state = ?")
        params.append(state)
    if chat_id is not None:
        where.append("chat_id = ?")
        params.append(chat_id)
    clause = f"WHERE {' AND '.join(where)}" if where else ""
    # Newest first; for done and dead, their (updated_at) index serves the order.
    order = "updated_at DESC, id DESC" if state is not None else "id DESC"
    sql = f"SELECT {COLUMNS} FROM tasks {clause} ORDER BY {order} LIMIT ?"  # noqa: S608
    return [task_from_row(r) for r in conn.execute(sql, (*params, limit)).fetchall()]


def get_task(conn: apsw.Connection, task_id: int) -> Task | None:
    rows = conn.execute(f"SELECT {COLUMNS} FROM tasks WHERE id = ?", (task_id,)).fetchall()  # noqa: S608
    return task_from_row(rows[0]) if rows else None


def retry_dead(conn: apsw.Connection, task_id: int, now: float) -> bool:
    # If a live task with the same dedup key already does this job, leave the dead one.
    rows = conn.execute(
        f"""UPDATE tasks SET state = 'pending', attempts = 0, lost_leases = 0,
               run_after = :now, {FREE}
           WHERE id = :id AND state = 'dead' AND (dedup_key IS NULL OR NOT EXISTS (
               SELECT 1 FROM tasks AS o WHERE o.dedup_key = tasks.dedup_key
               AND o.state IN ('pending', 'running')))
           RETURNING 1""",  # noqa: S608
        {"id": task_id, "now": now},
    ).fetchall()
    return bool(rows)


def purge_dead(conn: apsw.Connection, now: float, older_than: float | None) -> int:
    before = float("inf") if older_than is None else now - older_than
    rows = conn.execute(
        "DELETE FROM tasks WHERE state = 'dead' AND updated_at < ? RETURNING 1", (before,)
    )
    return len(rows.fetchall())


def prune_done_chunk(conn: apsw.Connection, before: float, chunk: int) -> int:
    rows = conn.execute(
        "DELETE FROM tasks WHERE id IN (SELECT id FROM tasks INDEXED BY tasks_done_updated"
        " WHERE state = 'done' AND updated_at < ? LIMIT ?) RETURNING 1",
        (before, chunk),
    )
    return len(rows.fetchall())
