"""The rule for a lost lease (`xbot.storage.queue.judge_lost_lease`), as a table of cases.

A process death or an expired lease is not the task's failure; it counts
against the task only while the task makes no progress, against a budget of
``LOST_LEASE_FACTOR`` times its ``max_attempts``.
"""

from __future__ import annotations

import pytest

from xbot.storage.queue import LOST_LEASE_FACTOR, judge_lost_lease, lost_lease_budget

CASES = [
    # progressed, lost before, max_attempts -> state, lost after
    (False, 0, 5, "pending", 1),
    (False, 5, 5, "pending", 6),  # past max_attempts: a crash loop is not a failure
    (False, 8, 5, "pending", 9),  # one short of the budget (10)
    (False, 9, 5, "dead", 10),  # the budget is spent: in flight at 10 deaths, no progress
    (True, 9, 5, "pending", 0),  # an album recorded since the lease: not held against it
    (True, 0, 5, "pending", 0),
    (False, 0, 1, "pending", 1),  # the smallest budget is still two deaths
    (False, 1, 1, "dead", 2),
    (False, 0, 0, "pending", 1),  # a nonsense max_attempts is treated as 1
    (False, 40, 5, "dead", 41),  # a count from before (or edited by hand) past the budget
]


@pytest.mark.parametrize(
    ("progressed", "lost", "max_attempts", "state", "after"),
    CASES,
    ids=[
        "first-death",
        "past-max-attempts",
        "one-short",
        "budget-spent",
        "progress-clears-a-long-run",
        "progress-first",
        "max1-first",
        "max1-second",
        "max0",
        "past-budget",
    ],
)
def test_judge_lost_lease(
    progressed: bool, lost: int, max_attempts: int, state: str, after: int
) -> None:
    verdict = judge_lost_lease(progressed=progressed, lost_leases=lost, max_attempts=max_attempts)
    assert (verdict.state, verdict.lost_leases) == (state, after)
    assert verdict.reason


def test_the_budget_is_larger_than_for_failures() -> None:
    assert LOST_LEASE_FACTOR >= 2
    assert all(lost_lease_budget(n) > n for n in range(1, 20))
    # The crash loop: a post in flight at six kills in a row must survive.
    assert lost_lease_budget(5) > 6
