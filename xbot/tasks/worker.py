"""Workers: lease a task, keep its lease alive, run it, and write back what happened.

Tasks raise outcomes (`RetryLater`, `RateLimited`, `Permanent`,
`TelegramUnreachable`...); the ladder in `Workers._settle` alone maps them to queue
write-backs, log lines and the dead-letter notice. Every write-back is fenced by
the lease token: a worker whose lease was lost stops and writes nothing.

While Telegram is unreachable (`xbot.sending.telegram_health`) the workers lease
nothing but the probe: each looks at `telegram_wait` before it leases and naps
until the next probe is due or the hold ends (the app wakes them). Tasks wait in
the queue, pending, their leases neither held nor renewed; a task whose call
found Telegram down is put back in its place without an attempt counted.

Slow work never starves quick work: a task still running after `detach_after`
seconds hands its worker back and goes on *detached*, in a pool of its own
(at most `long_running` tasks), its lease still held and beaten; the worker
leases again at once. Why this and not more workers, or network waits not
counted: the workers bound how many tasks *start* at a time (their first
seconds are the busy ones: look-ups, the database, the send of a cached
album), and most tasks end within those seconds; a task that outlives them is
almost always waiting on a slow network, which costs an open connection and
a temp file, not a worker. So a fresh link starts within `detach_after` of
arriving however many slow downloads are in flight, and the slow ones are
still bounded (the pool, each user's share in the queue's claim, the speed
floor, and `task_budget`). When the pool is full a task keeps its worker, as
before. Every run is bounded in time by `task_budget`: past it, it is given
up with one sentence to the chat (a lease kept alive by heartbeats never ends
by itself).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

import attrs

from xbot.clock import SystemClocks, TimeLine
from xbot.errors import (
    ChatMoved,
    ChatUnavailable,
    LeaseLost,
    OutageRetry,
    PayloadError,
    Permanent,
    RateLimited,
    RetryLater,
    StoreError,
    TelegramUnreachable,
)
from xbot.i18n import N_
from xbot.logs import kv
from xbot.media.speed_floor import took_too_long
from xbot.sending.telegram_health import TELEGRAM_BUDGET
from xbot.storage.queue import Effect, Task, TaskQueue
from xbot.tasks.backoff import compute_backoff, compute_outage_delay

log = logging.getLogger(__name__)

# After a hold or a backoff, the worker looks again this much later: the
# queue compares run_after with a clock read a little after the timer fires.
WAKE_MARGIN = 0.02


@attrs.define
class TaskContext:
    """What a running task may do to its own row (always under its lease).

    Progress is recorded in the payload (two-phase delivery). `save_payload`
    writes it at once; `stage_payload` keeps it until the task's ending
    writes it (the done mark, or any other write-back) or `flush` does. A
    staged record costs no transaction of its own: the last step of a task
    rides on its done mark. The rule that keeps that safe: `flush` before
    any effect outside the database that must not be repeated (the next
    album, a prompt), so a crash never repeats one already recorded.
    """

    task: Task
    queue: TaskQueue
    clock: Callable[[], float]
    _staged: bool = attrs.field(default=False, init=False)

    async def save_payload(
        self, payload: str | Mapping[str, object], *, effects: tuple[Effect, ...] = ()
    ) -> None:
        """Record progress now, with ``effects`` in the same transaction.

        Raises `LeaseLost` if the lease is gone (nothing is written then).
        """
        self.stage_payload(payload)
        await self.flush(effects=effects)

    def stage_payload(self, payload: str | Mapping[str, object]) -> None:
        """Record progress, written with the task's ending or the next `flush`."""
        text = payload if isinstance(payload, str) else json.dumps(payload)
        self.task = attrs.evolve(self.task, payload=text)
        self._staged = True

    async def flush(self, *, effects: tuple[Effect, ...] = ()) -> None:
        """Write the staged record (and ``effects``) now; nothing to do, no transaction."""
        payload = self.take_staged()
        if payload is None and not effects:
            return
        await self.queue.save_progress(
            self.task.lease, self.clock(), payload=payload, effects=effects
        )

    def take_staged(self) -> str | None:
        """The staged payload, handed to whoever writes it next (None: nothing staged)."""
        if not self._staged:
            return None
        self._staged = False
        return self.task.payload


@attrs.define
class _Run:
    """One run of a task, as its worker sees it: detached once it went on in the
    long-running pool (its done mark then leases nothing in passing)."""

    detached: bool = False


TaskHandler = Callable[[TaskContext], Coroutine[Any, Any, None]]
ChatMovedHook = Callable[[int, int], Coroutine[Any, Any, None]]
# Told of every run's ending: the task as it stands (its last payload) and the outcome.
FinishedHook = Callable[[Task, str], None]


@attrs.define
class Doorbell:
    """What an enqueue rings so an idle worker looks at the queue at once.

    Built before the workers and before those who enqueue (the forward prompt, the
    alerts, Telegram's return), and handed to each: neither needs the other built first.
    """

    _rung: asyncio.Event = attrs.field(factory=asyncio.Event, init=False)

    def ring(self) -> None:
        self._rung.set()

    def ring_if(self, sendable: bool) -> None:
        """Telegram's health tells it (`TelegramHealth` listeners): rung when sends may go."""
        if sendable:
            self._rung.set()

    async def wait(self, seconds: float) -> None:
        """Nap until the next ring, for at most `seconds`."""
        self._rung.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._rung.wait(), seconds)


@attrs.define
class Workers:
    """A fixed number of asyncio workers sharing one queue.

    Attributes:
        handlers: task kind → coroutine doing the work.
        lease_for: seconds a lease lasts without a heartbeat.
        heartbeat_every: seconds between heartbeats (a third of the lease).
        idle_poll: the longest nap between empty polls (an enqueue wakes us sooner).
        clock: ``now`` on the bot's time line, for every queue call.
        on_chat_moved: after a group became a supergroup and its tasks moved,
            moves the rest of what the chat owns (settings, records): (old, new).
        telegram_wait: seconds before work that talks to Telegram may start (0: now);
            `TelegramHealth.lease_wait` in the app: positive while Telegram's hold
            stands and no probe is due.
        telegram_budget: a task older than this that finds Telegram unreachable is
            given up (dead-lettered, its notice queued behind the hold).
        on_finished: told of each run's ending, with the outcome of the log line
            (the metrics count there); must not raise or block.
        detach_after: seconds after which a running task hands its worker back.
        long_running: the most tasks going on detached at once (then a task keeps
            its worker).
        task_budget: seconds one run of a task may take (None: no bound); the app's
            is `xbot.media.speed_floor.task_budget`.
        doorbell: what an enqueue rings (`wake`), shared with those who enqueue.
    """

    queue: TaskQueue
    handlers: Mapping[str, TaskHandler]
    count: int = 4
    lease_for: float = 90.0
    heartbeat_every: float = 30.0
    idle_poll: float = 1.0
    # The bot's time line (xbot.clock): monotonic seconds, never the wall clock read again.
    clock: Callable[[], float] = attrs.field(factory=lambda: TimeLine.from_wall(SystemClocks()).now)
    on_chat_moved: ChatMovedHook | None = None
    telegram_wait: Callable[[], float] = lambda: 0.0
    telegram_budget: float = TELEGRAM_BUDGET
    on_finished: FinishedHook | None = None
    detach_after: float = 5.0
    long_running: int = 16
    task_budget: float | None = None
    doorbell: Doorbell = attrs.field(factory=Doorbell)
    _loops: list[asyncio.Task[None]] = attrs.field(factory=list, init=False)
    _running: set[int] = attrs.field(factory=set, init=False)
    _detached: set[asyncio.Task[None]] = attrs.field(factory=set, init=False)
    _stopping: bool = attrs.field(default=False, init=False)
    done_count: int = attrs.field(default=0, init=False)

    def wake(self) -> None:
        """Called after an enqueue: an idle worker looks at the queue at once."""
        self.doorbell.ring()

    def start(self) -> None:
        self._stopping = False
        self._loops = [
            asyncio.create_task(self._loop(i), name=f"xbot-worker-{i}") for i in range(self.count)
        ]

    @property
    def in_flight(self) -> int:
        return len(self._running)

    @property
    def detached(self) -> int:
        """Tasks going on detached (in the long-running pool), not holding a worker."""
        return len(self._detached)

    async def stop(self, grace: float = 6.0) -> None:
        """Stop leasing; let running tasks finish for `grace` s, then hand their leases back.

        A worker runs its task in its own asyncio task: each ends by itself
        after the task in hand (one leased in passing, with the done mark of
        the last, is handed back); those still busy after `grace` are
        cancelled, and their task goes back without an attempt counted.
        """
        self._stopping = True
        self.doorbell.ring()
        # Loops first: a loop may still detach its task while it ends.
        everyone = [*self._loops, *self._detached]
        if everyone:
            _, busy = await asyncio.wait(everyone, timeout=grace)
            busy |= {run for run in self._detached if not run.done()}
            for loop in busy:
                loop.cancel()
            if busy:
                _, stuck = await asyncio.wait(busy, timeout=2.0)
                for loop in stuck:  # the hand-back itself hangs (a locked database)
                    loop.cancel()
        await asyncio.gather(*self._loops, *self._detached, return_exceptions=True)
        self._loops.clear()

    async def _loop(self, index: int) -> None:
        task: Task | None = None
        while not self._stopping:
            if task is None:
                held = self.telegram_wait()
                if held > 0:
                    # Telegram is down and no probe is due: nothing to lease for.
                    await self._nap(held)
                    continue
                try:
                    task = await self.queue.lease_next(self.clock(), self.lease_for)
                except StoreError as exc:
                    log.warning("lease failed %s", kv(worker=index, error=exc))
                    await self._nap(5.0)
                    continue
            if task is None:
                await self._nap(self.idle_poll)
                continue
            task = await self._run_or_detach(task)
        if task is not None:
            await self._hand_back(task)

    async def _run_or_detach(self, task: Task) -> Task | None:
        """Run `task` on this worker; past `detach_after`, hand the worker back (the run
        goes on in the long-running pool) while the pool has room.

        Returns the next task when the run's done mark leased it in passing.
        """
        run = _Run()
        work = asyncio.create_task(self._execute(task, run), name=f"xbot-task-{task.id}")
        try:
            done, _ = await asyncio.wait({work}, timeout=self.detach_after)
            if not done and len(self._detached) < self.long_running and not self._stopping:
                run.detached = True
                going_on = asyncio.create_task(self._going_on(work), name=f"xbot-long-{task.id}")
                self._detached.add(going_on)
                going_on.add_done_callback(self._detached.discard)
                return None
            return await work
        except asyncio.CancelledError:
            # Stopping: the run hands its task back itself once cancelled.
            work.cancel()
            await asyncio.wait({work})
            raise

    async def _going_on(self, work: asyncio.Task[Task | None]) -> None:
        """A detached run to its end. A task its done mark leased in passing (when the
        run was detached in that very moment) goes back in its place: no worker waits
        for it here."""
        try:
            following = await work
        except asyncio.CancelledError:
            work.cancel()
            await asyncio.wait({work})
            raise
        if following is not None:
            with contextlib.suppress(LeaseLost, StoreError):
                await self.queue.put_back(following.lease, self.clock(), "interrupted")
        self.wake()  # its chat's next task, and its user's, may run now

    async def _hand_back(self, task: Task) -> None:
        """Give a task back at once, its attempt given back (stopping, or interrupted)."""
        with contextlib.suppress(LeaseLost, StoreError):
            await self.queue.reschedule(
                task.lease, self.clock(), 0.0, "interrupted", count_attempt=False
            )

    def _wake_after(self, seconds: float) -> None:
        """Look at the queue again when a held or backed-off task becomes runnable.

        Without it the task waited its ``retry_after`` and then up to an idle
        poll more: a 429 costs exactly what Telegram asked, not a nap on top.
        """
        asyncio.get_running_loop().call_later(max(0.0, seconds) + WAKE_MARGIN, self.doorbell.ring)

    async def _nap(self, seconds: float) -> None:
        await self.doorbell.wait(seconds)

    async def _heartbeat(self, ctx: TaskContext, lost: Callable[[], None]) -> None:
        while True:
            try:
                await self.queue.heartbeat(ctx.task.lease, self.clock(), self.lease_for)
            except LeaseLost:
                log.warning("lease lost %s", kv(task=ctx.task.id, chat=ctx.task.chat_id))
                lost()
                return
            except StoreError as exc:
                log.warning("heartbeat failed %s", kv(task=ctx.task.id, error=exc))
            await asyncio.sleep(self.heartbeat_every)

    async def _execute(self, task: Task, run: _Run | None = None) -> Task | None:
        """Run one task; returns the next one when its done mark leased it in passing."""
        self._running.add(task.id)
        try:
            return await self._ladder(task, run or _Run())
        except LeaseLost:
            log.warning("lease lost during write-back %s", kv(task=task.id, chat=task.chat_id))
        except StoreError as exc:
            # The write-back did not land; the lease expires and repair hands it back.
            log.error("write-back failed %s", kv(task=task.id, chat=task.chat_id, error=exc))
        finally:
            self._running.discard(task.id)
        return None

    async def _ladder(self, task: Task, run: _Run) -> Task | None:
        """Run the task, then settle its ending; one log line per task."""
        ctx = TaskContext(task, self.queue, self.clock)
        following: Task | None = None
        started = time.monotonic()
        fields: dict[str, object] = {
            "task": task.id,
            "kind": task.kind,
            "chat": task.chat_id,
            "attempt": task.attempts,
        }
        outcome = "done"
        try:
            await self._run(ctx)
            following = await self._done(ctx, run)
            self.done_count += 1
        except asyncio.CancelledError:
            outcome = "handed_back"
            # Shutdown or a lost lease: give the task back at once, without an attempt.
            with contextlib.suppress(LeaseLost, StoreError):
                await ctx.flush()
                await self._hand_back(ctx.task)
            raise
        except Exception as exc:  # noqa: BLE001 - every ending is settled, none escapes
            outcome = "write_back_failed"  # what the line says if the settling write fails
            outcome = await self._settle(ctx, exc, fields)
        finally:
            fields["outcome"] = outcome
            if run.detached:
                fields["detached"] = True
            fields["duration"] = f"{time.monotonic() - started:.3f}"
            log.info("task %s", kv(**fields))
            if self.on_finished is not None:
                self.on_finished(ctx.task, outcome)
        return following

    async def _done(self, ctx: TaskContext, run: _Run) -> Task | None:
        """The done mark (with any staged record) and, unless stopping or detached, the
        next lease.

        One transaction for both: a thread hop and a commit fewer per task
        (docs/benchmarks.md, "Queue"). A detached run has no worker to run the next.
        """
        payload = ctx.take_staged()
        if self._stopping or run.detached:
            await self.queue.mark_done(ctx.task.lease, self.clock(), payload=payload)
            return None
        return await self.queue.mark_done_and_lease_next(
            ctx.task.lease, self.clock(), self.lease_for, payload=payload
        )

    async def _run(self, ctx: TaskContext) -> None:
        """The task's handler, in this worker's own asyncio task, its lease kept alive.

        Heartbeats start only once the task has run `heartbeat_every` seconds
        (a timer, not a task: most tasks end long before). A lost lease
        cancels the handler and ends as `LeaseLost`: nothing more is written.
        """
        handler = self.handlers.get(ctx.task.kind)
        budget: asyncio.Timeout | None = None
        if handler is None:
            raise PayloadError(f"no handler for task kind {ctx.task.kind!r}")
        me = asyncio.current_task()
        assert me is not None
        state = {"running": True, "lost": False}
        beat: list[asyncio.Task[None]] = []

        def lost() -> None:
            if state["running"]:
                state["lost"] = True
                me.cancel()

        def start_beating() -> None:
            beat.append(asyncio.create_task(self._heartbeat(ctx, lost)))

        timer = asyncio.get_running_loop().call_later(self.heartbeat_every, start_beating)
        try:
            async with asyncio.timeout(self.task_budget) as budget:
                await handler(ctx)
        except TimeoutError as exc:
            if budget is None or not budget.expired():
                raise
            raise Permanent(took_too_long(self.task_budget or 0).reason) from exc
        except asyncio.CancelledError:
            if state["lost"] and me.uncancel() == 0:  # ours alone, not a shutdown
                raise LeaseLost(ctx.task.id, "heartbeat") from None
            raise
        finally:
            state["running"] = False
            timer.cancel()
            for t in beat:
                t.cancel()

    async def _settle(self, ctx: TaskContext, exc: Exception, fields: dict[str, object]) -> str:
        """The one ladder: a task's failure becomes a write-back, a log field, a notice."""
        task, now = ctx.task, self.clock()
        if isinstance(exc, LeaseLost):
            return "lease_lost"  # someone else holds it now: write nothing
        if isinstance(exc, StoreError):
            # The database refused the task's own write (locked, disk full): a
            # write-back would meet the same refusal. The lease runs out and the
            # sweep hands the task back; nothing here is a bug to trace.
            fields["error"] = str(exc)
            return "store_unavailable"
        # What the task recorded but did not write yet goes first: a retry must
        # not repeat what was already done.
        await ctx.flush()
        if isinstance(exc, RateLimited):
            # Hold the whole chat (every pending task of it), and give this one back
            # without counting an attempt: a 429 is Telegram's pace, not a failure.
            await self.queue.rate_limited(task.lease, now, now + exc.retry_after, str(exc))
            fields["retry_after"] = round(exc.retry_after, 2)
            self._wake_after(exc.retry_after)
            return "rate_limited"
        if isinstance(exc, ChatUnavailable):
            # No notice: there is no one left in the chat to read it.
            error = f"chat unavailable: {exc}"
            await self.queue.dead_letter(task.lease, now, error, untold="the chat is gone")
            return "chat_unavailable"
        if isinstance(exc, Permanent):
            fields["error"] = exc.reason
            untold = None if exc.notify else "the task told the chat itself"
            await self.queue.dead_letter(task.lease, now, exc.reason, untold=untold)
            if exc.notify:
                self._notice_queued()
            return "dead"
        if isinstance(exc, PayloadError):
            reason = N_("the task could not be read")
            fields["error"] = str(exc)
            await self.queue.dead_letter_raw(task.lease, now, str(exc), tell=reason)
            self._notice_queued()
            return "dead"
        if isinstance(exc, TelegramUnreachable):
            return await self._unreachable(ctx, exc, fields)
        if isinstance(exc, ChatMoved) and exc.new_chat_id != task.chat_id:
            return await self._moved(ctx, exc, fields)
        if isinstance(exc, OutageRetry):
            return await self._outage(ctx, exc, fields)
        retry = exc if isinstance(exc, RetryLater) else None
        reason = retry.reason if retry else f"internal error ({type(exc).__name__})"
        fields["error"] = reason
        if retry is None:
            log.error("task failed unexpectedly %s", kv(**fields), exc_info=exc)
        if task.attempts >= task.max_attempts:
            await self.queue.dead_letter(task.lease, now, reason, tell=_plain(reason))
            self._notice_queued()
            return "dead"
        delay = compute_backoff(
            task.attempts, jitter=random.random(), retry_after=retry.delay if retry else None
        )
        await self.queue.reschedule(task.lease, now, delay, reason)
        fields["delay"] = round(delay, 1)
        self._wake_after(delay)
        return "retry"

    async def _moved(self, ctx: TaskContext, exc: ChatMoved, fields: dict[str, object]) -> str:
        """The group became a supergroup: all its tasks (this one included), its hold and
        its state move to the new id; then this one runs again there, no attempt counted."""
        task = ctx.task
        await self.queue.move_chat(task.chat_id, exc.new_chat_id)
        if self.on_chat_moved is not None:
            # Before the task is handed back, so it finds the chat's settings under the new id.
            try:
                await self.on_chat_moved(task.chat_id, exc.new_chat_id)
            except Exception as hook_exc:  # noqa: BLE001 - the tasks moved; log the rest
                log.warning(
                    "chat move hook failed %s",
                    kv(chat=task.chat_id, new=exc.new_chat_id, error=type(hook_exc).__name__),
                )
        await self.queue.reschedule(task.lease, self.clock(), 0.0, exc.reason, count_attempt=False)
        fields["moved_to"] = exc.new_chat_id
        return "chat_moved"

    async def _outage(self, ctx: TaskContext, exc: OutageRetry, fields: dict[str, object]) -> str:
        """Every source is down: retry until the task is `exc.budget` old, no attempt counted.

        `exc.notice` (the one "I will send this when it is back") is queued in the
        retry's own transaction: a chat is never promised a retry that is not there.
        """
        task, now = ctx.task, self.clock()
        age = now - task.created_at
        fields["error"] = exc.reason
        if age >= exc.budget:
            # The chat reads a msgid (translated in its notice); the operator, the minutes.
            reason = N_("X did not answer for too long")
            waited = f"X did not answer for {exc.budget / 60:.0f} minutes"
            await self.queue.dead_letter(task.lease, now, f"{exc.reason} ({waited})", tell=reason)
            self._notice_queued()
            return "dead"
        delay = compute_outage_delay(age, jitter=random.random(), at_least=exc.delay)
        await self.queue.reschedule(
            task.lease, now, delay, exc.reason, count_attempt=False, notice=exc.notice
        )
        fields["delay"] = round(delay, 1)
        return "outage_retry"

    async def _unreachable(
        self, ctx: TaskContext, exc: TelegramUnreachable, fields: dict[str, object]
    ) -> str:
        """Telegram did not answer: back in its place with no attempt counted (the hold,
        not a backoff, says when it runs again), until the task is `telegram_budget` old.

        Then it is given up with its one notice, which waits behind the hold like
        every send: the chat reads it once Telegram is back. A send that may have
        arrived (`exc.ambiguous`) is counted on the task.
        """
        task, now = ctx.task, self.clock()
        fields["error"] = exc.reason
        if exc.ambiguous:
            fields["ambiguous"] = True
        if now - task.created_at >= self.telegram_budget:
            reason = N_("Telegram did not answer for too long")
            waited = f"Telegram did not answer for {self.telegram_budget / 3600:g} h"
            await self.queue.dead_letter(task.lease, now, f"{exc.reason} ({waited})", tell=reason)
            self._notice_queued()
            return "dead"
        await self.queue.put_back(task.lease, now, exc.reason, ambiguous=exc.ambiguous)
        return "telegram_held" if exc.held else "telegram_unreachable"

    def _notice_queued(self) -> None:
        """The queue queued the chat's notice with the dead mark (`xbot.tasks.notices`
        words and sends it): an idle worker picks it up now, not after a nap."""
        self.wake()


def _plain(reason: str) -> str:
    """Internal reasons are not for users; keep the sentence short and human."""
    if reason.startswith("internal error"):
        return N_("something went wrong on my side")
    return reason
