"""How slow a download may be, and how long a task may take: the time budgets.

Timeouts per read do not bound a transfer: a server that sends one byte every
few seconds never lets a read time out, and held a worker (and a lease kept
alive by heartbeats) for ever. Two rules bound it instead:

- **The speed floor** (`SpeedFloor`): every ``rate × window`` bytes (a *block*)
  must arrive within ``window`` seconds of the previous block. A block rather
  than a sliding average, because then the verdict needs no history (two
  numbers, `Pace`) and a timer can give it at the block's due time even when no
  byte comes at all: a transfer that is still short of its block when the block
  is due is too slow, whatever arrives later. The time before the first byte
  (connecting, the headers) counts in the first block, so headers sent a byte
  at a time are caught too. A file that ends before a block is complete is
  simply done.
- **The task's wall-clock budget** (`task_budget`): a base for what every task
  does (look-ups, sends, retries inside it) plus the largest file the bot may
  send, arriving at exactly the floor's speed. So the budget never ends a task
  the floor would let through for one file of the biggest size, and nothing that
  slips past the floor (many small files, a yt-dlp run re-extracting) holds a
  slot for longer than that.

`step` is pure (time passed in; a table of cases in tests/test_speed_floor.py).
`SpeedWatch` is the shell the download loops call per chunk: an asyncio timer
that fires at the block's due time and ends the transfer (its connection closed
as the cancelled ``with`` unwinds) as `TooSlow`.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import AsyncIterator

import attrs

from xbot.config import Settings
from xbot.errors import TooSlow
from xbot.i18n import N_, reason_template

TOO_SLOW = reason_template(
    N_(
        "The server sent the file too slowly (under {rate} kB a second for {seconds} seconds), "
        "so I gave up."
    )
)
TOOK_TOO_LONG = reason_template(N_("It took too long (over {minutes} min), so I gave up."))
# A site's answer about a post (yt-dlp's or gallery-dl's extraction) that did not come in time.
SLOW_SITE = N_("That site took too long to answer, so I gave up on this link.")
# What every task may spend besides its downloads: API look-ups, Telegram's
# uploads and their retries inside the task. Generous: the floor, not this,
# is what stops a dripping download.
BASE_BUDGET = 600.0


@attrs.frozen
class SpeedFloor:
    """The slowest a transfer may go.

    Attributes:
        rate: bytes per second, on average over each block.
        window: seconds a block of ``rate × window`` bytes may take.
    """

    rate: float = 10_000.0
    window: float = 60.0

    @classmethod
    def configured(cls, settings: Settings) -> SpeedFloor:
        """The operator's floor (`XBOT_MIN_SPEED_KBPS`, `XBOT_SPEED_WINDOW_S`)."""
        return cls(rate=settings.min_speed_kbps * 1000, window=settings.speed_window)

    @property
    def block(self) -> int:
        return max(1, int(self.rate * self.window))

    def error(self) -> TooSlow:
        rate = f"{self.rate / 1000:g}"
        return TooSlow(TOO_SLOW.format(rate=rate, seconds=f"{self.window:g}"))


DEFAULT_FLOOR = SpeedFloor()


@attrs.frozen
class Pace:
    """Where the current block started: at ``since`` (seconds), with ``base`` bytes done."""

    since: float
    base: int = 0


def step(floor: SpeedFloor, pace: Pace, now: float, done: int) -> Pace | None:
    """The pace after `done` bytes at `now`: a new block once the current one is full,
    the same one while it is on time, None when it is due and still short (too slow)."""
    if done - pace.base >= floor.block:
        return Pace(now, done)
    if now - pace.since >= floor.window:
        return None
    return pace


def due(floor: SpeedFloor, pace: Pace) -> float:
    """When the current block must be full."""
    return pace.since + floor.window


def took_too_long(seconds: float) -> TooSlow:
    """A run that used up its time (a task's budget, an extraction's limit)."""
    return TooSlow(TOOK_TOO_LONG.format(minutes=f"{math.ceil(seconds / 60):.0f}"))


def task_budget(upload_limit: int, floor: SpeedFloor = DEFAULT_FLOOR) -> float:
    """Seconds a task may run: `BASE_BUDGET` plus the upload limit at the floor's speed."""
    return BASE_BUDGET + upload_limit / floor.rate


@attrs.define
class SpeedWatch:
    """The floor applied to one transfer, on the event loop's clock.

    ``async with watch.held(): … watch.sample(done) …``: `held` raises `TooSlow`
    when a block is not full by its due time, having cancelled what ran inside.

    Attributes:
        floor: the rule.
    """

    floor: SpeedFloor = DEFAULT_FLOOR
    _pace: Pace = attrs.field(factory=lambda: Pace(0.0), init=False)
    _timer: asyncio.Timeout | None = attrs.field(default=None, init=False)

    @staticmethod
    def _now() -> float:
        # The loop's clock: the one ``asyncio.timeout_at`` compares with.
        return asyncio.get_running_loop().time()

    @contextlib.asynccontextmanager
    async def held(self) -> AsyncIterator[SpeedWatch]:
        self._pace = Pace(self._now())
        try:
            async with asyncio.timeout_at(due(self.floor, self._pace)) as timer:
                self._timer = timer
                yield self
        except TimeoutError as exc:
            if self._timer is not None and self._timer.expired():
                raise self.floor.error() from exc
            raise
        finally:
            self._timer = None

    @property
    def due_at(self) -> float | None:
        """When (the loop's clock) the current block must be full; None while resting
        or outside `held`."""
        return self._timer.when() if self._timer is not None else None

    def rest(self) -> None:
        """No more bytes are expected for now (a merge of what arrived): the timer stops.
        The task's budget still bounds what follows."""
        if self._timer is not None:
            self._timer.reschedule(None)

    def resume(self, done: int) -> None:
        """Bytes flow again after a rest (a step down after a merge): a block starts now."""
        self._pace = Pace(self._now(), done)
        if self._timer is not None:
            self._timer.reschedule(due(self.floor, self._pace))

    def sample(self, done: int) -> None:
        """`done` bytes so far; a full block starts the next one (and moves the timer)."""
        pace = step(self.floor, self._pace, self._now(), done)
        if pace is None:
            raise self.floor.error()
        if pace is not self._pace:
            self._pace = pace
            if self._timer is not None:
                self._timer.reschedule(due(self.floor, pace))
