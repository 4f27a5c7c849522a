"""A small circuit breaker per source: pure arithmetic over a frozen state, and the
health record `/stats` and `xbot doctor` read.

    closed ──N transient failures within `window`──▶ open (skipped for `cool_down`)
    open ──cool-down over──▶ half-open: one request goes through (the probe)
    half-open ──probe answers──▶ closed      half-open ──probe fails──▶ open, cool-down doubled

A skipped source costs a request nothing: no connection, no timeout. Only one
probe is in flight at a time; every other request skips the source until the
probe settles (or until `probe_timeout`, should its task be cancelled and never
report back).

`admit`, `succeeded` and `failed` are pure (time is passed in); `SourceHealth`
is the stateful shell around them, plus the counters the operator sees.
"""

from __future__ import annotations

import collections
import enum
from collections.abc import Callable

import attrs

HOUR = 3600.0


class Verdict(enum.Enum):
    """What a request does with a source."""

    ASK = "ask"  # closed: ask it
    PROBE = "probe"  # half-open: ask it, as the one probe
    SKIP = "skip"  # open (or a probe is in flight): go on to the next source at once


@attrs.frozen
class BreakerPolicy:
    """How quickly a source is given up on and tried again.

    Attributes:
        threshold: transient failures within `window` that open the breaker.
        window: seconds the failures are counted over.
        cool_down: seconds the first opening lasts; each failed probe doubles it,
            up to `max_cool_down`.
        probe_timeout: seconds after which a probe that never reported back no
            longer blocks the next one.
    """

    threshold: int = 3
    window: float = 60.0
    cool_down: float = 30.0
    max_cool_down: float = 120.0
    probe_timeout: float = 60.0


@attrs.frozen
class BreakerState:
    """One source's breaker.

    Attributes:
        failures: when the recent transient failures happened (closed only; oldest first).
        open_until: while open, when the next probe may go (None: closed).
        cool_down: the length of the current (or last) opening.
        probe_started: when the probe in flight went out (None: no probe in flight).
    """

    failures: tuple[float, ...] = ()
    open_until: float | None = None
    cool_down: float = 0.0
    probe_started: float | None = None

    @property
    def is_open(self) -> bool:
        return self.open_until is not None


def admit(state: BreakerState, policy: BreakerPolicy, now: float) -> tuple[Verdict, BreakerState]:
    """Whether a request asks this source now, and the state after deciding."""
    if state.open_until is None:
        return Verdict.ASK, state
    if now < state.open_until:
        return Verdict.SKIP, state
    if state.probe_started is not None and now - state.probe_started < policy.probe_timeout:
        return Verdict.SKIP, state  # one probe at a time
    return Verdict.PROBE, attrs.evolve(state, probe_started=now)


def succeeded(state: BreakerState) -> BreakerState:
    """The source answered (a post, or a definite "not found"): closed, slate clean."""
    return BreakerState()


def failed(state: BreakerState, policy: BreakerPolicy, now: float) -> BreakerState:
    """The source failed transiently (down, 5xx, 429, junk instead of its JSON)."""
    if state.open_until is not None:
        if state.probe_started is None:
            return state  # an answer to a request sent before it opened: already counted
        # The probe failed: open again, for longer.
        longer = min(policy.max_cool_down, max(policy.cool_down, state.cool_down * 2))
        return BreakerState(open_until=now + longer, cool_down=longer)
    recent = (*(t for t in state.failures if now - t < policy.window), now)
    if len(recent) >= policy.threshold:
        return BreakerState(open_until=now + policy.cool_down, cool_down=policy.cool_down)
    return attrs.evolve(state, failures=recent)


# -- the stateful shell ----------------------------------------------------------------


Transition = Callable[[str, str, "SourceHealth"], None]


@attrs.define
class SourceHealth:
    """A source's breaker and what the operator sees of it.

    Attributes:
        name: the source (``fxtwitter``, ``vxtwitter``, ``syndication``).
        on_change: called with (name, ``opened`` | ``closed``, self) when the
            breaker opens or closes: the one log line per change.
        last_error: the last failure, one line.
        successes_total, failures_total: answers and transient failures since start
            (the metrics' counters; `counts` is the last hour's).
    """

    name: str
    policy: BreakerPolicy = attrs.field(factory=BreakerPolicy)
    on_change: Transition | None = None
    state: BreakerState = attrs.field(factory=BreakerState)
    last_error: str = ""
    last_error_at: float | None = None
    successes_total: int = 0
    failures_total: int = 0
    _successes: collections.deque[float] = attrs.field(
        factory=lambda: collections.deque(maxlen=10_000)
    )
    _failures: collections.deque[float] = attrs.field(
        factory=lambda: collections.deque(maxlen=10_000)
    )

    def admit(self, now: float) -> Verdict:
        verdict, self.state = admit(self.state, self.policy, now)
        return verdict

    def succeeded(self, now: float) -> None:
        was_open = self.state.is_open
        self.state = succeeded(self.state)
        self._successes.append(now)
        self.successes_total += 1
        if was_open:
            self._changed("closed")

    def failed(self, now: float, error: str) -> None:
        was_open = self.state.is_open
        self.state = failed(self.state, self.policy, now)
        self._failures.append(now)
        self.failures_total += 1
        self.last_error = " ".join(error.split())[:200]
        self.last_error_at = now
        if self.state.is_open and not was_open:
            self._changed("opened")

    def junk(self, now: float, error: str) -> None:
        """An answer that is no post: counted and shown, but no sign the source is down."""
        self._failures.append(now)
        self.last_error = " ".join(error.split())[:200]
        self.last_error_at = now

    def skipped_until(self, now: float) -> float | None:
        """While open: when the next probe may go; None when closed."""
        until = self.state.open_until
        return until if until is not None and until > now else None

    def counts(self, now: float) -> tuple[int, int]:
        """Successes and failures in the last hour."""
        return (
            sum(1 for t in self._successes if now - t < HOUR),
            sum(1 for t in self._failures if now - t < HOUR),
        )

    def _changed(self, what: str) -> None:
        if self.on_change is not None:
            self.on_change(self.name, what, self)
