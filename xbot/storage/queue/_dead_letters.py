"""Dead letters: every task that goes dead gets its one notice, in the same transaction.

The rule (see the package, `xbot.storage.queue`): every way into ``dead`` goes
through `bury` (`_lease`'s write-backs, `_lost_leases`' verdicts), and the front
door (`_task_queue`) logs one ``dead-lettered`` line per burial (`log_burials`)
once the transaction committed.
"""

from __future__ import annotations

import builtins
import json
import logging
from collections.abc import Mapping
from typing import Any, Final

import apsw
import attrs

from xbot.errors import reading_payload
from xbot.logs import kv
from xbot.storage.queue._rows import Task, enqueue, enqueue_fields

# Its lines are the queue's: named by the package, not by this private module.
log = logging.getLogger("xbot.storage.queue")

# The dead-letter notice is a task of this kind (xbot.tasks.notices runs it).
NOTICE_KIND: Final = "notice"
NOTICE_MAX_ATTEMPTS: Final = 8


@attrs.frozen
class BuriedNotice:
    """The payload of the notice the queue writes with a dead mark, in the same
    transaction (`bury`): which task died, why, and its kind and payload, so that
    `xbot.tasks.notices` words the sentence when it runs and the queue needs no
    knowledge of task kinds.
    """

    for_task: int
    reason: str
    of_kind: str
    of_payload: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "for_task": self.for_task,
            "reason": self.reason,
            "of_kind": self.of_kind,
            "of_payload": self.of_payload,
        }

    @classmethod
    def from_json(cls, raw: str) -> BuriedNotice:
        with reading_payload("notice"):
            data = json.loads(raw)
            return cls(
                for_task=int(data["for_task"]),
                reason=str(data["reason"]),
                of_kind=str(data["of_kind"]),
                of_payload=str(data["of_payload"]),
            )


@attrs.frozen
class Burial:
    """A task that went dead in a transaction, and whether its notice was queued."""

    task: Task
    reason: str
    notice: str  # "queued", or "none: <why>" (a notice itself, the chat is gone, …)


def bury(
    conn: apsw.Connection,
    task: Task,
    reason: str,
    now: float,
    *,
    tell: str | None = None,
    untold: str | None = None,
) -> Burial:
    """``task`` (already written as dead) gets its one notice, in the same transaction.

    ``tell`` is the reason in the chat's words (default ``reason``); ``untold``
    says why no notice goes (the chat is gone, the task told it itself). The
    notice carries the dead task's kind and payload: `xbot.tasks.notices` words it
    when it runs, so the queue needs no knowledge of kinds.
    """
    if task.kind == NOTICE_KIND:
        return Burial(task, reason, "none: a notice itself")
    if untold is not None:
        return Burial(task, reason, f"none: {untold}")
    payload = BuriedNotice(task.id, tell or reason, task.kind, task.payload).to_dict()
    queue_notice(conn, task, payload, now, dedup_key=f"notice:{task.id}")
    return Burial(task, reason, "queued")


def queue_notice(
    conn: apsw.Connection,
    task: Task,
    payload: Mapping[str, Any] | str,
    now: float,
    *,
    dedup_key: str,
) -> None:
    """A ``notice`` task to `task`'s chat, in the caller's transaction (once per key)."""
    fields = enqueue_fields(
        kind=NOTICE_KIND,
        payload=payload,
        chat_id=task.chat_id,
        now=now,
        run_after=None,
        dedup_key=dedup_key,
        max_attempts=NOTICE_MAX_ATTEMPTS,
    )
    enqueue(conn, fields)


def log_burials(burials: builtins.list[Burial], path: str) -> None:
    """The one log line of each dead letter, after its transaction committed."""
    for b in burials:
        log.warning(
            "dead-lettered %s",
            kv(
                task=b.task.id,
                kind=b.task.kind,
                chat=b.task.chat_id,
                path=path,
                reason=b.reason,
                notice=b.notice,
            ),
        )
