"""The rule for a lost lease: when a process death or an expiry is held against a task.

Pure; the queue applies it (`_lease_repair`) wherever a lease is found lost (the startup
reclaim, the periodic sweep, the inline repair at every lease). The table of
cases is in tests/test_queue_lost.py.
"""

from __future__ import annotations

from typing import Final

import attrs

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
