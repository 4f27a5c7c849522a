"""The two clocks a process has, and the one time line the bot measures everything on.

The rule (the queue's docstring says what it means for stored rows):

- **Durations are monotonic.** The bot's ``now`` is a `TimeLine`: the wall
  clock read once, at start-up, plus the monotonic seconds since. Every time
  the process writes (a retry's due time, a lease's expiry, a chat's hold, a
  task's creation) and every time it compares with one is on that line, so a
  retry written "in 30 s" is due 30 monotonic seconds later whatever the wall
  clock does meanwhile: NTP stepping a stale clock by hours moves nothing.
- **The wall clock is for the disk and the world.** It anchors the line at
  start-up (so a restart can resume what is stored) and it is what external
  dates are compared with (an X post's snowflake time, a file's mtime).
- **A step is noticed, never followed, while running.** `StepWatch` compares the
  two clocks (`detect_step`) and logs a step with how far the line now is from
  the wall clock (`TimeLine.offset`). The line itself does not move: re-anchoring
  a running process would race with every ``now`` read before the step and
  written after it (a worker reads the time, awaits one write, then writes a
  retry: an hour off). The next start puts the line back onto the wall clock and
  shifts what is stored by the same amount, in one transaction, before any worker
  runs (`xbot.storage.time_line`).

`Clocks` is the pair (injected: `ManualClocks` in tests); `detect_step` is pure
and has its table of cases in tests/test_clock.py.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final, Protocol, runtime_checkable

import attrs

from xbot.logs import kv

log = logging.getLogger(__name__)

# A step smaller than this is scheduling noise between two reads of the two clocks
# (or NTP slewing), not a step: NTP steps when the error is above 0.128 s.
STEP_TOLERANCE: Final = 1.0
BOOT_ID: Final = Path("/proc/sys/kernel/random/boot_id")


@runtime_checkable
class Clocks(Protocol):
    """The clock pair: the system's wall clock, its monotonic clock, and which boot this is.

    The monotonic clock is shared by every process of one boot (Linux's
    ``CLOCK_MONOTONIC``); the boot id says whether two readings share it.
    """

    def wall(self) -> float: ...

    def mono(self) -> float: ...

    def boot_id(self) -> str: ...


def _read_boot_id() -> str:
    try:
        return BOOT_ID.read_text().strip()
    except OSError:
        return ""  # not Linux: no reading is ever known to share a boot


@attrs.frozen
class SystemClocks:
    """The real clocks: ``time.time``, ``time.monotonic`` and the kernel's boot id."""

    _boot: str = attrs.field(factory=_read_boot_id)

    def wall(self) -> float:
        return time.time()

    def mono(self) -> float:
        return time.monotonic()

    def boot_id(self) -> str:
        return self._boot


@attrs.frozen
class SteppedClocks:
    """The real clocks with the wall clock moved by the seconds written in `offset_file`
    (read at each look; missing or unreadable: 0). Tests only (XBOT_TEST_WALL_CLOCK_FILE):
    a test steps the wall clock of a real bot process as NTP would."""

    offset_file: Path
    _system: SystemClocks = attrs.field(factory=SystemClocks)

    def wall(self) -> float:
        try:
            offset = float(self.offset_file.read_text().strip() or 0)
        except (OSError, ValueError):
            offset = 0.0
        return self._system.wall() + offset

    def mono(self) -> float:
        return self._system.mono()

    def boot_id(self) -> str:
        return self._system.boot_id()


@attrs.define
class ManualClocks:
    """Clocks that move only when told (tests): `advance` moves both, `step` the wall alone.

    Attributes:
        wall_at: the wall clock's reading.
        mono_at: the monotonic clock's reading.
        boot: the boot id; `reboot` changes it and restarts the monotonic clock.
    """

    wall_at: float = 1_750_000_000.0
    mono_at: float = 1000.0
    boot: str = "boot-1"

    def wall(self) -> float:
        return self.wall_at

    def mono(self) -> float:
        return self.mono_at

    def boot_id(self) -> str:
        return self.boot

    def advance(self, seconds: float) -> None:
        """Time passes: both clocks move."""
        self.wall_at += seconds
        self.mono_at += seconds

    def step(self, seconds: float) -> None:
        """NTP steps the wall clock (back when negative); the monotonic clock does not move."""
        self.wall_at += seconds

    def reboot(self, down_for: float = 0.0, *, wall_step: float = 0.0) -> None:
        """A new boot: a new id, the monotonic clock from near zero, the wall on by
        ``down_for`` (plus ``wall_step``: the clock the machine came back with)."""
        self.boot = f"{self.boot}+"
        self.mono_at = 5.0
        self.wall_at += down_for + wall_step


@attrs.frozen
class Reading:
    """Both clocks read together."""

    wall: float
    mono: float


def read(clocks: Clocks) -> Reading:
    return Reading(clocks.wall(), clocks.mono())


def detect_step(before: Reading, after: Reading, tolerance: float = STEP_TOLERANCE) -> float:
    """How far the wall clock stepped between two readings (back when negative); 0.0 if not.

    The wall clock should move as much as the monotonic clock: what it moved
    more or less is the step. Within ``tolerance`` it is noise (two reads are
    never simultaneous; NTP slews small errors).
    """
    step = (after.wall - before.wall) - (after.mono - before.mono)
    return step if abs(step) > tolerance else 0.0


@attrs.define
class TimeLine:
    """The process's ``now``: `start` at the monotonic reading `anchor`, monotonic ever after.

    Attributes:
        clocks: the pair it reads.
        start: the line's value at `anchor` (the wall clock at start-up, or the
            line a restart resumes: `xbot.storage.time_line`).
        anchor: the monotonic reading that `start` belongs to.
    """

    clocks: Clocks
    start: float
    anchor: float

    @classmethod
    def from_wall(cls, clocks: Clocks) -> TimeLine:
        """A line that starts at the wall clock now."""
        reading = read(clocks)
        return cls(clocks, reading.wall, reading.mono)

    def now(self) -> float:
        """Epoch seconds on the line: written to disk, compared with what is stored."""
        return self.start + (self.clocks.mono() - self.anchor)

    def wall(self) -> float:
        """The system's wall clock: only for dates from outside (a post's time, an mtime)."""
        return self.clocks.wall()

    def mono(self) -> float:
        return self.clocks.mono()

    def offset(self) -> float:
        """How far the line is ahead of the wall clock (negative: behind); 0 until a step."""
        return self.now() - self.clocks.wall()

    def to_wall(self, at: float) -> float:
        """A time on the line as the wall clock has it now (for showing a date)."""
        return at - self.offset()


@attrs.define
class StepWatch:
    """Notices steps of the wall clock under a running `TimeLine`, one log line each.

    The line does not follow a step (see the module's rule); the offset logged is
    how far stored times are from the wall clock until the next start rebases them.

    Attributes:
        steps: steps seen so far (for /stats and tests).
    """

    line: TimeLine
    tolerance: float = STEP_TOLERANCE
    steps: int = attrs.field(default=0, init=False)
    _last: Reading = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._last = read(self.line.clocks)

    def check(self) -> float:
        """The step since the last check (0.0: none); logged when there is one."""
        now = read(self.line.clocks)
        step = detect_step(self._last, now, self.tolerance)
        self._last = now
        if step:
            self.steps += 1
            log.warning(
                "wall clock stepped %s",
                kv(step=f"{step:+.1f}", line_ahead_by=f"{self.line.offset():+.1f}"),
            )
        return step


class OneClock:
    """A test's clock that is one number (``now``): wall and monotonic alike, never a step."""

    def __init__(self, now: Callable[[], float]) -> None:
        self._now = now

    def wall(self) -> float:
        return self._now()

    def mono(self) -> float:
        return self._now()

    def boot_id(self) -> str:
        return "one-clock"


def clock_pair(clock: Clocks | Callable[[], float]) -> Clocks:
    """The pair to build the time line on: given, or a test's one-number clock wrapped."""
    if isinstance(clock, Clocks):
        return clock
    return OneClock(clock)
