"""The queue, one rule at a time, on real SQLite files through the real pool.

Time is injected (``now``); nothing sleeps.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import apsw
import pytest

from xbot.errors import LeaseLost, StoreError
from xbot.storage import group_commit, migrations
from xbot.storage.db import DbPool, connect, open_store

# The queue from its face; its statements and internals (the plans, the claim's cost) from inside.
from xbot.storage.queue import (
    POISON_TELL,
    USER_LEASES,
    Lease,
    Task,
    TaskQueue,
    _admin,
    _lease,
    _lost_leases,
    _task_queue,
    lost_lease_budget,
)
from xbot.tasks.payloads import payload_identity

T0 = 1_000_000.0
LEASE = 90.0


@pytest.fixture
def q(pool: DbPool) -> TaskQueue:
    return TaskQueue(pool)


async def add(q: TaskQueue, chat: int, *, at: float = T0, **kw: Any) -> Task:
    return await q.enqueue("x_post", {"url": f"https://x.com/a/status/{chat}"}, chat, now=at, **kw)


async def _row(pool: DbPool, task_id: int) -> tuple[Any, ...]:
    def read(c: apsw.Connection) -> tuple[Any, ...]:
        return tuple(c.execute("SELECT * FROM tasks WHERE id = ?", (task_id,)).fetchall()[0])

    return await pool.run(read)


# --- enqueue and dedup -----------------------------------------------------------------------


async def test_enqueue_stores_a_pending_task(q: TaskQueue) -> None:
    t = await q.enqueue("x_post", {"url": "https://x.com/a/status/1", "é": 1}, 42, now=T0)
    assert (t.kind, t.chat_id, t.state, t.attempts, t.max_attempts) == (
        "x_post",
        42,
        "pending",
        0,
        5,
    )
    assert (t.run_after, t.created_at, t.updated_at) == (T0, T0, T0)
    assert t.lease_token is None
    assert t.lease_expires is None
    assert t.last_error is None
    assert json.loads(t.payload) == {"url": "https://x.com/a/status/1", "é": 1}
    assert await q.get(t.id) == t


async def test_enqueue_keeps_a_string_payload_as_is(q: TaskQueue) -> None:
    t = await q.enqueue("x_post", "{not json", 1, now=T0, run_after=T0 + 5, max_attempts=2)
    assert (t.payload, t.run_after, t.max_attempts) == ("{not json", T0 + 5, 2)


async def test_enqueue_refuses_zero_attempts(q: TaskQueue) -> None:
    with pytest.raises(ValueError, match="max_attempts"):
        await add(q, 1, max_attempts=0)


async def test_dedup_returns_the_live_task(q: TaskQueue) -> None:
    first = await add(q, 1, dedup_key="x:1")
    assert (await add(q, 1, dedup_key="x:1", at=T0 + 1)).id == first.id  # pending
    leased = await q.lease_next(T0)
    assert leased is not None
    assert leased.id == first.id
    again = await add(q, 2, dedup_key="x:1", at=T0 + 2)  # running
    assert again.id == first.id
    assert again.state == "running"
    await q.mark_done(leased.lease, T0 + 3)
    fresh = await add(q, 1, dedup_key="x:1", at=T0 + 4)  # done: a new job
    assert fresh.id != first.id
    assert (await add(q, 1, dedup_key="x:2")).id not in (first.id, fresh.id)


async def test_dedup_after_dead_makes_a_new_task(q: TaskQueue) -> None:
    first = await add(q, 1, dedup_key="k")
    leased = await q.lease_next(T0)
    assert leased is not None
    await q.dead_letter(leased.lease, T0, "gone")
    assert (await add(q, 1, dedup_key="k")).id != first.id


async def test_dedup_is_race_safe_within_and_across_pools(q: TaskQueue, tmp_path: Path) -> None:
    other_pool = await open_store(tmp_path / "q.sqlite3")
    other = TaskQueue(other_pool)
    try:
        results = await asyncio.gather(
            *(add(q, 1, dedup_key="same") for _ in range(10)),
            *(add(other, 1, dedup_key="same") for _ in range(10)),
        )
    finally:
        await other_pool.close()
    assert len({t.id for t in results}) == 1
    assert (await q.stats(T0)).counts_by_state["pending"] == 1


# --- lease_next: order, per-chat exclusivity, holds ------------------------------------------


async def test_lease_stamps_token_expiry_and_attempt(q: TaskQueue) -> None:
    assert await q.lease_next(T0) is None
    t = await add(q, 1)
    leased = await q.lease_next(T0 + 1, lease_for=30)
    assert leased is not None
    assert leased.id == t.id
    assert leased.state == "running"
    assert leased.attempts == 1
    assert leased.lease_expires == T0 + 31
    assert leased.updated_at == T0 + 1
    assert leased.lease_token is not None
    assert len(leased.lease_token) == 32
    int(leased.lease_token, 16)
    assert leased.lease == Lease(t.id, leased.lease_token)
    assert await q.lease_next(T0 + 1) is None


async def test_tokens_differ_per_claim(q: TaskQueue) -> None:
    tokens = set()
    for chat in range(20):
        await add(q, chat)
    for _ in range(20):
        t = await q.lease_next(T0)
        assert t is not None
        tokens.add(t.lease_token)
    assert len(tokens) == 20


async def test_task_without_lease_has_no_lease(q: TaskQueue) -> None:
    t = await add(q, 1)
    with pytest.raises(ValueError, match="not leased"):
        _ = t.lease


async def test_not_due_is_not_leased(q: TaskQueue) -> None:
    await add(q, 1, run_after=T0 + 10)
    assert await q.lease_next(T0 + 9.9) is None
    assert await q.lease_next(T0 + 10) is not None


async def test_one_chat_runs_one_task_at_a_time_in_order(q: TaskQueue) -> None:
    a1, a2, a3 = [await add(q, 7, at=T0 + i) for i in range(3)]
    first = await q.lease_next(T0 + 5)
    assert first is not None
    assert first.id == a1.id
    assert await q.lease_next(T0 + 5) is None  # chat 7 is busy
    await q.mark_done(first.lease, T0 + 6)
    second = await q.lease_next(T0 + 6)
    assert second is not None
    assert second.id == a2.id
    await q.mark_done(second.lease, T0 + 7)
    third = await q.lease_next(T0 + 7)
    assert third is not None
    assert third.id == a3.id


async def test_one_users_leases_are_bounded_across_chats(q: TaskQueue) -> None:
    # User 5 asked in four chats (oldest first), user 6 and the bot itself after.
    mine = [await add(q, 100 + i, at=T0 + i, user_id=5) for i in range(4)]
    other = await add(q, 200, at=T0 + 10, user_id=6)
    bots = await add(q, 300, at=T0 + 11)  # a notice: nobody's
    got = [await q.lease_next(T0 + 20) for _ in range(5)]
    assert [t.id if t else None for t in got] == [
        mine[0].id, mine[1].id, other.id, bots.id, None,
    ], f"user 5 holds {USER_LEASES}: their other chats wait, others' work does not"  # fmt: skip
    assert got[0] is not None
    assert got[0].user_id == 5
    await q.mark_done(got[0].lease, T0 + 21)
    after = await q.lease_next(T0 + 21)
    assert after is not None
    assert after.id == mine[2].id, "one lease given back: the user's next task goes"


async def test_an_expired_lease_does_not_count_against_its_user(q: TaskQueue) -> None:
    first = await add(q, 1, user_id=5)
    second = await add(q, 2, user_id=5)
    await add(q, 3, user_id=5)
    assert [await q.lease_next(T0, LEASE) for _ in range(2)] != [None, None]
    assert await q.lease_next(T0) is None
    # Both leases ran out (their holder died): the repair hands them back, and the
    # user's oldest task is claimed again, as before.
    again = await q.lease_next(T0 + LEASE + 1)
    assert again is not None
    assert again.id in (first.id, second.id)


async def test_chat_order_is_run_after_then_id(q: TaskQueue) -> None:
    late = await add(q, 7, run_after=T0 + 10)
    early = await add(q, 7, run_after=T0 + 5)
    tie = await add(q, 7, run_after=T0 + 5)
    order = []
    for _ in range(3):
        t = await q.lease_next(T0 + 20)
        assert t is not None
        order.append(t.id)
        await q.mark_done(t.lease, T0 + 20)
    assert order == [early.id, tie.id, late.id]


async def test_chats_run_in_parallel_oldest_first(q: TaskQueue) -> None:
    a1 = await add(q, 1, at=T0)
    a2 = await add(q, 1, at=T0 + 1)
    b1 = await add(q, 2, at=T0 + 2)
    c1 = await add(q, 3, at=T0 + 0.5, run_after=T0 + 3)
    got = [await q.lease_next(T0 + 10) for _ in range(4)]
    assert [t.id if t else None for t in got] == [a1.id, b1.id, c1.id, None]
    assert a2.state == "pending"


async def test_a_busy_chat_with_a_long_backlog_does_not_block_others(q: TaskQueue) -> None:
    # The claim walks chat lanes, not tasks: chat 1's backlog is one row to skip.
    def fill(c: apsw.Connection) -> None:
        c.executemany(
            "INSERT INTO tasks (kind, chat_id, payload, run_after, created_at, updated_at)"
            " VALUES ('x', 1, '{}', ?, ?, ?)",
            [(T0 + i * 1e-3, T0, T0) for i in range(5000)],
        )

    await q._pool.write(fill)  # type: ignore[attr-defined]
    other = await add(q, 2, at=T0 + 100)
    busy = await q.lease_next(T0 + 200)
    assert busy is not None
    assert busy.chat_id == 1
    nxt = await q.lease_next(T0 + 200)
    assert nxt is not None
    assert nxt.id == other.id
    assert await q.lease_next(T0 + 200) is None


async def test_hold_pauses_one_chat_and_not_the_others(q: TaskQueue) -> None:
    held = await add(q, 1)
    free = await add(q, 2, at=T0 + 1)
    assert await q.hold_chat(1, T0 + 30) == T0 + 30
    assert await q.hold_chat(1, T0 + 10) == T0 + 30  # the later of the two stands
    t = await q.lease_next(T0 + 5)
    assert t is not None
    assert t.id == free.id
    assert await q.lease_next(T0 + 29) is None
    assert (await q.stats(T0 + 29)).held_chats == 1
    t = await q.lease_next(T0 + 30)
    assert t is not None
    assert t.id == held.id
    assert await q.release_expired_holds(T0 + 29) == 0
    assert await q.release_expired_holds(T0 + 30) == 1
    assert (await q.stats(T0 + 30)).held_chats == 0


async def test_rate_limited_holds_the_chat_and_gives_the_attempt_back(q: TaskQueue) -> None:
    t1 = await add(q, 1)
    t2 = await add(q, 1, at=T0 + 1)
    other = await add(q, 2, at=T0 + 2)
    leased = await q.lease_next(T0 + 3)
    assert leased is not None
    assert leased.id == t1.id
    back = await q.rate_limited(leased.lease, T0 + 4, T0 + 40, "429")
    # Back in its place (run_after kept): the chat's hold alone does the waiting.
    assert (back.state, back.attempts, back.run_after, back.last_error) == (
        "pending",
        0,
        t1.run_after,
        "429",
    )
    nxt = await q.lease_next(T0 + 5)
    assert nxt is not None
    assert nxt.id == other.id
    assert await q.lease_next(T0 + 39) is None
    # The chat in its order after the hold: t1, the link the 429 met, before t2.
    first_after = await q.lease_next(T0 + 40)
    assert first_after is not None
    assert first_after.id == t1.id
    await q.mark_done(first_after.lease, T0 + 41)
    second = await q.lease_next(T0 + 41)
    assert second is not None
    assert second.id == t2.id


async def test_rate_limited_keeps_the_hold_when_the_lease_is_lost(q: TaskQueue) -> None:
    t = await add(q, 1)
    old = await q.lease_next(T0, lease_for=10)
    assert old is not None
    new = await q.lease_next(T0 + 11)
    assert new is not None
    assert new.id == t.id
    with pytest.raises(LeaseLost) as lost:
        await q.rate_limited(old.lease, T0 + 12, T0 + 60, "429")
    assert lost.value.op == "rate_limited"
    assert (await q.stats(T0 + 12)).held_chats == 1
    assert (await q.get(t.id)) == new


# --- fenced write-backs ----------------------------------------------------------------------

WRITE_BACKS: dict[str, Callable[[TaskQueue, Lease, float], Awaitable[object]]] = {
    "heartbeat": lambda q, lease, now: q.heartbeat(lease, now, 30),
    "mark_done": lambda q, lease, now: q.mark_done(lease, now),
    "mark_done_and_lease_next": lambda q, lease, now: q.mark_done_and_lease_next(lease, now),
    "reschedule": lambda q, lease, now: q.reschedule(lease, now, 5, "e"),
    "reschedule_no_attempt": lambda q, lease, now: q.reschedule(lease, now, 5, "e", False),
    "dead_letter": lambda q, lease, now: q.dead_letter(lease, now, "e"),
    "dead_letter_raw": lambda q, lease, now: q.dead_letter_raw(lease, now, "e"),
    "replace_payload": lambda q, lease, now: q.replace_payload(lease, {"phase": 2}, now),
    "delete": lambda q, lease, now: q.delete(lease),
    "rate_limited": lambda q, lease, now: q.rate_limited(lease, now, now + 1, "429"),
}
OP_NAME = {"reschedule_no_attempt": "reschedule", "mark_done_and_lease_next": "mark_done"}


@pytest.mark.parametrize("op", list(WRITE_BACKS), ids=list(WRITE_BACKS))
async def test_a_stale_lease_writes_nothing_and_says_so(
    q: TaskQueue, pool: DbPool, op: str
) -> None:
    t = await add(q, 1)
    await add(q, 2)  # another chat's task: a lease after a lost one must not happen
    stale = await q.lease_next(T0, lease_for=10)
    assert stale is not None
    assert stale.id == t.id
    other = await q.lease_next(T0)
    assert other is not None
    await q.mark_done(other.lease, T0)
    taken = await q.lease_next(T0 + 11)  # expired: handed back and leased again
    assert taken is not None
    assert taken.id == t.id
    assert taken.lease_token != stale.lease_token
    before = await _row(pool, t.id)
    counts = (await q.stats(T0 + 12)).counts_by_state
    with pytest.raises(LeaseLost) as lost:
        await WRITE_BACKS[op](q, stale.lease, T0 + 12)
    assert lost.value.task_id == t.id
    assert lost.value.op == OP_NAME.get(op, op)
    assert await _row(pool, t.id) == before
    assert (await q.stats(T0 + 12)).counts_by_state == counts
    # The rightful holder still can.
    await q.heartbeat(taken.lease, T0 + 13)


@pytest.mark.parametrize("op", list(WRITE_BACKS), ids=list(WRITE_BACKS))
async def test_a_made_up_or_finished_lease_is_refused(q: TaskQueue, pool: DbPool, op: str) -> None:
    t = await add(q, 1)
    leased = await q.lease_next(T0)
    assert leased is not None
    with pytest.raises(LeaseLost):
        await WRITE_BACKS[op](q, Lease(t.id, "0" * 32), T0 + 1)
    with pytest.raises(LeaseLost):
        await WRITE_BACKS[op](q, Lease(t.id + 99, leased.lease.token), T0 + 1)
    await q.mark_done(leased.lease, T0 + 1)
    before = await _row(pool, t.id)
    with pytest.raises(LeaseLost):
        await WRITE_BACKS[op](q, leased.lease, T0 + 2)
    assert await _row(pool, t.id) == before


async def test_heartbeat_extends_and_keeps_the_task(q: TaskQueue) -> None:
    t = await add(q, 1)
    leased = await q.lease_next(T0, lease_for=10)
    assert leased is not None
    assert await q.heartbeat(leased.lease, T0 + 8, 10) == T0 + 18
    assert await q.lease_next(T0 + 15) is None  # still live: nobody takes it over
    await q.mark_done(leased.lease, T0 + 16)
    assert (await q.get(t.id)).state == "done"  # type: ignore[union-attr]


async def test_an_expired_lease_not_yet_taken_may_still_finish(q: TaskQueue) -> None:
    t = await add(q, 1)
    leased = await q.lease_next(T0, lease_for=10)
    assert leased is not None
    await q.mark_done(leased.lease, T0 + 50)
    done = await q.get(t.id)
    assert done is not None
    assert (done.state, done.lease_token, done.lease_expires) == (
        "done",
        None,
        None,
    )


async def test_reschedule_backs_off_and_counts(q: TaskQueue) -> None:
    t = await add(q, 1, max_attempts=3)
    leased = await q.lease_next(T0)
    assert leased is not None
    back = await q.reschedule(leased.lease, T0 + 1, 30, "flaky host")
    assert (back.state, back.attempts, back.run_after, back.last_error) == (
        "pending",
        1,
        T0 + 31,
        "flaky host",
    )
    assert back.lease_token is None
    assert back.lease_expires is None
    assert await q.lease_next(T0 + 30) is None
    again = await q.lease_next(T0 + 31)
    assert again is not None
    assert again.id == t.id
    assert again.attempts == 2
    free = await q.reschedule(again.lease, T0 + 32, -5, "shutdown", count_attempt=False)
    assert (free.attempts, free.run_after) == (1, T0 + 32)  # negative delay: now


async def test_reschedule_of_the_last_attempt_is_dead(q: TaskQueue) -> None:
    await add(q, 1, max_attempts=2)
    for attempt in (1, 2):
        leased = await q.lease_next(T0 + attempt * 100)
        assert leased is not None
        assert leased.attempts == attempt
        back = await q.reschedule(leased.lease, T0 + attempt * 100, 1, f"fail {attempt}")
    assert (back.state, back.last_error) == ("dead", "fail 2")
    notice = await q.lease_next(T0 + 1000)  # all that is left: its dead-letter notice
    assert notice is not None
    assert (notice.kind, notice.chat_id, notice.dedup_key) == ("notice", 1, f"notice:{back.id}")
    assert await q.lease_next(T0 + 1000) is None


async def test_dead_letter_and_raw(q: TaskQueue) -> None:
    bad = await q.enqueue("x_post", '{"url": "https://x.com/a/status/9", oops', 5, now=T0)
    leased = await q.lease_next(T0)  # an unparsable payload leases like any other
    assert leased is not None
    assert leased.payload == bad.payload
    dead = await q.dead_letter_raw(leased.lease, T0 + 1, "the task could not be read")
    assert (dead.state, dead.last_error, dead.chat_id, dead.kind) == (
        "dead",
        "the task could not be read",
        5,
        "x_post",
    )
    assert payload_identity(dead.payload) == {"url": "https://x.com/a/status/9"}
    await add(q, 6)
    leased = await q.lease_next(T0 + 2)
    assert leased is not None
    dead = await q.dead_letter(leased.lease, T0 + 3, "post deleted")
    assert (dead.state, dead.last_error, dead.lease_token) == ("dead", "post deleted", None)


async def test_replace_payload_keeps_the_lease(q: TaskQueue) -> None:
    await add(q, 1)
    leased = await q.lease_next(T0)
    assert leased is not None
    await q.replace_payload(leased.lease, {"sent": [1, 2]}, T0 + 1)
    await q.replace_payload(leased.lease, '{"sent": [1, 2, 3]}', T0 + 2)
    now = await q.get(leased.id)
    assert now is not None
    assert now.payload == '{"sent": [1, 2, 3]}'
    assert (now.state, now.lease_token, now.updated_at) == ("running", leased.lease_token, T0 + 2)


async def test_delete_removes_the_task(q: TaskQueue) -> None:
    t = await add(q, 1)
    leased = await q.lease_next(T0)
    assert leased is not None
    await q.delete(leased.lease)
    assert await q.get(t.id) is None


async def test_done_and_next_lease_in_one_call(q: TaskQueue) -> None:
    a1 = await add(q, 1)
    a2 = await add(q, 1, at=T0 + 1)
    leased = await q.lease_next(T0 + 2)
    assert leased is not None
    assert leased.id == a1.id
    nxt = await q.mark_done_and_lease_next(leased.lease, T0 + 3)
    assert nxt is not None
    assert nxt.id == a2.id
    assert (await q.get(a1.id)).state == "done"  # type: ignore[union-attr]
    assert await q.mark_done_and_lease_next(nxt.lease, T0 + 4) is None


# --- repair, poison tasks --------------------------------------------------------------------


async def test_repair_hands_expired_leases_back(q: TaskQueue) -> None:
    t1 = await add(q, 1, run_after=T0 - 50)
    t2 = await add(q, 2)
    l1 = await q.lease_next(T0, lease_for=10)
    l2 = await q.lease_next(T0, lease_for=100)
    assert l1 is not None
    assert l2 is not None
    assert await q.repair_expired(T0 + 9) == 0
    assert await q.repair_expired(T0 + 10) == 1
    back = await q.get(t1.id)
    assert back is not None
    assert (back.state, back.lease_token, back.lease_expires, back.run_after) == (
        "pending",
        None,
        None,
        T0 - 50,  # keeps its place at the front of its chat
    )
    # A lost lease is not a failed attempt: the attempt is given back, the loss counted.
    assert (back.attempts, back.lost_leases) == (0, 1)
    assert back.last_error is not None
    assert (await q.get(t2.id)).state == "running"  # type: ignore[union-attr]


async def test_a_task_that_kills_its_worker_dies_with_its_notice(q: TaskQueue) -> None:
    t = await add(q, 1, max_attempts=3)
    budget = lost_lease_budget(3)
    now = T0
    for loss in range(budget):
        leased = await q.lease_next(now, lease_for=10)
        assert leased is not None
        assert leased.id == t.id
        assert (leased.attempts, leased.lost_leases) == (1, loss)  # never a failure
        now += 11  # the worker died: no write-back, the lease runs out
    notice = await q.lease_next(now)  # the inline repair buried it and queued its notice
    assert notice is not None
    assert (notice.kind, notice.dedup_key) == ("notice", f"notice:{t.id}")
    assert json.loads(notice.payload)["reason"] == POISON_TELL
    dead = await q.get(t.id)
    assert dead is not None
    assert (dead.state, dead.lost_leases, dead.attempts) == ("dead", budget, 0)
    assert dead.last_error == (
        f"the task was in flight at {budget} process deaths in a row without progress"
    )


async def test_progress_between_lost_leases_is_not_held_against_a_task(q: TaskQueue) -> None:
    t = await add(q, 1, max_attempts=1)  # a budget of 2 lost leases without progress
    now = T0
    for _ in range(10):
        leased = await q.lease_next(now, lease_for=10)
        assert leased is not None
        assert leased.id == t.id
        await q.save_progress(leased.lease, now + 1, payload='{"sent": 1}')  # an album
        now += 11
        assert await q.reclaim_orphans(now) == 1
    back = await q.get(t.id)
    assert back is not None
    assert (back.state, back.lost_leases) == ("pending", 0)
    leased = await q.lease_next(now, lease_for=10)  # no progress now: 1, then 2 = dead
    assert leased is not None
    assert await q.reclaim_orphans(now) == 1
    assert (await q.get(t.id)).lost_leases == 1  # type: ignore[union-attr]
    leased = await q.lease_next(now, lease_for=10)
    assert leased is not None
    assert await q.reclaim_orphans(now) == 1
    assert (await q.get(t.id)).state == "dead"  # type: ignore[union-attr]


async def test_a_live_lease_is_reclaimed_at_startup_and_its_attempt_given_back(
    q: TaskQueue,
) -> None:
    t = await add(q, 1)
    await q.lease_next(T0, lease_for=90)
    assert await q.repair_expired(T0 + 1) == 0  # live: the sweep leaves it
    assert await q.reclaim_orphans(T0 + 1) == 1  # startup: its process is gone
    back = await q.get(t.id)
    assert back is not None
    assert (back.state, back.attempts, back.lost_leases) == ("pending", 0, 1)


# --- operators -------------------------------------------------------------------------------


async def test_stats(q: TaskQueue) -> None:
    empty = await q.stats(T0)
    assert empty.counts_by_state == {"pending": 0, "running": 0, "done": 0, "dead": 0}
    assert (empty.oldest_pending_age, empty.dead, empty.held_chats) == (None, 0, 0)
    for chat in range(4):
        await add(q, chat, at=T0 + chat)
    await add(q, 9, run_after=T0 + 1000)
    a = await q.lease_next(T0 + 10)
    b = await q.lease_next(T0 + 10)
    c = await q.lease_next(T0 + 10)
    assert a
    assert b
    assert c
    await q.mark_done(a.lease, T0 + 10)
    await q.dead_letter(b.lease, T0 + 10, "x", untold="a test")
    await q.hold_chat(5, T0 + 100)
    s = await q.stats(T0 + 20)
    assert s.counts_by_state == {"pending": 2, "running": 1, "done": 1, "dead": 1}
    assert (s.oldest_pending_age, s.dead, s.held_chats) == (17.0, 1, 1)
    assert (await q.stats(T0)).oldest_pending_age == 0.0  # never negative


async def test_list_and_get(q: TaskQueue) -> None:
    tasks = [await add(q, chat % 2, at=T0 + chat) for chat in range(5)]
    leased = await q.lease_next(T0 + 10)
    assert leased is not None
    await q.dead_letter(leased.lease, T0 + 11, "x", untold="a test")
    assert [t.id for t in await q.list()] == [t.id for t in reversed(tasks)]
    assert [t.id for t in await q.list(limit=2)] == [tasks[4].id, tasks[3].id]
    assert [t.id for t in await q.list(state="dead")] == [tasks[0].id]
    assert [t.id for t in await q.list(chat_id=1)] == [tasks[3].id, tasks[1].id]
    assert [t.id for t in await q.list(state="pending", chat_id=0)] == [tasks[4].id, tasks[2].id]
    assert await q.get(12345) is None


async def test_retry_a_dead_task(q: TaskQueue) -> None:
    t = await add(q, 1, dedup_key="k", max_attempts=1)
    leased = await q.lease_next(T0)
    assert leased is not None
    assert not await q.retry(t.id, T0)  # running, not dead
    await q.reschedule(leased.lease, T0, 1, "boom")
    assert (await q.get(t.id)).state == "dead"  # type: ignore[union-attr]
    notice = await q.lease_next(T0)  # its notice goes first in the chat
    assert notice is not None
    assert notice.kind == "notice"
    await q.mark_done(notice.lease, T0)
    twin = await add(q, 1, dedup_key="k", at=T0 + 1)
    assert not await q.retry(t.id, T0 + 2)  # its twin is live: leave it dead
    leased = await q.lease_next(T0 + 2)
    assert leased is not None
    assert leased.id == twin.id
    await q.mark_done(leased.lease, T0 + 3)
    assert await q.retry(t.id, T0 + 4)
    back = await q.get(t.id)
    assert back is not None
    assert (back.state, back.attempts, back.run_after) == ("pending", 0, T0 + 4)
    assert not await q.retry(99999, T0)


async def test_a_retried_poison_task_gets_its_lost_lease_budget_back(q: TaskQueue) -> None:
    t = await add(q, 1, max_attempts=1)
    for _ in range(lost_lease_budget(1)):
        assert await q.lease_next(T0) is not None
        await q.reclaim_orphans(T0)
    dead = await q.get(t.id)
    assert dead is not None
    assert (dead.state, dead.lost_leases) == ("dead", 2)
    assert await q.retry(t.id, T0 + 1)
    back = await q.get(t.id)
    assert back is not None
    assert (back.state, back.attempts, back.lost_leases) == ("pending", 0, 0)


async def test_purge_dead(q: TaskQueue) -> None:
    for i in range(3):
        await add(q, i)
        leased = await q.lease_next(T0 + i * 100)
        assert leased is not None
        await q.dead_letter(leased.lease, T0 + i * 100, "x", untold="a test")
    await add(q, 9)
    assert await q.purge_dead(T0 + 250, older_than=100) == 2
    assert await q.purge_dead(T0 + 250) == 1
    assert (await q.stats(T0)).counts_by_state["pending"] == 1


async def test_prune_done_only_old_done(q: TaskQueue, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_task_queue, "PRUNE_CHUNK", 3)  # several chunks
    for i in range(10):
        await add(q, i)
        leased = await q.lease_next(T0)
        assert leased is not None
        await q.mark_done(leased.lease, T0 + i)
    await add(q, 99)
    assert await q.prune_done(T0 + 86400 + 7) == 7
    s = await q.stats(T0)
    assert s.counts_by_state == {"pending": 1, "running": 0, "done": 3, "dead": 0}


async def test_move_chat_moves_tasks_holds_and_order(q: TaskQueue) -> None:
    a1 = await add(q, -100)
    a2 = await add(q, -100, at=T0 + 1)
    await add(q, 5, at=T0 + 2)
    await q.hold_chat(-100, T0 + 50)
    await q.hold_chat(-200, T0 + 10)
    assert await q.move_chat(-100, -200) == 2
    s = await q.stats(T0)
    assert s.held_chats == 1
    assert {t.chat_id for t in await q.list(state="pending")} == {-200, 5}
    t = await q.lease_next(T0 + 20)
    assert t is not None
    assert t.chat_id == 5
    t = await q.lease_next(T0 + 50)
    assert t is not None
    assert t.id == a1.id
    assert await q.lease_next(T0 + 50) is None
    await q.mark_done(t.lease, T0 + 50)
    t = await q.lease_next(T0 + 50)
    assert t is not None
    assert t.id == a2.id
    assert t.chat_id == -200


# --- payload identity ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"url": "https://x.com/1", "key": "x:1"}', {"url": "https://x.com/1", "key": "x:1"}),
        ('{"key": 12}', {"key": "12"}),
        ('{"url": true, "key": null}', {}),
        ('{"other": 1}', {}),
        ("[1, 2]", {}),
        ("", {}),
        ("\x00\xff garbage", {}),
        ('{"url": "https://x.com/a/status/2", "v": ', {"url": "https://x.com/a/status/2"}),
        ('{"url":"a\\"b", broken', {"url": 'a\\"b'}),
        ("[" * 100_000, {}),
    ],
    ids=["both", "int-key", "wrong-types", "none", "not-an-object", "empty", "binary",
         "truncated", "escaped-quote", "deep-nesting"],
)  # fmt: skip
def test_payload_identity(raw: str, expected: dict[str, str]) -> None:
    assert payload_identity(raw) == expected


# --- group commit ----------------------------------------------------------------------------


@pytest.fixture
def batches(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of the batches that ran (a spy on the group commit)."""
    sizes: list[int] = []
    real = group_commit._apply_batch

    def spy(conn: apsw.Connection, fns: list[Callable[[apsw.Connection], Any]]) -> Any:
        sizes.append(len(fns))
        return real(conn, fns)

    monkeypatch.setattr(group_commit, "_apply_batch", spy)
    return sizes


async def test_concurrent_calls_share_batches_but_not_outcomes(
    q: TaskQueue, batches: list[int]
) -> None:
    for chat in range(6):
        await add(q, chat)
    stale = await q.lease_next(T0, lease_for=1)
    assert stale is not None
    taken = await q.lease_next(T0 + 2)  # stale's task again, new token
    assert taken is not None
    assert taken.id == stale.id
    results = await asyncio.gather(
        *(q.lease_next(T0 + 2) for _ in range(4)),
        q.mark_done(stale.lease, T0 + 2),
        add(q, 50),
        q.heartbeat(taken.lease, T0 + 2, 10),
        return_exceptions=True,
    )
    leased = [r for r in results[:4] if isinstance(r, Task)]
    assert len(leased) == 4
    assert len({t.chat_id for t in leased}) == 4
    assert isinstance(results[4], LeaseLost)
    assert isinstance(results[5], Task)
    assert results[5].state == "pending"
    assert results[6] == T0 + 12
    assert (await q.stats(T0 + 2)).counts_by_state == {
        "pending": 2,
        "running": 5,
        "done": 0,
        "dead": 0,
    }
    assert batches == [6]  # the first call went alone, the other six together


async def test_a_database_error_in_a_batch_reaches_only_its_caller(
    q: TaskQueue, batches: list[int]
) -> None:
    await add(q, 1)
    await add(q, 2)

    def broken(c: apsw.Connection) -> None:
        c.execute("INSERT INTO no_such_table VALUES (1)")

    results = await asyncio.gather(
        q.lease_next(T0),  # alone: the next three share a batch
        q.lease_next(T0),
        q._write(broken),  # type: ignore[attr-defined]
        add(q, 3),
        return_exceptions=True,
    )
    assert batches == [3]  # rolled back as a whole, then each ran alone
    assert isinstance(results[2], StoreError)
    assert [isinstance(r, Task) and r.state for r in results] == [
        "running",
        "running",
        False,
        "pending",
    ]
    assert (await q.stats(T0)).counts_by_state == {
        "pending": 1,
        "running": 2,
        "done": 0,
        "dead": 0,
    }


async def test_a_call_that_wrote_then_raised_leaves_nothing_in_its_batch(
    q: TaskQueue, batches: list[int]
) -> None:
    await add(q, 1)
    await add(q, 2)

    def half_then_fails(c: apsw.Connection) -> None:
        c.execute("INSERT INTO link_cache VALUES ('half', '{}', 1)")
        raise RuntimeError("after a write")

    results = await asyncio.gather(
        q.lease_next(T0),  # alone: the next three share a batch
        q.lease_next(T0),
        q._write(half_then_fails),  # type: ignore[attr-defined]
        add(q, 3),
        return_exceptions=True,
    )
    assert batches == [3]  # aborted as a whole, then each ran alone
    assert isinstance(results[2], RuntimeError)
    assert [isinstance(r, Task) and r.state for r in results] == [
        "running",
        "running",
        False,
        "pending",
    ]
    left = await q._pool.run(  # type: ignore[attr-defined]
        lambda c: c.execute("SELECT count(*) FROM link_cache WHERE key = 'half'").fetchall()
    )
    assert left == [(0,)], "the write before the exception must not be committed"


async def test_a_lone_caller_goes_straight_and_a_crowd_is_batched(
    q: TaskQueue, batches: list[int]
) -> None:
    for chat in range(8):
        await add(q, chat)  # one at a time: no batch at all
    assert batches == []
    got = await asyncio.gather(*(q.lease_next(T0) for _ in range(8)))
    assert len({t.chat_id for t in got if t}) == 8
    assert batches == [7]
    got = await asyncio.gather(*(q.lease_next(T0) for _ in range(3)))
    assert got == [None, None, None]
    assert batches == [7, 3]  # after a crowd, the next caller joins a batch too


async def test_a_cancelled_caller_does_not_lose_the_others(q: TaskQueue) -> None:
    for chat in range(3):
        await add(q, chat)
    first = asyncio.ensure_future(q.lease_next(T0))
    second = asyncio.ensure_future(q.lease_next(T0))
    await asyncio.sleep(0)
    second.cancel()
    third = await q.lease_next(T0)
    assert (await first) is not None
    assert third is not None
    # The cancelled call ran all the same (like a pool call): its lease expires unused.
    assert (await q.stats(T0)).counts_by_state["running"] == 3


async def test_a_closed_pool_fails_every_caller(pool: DbPool, q: TaskQueue) -> None:
    await pool.close()
    with pytest.raises(StoreError):
        await q.lease_next(T0)
    results = await asyncio.gather(q.lease_next(T0), add(q, 1), return_exceptions=True)
    assert all(isinstance(r, StoreError) for r in results)


# --- the schema serves the queries (EXPLAIN QUERY PLAN) --------------------------------------


def plan(conn: apsw.Connection, sql: str, params: Any = None) -> list[str]:
    return [str(r[3]) for r in conn.execute("EXPLAIN QUERY PLAN " + sql, params).fetchall()]


PLANNED = {
    "claim": (_lease._CLAIM_SQL, {"token": "t", "expires": 1.0, "now": 0.0, "per_user": 2}),
    "repair": (_lost_leases._EXPIRED_SQL, {"now": 0.0}),
    "reclaim": (_lost_leases._ORPHANS_SQL, None),
    "lost": (
        _lost_leases._LOST_SQL,
        {"state": "pending", "lost": 1, "error": "e", "now": 0.0, "id": 1, "token": "t"},
    ),
    "next-head": (
        "SELECT chat_id, run_after, id FROM tasks INDEXED BY tasks_chat_pending"
        " WHERE state = 'pending' AND chat_id = 1 ORDER BY run_after, id LIMIT 1",
        None,
    ),
    "prune-done": (
        "DELETE FROM tasks WHERE id IN (SELECT id FROM tasks INDEXED BY tasks_done_updated"
        " WHERE state = 'done' AND updated_at < ? LIMIT ?)",
        (0.0, 10),
    ),
    "dead-list": (
        "SELECT * FROM tasks WHERE state = 'dead' ORDER BY updated_at DESC, id DESC LIMIT ?",
        (50,),
    ),
    "purge-dead": ("DELETE FROM tasks WHERE state = 'dead' AND updated_at < ?", (0.0,)),
    **{f"count-{state}": (sql, None) for state, sql in _admin._COUNT_SQL.items()},
    "oldest-pending": ("SELECT min(head_run_after) FROM chat_lanes", None),
    "dedup": (
        "SELECT * FROM tasks WHERE dedup_key = ? AND state IN ('pending', 'running')",
        ("k",),
    ),
    "link-cache-prune": ("DELETE FROM link_cache WHERE created_at < ?", (0.0,)),
}


def partial_indexes(conn: apsw.Connection) -> set[str]:
    rows = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index'").fetchall()
    return {str(name) for name, sql in rows if sql is not None and " WHERE " in str(sql)}


@pytest.mark.parametrize("name", list(PLANNED), ids=list(PLANNED))
async def test_queries_are_served_by_an_index(pool: DbPool, name: str) -> None:
    sql, params = PLANNED[name]
    steps, partial = await pool.run(lambda c: (plan(c, sql, params), partial_indexes(c)))
    assert steps, name
    # A scan is allowed only over a partial index: it walks exactly the rows
    # of one state (a count, or the newest dead letters), never the table.
    scans = [s for s in steps if s.startswith("SCAN")]
    assert all(s.split()[-1] in partial for s in scans), f"{name}: a table scan in {steps}"
    assert not [s for s in steps if "TEMP B-TREE" in s], f"{name}: a sort in {steps}"
    assert any(s.startswith(("SEARCH", "SCAN")) for s in steps), steps


async def test_claim_plan_walks_lanes_by_their_order(pool: DbPool) -> None:
    sql, params = PLANNED["claim"]
    steps = await pool.run(lambda c: plan(c, sql, params))
    assert any("chat_lanes_order" in s for s in steps), steps
    assert any("tasks_running_chat" in s for s in steps), steps


# --- lanes: migration backfill and consistency -----------------------------------------------


def lanes(conn: apsw.Connection) -> set[tuple[Any, ...]]:
    return {
        tuple(r) for r in conn.execute("SELECT chat_id, head_run_after, head_id FROM chat_lanes")
    }


def true_heads(conn: apsw.Connection) -> set[tuple[Any, ...]]:
    rows = conn.execute(
        "SELECT chat_id, run_after, id FROM tasks AS t WHERE state = 'pending' AND NOT EXISTS ("
        " SELECT 1 FROM tasks AS o WHERE o.state = 'pending' AND o.chat_id = t.chat_id"
        " AND (o.run_after < t.run_after OR (o.run_after = t.run_after AND o.id < t.id)))"
    )
    return {tuple(r) for r in rows}


def test_migration_backfills_lanes_for_existing_work(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    conn = connect(path)
    migrations.migrate(conn, migrations.load_migrations()[:2])  # before the lanes
    conn.executemany(
        "INSERT INTO tasks (kind, chat_id, payload, state, run_after, created_at, updated_at)"
        " VALUES ('x', ?, '{}', ?, ?, 0, 0)",
        [(1, "pending", 5.0), (1, "pending", 3.0), (1, "done", 1.0), (2, "running", 1.0),
         (2, "pending", 9.0), (3, "dead", 1.0)],
    )  # fmt: skip
    migrations.migrate(conn)
    assert lanes(conn) == true_heads(conn) == {(1, 3.0, 2), (2, 9.0, 5)}
    conn.close()


async def test_lanes_follow_every_kind_of_change(q: TaskQueue, pool: DbPool) -> None:
    async def check() -> None:
        got, want = await pool.run(lambda c: (lanes(c), true_heads(c)))
        assert got == want

    a = await add(q, 1, run_after=T0 + 5)
    await check()
    b = await add(q, 1, run_after=T0 + 1)  # a new head
    await check()
    await add(q, 2)
    leased = await q.lease_next(T0 + 2)
    assert leased is not None
    assert leased.id != b.id
    await check()
    await q.reschedule(leased.lease, T0 + 2, 100, "x")
    await check()
    leased = await q.lease_next(T0 + 5)
    assert leased is not None
    assert leased.id == b.id
    await check()
    await q.move_chat(1, 3)
    await check()
    await q.delete(leased.lease)
    await check()
    leased = await q.lease_next(T0 + 6)
    assert leased is not None
    assert leased.id == a.id
    await q.dead_letter(leased.lease, T0 + 6, "x")
    await check()
    assert await q.retry(a.id, T0 + 7)
    await check()

    def delete_pending_head(c: apsw.Connection) -> None:
        c.execute("DELETE FROM tasks WHERE id = ?", (a.id,))

    await pool.write(delete_pending_head)
    await check()


@pytest.mark.slow
def test_the_claim_is_not_recompiled_on_every_call_once_analyzed(tmp_path: Path) -> None:
    """PRAGMA optimize (the pool runs it at close) gathers STAT4 samples; with them
    SQLite re-prepares a statement whenever a range parameter changes value. The
    claim hides ``now`` from the planner, so an analyzed file claims as fast."""
    conns = {}
    for name in ("plain", "analyzed"):
        conn = connect(tmp_path / f"{name}.sqlite3")
        migrations.migrate(conn)
        with conn:
            conn.executemany(
                "INSERT INTO tasks (kind, chat_id, payload, run_after, created_at, updated_at)"
                " VALUES ('x', ?, '{}', ?, 0, 0)",
                [(i % 200, T0 + i) for i in range(1200)],
            )
        conns[name] = conn
    conns["analyzed"].execute("ANALYZE")
    best = {name: float("inf") for name in conns}
    now = T0 + 10_000
    for _ in range(5):
        for name, conn in conns.items():
            spent = 0.0
            for _ in range(100):
                now += 0.001  # a new value each call, as the clock gives
                conn.execute("BEGIN IMMEDIATE")
                started = time.perf_counter()
                task, _ = _lease.lease_next(conn, now, LEASE)
                spent += time.perf_counter() - started
                assert task is not None
                _lease.mark_done(conn, task.lease, now)
                conn.execute("COMMIT")
            best[name] = min(best[name], spent / 100)
    for conn in conns.values():
        conn.close()
    assert best["analyzed"] < 2.5 * best["plain"], f"claim cost per call: {best}"


async def test_lanes_follow_direct_writes_to_a_pending_head(q: TaskQueue, pool: DbPool) -> None:
    """Writers other than the queue: a head that stays pending keeps (or hands on) its lane."""
    first = await add(q, 1, run_after=T0 + 1)
    second = await add(q, 1, run_after=T0 + 2)
    lone = await add(q, 2, run_after=T0 + 1)
    statements = [
        ("UPDATE tasks SET run_after = ? WHERE id = ?", (T0 + 1.5, first.id)),  # still the head
        ("UPDATE tasks SET state = 'pending' WHERE id = ?", (first.id,)),  # a no-op rewrite
        ("UPDATE tasks SET run_after = ? WHERE id = ?", (T0 + 3, first.id)),  # now behind
        ("UPDATE tasks SET run_after = ? WHERE id = ?", (T0 + 9, second.id)),  # behind again
        ("UPDATE tasks SET chat_id = 1 WHERE id = ?", (lone.id,)),  # its chat's last task
        ("UPDATE tasks SET chat_id = 2 WHERE id = ?", (lone.id,)),  # and back
        ("UPDATE tasks SET state = 'done' WHERE chat_id = 1", ()),  # a chat's work all gone
    ]
    for sql, params in statements:
        await pool.write(lambda c, sql=sql, params=params: c.execute(sql, params))
        got, want = await pool.run(lambda c: (lanes(c), true_heads(c)))
        assert got == want, sql
    assert {chat for chat, _, _ in await pool.run(lanes)} == {2}
