"""The queue against a model of a few lines, under random operations and clock jumps.

Every step compares every row with the model, so a task lost, a second live
lease in a chat, a lease out of order or a stale token that changed a row
all fail here. The queue runs on a real file through `SyncQueue` (the same
functions the async queue batches), to keep the examples fast.

It also holds the no-silent-death property: every transition into ``dead``
(a failed last attempt, a dead letter, the repair, the startup reclaim)
leaves a notice task for the chat, unless the dead task is a notice itself.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    rule,
)

from standins.queue_sync import SyncQueue
from xbot.errors import LeaseLost
from xbot.storage.db import connect, prepare_store
from xbot.storage.queue import NOTICE_KIND, Lease, Task, lost_lease_budget

T0 = 1_000_000.0
CHATS = st.integers(min_value=0, max_value=3)
STALE_ARGS: dict[str, tuple[Any, ...]] = {"heartbeat": (10.0,), "reschedule": (0.0, True)}


@attrs.define
class Model:
    """What a task should look like; the queue's rules, written the obvious way."""

    id: int
    chat: int
    run_after: float
    max_attempts: int
    dedup: str | None
    state: str = "pending"
    token: str | None = None
    expires: float | None = None
    attempts: int = 0
    kind: str = "k"
    lost: int = 0
    progressed: bool = False

    def row(self) -> tuple[Any, ...]:
        return (self.id, self.chat, self.state, self.token, self.expires, self.run_after,
                self.attempts, self.kind, self.lost)  # fmt: skip


def db_row(t: Task) -> tuple[Any, ...]:
    return (t.id, t.chat_id, t.state, t.lease_token, t.lease_expires, t.run_after, t.attempts,
            t.kind, t.lost_leases)  # fmt: skip


class QueueMachine(RuleBasedStateMachine):
    leases = Bundle("leases")

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="xbot-test-queue-"))
        path = self.dir / "q.sqlite3"
        prepare_store(path)
        self.conn = connect(path)
        self.q = SyncQueue(self.conn)
        self.now = T0
        self.model: dict[int, Model] = {}
        self.holds: dict[int, float] = {}
        self.tokens: set[str] = set()
        self.handed: dict[int, list[Lease]] = {}

    def teardown(self) -> None:
        self.conn.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # --- the model's rules ----------------------------------------------------------------

    def model_bury(self, m: Model) -> None:
        """Dead: the chat's notice appears with it (a notice's own death is only logged)."""
        m.state, m.token, m.expires = "dead", None, None
        if m.kind == NOTICE_KIND:
            return
        # A rowid table that never loses its last row: the next id is the largest plus one.
        notice_id = max(self.model) + 1
        self.model[notice_id] = Model(
            notice_id, m.chat, self.now, 8, f"notice:{m.id}", kind=NOTICE_KIND
        )

    def model_repair(self, *, every: bool = False) -> int:
        """Lost leases: the attempt given back; dead after a run without progress."""
        n = 0
        # In the order the repair finds them (tasks_running_chat: by chat), which is
        # the order their notices get their ids.
        for m in sorted(self.model.values(), key=lambda m: (m.chat, m.id)):
            if m.state != "running" or m.expires is None:
                continue
            if not every and m.expires > self.now:
                continue
            m.attempts -= 1
            m.lost = 0 if m.progressed else m.lost + 1
            m.progressed = False
            m.token = m.expires = None
            m.state = "pending"
            if m.lost >= lost_lease_budget(m.max_attempts):
                self.model_bury(m)
            n += 1
        return n

    def model_next(self) -> Model | None:
        busy = {m.chat for m in self.model.values() if m.state == "running"}
        held = {c for c, until in self.holds.items() if until > self.now}
        ready = [
            m
            for m in self.model.values()
            if m.state == "pending"
            and m.run_after <= self.now
            and m.chat not in busy
            and m.chat not in held
        ]
        # The oldest runnable task is also the first of its own chat: (run_after, id) order.
        return min(ready, key=lambda m: (m.run_after, m.id), default=None)

    def live(self, lease: Lease) -> Model | None:
        m = self.model.get(lease.task_id)
        if m is not None and m.state == "running" and m.token == lease.token:
            return m
        return None

    def fenced(self, lease: Lease, call: Any) -> Model | None:
        """Run a write-back; a stale lease must raise and leave the row as it was."""
        m = self.live(lease)
        before = self.q.get(lease.task_id)
        if m is None:
            now = self.model.get(lease.task_id)
            event(f"stale lease refused, task {now.state if now else 'deleted'}")
            with pytest.raises(LeaseLost, match=f"task {lease.task_id} "):
                call()
            assert self.q.get(lease.task_id) == before, "a stale token changed the row"
            return None
        call()
        return m

    # --- rules ----------------------------------------------------------------------------

    @initialize()
    def start(self) -> None:
        assert self.q.lease_next(self.now) is None

    @rule(
        chat=CHATS,
        delay=st.sampled_from([0.0, 0.0, 5.0, 50.0]),
        dedup=st.none() | st.sampled_from(["a", "b"]),
        max_attempts=st.integers(min_value=1, max_value=3),
    )
    def enqueue(self, chat: int, delay: float, dedup: str | None, max_attempts: int) -> None:
        t = self.q.enqueue(
            "k",
            {"chat": chat},
            chat,
            now=self.now,
            run_after=self.now + delay,
            dedup_key=dedup,
            max_attempts=max_attempts,
        )
        live = [
            m for m in self.model.values() if m.dedup == dedup and m.state in ("pending", "running")
        ]
        if dedup is not None and live:
            assert t.id == live[0].id
            return
        assert t.id not in self.model
        self.model[t.id] = Model(t.id, chat, self.now + delay, max_attempts, dedup)

    @rule(target=leases, lease_for=st.sampled_from([10.0, 30.0]))
    def lease(self, lease_for: float) -> Any:
        self.model_repair()
        expected = self.model_next()
        t = self.q.lease_next(self.now, lease_for)
        event("leased" if expected else "nothing to lease")
        if expected is None:
            assert t is None, f"leased {t} while nothing should be runnable"
            return multiple()
        assert t is not None, f"nothing leased, expected task {expected.id}"
        assert t.id == expected.id, f"leased {t.id}, expected {expected.id}"
        assert t.lease_token is not None
        assert t.lease_token not in self.tokens, "a token was handed out twice"
        self.tokens.add(t.lease_token)
        self.handed.setdefault(t.id, []).append(t.lease)
        expected.state, expected.token = "running", t.lease_token
        expected.expires = self.now + lease_for
        expected.attempts += 1
        expected.progressed = False
        return t.lease

    @rule(
        target=leases,
        lease_for=st.sampled_from([10.0, 30.0]),
        op=st.sampled_from(["heartbeat", "done", "reschedule", "dead_letter", "progress"]),
    )
    def take_over(self, lease_for: float, op: str) -> Any:
        """Jump past every live lease and lease again; the earlier holders of that
        task, now stale, try to write back (the case the token exists for)."""
        expiries = [m.expires for m in self.model.values() if m.expires is not None]
        self.now = max([self.now, *expiries])
        lease = self.lease(lease_for)
        if isinstance(lease, Lease):
            for stale in self.handed.get(lease.task_id, [])[:-1]:
                getattr(self, op)(stale, *STALE_ARGS.get(op, ()))
        return lease

    @rule(lease=leases, lease_for=st.sampled_from([10.0, 30.0]))
    def heartbeat(self, lease: Lease, lease_for: float) -> None:
        m = self.fenced(lease, lambda: self.q.heartbeat(lease, self.now, lease_for))
        if m is not None:
            m.expires = self.now + lease_for

    @rule(lease=leases)
    def done(self, lease: Lease) -> None:
        m = self.fenced(lease, lambda: self.q.mark_done(lease, self.now))
        if m is not None:
            m.state, m.token, m.expires = "done", None, None

    @rule(lease=leases, delay=st.sampled_from([0.0, 3.0, 40.0]), count=st.booleans())
    def reschedule(self, lease: Lease, delay: float, count: bool) -> None:
        call = lambda: self.q.reschedule(lease, self.now, delay, "e", count)  # noqa: E731
        m = self.fenced(lease, call)
        if m is not None:
            if not count:
                m.attempts -= 1
            m.token = m.expires = None
            m.run_after = self.now + delay
            m.state = "pending"
            if m.attempts >= m.max_attempts:
                self.model_bury(m)

    @rule(lease=leases)
    def dead_letter(self, lease: Lease) -> None:
        m = self.fenced(lease, lambda: self.q.dead_letter(lease, self.now, "e"))
        if m is not None:
            self.model_bury(m)

    @rule(lease=leases)
    def progress(self, lease: Lease) -> None:
        m = self.fenced(lease, lambda: self.q.save_progress(lease, self.now, payload='{"sent": 1}'))
        if m is not None:
            m.progressed = True

    @rule()
    def reclaim(self) -> None:
        """The process died and started again: every lease is lost."""
        assert self.q.reclaim_orphans(self.now) == self.model_repair(every=True)

    @rule(chat=CHATS, for_=st.sampled_from([5.0, 60.0]))
    def hold(self, chat: int, for_: float) -> None:
        until = self.q.hold_chat(chat, self.now + for_)
        self.holds[chat] = max(self.holds.get(chat, 0.0), self.now + for_)
        assert until == self.holds[chat]

    @rule(dt=st.sampled_from([1.0, 4.0, 11.0, 31.0, 100.0]))
    def tick(self, dt: float) -> None:
        self.now += dt

    @rule()
    def repair(self) -> None:
        assert self.q.repair_expired(self.now) == self.model_repair()

    # --- invariants -----------------------------------------------------------------------

    @invariant()
    def rows_match_the_model(self) -> None:
        rows = {
            r[0]: r
            for r in self.conn.execute(
                "SELECT id, chat_id, state, lease_token, lease_expires, run_after, attempts,"
                " kind, lost_leases FROM tasks"
            ).fetchall()
        }
        assert set(rows) == set(self.model), "a task was lost (or appeared)"
        for task_id, m in self.model.items():
            assert tuple(rows[task_id]) == m.row(), f"task {task_id}: {rows[task_id]} != {m}"

    @invariant()
    def no_silent_death(self) -> None:
        """Every dead task has its notice queued, or is a notice itself."""
        rows = self.conn.execute(
            "SELECT d.id FROM tasks AS d WHERE d.state = 'dead' AND d.kind <> ?"
            " AND NOT EXISTS (SELECT 1 FROM tasks AS n"
            "   WHERE n.kind = ? AND n.dedup_key = 'notice:' || d.id AND n.chat_id = d.chat_id)",
            (NOTICE_KIND, NOTICE_KIND),
        ).fetchall()
        assert rows == [], f"dead without a notice: {rows}"

    @invariant()
    def one_lease_per_chat(self) -> None:
        running = self.conn.execute(
            "SELECT chat_id, count(*) FROM tasks WHERE state = 'running' GROUP BY chat_id"
        ).fetchall()
        assert all(n == 1 for _, n in running), f"two running tasks in a chat: {running}"
        live = self.conn.execute(
            "SELECT chat_id, count(*) FROM tasks WHERE state = 'running' AND lease_expires > ?"
            " GROUP BY chat_id",
            (self.now,),
        ).fetchall()
        assert all(n == 1 for _, n in live)

    @invariant()
    def lanes_name_each_chats_first_pending_task(self) -> None:
        lanes = set(
            self.conn.execute("SELECT chat_id, head_run_after, head_id FROM chat_lanes").fetchall()
        )
        heads = {}
        for m in sorted(self.model.values(), key=lambda m: (m.run_after, m.id)):
            if m.state == "pending":
                heads.setdefault(m.chat, (m.chat, m.run_after, m.id))
        assert lanes == set(heads.values())


QueueMachine.TestCase.settings = settings(
    max_examples=100,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestQueueMachine = QueueMachine.TestCase
