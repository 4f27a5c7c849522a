"""The durable task queue: the ``tasks`` table, leases fenced by a token.

The rules, each pinned by tests in tests/test_queue*.py:

- ``lease_next`` claims in one statement (``UPDATE … WHERE id = (SELECT …
  LIMIT 1) RETURNING``) and stamps a random token and an expiry. It never
  leases a task of a chat that holds a live lease or is on hold (Telegram's
  ``retry_after``): tasks of one chat run one at a time, in ``(run_after,
  id)`` order; different chats run in parallel, the oldest runnable first.
- Every later write-back matches id, token and ``state = 'running'``. A holder
  whose lease expired and was handed to someone else matches no row and gets
  `LeaseLost`; a 0-row update is never silent.
- An attempt is counted when a task is leased and stands when the task
  itself fails (``reschedule``); ``reschedule(count_attempt=False)`` gives it
  back (rate limits are not failures).
- A *lost* lease (the process died: reclaimed at startup; or it expired: the
  periodic sweep and the inline repair at every ``lease_next``) is not a
  failure: its attempt is given back and it counts in ``lost_leases``
  instead, against a larger budget, and only while the task makes no
  progress (`judge_lost_lease`, a pure function with its table of cases in
  tests/test_queue_lost.py). A task that kills the process every time still
  dies; one caught in a crash loop, a deploy loop or an OOM kill of the
  service does not. Handed back, a task keeps its ``run_after``, so it keeps
  its place at the front of its chat.
- Progress: `save_progress` (an album recorded) marks the lease as having
  made progress; the lost lease of a task that progressed is not held
  against it and its ``lost_leases`` starts again from 0.
- Every way into ``dead`` goes through `bury`: the failed attempt, the dead
  letter, the inline repair, the sweep's repair, the startup reclaim. In the
  same transaction it queues the task's one dead-letter notice (a ``notice``
  task in the same chat, dedup key ``notice:<id>``), unless the dead task is
  itself a notice or the caller said the chat was told already; the front
  door logs one ``dead-lettered`` line with the reason. No silent death.
- The payload is the raw JSON text: the queue never parses it, so a payload
  that no longer parses cannot break leasing; the worker dead-letters it and
  `xbot.tasks.payloads.payload_identity` reads what it can for the notice.

Time is always passed in (``now``, float epoch seconds); nothing here reads a
clock. The rule for what ``now`` is (`xbot.clock`): the bot's time line, the
wall clock at start-up plus monotonic seconds since, never the wall clock read
again. So every stored time (``run_after``, ``lease_expires``, a hold's
``not_before``, ``created_at``, ``updated_at``) and every ``now`` compared with
it are on one line that a step of the wall clock does not move: a retry due in
30 s runs 30 s later, a live worker's lease never looks expired because NTP
stepped forward, a task never looks hours old. No write puts a task's due time
or its chat's hold more than ``LONGEST_DELAY`` after its ``now`` (each goes
through `xbot.storage.time_line.clamp_due`; a longer ``retry_after`` is held
that long, then asked again), which is what lets the
start-up clamp bound what a clock that went back while the bot was down can hold:
the start-up rebase that puts the line back onto the wall clock
(`xbot.storage.time_line`) runs before any worker, under the instance lock.

`TaskQueue` runs the operations on the `DbPool`, several concurrent
callers per transaction (`xbot.storage.group_commit`); `standins.queue_sync.SyncQueue`
runs the same `TaskQueue` on `OneConnection` (other processes, tests).

The package's public face is this module; import every name from here. Inside it,
each module a responsibility that the others reach by its public names: `_rows`
(the row, `Task` and `Lease`, the fence, and the one insert), `_lease` (the claim, and every
write-back fenced by the lease's token), `_lost_leases` (the pure rule for a lost
lease, and the repair that finds lost leases and writes its verdicts), `_dead_letters`
(`bury`, the notice and its log line), `_chat_holds` (Telegram's ``retry_after``,
per chat), `_admin` (the rows outside any lease: the operator's queries, the
sweep's pruning) and `_task_queue` (the two front doors, `TaskQueue` and
`OneConnection`, that run all of them in transactions).
"""

from xbot.storage.queue._admin import QueueStats
from xbot.storage.queue._dead_letters import NOTICE_KIND, NOTICE_MAX_ATTEMPTS, BuriedNotice
from xbot.storage.queue._lease import USER_LEASES, Effect
from xbot.storage.queue._lost_leases import (
    LOST_LEASE_FACTOR,
    POISON_TELL,
    LostVerdict,
    judge_lost_lease,
    lost_lease_budget,
)
from xbot.storage.queue._rows import STATES, Lease, Task
from xbot.storage.queue._task_queue import DEFAULT_LEASE, OneConnection, TaskQueue

__all__ = [
    "DEFAULT_LEASE",
    "LOST_LEASE_FACTOR",
    "NOTICE_KIND",
    "NOTICE_MAX_ATTEMPTS",
    "POISON_TELL",
    "STATES",
    "USER_LEASES",
    "BuriedNotice",
    "Effect",
    "Lease",
    "LostVerdict",
    "OneConnection",
    "QueueStats",
    "Task",
    "TaskQueue",
    "judge_lost_lease",
    "lost_lease_budget",
]
