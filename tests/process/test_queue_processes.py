"""Real processes on one database file: a stopped holder, and kill -9 at random moments.

The helpers under tests/helpers/ run the queue in child processes. ``now`` is
passed to them, so the outcome depends on the steps, not on the clock; the
processes, signals and SQLite locking are real.
"""

from __future__ import annotations

import json
import os
import random
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import apsw
import pytest
from conftest import wait_until

from standins.queue_sync import SyncQueue
from xbot.storage.db import connect, prepare_store
from xbot.storage.queue import _lost_leases

HELPERS = Path(__file__).parent.parent / "helpers"
T0 = 1_000_000.0
WAIT = 20.0  # the bound on any single wait for a child


def spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        bufsize=1,
    )


def read_line(proc: subprocess.Popen[str], timeout: float = WAIT) -> str:
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            raise AssertionError(f"child {proc.pid} said nothing for {timeout} s")
    return proc.stdout.readline()


def ask(proc: subprocess.Popen[str], **cmd: Any) -> dict[str, Any]:
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(cmd) + "\n")
    proc.stdin.flush()
    answer: dict[str, Any] = json.loads(read_line(proc))
    return answer


def is_stopped(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] == "T"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "q.sqlite3"
    prepare_store(path)
    return path


def row(path: Path, task_id: int) -> tuple[Any, ...]:
    conn = connect(path)
    try:
        return tuple(conn.execute("SELECT * FROM tasks WHERE id = ?", (task_id,)).fetchall()[0])
    finally:
        conn.close()


def test_a_stopped_holder_writes_nothing_after_a_takeover(db: Path) -> None:
    setup = connect(db)
    task = SyncQueue(setup).enqueue("x_post", {"url": "https://x.com/a/status/1"}, 7, now=T0)
    setup.close()
    a = spawn(str(HELPERS / "queue_client.py"), str(db))
    b = spawn(str(HELPERS / "queue_client.py"), str(db))
    try:
        assert json.loads(read_line(a)) == json.loads(read_line(b)) == {"ready": True}
        held = ask(a, op="lease", now=T0, lease_for=10.0)["task"]
        assert held["id"] == task.id

        os.kill(a.pid, signal.SIGSTOP)
        wait_until(lambda: is_stopped(a.pid), WAIT, "A to stop")
        assert ask(b, op="lease", now=T0 + 5, lease_for=10.0) == {"task": None}  # still A's
        taken = ask(b, op="lease", now=T0 + 11, lease_for=10.0)["task"]
        assert taken["id"] == task.id
        assert taken["lease_token"] != held["lease_token"]
        # A lost lease gives its attempt back and is counted on its own.
        assert (taken["attempts"], taken["lost_leases"]) == (1, 1)
        before = row(db, task.id)

        os.kill(a.pid, signal.SIGCONT)
        stale = {"task_id": task.id, "token": held["lease_token"], "now": T0 + 12}
        for op, name in [
            ("done", "mark_done"),
            ("heartbeat", "heartbeat"),
            ("reschedule", "reschedule"),
            ("dead_letter", "dead_letter"),
        ]:
            assert ask(a, op=op, **stale) == {"lost": name}
        assert row(db, task.id) == before, "the stopped holder changed the row"

        fresh = {"task_id": task.id, "token": taken["lease_token"], "now": T0 + 13}
        assert ask(b, op="heartbeat", **fresh) == {"ok": True}
        assert ask(b, op="done", **fresh) == {"ok": True}
        assert row(db, task.id)[4] == "done"
    finally:
        for p in (a, b):
            if p.poll() is None:
                os.kill(p.pid, signal.SIGCONT)
                p.kill()
            p.wait(WAIT)
            for pipe in (p.stdin, p.stdout):
                if pipe is not None:
                    pipe.close()


# --- kill -9 ---------------------------------------------------------------------------------

N_TASKS = 3000
KILLS = 40
WORKERS_PER_CHILD = 2


def check_after_kill(path: Path, next_now: float) -> int:
    """integrity ok; every task done, pending, or running with an expired lease; lanes
    true; and after repair (rolled back: the next child does it inline) none is stuck.
    Returns how many are not done."""
    conn = apsw.Connection(str(path))
    try:
        conn.set_busy_timeout(5000)
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        rows = conn.execute("SELECT state, lease_expires FROM tasks").fetchall()
        assert len(rows) == N_TASKS, "a task was lost"
        for state, expires in rows:
            assert state in ("done", "pending", "running"), state
            if state == "running":
                assert expires is not None
                assert expires <= next_now
        lanes = set(conn.execute("SELECT chat_id, head_id FROM chat_lanes").fetchall())
        heads = set(
            conn.execute(
                "SELECT chat_id, min(id) FROM tasks WHERE state = 'pending' GROUP BY chat_id"
            ).fetchall()
        )
        assert lanes == heads, "the chat lanes disagree with the tasks after a crash"
        conn.execute("BEGIN IMMEDIATE")
        _lost_leases.repair(conn, next_now)
        stuck = conn.execute("SELECT count(*) FROM tasks WHERE state = 'running'").fetchall()
        conn.execute("ROLLBACK")
        assert stuck == [(0,)]
        left = conn.execute("SELECT count(*) FROM tasks WHERE state != 'done'").fetchall()
        return int(left[0][0])  # type: ignore[arg-type]
    finally:
        conn.close()


@pytest.mark.slow
def test_kill_9_at_random_moments_loses_nothing(db: Path) -> None:
    seed = int(os.environ.get("XBOT_KILL_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    conn = connect(db)
    conn.execute("CREATE TABLE effects (task_id INTEGER NOT NULL, incarnation INTEGER NOT NULL)")
    q = SyncQueue(conn)
    # On a loaded machine a chat's head task can be in flight at every kill: past
    # 2 x max_attempts such deaths in a row the queue buries it as poison (its
    # notice a new row), which is test_crash_loop's rule, not this test's. The
    # budget here outlasts every kill, so "nothing lost" is all that is checked.
    for i in range(N_TASKS):
        q.enqueue(
            "x_post", {"url": f"https://x.com/a/status/{i}"}, i % 13, now=T0, max_attempts=KILLS
        )
    conn.close()

    worker = str(HELPERS / "queue_kill_worker.py")
    landed_mid_work = 0
    for k in range(KILLS):
        now = T0 + 1000.0 * (k + 1)  # past every lease of the previous incarnation
        child = spawn(worker, str(db), str(now), str(k))
        try:
            if k % 4 == 0:
                # Sometimes while it starts: opening, migrating, the first leases.
                time.sleep(rng.uniform(0.0, 0.15))
            else:
                assert read_line(child).strip() == "ready", f"seed {seed}"
                time.sleep(rng.uniform(0.0, 0.03))
            child.send_signal(signal.SIGKILL)
        finally:
            child.wait(WAIT)
            assert child.stdout is not None
            assert child.stdin is not None
            child.stdout.close()
            child.stdin.close()
        assert child.returncode in (-signal.SIGKILL, 0), f"the worker failed (seed {seed})"
        left = check_after_kill(db, now + 1000.0)
        landed_mid_work += child.returncode == -signal.SIGKILL and left > 0

    assert landed_mid_work >= 30, f"only {landed_mid_work} kills landed mid-work (seed {seed})"
    final = spawn(worker, str(db), str(T0 + 1000.0 * (KILLS + 1)), str(KILLS))
    try:
        assert final.wait(30) == 0
        assert final.stdout is not None
        assert final.stdout.read().split() == ["ready", "finished"]
    finally:
        assert final.stdout is not None
        assert final.stdin is not None
        final.stdout.close()
        final.stdin.close()

    conn = connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        states = dict(conn.execute("SELECT state, count(*) FROM tasks GROUP BY state").fetchall())
        assert states == {"done": N_TASKS}, f"seed {seed}"
        # Every task's work happened; a kill between the work and mark_done repeats
        # it (at least once, never lost): at most one repeat per worker per kill.
        missing = conn.execute(
            "SELECT count(*) FROM tasks WHERE id NOT IN (SELECT task_id FROM effects)"
        ).fetchall()
        assert missing == [(0,)]
        repeats = conn.execute("SELECT count(*) - count(DISTINCT task_id) FROM effects").fetchall()
        assert 0 <= repeats[0][0] <= KILLS * WORKERS_PER_CHILD  # type: ignore[operator]
    finally:
        conn.close()
