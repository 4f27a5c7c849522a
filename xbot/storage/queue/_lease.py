"""A task's lease: the claim in one statement, and every write-back fenced by its token.

Plain functions of a connection, each run inside a transaction by the front doors
(`_task_queue`). The claim stamps a random token and an expiry; every later write
matches id, token and ``state = 'running'``, so a holder whose lease was handed
to someone else matches no row and gets `LeaseLost`, never a silent 0-row update.
SQL here is assembled only from this module's constants, never from input (hence
the ``noqa: S608``).
"""

from __future__ import annotations

import builtins
import secrets
from collections.abc import Callable
from typing import Any, Final

import apsw

from xbot.errors import LeaseLost
from xbot.storage.queue._chat_holds import hold_chat
from xbot.storage.queue._dead_letters import Burial, bury, queue_notice
from xbot.storage.queue._lost_leases import repair
from xbot.storage.queue._rows import COLUMNS, FENCE, FREE, Lease, Task, task_from_row
from xbot.storage.time_line import clamp_due

# A write that belongs with a task's progress record (e.g. the link cache entry
# of what was just sent): run inside the record's own transaction.
Effect = Callable[[apsw.Connection], object]


# How many live leases one user's tasks may hold at once, across every chat: the
# rest of their work waits (in each chat's order) while other users' runs. Two,
# not one: a user's private chat and a group they share with others each make
# progress; more would let one account pin the workers with slow links.
USER_LEASES: Final = 2

# The claim, in one statement. It walks chat lanes (one row per chat with
# pending work, naming its head; see migrations_sql/0002_chat_lanes.sql)
# oldest head first and skips chats with a live lease or a hold: one row per
# busy or held chat, whatever their backlogs. Claiming only heads keeps each
# chat in (run_after, id) order; the lane triggers move the head along. A head
# whose user holds :per_user live leases waits too (its chat with it, keeping the
# chat's order); the count walks tasks_running_chat, the live leases (a handful),
# and a head with no user (the bot's own work) matches no lease and never waits.
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
      AND (SELECT count(*) FROM tasks AS u INDEXED BY tasks_running_chat
           WHERE u.state = 'running' AND u.lease_expires > +:now
             AND u.user_id = (SELECT t.user_id FROM tasks AS t WHERE t.id = l.head_id)
          ) < :per_user
    ORDER BY l.head_run_after, l.head_id
    LIMIT 1)
RETURNING {COLUMNS}
"""  # noqa: S608


Leased = tuple[Task | None, builtins.list[Burial]]


def lease_next(
    conn: apsw.Connection, now: float, lease_for: float, per_user: int = USER_LEASES
) -> Leased:
    """The inline repair, then the claim; returns the task and whatever the repair buried."""
    _, buried = repair(conn, now)
    params = {
        "token": secrets.token_hex(16),
        "expires": now + lease_for,
        "now": now,
        "per_user": per_user,
    }
    # fetchall(), always: an unfinished RETURNING statement keeps the write lock.
    rows = conn.execute(_CLAIM_SQL, params).fetchall()
    return (task_from_row(rows[0]) if rows else None), buried


def _fenced(
    conn: apsw.Connection, lease: Lease, op: str, sets: str, params: dict[str, Any]
) -> Task:
    """One fenced UPDATE; 0 rows matched means someone else holds the task now."""
    sql = f"UPDATE tasks SET {sets} WHERE {FENCE} RETURNING {COLUMNS}"  # noqa: S608
    rows = conn.execute(sql, {"id": lease.task_id, "token": lease.token, **params}).fetchall()
    if not rows:
        raise LeaseLost(lease.task_id, op)
    return task_from_row(rows[0])


def heartbeat(conn: apsw.Connection, lease: Lease, now: float, lease_for: float) -> float:
    sets = "lease_expires = :expires, updated_at = :now"
    task = _fenced(conn, lease, "heartbeat", sets, {"expires": now + lease_for, "now": now})
    assert task.lease_expires is not None
    return task.lease_expires


_DONE_SQL: Final = (
    f"UPDATE tasks SET state = 'done', payload = coalesce(:payload, payload), {FREE}"  # noqa: S608
    f" WHERE {FENCE}"
)


def mark_done(conn: apsw.Connection, lease: Lease, now: float, payload: str | None = None) -> None:
    # With a payload: the task's last progress record rides on its done mark.
    # No RETURNING: the statement runs to its end inside execute(), and
    # changes() counts the rows it matched itself (never a trigger's).
    params = {"id": lease.task_id, "token": lease.token, "now": now, "payload": payload}
    conn.execute(_DONE_SQL, params)
    if conn.changes() != 1:
        raise LeaseLost(lease.task_id, "mark_done")


def done_and_lease_next(
    conn: apsw.Connection, lease: Lease, now: float, lease_for: float, payload: str | None = None
) -> Leased:
    mark_done(conn, lease, now, payload)  # raises before anything is written
    return lease_next(conn, now, lease_for)


def reschedule(
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
        "run_after": clamp_due(now + max(0.0, delay), now),
        "error": error,
        "now": now,
    }
    task = _fenced(conn, lease, "reschedule", sets, params)
    if task.state == "dead":
        return task, bury(conn, task, error, now)
    if notice is not None:
        queue_notice(conn, task, notice, now, dedup_key=f"told:{task.id}")
    return task, None


def dead_letter(
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


def replace_payload(conn: apsw.Connection, lease: Lease, payload: str, now: float) -> None:
    sets = "payload = :payload, updated_at = :now"
    _fenced(conn, lease, "replace_payload", sets, {"payload": payload, "now": now})


def save_progress(
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


def delete(conn: apsw.Connection, lease: Lease) -> None:
    rows = conn.execute(
        f"DELETE FROM tasks WHERE {FENCE} RETURNING id",  # noqa: S608
        {"id": lease.task_id, "token": lease.token},
    ).fetchall()
    if not rows:
        raise LeaseLost(lease.task_id, "delete")


def rate_limited(
    conn: apsw.Connection, lease: Lease, now: float, until: float, error: str
) -> Task | None:
    """Hold the chat, then put the task back in its place; None (hold kept) if the lease
    was lost.

    The hold alone keeps the whole chat waiting; the task keeps its ``run_after``, so
    it is still its chat's head when the hold ends. Moving it to the hold's end let a
    later link of the same chat (due earlier) overtake it: the chat's order broken.
    """
    until = clamp_due(until, now)
    row = conn.execute("SELECT chat_id FROM tasks WHERE id = ?", (lease.task_id,)).fetchall()
    if row:
        # The hold stands even if this lease was lost: Telegram said so for the chat.
        hold_chat(conn, int(row[0][0]), until)  # type: ignore[arg-type]
    try:
        return put_back(conn, lease, now, error, ambiguous=False)
    except LeaseLost:
        return None


def put_back(conn: apsw.Connection, lease: Lease, now: float, error: str, ambiguous: bool) -> Task:
    """Back to pending in its place (``run_after`` kept: first of its chat again), its
    attempt given back; an ambiguous send counted (``ambiguous_sends``)."""
    sets = f"""attempts = attempts - 1, state = 'pending', last_error = :error,
        ambiguous_sends = ambiguous_sends + :ambiguous, {FREE}"""
    params = {"error": error, "ambiguous": int(ambiguous), "now": now}
    return _fenced(conn, lease, "put_back", sets, params)
