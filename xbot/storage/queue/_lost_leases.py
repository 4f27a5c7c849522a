"""A lost lease: the rule for when it is held against a task, and its repair.

A lease is lost when its process died (reclaimed at startup, `reclaim`) or it
expired (the periodic sweep and the inline repair before every claim, `repair`).
`judge_lost_lease` is the rule, a pure function with its table of cases in
tests/test_queue_lost.py; `repair` and `reclaim` find the lost leases and write
each verdict under the lost lease's own token, so a holder that came back in the
meantime is never overwritten. SQL here is assembled only from this module's
constants (hence the ``noqa: S608``).
"""

from __future__ import annotations

import builtins
from typing import Final

import apsw
import attrs

from xbot.storage.queue._dead_letters import Burial, bury
from xbot.storage.queue._rows import COLUMNS, FENCE, FREE, Task, task_from_row

# Lost leases in a row without progress that a task may use: this many times
# its max_attempts (see judge_lost_lease).
LOST_LEASE_FACTOR: Final = 2
# What the chat reads when a task is judged poison.
POISON_TELL: Final = "it stopped the bot every time I tried it"


@attrs.frozen
class LostVerdict:
    """What becomes of a task whose lease was lost.

    Attributes:
        state: ``pending`` (handed back) or ``dead`` (judged a poison task).
        lost_leases: the task's new count of lost leases in a row without progress.
        reason: the ``last_error`` to record.
    """

    state: str
    lost_leases: int
    reason: str


def lost_lease_budget(max_attempts: int) -> int:
    """Lost leases in a row without progress a task may use before it is judged poison."""
    return LOST_LEASE_FACTOR * max(1, max_attempts)


def judge_lost_lease(*, progressed: bool, lost_leases: int, max_attempts: int) -> LostVerdict:
    """The rule for a lease lost to a process death or an expiry. Pure.

    A lost lease is the process's failure before it is the task's: a crash
    loop, a deploy loop, an OOM kill of the whole service or a watchdog
    restart takes every lease in flight, innocent or not. So it never counts
    as an attempt. It counts against the task only when the task made no
    progress under that lease; ``lost_leases`` is the run of such losses, and
    the task is poison when the run reaches ``LOST_LEASE_FACTOR`` times its
    ``max_attempts``: the budget is larger than for failures because the
    evidence is weaker. Progress (an album recorded under the lease) clears
    the run: a task that moves forward between deaths is not what kills them.

    Why no finer evidence (which other tasks were in flight, whether they
    completed since): a slow task caught in a crash loop that kills faster
    than it runs looks exactly like a poison task from inside — in flight at
    every death while the others go on and complete. What tells them apart
    is how often it happens; the run without progress counts exactly that.
    """
    if progressed:
        return LostVerdict("pending", 0, "lease lost after progress: handed back")
    run = lost_leases + 1
    if run >= lost_lease_budget(max_attempts):
        return LostVerdict(
            "dead", run, f"the task was in flight at {run} process deaths in a row without progress"
        )
    return LostVerdict("pending", run, f"lease lost ({run} in a row without progress): handed back")


# --- found and written back ----------------------------------------------------------------------

# Expired leases are found through tasks_running_chat, whose rows are the
# live leases (one per busy worker, a handful): the repair runs at every
# lease, so it has no index of its own to keep up. Usually it finds nothing.
_EXPIRED_SQL: Final = f"""
SELECT {COLUMNS} FROM tasks INDEXED BY tasks_running_chat
WHERE state = 'running' AND lease_expires <= +:now
"""  # noqa: S608

# Every lease, live or not: only for a process that holds the instance lock
# (xbot.ops.instance), to which every lease in the file belongs to a dead process.
_ORPHANS_SQL: Final = _EXPIRED_SQL.replace("lease_expires <= +:now", "lease_expires IS NOT NULL")
if _ORPHANS_SQL == _EXPIRED_SQL:  # the text moved: reclaim would wait out every lease
    raise RuntimeError("queue: the reclaim statement no longer differs from the repair")

# A lost lease handed back or buried: the attempt it used is given back.
_LOST_SQL: Final = f"""
UPDATE tasks SET state = :state, attempts = max(0, attempts - 1), lost_leases = :lost,
    progressed = 0, last_error = :error, {FREE}
WHERE {FENCE}
RETURNING {COLUMNS}
"""  # noqa: S608


# What a repair wrote: every row it handed back or buried, and the buried.
Handed = tuple[builtins.list[Task], builtins.list[Burial]]


def _hand_back_lost(conn: apsw.Connection, sql: str, now: float) -> Handed:
    """Judge every lost lease ``sql`` finds; returns (rows written, the buried among them)."""
    written: builtins.list[Task] = []
    buried: builtins.list[Burial] = []
    for found in [task_from_row(r) for r in conn.execute(sql, {"now": now}).fetchall()]:
        verdict = judge_lost_lease(
            progressed=bool(found.progressed),
            lost_leases=found.lost_leases,
            max_attempts=found.max_attempts,
        )
        params = {
            "state": verdict.state,
            "lost": verdict.lost_leases,
            "error": verdict.reason,
            "now": now,
            "id": found.id,
            "token": found.lease_token,
        }
        rows = conn.execute(_LOST_SQL, params).fetchall()
        if not rows:
            continue
        task = task_from_row(rows[0])
        written.append(task)
        if verdict.state == "dead":
            buried.append(bury(conn, task, verdict.reason, now, tell=POISON_TELL))
    return written, buried


def repair(conn: apsw.Connection, now: float) -> Handed:
    return _hand_back_lost(conn, _EXPIRED_SQL, now)


def reclaim(conn: apsw.Connection, now: float) -> tuple[builtins.list[Task], builtins.list[Burial]]:
    return _hand_back_lost(conn, _ORPHANS_SQL, now)
