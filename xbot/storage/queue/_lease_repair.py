"""A lost lease found and handed back, or buried: the inline repair, the sweep, the reclaim.

`judge_lost_lease` (pure, `_lost_leases`) decides; this writes its
verdict under the lost lease's own token, so a holder that came back in the
meantime is never overwritten. `_task_queue` runs `repair` before every
claim and from the sweep, `reclaim` at startup. SQL here is assembled only from
this module's constants (hence the ``noqa: S608``).
"""

from __future__ import annotations

import builtins
from typing import Final

import apsw

from xbot.storage.queue._dead_letters import Burial, bury
from xbot.storage.queue._lost_leases import POISON_TELL, judge_lost_lease
from xbot.storage.queue._rows import COLUMNS, Task, task_from_row

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
    progressed = 0, last_error = :error, lease_token = NULL, lease_expires = NULL,
    updated_at = :now
WHERE id = :id AND lease_token = :token AND state = 'running'
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
