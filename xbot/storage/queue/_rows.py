"""The ``tasks`` row: `Task`, `Lease`, the column list, the fence, and the one insert.

What every part of the queue shares (`_lease`, the claim and the write-backs;
`_lost_leases`, the repair; `_dead_letters`, the notice a burial queues; `_admin`,
the operator's queries).
SQL here is assembled only from this module's constants (hence the ``noqa: S608``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

import apsw
import attrs

from xbot.storage.time_line import clamp_due

STATES: Final = ("pending", "running", "done", "dead")

# The columns of tasks in table order, which is also the field order of Task.
COLUMNS: Final = (
    "id, kind, chat_id, payload, state, dedup_key, attempts, max_attempts, run_after, "
    "lease_token, lease_expires, last_error, created_at, updated_at, lost_leases, progressed, "
    "ambiguous_sends, user_id"
)


@attrs.frozen
class Lease:
    """The right to write back to one task: its id and the token of this claim."""

    task_id: int
    token: str


@attrs.frozen
class Task:
    """One row of ``tasks``. ``payload`` is the raw JSON text, never parsed here."""

    id: int
    kind: str
    chat_id: int
    payload: str
    state: str
    dedup_key: str | None
    attempts: int
    max_attempts: int
    run_after: float
    lease_token: str | None
    lease_expires: float | None
    last_error: str | None
    created_at: float
    updated_at: float
    lost_leases: int = 0
    progressed: int = 0
    ambiguous_sends: int = 0  # sends that timed out and may have reached the chat (0006)
    user_id: int | None = None  # who asked for it; None: the bot's own work (0009)

    @property
    def lease(self) -> Lease:
        if self.lease_token is None:
            raise ValueError(f"task {self.id} is not leased (state {self.state})")
        return Lease(self.id, self.lease_token)


def task_from_row(row: apsw.SQLiteValues) -> Task:
    return Task(*row)  # type: ignore[arg-type]


def encode_payload(payload: Mapping[str, Any] | str) -> str:
    if isinstance(payload, str):
        return payload
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


# The token fence: a write-back matches this task, under this lease, still running
# (a holder whose lease was handed on matches no row).
FENCE: Final = "id = :id AND lease_token = :token AND state = 'running'"
# A write-back's release of the lease (every way out of ``running``).
FREE: Final = "lease_token = NULL, lease_expires = NULL, updated_at = :now"

_INSERT_SQL: Final = f"""
INSERT INTO tasks (kind, chat_id, payload, state, dedup_key, attempts, max_attempts,
                   run_after, created_at, updated_at, user_id)
VALUES (:kind, :chat_id, :payload, 'pending', :dedup_key, 0, :max_attempts, :run_after, :now, :now,
        :user_id)
RETURNING {COLUMNS}
"""  # noqa: S608


def enqueue(conn: apsw.Connection, fields: dict[str, Any]) -> Task:
    if fields["dedup_key"] is not None:
        # Inside BEGIN IMMEDIATE nobody slips in between this look-up and the
        # insert; the unique partial index tasks_dedup_live is the backstop.
        sql = f"SELECT {COLUMNS} FROM tasks WHERE dedup_key = ? AND state IN ('pending', 'running')"  # noqa: S608
        existing = conn.execute(sql, (fields["dedup_key"],)).fetchall()
        if existing:
            return task_from_row(existing[0])
    rows = conn.execute(_INSERT_SQL, fields).fetchall()
    return task_from_row(rows[0])


def enqueue_fields(
    *,
    kind: str,
    payload: Mapping[str, Any] | str,
    chat_id: int,
    now: float,
    run_after: float | None,
    dedup_key: str | None,
    max_attempts: int,
    user_id: int | None = None,
) -> dict[str, Any]:
    if max_attempts < 1:
        raise ValueError(f"max_attempts must be at least 1, got {max_attempts}")
    return {
        "kind": kind,
        "payload": encode_payload(payload),
        "chat_id": chat_id,
        "now": now,
        # Never due further out than the longest delay (the start-up clamp's bound).
        "run_after": now if run_after is None else clamp_due(run_after, now),
        "dedup_key": dedup_key,
        "max_attempts": max_attempts,
        "user_id": user_id,
    }
