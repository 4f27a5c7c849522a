"""Queue benchmark: xbot's lease-fenced queue against huey, persist-queue and litequeue.

    .venv/bin/python bench/queue_bench.py [--n 20000] [--backlog 200000] [--cap 8]

Each library runs with its durable defaults on a fresh file, on the same N
small tasks: the enqueue rate; lease+done with 1 and 4 concurrent workers
and with 2 processes; lease latency; the same at a backlog; the largest
``-wal`` seen (also with a stats query every 50 ms alongside, and, for xbot,
with an outside reader holding one read transaction open for the whole run).

xbot runs as the bot uses it: asyncio workers sharing one DbPool of 4, each
finishing a task and leasing its next in one call,
``mark_done_and_lease_next`` (fenced by its token, one task per chat at a
time, 500 chats), as `xbot.tasks.worker.Workers` does, each commit on the disk when
it returns (FULL, issue 31); a row runs `Workers` itself with a task that does
nothing, one the two separate calls, and one the pool at NORMAL (not durable: the
pool before issue 31). The peers run 4 threads
sharing the library's queue object (litequeue: one object per thread, its
single connection is not for sharing). A run that takes longer than
``--cap`` seconds stops there and reports its rate over what it did.

Prints a markdown table, then one line:
``queue-bench: lease+done x4: xbot N/s, best peer NAME M/s, ratio R``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing as mp
import os
import pickle
import platform
import shutil
import sqlite3
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apsw

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from xbot.errors import StoreError
from xbot.storage import db
from xbot.storage.db import DbPool, open_store
from xbot.storage.queue import TaskQueue
from xbot.tasks.worker import TaskContext, Workers

CHATS = 500
PAYLOAD = '{"url": "https://x.com/someone/status/%d", "chat": %d}'
STATS_EVERY = 0.05


# --- measuring ---------------------------------------------------------------------------------


@dataclass
class Run:
    lib: str
    scenario: str
    done: int = 0
    seconds: float = 0.0
    lat: list[float] = field(default_factory=list)
    wal_max: int = 0
    errors: int = 0
    dups: int = 0
    capped: bool = False
    note: str = ""

    @property
    def rate(self) -> float:
        return self.done / self.seconds if self.seconds else 0.0

    def pct(self, p: float) -> float:
        if not self.lat:
            return float("nan")
        s = sorted(self.lat)
        return s[min(len(s) - 1, int(p * len(s)))] * 1e3

    @property
    def lat_max(self) -> float:
        return max(self.lat) * 1e3 if self.lat else float("nan")


class WalWatch:
    """Samples the size of the -wal file every few ms from a thread."""

    def __init__(self, wal: Path) -> None:
        self.wal, self.max = wal, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.005):
            with contextlib.suppress(OSError):
                self.max = max(self.max, self.wal.stat().st_size)

    def __enter__(self) -> WalWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        with contextlib.suppress(OSError):
            self.max = max(self.max, self.wal.stat().st_size)


@contextlib.contextmanager
def sidecar(fn: Callable[[], object], every: float) -> Iterator[list[int]]:
    """Call ``fn`` every ``every`` s in a thread (an operator's stats); yields [calls]."""
    stop, calls = threading.Event(), [0]

    def loop() -> None:
        while not stop.wait(every):
            fn()
            calls[0] += 1

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    try:
        yield calls
    finally:
        stop.set()
        t.join()


# --- xbot --------------------------------------------------------------------------------------


def xbot_fill(path: Path, n: int, start: int = 0, chats: int = CHATS) -> None:
    """Bulk setup for a backlog (not measured): the same rows enqueue writes."""
    conn = apsw.Connection(str(path))
    conn.set_busy_timeout(5000)
    now = time.time()
    with conn:
        conn.executemany(
            "INSERT INTO tasks (kind, chat_id, payload, run_after, created_at, updated_at)"
            " VALUES ('x_post', ?, ?, ?, ?, ?)",
            ((i % chats, PAYLOAD % (i, i % chats), now, now, now) for i in range(start, start + n)),
        )
    conn.close()


async def xbot_enqueue(path: Path, n: int) -> Run:
    run = Run("xbot", "enqueue")
    pool = await open_store(path)
    q = TaskQueue(pool)
    t0 = time.perf_counter()
    for i in range(n):
        await q.enqueue("x_post", PAYLOAD % (i, i % CHATS), i % CHATS, now=time.time())
    run.seconds, run.done = time.perf_counter() - t0, n
    await pool.close()
    return run


async def xbot_work(
    path: Path,
    scenario: str,
    workers: int,
    n: int,
    cap: float,
    *,
    separate: bool = False,
    stats: bool = False,
    reader: bool = False,
    durable: bool = True,
) -> Run:
    """``durable``: the pool as the bot has it (FULL); else NORMAL, as before issue 31."""
    run = Run("xbot", scenario)
    if durable:
        pool = await open_store(path)
    else:
        pool = DbPool(path, synchronous="NORMAL")
        await asyncio.to_thread(pool.open)
    q = TaskQueue(pool)
    stop_at = time.perf_counter() + cap
    outside = None
    if reader:  # an outside reader: one read transaction held open for the whole run
        outside = apsw.Connection(str(path))
        outside.execute("BEGIN")
        outside.execute("SELECT count(*) FROM tasks").fetchall()

    async def worker() -> None:
        task = None
        while run.done < n:
            if time.perf_counter() > stop_at:
                run.capped = True
                return
            try:
                t0 = time.perf_counter()
                if not separate and task is not None:
                    task = await q.mark_done_and_lease_next(task.lease, time.time())
                    run.done += 1
                else:
                    if task is not None:
                        await q.mark_done(task.lease, time.time())
                        run.done += 1
                    t0 = time.perf_counter()
                    task = await q.lease_next(time.time())
                run.lat.append(time.perf_counter() - t0)
            except StoreError as exc:
                run.errors += 1
                run.note = str(exc)[:80]
                task = None
            if task is None:
                await asyncio.sleep(0.001)  # every chat with work is busy, or none left
        if task is not None:
            await q.reschedule(task.lease, time.time(), 0, "bench over", count_attempt=False)

    async def stats_loop() -> None:
        while True:
            await asyncio.sleep(STATS_EVERY)
            await q.stats(time.time())

    with WalWatch(Path(str(path) + "-wal")) as wal:
        side = asyncio.create_task(stats_loop()) if stats else None
        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(workers)))
        run.seconds = time.perf_counter() - t0
        if side is not None:
            side.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await side
    run.wal_max = wal.max
    if outside is not None:
        outside.execute("COMMIT")
        outside.close()
    await pool.close()
    return run


async def xbot_workers(path: Path, n: int, cap: float) -> Run:
    """The bot's own `Workers` (4) on a task kind that does nothing: its loop's whole cost."""
    run = Run("xbot", "x4 Workers")
    pool = await open_store(path)
    q = TaskQueue(pool)

    async def nothing(ctx: TaskContext) -> None:
        return None

    workers = Workers(q, {"x_post": nothing}, count=4, idle_poll=0.01)
    with WalWatch(Path(str(path) + "-wal")) as wal:
        t0 = time.perf_counter()
        workers.start()
        while workers.done_count < n:
            if time.perf_counter() - t0 > cap:
                run.capped = True
                break
            await asyncio.sleep(0.01)
        run.seconds = time.perf_counter() - t0
        run.done = workers.done_count
        await workers.stop(grace=1.0)
    run.wal_max = wal.max
    # A task the worker gave up on is an error (its notice, with no handler here, is not).
    dead = [t for t in await q.list(state="dead", limit=n) if t.kind == "x_post"]
    run.errors += len(dead)
    if dead:
        run.note = (dead[0].last_error or "")[:80]
    await pool.close()
    return run


def xbot_child(path: str, cap: float, start: Any, out: Any) -> None:
    async def main() -> tuple[int, list[float], int, list[int], str]:
        pool = await open_store(path, size=2)
        q = TaskQueue(pool)
        start.wait()
        stop_at = time.perf_counter() + cap
        done, lat, errors, note = 0, [], 0, ""
        task = None
        while time.perf_counter() < stop_at:
            try:
                t0 = time.perf_counter()
                if task is None:
                    task = await q.lease_next(time.time())
                else:
                    task = await q.mark_done_and_lease_next(task.lease, time.time())
                    done += 1
                lat.append(time.perf_counter() - t0)
                if task is None:
                    s = await q.stats(time.time())
                    if s.counts_by_state["pending"] == 0:
                        break
                    await asyncio.sleep(0.001)
                    continue
            except StoreError as exc:
                errors += 1
                note = str(exc)[:80]
                task = None
        if task is not None:
            await q.reschedule(task.lease, time.time(), 0, "bench over", count_attempt=False)
        await pool.close()
        return done, lat, errors, [], note

    out.put(asyncio.run(main()))


# --- peers ---------------------------------------------------------------------------------------


class Peer:
    """One library behind the same small interface (sync, thread-safe as the library is)."""

    name = ""
    delivery = ""
    sync = ""

    def __init__(self, root: Path) -> None:
        self.root = root

    def wal(self) -> Path:
        raise NotImplementedError

    def open(self) -> Any:
        raise NotImplementedError

    def open_per_thread(self) -> bool:
        return False

    def put(self, h: Any, i: int) -> None:
        raise NotImplementedError

    def take(self, h: Any) -> int | None:
        """Lease (dequeue) one task and finish it; the item's number, or None when empty."""
        raise NotImplementedError

    def lease(self, h: Any) -> Any:
        raise NotImplementedError

    def finish(self, h: Any, item: Any) -> int:
        raise NotImplementedError

    def stats(self, h: Any) -> object:
        raise NotImplementedError

    def fill(self, n: int, start: int) -> None:
        raise NotImplementedError

    def close(self, h: Any) -> None:
        """Release the handle."""


class Huey(Peer):
    name, delivery, sync = "huey SqliteStorage", "at-most-once (dequeue deletes)", "FULL"

    def wal(self) -> Path:
        return self.root / "huey.db-wal"

    def open(self) -> Any:
        from huey.storage import SqliteStorage

        return SqliteStorage(name="bench", filename=str(self.root / "huey.db"))

    def put(self, h: Any, i: int) -> None:
        h.enqueue(pickle.dumps(i))

    def lease(self, h: Any) -> Any:
        return h.dequeue()

    def finish(self, h: Any, item: Any) -> int:
        return int(pickle.loads(item))  # dequeue already deleted it: nothing to ack

    def stats(self, h: Any) -> object:
        return h.queue_size()

    def fill(self, n: int, start: int) -> None:
        h = self.open()
        h.close()
        conn = sqlite3.connect(str(self.root / "huey.db"))
        with conn:
            conn.executemany(
                "INSERT INTO task (queue, data, priority) VALUES ('bench', ?, 0)",
                ((pickle.dumps(i),) for i in range(start, start + n)),
            )
        conn.close()

    def close(self, h: Any) -> None:
        h.close()


class PersistQueue(Peer):
    name, delivery, sync = "persist-queue SQLiteAckQueue", "ack/nack", "FULL"

    def wal(self) -> Path:
        return self.root / "pq" / "data.db-wal"

    def open(self) -> Any:
        from persistqueue import SQLiteAckQueue

        return SQLiteAckQueue(str(self.root / "pq"), multithreading=True)

    def put(self, h: Any, i: int) -> None:
        h.put(i)

    def lease(self, h: Any) -> Any:
        from persistqueue.exceptions import Empty

        try:
            return h.get(block=False, raw=True)
        except Empty:
            return None

    def finish(self, h: Any, item: Any) -> int:
        h.ack(id=item["pqid"])
        return int(item["data"])

    def stats(self, h: Any) -> object:
        return h.ready_count()

    def fill(self, n: int, start: int) -> None:
        h = self.open()
        h.close()
        conn = sqlite3.connect(str(self.root / "pq" / "data.db"))
        now = time.time()
        with conn:
            conn.executemany(
                "INSERT INTO ack_queue_default (data, timestamp, status) VALUES (?, ?, 0)",
                ((pickle.dumps(i), now) for i in range(start, start + n)),
            )
        conn.close()

    def close(self, h: Any) -> None:
        h.close()


class LiteQueuePeer(Peer):
    name, delivery, sync = "litequeue", "status flag (done)", "NORMAL"

    def wal(self) -> Path:
        return self.root / "lq.db-wal"

    def open(self) -> Any:
        from litequeue import LiteQueue

        return LiteQueue(str(self.root / "lq.db"))

    def open_per_thread(self) -> bool:
        return True

    def put(self, h: Any, i: int) -> None:
        h.put(str(i))

    def lease(self, h: Any) -> Any:
        return h.pop()

    def finish(self, h: Any, item: Any) -> int:
        h.done(item.message_id)
        return int(item.data)

    def stats(self, h: Any) -> object:
        return h.qsize()

    def fill(self, n: int, start: int) -> None:
        from litequeue import uuid7

        h = self.open()
        h.conn.close()
        conn = sqlite3.connect(str(self.root / "lq.db"))
        now = time.time_ns()
        with conn:
            conn.executemany(
                "INSERT INTO Queue (data, message_id, status, in_time) VALUES (?, ?, 0, ?)",
                ((str(i), uuid7(), now) for i in range(start, start + n)),
            )
        conn.close()

    def close(self, h: Any) -> None:
        h.conn.close()


PEERS: list[type[Peer]] = [Huey, PersistQueue, LiteQueuePeer]


def peer_enqueue(peer: Peer, n: int) -> Run:
    run = Run(peer.name, "enqueue")
    h = peer.open()
    t0 = time.perf_counter()
    for i in range(n):
        peer.put(h, i)
    run.seconds, run.done = time.perf_counter() - t0, n
    peer.close(h)
    return run


def peer_work(
    peer: Peer, scenario: str, threads: int, n: int, cap: float, *, stats: bool = False
) -> Run:
    run = Run(peer.name, scenario)
    shared = None if peer.open_per_thread() else peer.open()
    handles = [peer.open() if shared is None else shared for _ in range(threads)]
    stop_at = time.perf_counter() + cap
    lock = threading.Lock()
    seen: set[int] = set()

    def worker(h: Any) -> None:
        lat: list[float] = []
        while True:
            with lock:
                if run.done >= n:
                    break
            if time.perf_counter() > stop_at:
                run.capped = True
                break
            try:
                t0 = time.perf_counter()
                item = peer.lease(h)
                lat.append(time.perf_counter() - t0)
                if item is None:
                    break
                number = peer.finish(h, item)
            except Exception as exc:  # a peer's worker dying is a result, not a crash
                with lock:
                    run.errors += 1
                    run.note = f"{type(exc).__name__}: {exc}"[:60]
                break
            with lock:
                run.done += 1
                run.dups += number in seen
                seen.add(number)
        with lock:
            run.lat.extend(lat)

    side: contextlib.AbstractContextManager[Any] = (
        sidecar(lambda: peer.stats(handles[0]), STATS_EVERY) if stats else contextlib.nullcontext()
    )
    with WalWatch(peer.wal()) as wal, side:
        ts = [threading.Thread(target=worker, args=(h,)) for h in handles]
        t0 = time.perf_counter()
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        run.seconds = time.perf_counter() - t0
    run.wal_max = wal.max
    for h in {id(h): h for h in handles}.values():
        peer.close(h)
    return run


def peer_child(cls_name: str, root: str, cap: float, start: Any, out: Any) -> None:
    peer = {c.__name__: c for c in PEERS}[cls_name](Path(root))
    h = peer.open()
    start.wait()
    stop_at = time.perf_counter() + cap
    done, lat, errors, numbers, note = 0, [], 0, [], ""
    while time.perf_counter() < stop_at:
        try:
            t0 = time.perf_counter()
            item = peer.lease(h)
            lat.append(time.perf_counter() - t0)
            if item is None:
                break
            numbers.append(peer.finish(h, item))
            done += 1
        except Exception as exc:  # a peer's worker dying is a result, not a crash
            errors += 1
            note = f"{type(exc).__name__}: {exc}"[:80]
            break
    peer.close(h)
    out.put((done, lat, errors, numbers, note))


def two_processes(lib: str, target: Any, args: tuple[Any, ...], cap: float) -> Run:
    ctx = mp.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=target, args=(*args, cap, start, out)) for _ in range(2)]
    for p in procs:
        p.start()
    time.sleep(1.0)  # let both import and open their queue before the clock starts
    t0 = time.perf_counter()
    start.set()
    results = [out.get(timeout=cap + 60) for _ in procs]
    seconds = time.perf_counter() - t0
    for p in procs:
        p.join()
    run = Run(lib, "2 processes", seconds=seconds)
    numbers: list[int] = []
    for r in results:
        run.done += r[0]
        run.lat.extend(r[1])
        run.errors += r[2]
        numbers.extend(r[3])
        run.note = run.note or r[4]
    run.dups = len(numbers) - len(set(numbers))
    run.capped = seconds >= cap
    return run


# --- the run -----------------------------------------------------------------------------------


def fresh(root: Path, name: str) -> Path:
    d = root / name
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    return d


def bench_xbot(root: Path, n: int, backlog: int, cap: float) -> dict[str, Run]:
    out: dict[str, Run] = {}

    def db(name: str) -> Path:
        return fresh(root, f"xbot-{name}") / "xbot.sqlite3"

    path = db("small")
    out["enqueue"] = asyncio.run(xbot_enqueue(path, n))
    out["x1"] = asyncio.run(xbot_work(path, "x1", 1, n, cap))
    for name, kw in [
        ("x4", {}),
        ("x4 separate", {"separate": True}),
        ("x4 stats", {"stats": True}),
        ("x4 reader", {"reader": True}),
        ("x4 not durable", {"durable": False}),
    ]:
        path = db(name.replace(" ", "-"))
        asyncio.run(_create(path))
        xbot_fill(path, n)
        out[name] = asyncio.run(xbot_work(path, name, 4, n, cap, **kw))  # type: ignore[arg-type]
    path = db("workers")
    asyncio.run(_create(path))
    xbot_fill(path, n)
    out["x4 Workers"] = asyncio.run(xbot_workers(path, n, cap))
    path = db("procs")
    asyncio.run(_create(path))
    xbot_fill(path, n)
    out["2 processes"] = two_processes("xbot", xbot_child, (str(path),), cap)
    path = db("backlog")
    asyncio.run(_create(path))
    xbot_fill(path, backlog + n)
    out["backlog x4"] = asyncio.run(xbot_work(path, "backlog x4", 4, n, cap))
    # A few hot chats hold the whole backlog: more workers than chats with work, so a
    # worker's lease_next finds every chat busy. The claim skips one lane per busy
    # chat; walking tasks instead would skip the whole backlog on every such call.
    path = db("hot")
    asyncio.run(_create(path))
    xbot_fill(path, backlog + n, chats=3)
    out["hot x4"] = asyncio.run(xbot_work(path, "hot x4", 4, n, cap))
    return out


async def _create(path: Path) -> None:
    pool = await open_store(path)
    await pool.close()


def bench_peer(cls: type[Peer], root: Path, n: int, backlog: int, cap: float) -> dict[str, Run]:
    out: dict[str, Run] = {}
    d = fresh(root, cls.__name__ + "-small")
    peer = cls(d)
    out["enqueue"] = peer_enqueue(peer, n)
    out["x1"] = peer_work(peer, "x1", 1, n, cap)
    for name, kw in [("x4", {}), ("x4 stats", {"stats": True})]:
        peer = cls(fresh(root, f"{cls.__name__}-{name.replace(' ', '-')}"))
        peer.fill(n, 0)
        out[name] = peer_work(peer, name, 4, n, cap, **kw)
    d = fresh(root, cls.__name__ + "-procs")
    cls(d).fill(n, 0)
    out["2 processes"] = two_processes(cls.name, peer_child, (cls.__name__, str(d)), cap)
    peer = cls(fresh(root, cls.__name__ + "-backlog"))
    peer.fill(backlog + n, 0)
    out["backlog x4"] = peer_work(peer, "backlog x4", 4, n, cap)
    return out


def fmt_rate(r: Run) -> str:
    return f"{r.rate:,.0f}" + ("*" if r.capped else "")


def mb(b: int) -> str:
    return f"{b / 1e6:.1f}"


def lat(r: Run) -> str:
    return f"{r.pct(0.5):.2f} / {r.pct(0.99):.2f} / {r.lat_max:.1f}"


def report(results: dict[str, dict[str, Run]], n: int, backlog: int, cap: float) -> str:
    lines = [
        f"N = {n:,} tasks; backlog = {backlog:,} + N; runs capped at {cap:g} s "
        "(`*`: capped, rate over what it did).",
        "",
        "| | xbot | " + " | ".join(c.name for c in PEERS) + " |",
        "| --- | --- | " + " | ".join("---" for _ in PEERS) + " |",
    ]
    libs = ["xbot", *[c.name for c in PEERS]]
    delivery = ["leased, token-fenced, per-chat order", *[c.delivery for c in PEERS]]
    sync = [f"{db.SYNCHRONOUS} (WAL)", *[c.sync for c in PEERS]]

    def row(label: str, cell: Callable[[Run], str], key: str) -> None:
        cells = []
        for lib in libs:
            r = results[lib].get(key)
            cells.append(cell(r) if r is not None else "—")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")

    lines.append("| delivery | " + " | ".join(delivery) + " |")
    lines.append("| synchronous | " + " | ".join(sync) + " |")
    row("enqueue /s", fmt_rate, "enqueue")
    row("lease+done /s, 1 worker", fmt_rate, "x1")
    row("lease+done /s, 4 workers", fmt_rate, "x4")
    row("lease+done /s, 2 processes", fmt_rate, "2 processes")
    row(f"lease+done /s, 4 workers, backlog {backlog // 1000}k", fmt_rate, "backlog x4")
    row("lease p50 / p99 / max ms, 1 worker", lat, "x1")
    row("lease p50 / p99 / max ms, 4 workers", lat, "x4")
    row("lease p50 / p99 / max ms, 2 processes", lat, "2 processes")
    row(f"lease p50 / p99 / max ms, backlog {backlog // 1000}k", lat, "backlog x4")
    row("largest -wal MB, 4 workers", lambda r: mb(r.wal_max), "x4")
    row("largest -wal MB, 4 workers + stats every 50 ms", lambda r: mb(r.wal_max), "x4 stats")
    row("lease+done /s, 4 workers + stats every 50 ms", fmt_rate, "x4 stats")
    row(f"largest -wal MB, backlog {backlog // 1000}k", lambda r: mb(r.wal_max), "backlog x4")
    row(
        "errors reaching a worker (all runs)",
        lambda r: str(r.errors),
        "__errors__",
    )
    row("duplicates, 2 processes", lambda r: str(r.dups), "2 processes")
    for lib in libs:
        first = results[lib].get("__errors__")
        if first is not None and first.note:
            lines.append(f"\nErrors, {lib}: {first.note}")
    x = results["xbot"]
    lines += [
        "",
        "xbot only:",
        "",
        "| xbot variant | lease+done /s | lease p50 / p99 / max ms | largest -wal MB |",
        "| --- | --- | --- | --- |",
        f"| 4 workers, `lease_next` and `mark_done`: two calls per task"
        f" | {fmt_rate(x['x4 separate'])} | {lat(x['x4 separate'])}"
        f" | {mb(x['x4 separate'].wal_max)} |",
        f"| `Workers` (the bot's own loop, 4 of them), a task that does nothing"
        f" | {fmt_rate(x['x4 Workers'])} | — | {mb(x['x4 Workers'].wal_max)} |",
        f"| 4 workers, backlog {backlog // 1000}k in 3 chats (a worker always finds every chat"
        f" busy) | {fmt_rate(x['hot x4'])} | {lat(x['hot x4'])} | {mb(x['hot x4'].wal_max)} |",
        f"| 4 workers, NORMAL: not durable (the pool before issue 31)"
        f" | {fmt_rate(x['x4 not durable'])} | {lat(x['x4 not durable'])}"
        f" | {mb(x['x4 not durable'].wal_max)} |",
        f"| 4 workers, an outside reader holds one read transaction open all run"
        f" | {fmt_rate(x['x4 reader'])} | {lat(x['x4 reader'])} | {mb(x['x4 reader'].wal_max)} |",
    ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=20_000, help="tasks per run (default 20000)")
    ap.add_argument("--backlog", type=int, default=200_000, help="backlog size (default 200000)")
    ap.add_argument("--cap", type=float, default=12.0, help="seconds a run may take (default 12)")
    ap.add_argument("--only", choices=["xbot", "peers"], help="run one side only")
    ap.add_argument("--dir", type=Path, help="where the files go (default: a temp dir)")
    args = ap.parse_args()
    root = args.dir or Path(tempfile.mkdtemp(prefix="xbot-bench-"))
    started = time.monotonic()
    load_before = os.getloadavg()[0]
    results: dict[str, dict[str, Run]] = {}
    try:
        if args.only != "peers":
            results["xbot"] = bench_xbot(root, args.n, args.backlog, args.cap)
            print(f"xbot done in {time.monotonic() - started:.0f} s", file=sys.stderr)
        for cls in PEERS:
            if args.only == "xbot":
                results[cls.name] = {}
                continue
            results[cls.name] = bench_peer(cls, root, args.n, args.backlog, args.cap)
            print(f"{cls.name} done in {time.monotonic() - started:.0f} s", file=sys.stderr)
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)
    for runs in results.values():
        notes = sorted({f"{r.scenario}: {r.note}" for r in runs.values() if r.note})
        runs["__errors__"] = Run(
            "", "", errors=sum(r.errors for r in runs.values()), note="; ".join(notes)
        )
    if "xbot" not in results:
        results["xbot"] = {}
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cpus, Python {platform.python_version()}"
        f", SQLite {apsw.sqlite_lib_version()} (apsw) / {sqlite3.sqlite_version} (sqlite3)"
        f"; took {time.monotonic() - started:.0f} s; load average {load_before:.2f} before,"
        f" {os.getloadavg()[0]:.2f} after"
    )
    print()
    print(report(results, args.n, args.backlog, args.cap))
    print()
    x4 = results["xbot"].get("x4")
    peers = [(name, runs["x4"].rate) for name, runs in results.items() if "x4" in runs]
    peers = [p for p in peers if p[0] != "xbot"]
    best = max(peers, key=lambda p: p[1]) if peers else ("none", 0.0)
    ratio = x4.rate / best[1] if x4 and best[1] else float("nan")
    print(
        f"queue-bench: lease+done x4: xbot {x4.rate if x4 else 0:.0f}/s, "
        f"best peer {best[0]} {best[1]:.0f}/s, ratio {ratio:.2f}"
    )


if __name__ == "__main__":
    main()
