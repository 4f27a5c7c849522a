"""Whether Telegram answers: the one hold for the whole bot while it does not.

A 5xx page, a refused or reset connection, a timeout (`TelegramUnreachable`, from
the one table in `xbot.sending.bot_errors`) is not a chat's business, so it is not
held per chat like a 429: it holds *every* call the bot makes. While Telegram is
down the sender refuses each call at once (`TelegramUnreachable(held=True)`, no
request goes out) except one probe at a time: the next real call once
`next_probe` has come. The probe's answer decides: any answer from Telegram (a
success, and also a 400 or a 429: Telegram is there) ends the hold; no answer
moves the next probe further out, doubling from `FIRST_PROBE` up to `PROBE_CAP`,
jittered down into ``[d/2, d)``.

Why a cap of 30 s: the backlog starts draining at the first probe after Telegram
is back, so the cap is the longest a recovered Telegram waits for us (plus the
probe's own round trip and a worker's nap); the issue asks for "within about a
minute". One request every 30 s is nothing to a front end that is recovering,
and one process has one prober, so there is no herd to spread; the jitter is for
many bots behind one outage.

The workers lease nothing while the hold stands and no probe is due
(`lease_wait`), and wake when it ends (`add_listener`): tasks wait in the queue,
their leases neither held nor renewed, no attempt burnt. When Telegram is back
the backlog drains at the pacer's pace, each chat's tasks in their order (the
queue's lanes), the oldest chats first: no herd either, since the workers are
few and the pacer spaces what they send.

It is the one hold mechanism of the bot (a chat's 429 is the pacer's `hold` and the
queue's chat hold, the same refusal at the same place, `Sender._line`), and it keeps
nothing waiting in memory: no task, timer or coroutine waits in it, so a stop has
nothing of it to cancel. What is held is in the queue (tasks put back, handler
replies queued as notices, `xbot.handlers.answers`), and survives a restart.

Every other Bot API call (getUpdates, the start-up's getMe and deleteWebhook or
setWebhook, setMyCommands) goes around the hold, and `observed` hears how each went
(from `xbot.sending.api_request.CountingRequest`, which sees every call; the hold's
own calls it leaves to the sender, whose classification is the table's). Such a
call is not the sender's business, so it moves the hold neither way:

- no answer to it (a 5xx, no HTTP answer) makes Telegram unreachable for the
  readers below, until that method is answered again or a call through the hold is,
  but starts no hold: an idle bot whose getUpdates fails has nothing to hold, and a
  hold only its probe could end would outlive the outage on a bot with nothing to
  send;
- an answer to it ends no hold: Telegram's `send` outages (a 502 for every send
  while getUpdates works, the stand-in's ``methods="send"``) answer getUpdates every
  few seconds, and each answer ending the hold would let every worker send into the
  outage, its backoff reset each time (a storm of sends, the hold flapping);
- but the answer of a method whose last call failed (getUpdates back after an
  outage of every method) brings the next probe forward to now (`hastened`): the
  backlog need not wait out the probe's backoff once the poller sees Telegram again.
  Only that method's own answer counts: in a `send` outage setMyCommands fails while
  getUpdates answers, and an answer of one after a failure of the other said nothing
  (the soak's `tgdown` saw it: a probe at each setMyCommands retry, 35 5xx instead
  of 5). So one early probe per method that recovers, no more than it asks itself.

So "Telegram is reachable" (`TelegramHealth.reachable`) is: no hold, and no call
around it whose method has failed since. The metrics' gauge, `/readyz`, the alerts,
`/stats`, systemd's STATUS line and `xbot doctor`'s record all read that one fact.

The arithmetic is pure functions of a `Hold` and ``now`` (a monotonic reading,
passed in); `TelegramHealth` is the thin stateful shell the sender and
`CountingRequest` move and everyone else reads. `record_path`, when set, is a small
JSON file written at each change of the fact, which `xbot doctor` reads from
another process.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import math
import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs

from xbot.errors import TelegramUnreachable
from xbot.logs import kv
from xbot.sending.api_request import UNANSWERED
from xbot.sending.bot_errors import NO_ANSWER
from xbot.storage.files import write_atomically

__all__ = [
    "FIRST_PROBE",
    "PROBE_CAP",
    "RECORD_NAME",
    "TELEGRAM_BUDGET",
    "HealthRecord",
    "Hold",
    "TelegramHealth",
    "admit",
    "answered",
    "failed",
    "hastened",
    "probe_delay",
    "read_record",
    "released",
    "wait",
]

log = logging.getLogger(__name__)

FIRST_PROBE = 1.0  # a blip passes within a second or two: look again soon
PROBE_CAP = 30.0  # the longest a recovered Telegram waits for our next probe (see above)
PROBING_POLL = 1.0  # while a probe is out, a worker looks again this often
RECORD_NAME = "telegram-health.json"
# How long a link may wait for Telegram before it is given up (its age, when it meets
# Telegram still down): 6 hours. Longer than the Bot API's outages we know of (minutes,
# at worst a few hours), so an outage costs a delay, not a link; short enough that a
# link is not delivered into a conversation that moved on a day ago, and well inside
# the 24 h Telegram keeps undelivered updates. A task that reaches a Telegram that is
# back is delivered, however old: the budget only ends waiting that is still waiting.
TELEGRAM_BUDGET = 6 * 3600.0


@attrs.frozen
class Hold:
    """The hold's state; every change is a pure function below.

    Attributes:
        down_at: monotonic time of the failure that started the hold (None: reachable).
        failures: calls without an answer in a row since (the first one included).
        next_probe: no call goes before this (monotonic).
        probing: a probe is out; no other call goes until it ends.
    """

    down_at: float | None = None
    failures: int = 0
    next_probe: float = 0.0
    probing: bool = False

    @property
    def reachable(self) -> bool:
        return self.down_at is None


def probe_delay(
    failures: int, *, jitter: float, first: float = FIRST_PROBE, cap: float = PROBE_CAP
) -> float:
    """Seconds from a failed call to the next probe: ``first * 2**(failures-1)`` up to
    `cap`, jittered down into ``[d/2, d)`` (`jitter` in [0, 1), e.g. `random.random()`)."""
    if not 0.0 <= jitter < 1.0:
        raise ValueError(f"jitter must be in [0, 1), got {jitter!r}")
    if not 0.0 < first <= cap or not math.isfinite(cap):
        raise ValueError(f"need 0 < first <= cap, got first={first!r} cap={cap!r}")
    steps = max(0, failures - 1)
    # Compare exponents, not powers: 2 ** steps overflows long before failures stops growing.
    at_cap = steps * math.log(2) >= math.log(cap / first)
    delay = cap if at_cap else first * 2**steps
    return delay * (0.5 + jitter / 2.0)


def failed(
    hold: Hold, now: float, *, jitter: float, first: float = FIRST_PROBE, cap: float = PROBE_CAP
) -> Hold:
    """A call got no answer from Telegram: the hold starts, or its next probe moves out."""
    failures = hold.failures + 1
    delay = probe_delay(failures, jitter=jitter, first=first, cap=cap)
    down_at = now if hold.down_at is None else hold.down_at
    return Hold(down_at, failures, now + delay, probing=False)


def answered(hold: Hold) -> Hold:
    """Telegram answered a call (whatever it said): no hold."""
    del hold  # whatever it was: Telegram is there
    return Hold()


def hastened(hold: Hold, now: float) -> Hold:
    """A call around the hold was answered after one failed: the next probe may go now
    (unless one is out already). The failures stay: a probe that fails still backs off."""
    if hold.reachable or hold.probing:
        return hold
    return attrs.evolve(hold, next_probe=min(hold.next_probe, now))


def released(hold: Hold) -> Hold:
    """A probe ended without an answer either way (cancelled at a stop): the next may go."""
    return attrs.evolve(hold, probing=False)


def admit(hold: Hold, now: float) -> tuple[Hold, float]:
    """May a call go at ``now``? ``(hold after, 0.0)`` if it may (as the probe, when
    held: `probing` is set), else ``(hold, seconds to wait)``."""
    if hold.reachable:
        return hold, 0.0
    if hold.probing:
        return hold, PROBING_POLL
    if now < hold.next_probe:
        return hold, hold.next_probe - now
    return attrs.evolve(hold, probing=True), 0.0


def wait(hold: Hold, now: float) -> float:
    """Seconds until a call may go (0: now), without taking the probe."""
    return admit(hold, now)[1]


@attrs.frozen
class HealthRecord:
    """What `xbot doctor` reads of a running bot's view of Telegram (its JSON file)."""

    reachable: bool
    down_since: float | None  # wall clock, epoch seconds
    error: str | None
    written_at: float  # wall clock


def read_record(data_dir: Path) -> HealthRecord | None:
    """The record a running bot wrote in ``data_dir`` (None: none, or unreadable)."""
    try:
        data = json.loads((data_dir / RECORD_NAME).read_text("utf-8"))
        return HealthRecord(
            reachable=bool(data["reachable"]),
            down_since=None if data["down_since"] is None else float(data["down_since"]),
            error=None if data.get("error") is None else str(data["error"]),
            written_at=float(data["written_at"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


Listener = Callable[[bool], None]
# Set while a call the hold admitted is out (`TelegramHealth.admitted`): its result is the
# sender's to give (`answered`/`failed`), so `observed` does not count it a second time.
_ADMITTED: contextvars.ContextVar[bool] = contextvars.ContextVar("xbot_admitted", default=False)


@attrs.define
class TelegramHealth:
    """Telegram's reachability for the whole bot, and the hold while it is down.

    Built once by the composition root (`xbot.app`, before the first call of the start-up);
    the sender moves the hold (`admitted`, `answered`, `failed`, `released` around
    each of its calls), `CountingRequest` tells it every call's result (`observed`);
    everyone else reads it.

    Attributes:
        clock: monotonic seconds, for the hold's arithmetic.
        wall: epoch seconds, for `down_since` (display only).
        first_probe, probe_cap: the probe backoff (tests scale them down).
        record_path: where each change of state is written for `xbot doctor` (None: nowhere).
        rng: the jitter's source.
        listeners: told `False` when the hold starts and `True` when sends may go
            again (the workers' doorbell); `add_listener` adds one later (tests).
    """

    clock: Callable[[], float] = time.monotonic
    wall: Callable[[], float] = time.time
    first_probe: float = FIRST_PROBE
    probe_cap: float = PROBE_CAP
    record_path: Path | None = None
    rng: random.Random = attrs.field(factory=random.Random)
    _listeners: list[Listener] = attrs.field(factory=list, alias="listeners")
    _hold: Hold = attrs.field(factory=Hold, init=False)
    # Methods called around the hold whose last call got no answer (none since through it).
    _unanswered: set[str] = attrs.field(factory=set, init=False)
    down_since: float | None = attrs.field(default=None, init=False)
    last_error: str | None = attrs.field(default=None, init=False)
    outages: int = attrs.field(default=0, init=False)

    @property
    def reachable(self) -> bool:
        """Telegram answers: no hold, and no method around it failed since."""
        return self._hold.reachable and not self._unanswered

    @property
    def held_until(self) -> float | None:
        """Monotonic time of the next probe while held (None: not held)."""
        return None if self._hold.reachable else self._hold.next_probe

    @property
    def hold(self) -> Hold:
        return self._hold

    def add_listener(self, callback: Listener) -> None:
        """`callback(False)` when the hold starts, `callback(True)` when sends may go
        again: the hold ended, or its probe was brought forward (sync, from the call)."""
        self._listeners.append(callback)

    def lease_wait(self) -> float:
        """Seconds before work that sends should start (0: now); takes no probe."""
        return wait(self._hold, self.clock())

    def check(self) -> None:
        """Raise `TelegramUnreachable(held=True)` if no call may go now (takes no probe)."""
        left = wait(self._hold, self.clock())
        if left > 0:
            raise self._held(left)

    def admit(self) -> bool:
        """Before a Bot API call: returns whether it is the probe; raises if held."""
        was_held = not self._hold.reachable
        self._hold, left = admit(self._hold, self.clock())
        if left > 0:
            raise self._held(left)
        return was_held

    @contextlib.contextmanager
    def admitted(self) -> Iterator[bool]:
        """Around one call through the hold: `admit` (raises if held; yields whether it
        is the probe), and the call marked as the hold's, so `observed` leaves its
        result to the caller's `answered`, `failed` or `released`."""
        probe = self.admit()
        token = _ADMITTED.set(True)
        try:
            yield probe
        finally:
            _ADMITTED.reset(token)

    def answered(self) -> None:
        """Telegram answered (a result, a 400, a 429...)."""
        was = self.reachable
        self._unanswered.clear()  # a call through the hold answered: the others' are stale
        if not self._hold.reachable:
            down_for = self.clock() - (self._hold.down_at or self.clock())
            self._hold = answered(self._hold)
            log.info(
                "telegram reachable again %s",
                kv(down_for=f"{down_for:.1f}s", since=_iso(self.down_since), error=self.last_error),
            )
            self._tell(sendable=True)
        self._settle(was)

    def failed(self, error: str) -> None:
        """A call got no answer (a 5xx, refused, reset, timed out): hold, or probe later."""
        was, holding = self.reachable, not self._hold.reachable
        self.last_error = error
        self._hold = failed(
            self._hold,
            self.clock(),
            jitter=self.rng.random(),
            first=self.first_probe,
            cap=self.probe_cap,
        )
        if holding:
            log.debug("telegram probe failed %s", kv(error=error, failures=self._hold.failures))
        else:
            log.warning(
                "telegram unreachable, holding every send %s",
                kv(error=error, probe_in=f"{self._hold.next_probe - self.clock():.1f}s"),
            )
            self._tell(sendable=False)
        self._settle(was)

    def observed(self, method: str, result: str) -> None:
        """How a Bot API call went, as `CountingRequest` saw it (``ok``, ``429``, ``4xx``,
        ``5xx``, ``network``). The hold's own calls are the sender's to tell: ignored.
        Any other call moves only the fact, and brings the probe forward when its
        method answers after failing (the module's docstring says why)."""
        if _ADMITTED.get():
            return
        was = self.reachable
        if result in UNANSWERED:
            if self._hold.reachable:  # while held, the hold's own error says more
                self.last_error = f"{method}: {'no answer' if result == 'network' else result}"
            self._unanswered.add(method)
        elif method in self._unanswered:
            self._unanswered.discard(method)
            sooner = hastened(self._hold, self.clock())
            if sooner != self._hold:
                self._hold = sooner
                log.info("telegram answers again, probing now %s", kv(call=method))
                self._tell(sendable=True)
        self._settle(was)

    def released(self) -> None:
        """A call was cancelled before Telegram's answer; if it was the probe, free it."""
        self._hold = released(self._hold)

    def _held(self, left: float) -> TelegramUnreachable:
        return TelegramUnreachable(
            NO_ANSWER.format(error=self.last_error or "held"), held=True, delay=left
        )

    def write_record(self) -> None:
        """Write the record now (at start: a record left by a process killed during an
        outage must not say "unreachable" for this one)."""
        self._write_record()

    def _settle(self, was: bool) -> None:
        """After a move: if the fact changed, its start (or end), the count, the record."""
        now = self.reachable
        if now == was:
            return
        if now:
            self.down_since = None
        else:
            self.down_since = self.wall()
            self.outages += 1
        self._write_record()

    def _tell(self, *, sendable: bool) -> None:
        for callback in list(self._listeners):
            try:
                callback(sendable)
            except Exception as exc:  # noqa: BLE001 - a reader's bug must not stop the sender
                log.warning("telegram health listener failed %s", kv(error=type(exc).__name__))

    def _write_record(self) -> None:
        if self.record_path is None:
            return
        data: dict[str, Any] = {
            "reachable": self.reachable,
            "down_since": self.down_since,
            "error": self.last_error,
            "written_at": self.wall(),
        }
        try:
            # Whole or not at all, even across a power cut; private like the data dir.
            write_atomically(self.record_path, json.dumps(data).encode())
        except OSError as exc:
            log.warning("telegram health record not written %s", kv(error=exc))


def _iso(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))
