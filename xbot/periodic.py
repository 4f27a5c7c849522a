"""Periodic loops: one step run every few seconds for as long as the bot runs.

The sweep, the clock watch, the alert watch and the canary each have a step
(`sweep_once`, a look at the two clocks, `AlertWatch.check`, `Canary.run_once`)
and a period; `Periodic` is the one loop around each. Its rules:

- the step runs, then the loop waits `every` seconds (through the injected
  ``sleep``: tests pass their own), and again; the first step comes after the
  first wait, or at once with ``at_once``;
- a step that fails is one WARNING line, ``<what> failed error=…``, on the
  owner's logger, and the loop goes on: a known failure (a `StoreError`: the
  database locked, the disk full) without a traceback, anything else with one.
  A loop never ends silently on an error for the rest of the run;
- `stop` cancels it (a step in progress included) and waits for it to end.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

import attrs

from xbot.errors import StoreError
from xbot.logs import kv

log = logging.getLogger(__name__)

Step = Callable[[], Awaitable[object]]
Sleep = Callable[[float], Awaitable[object]]


@attrs.define
class Periodic:
    """A step every `every` seconds, until stopped.

    Attributes:
        what: the step's name in its failure line (``sweep`` → ``sweep failed …``).
        step: the coroutine function run each time.
        every: seconds from the end of one step to the start of the next.
        at_once: the first step at start, not after the first wait.
        logger: the owner's logger: the failure line is the owner's line.
        known: failures that are not bugs, logged without a traceback.
        sleep: the wait between steps (``asyncio.sleep``; tests pass their own).
    """

    what: str
    step: Step
    every: float
    at_once: bool = False
    logger: logging.Logger = log
    known: tuple[type[Exception], ...] = (StoreError,)
    sleep: Sleep = asyncio.sleep
    _task: asyncio.Task[None] | None = attrs.field(default=None, init=False)

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self.run(), name=f"xbot-{self.what}")

    async def stop(self) -> None:
        """Cancel the loop and wait for it to end; safe to call twice, or never started."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def run(self) -> None:
        """The loop itself, until cancelled (`start` runs it in a task of its own)."""
        if not self.at_once:
            await self.sleep(self.every)
        while True:
            await self.once()
            await self.sleep(self.every)

    async def once(self) -> None:
        """One step; its failure is a log line, never the loop's end."""
        try:
            await self.step()
        except self.known as exc:
            self.logger.warning("%s failed %s", self.what, kv(error=exc))
        except Exception as exc:  # a bug in one step must not end the loop
            self.logger.warning(
                "%s failed %s", self.what, kv(error=type(exc).__name__), exc_info=exc
            )
