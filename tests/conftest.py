"""What the tests share, defined once: databases, clocks, the stand-in harness, waits.

Fixtures (pytest hands them to any test that names them):

- ``db_path``: where a test's database file goes (nothing is created).
- ``pool``: that file created, migrated and opened (`open_store`), closed after.
- ``clock``: a `ManualClock`, time that moves only when the test moves it.
- ``harness``: the real bot against the local stand-ins (Bot API, X API,
  media host) on 127.0.0.1, on a temp data dir; ``harness_no_url_fetch``
  the same with a Bot API that, like the real one, cannot fetch our
  loopback URLs; ``start_harness(**options)`` for any other configuration
  (every harness it starts is stopped after the test).
- Every test, unasked: the root logger's level is put back after it.

Helpers, imported where needed (``from conftest import wait_until``):

- `ManualClock`, `WallClock` (real time plus an offset a test pushes forward).
- `load_soak`: ``bench/soak.py`` as a module (its stand-in processes and checks).
- `notices_to` (async): the notices queued to a chat in the real database, as the
  chat will read them: (kind, chat, reason) of each, oldest first.
- `wait_until` / `eventually` (async): wait for a condition, with a bound. A test
  never sleeps to prove that something did not happen: it waits for the
  event that would follow it.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from standins.harness import Harness
from standins.streams import Streams, have_ffmpeg, make_streams
from xbot.storage.db import DbPool, open_store
from xbot.storage.queue import NOTICE_KIND, TaskQueue
from xbot.tasks.notices import read_notice

# Hypothesis fails an example that takes over 200 ms by default: a wall-clock limit,
# which a loaded machine (the parallel suite on two cores) passes or not by chance.
# Speed is measured in bench/, never asserted; a test that sets its own keeps it.
settings.register_profile("xbot", deadline=None)
settings.load_profile("xbot")

ROOT = Path(__file__).resolve().parent.parent


class ManualClock:
    """``clock()`` is ``now``; a test moves it (``clock.now += 30``)."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class WallClock:
    """Real time plus ``offset``: for code that compares with times the stand-ins stamp."""

    def __init__(self, offset: float = 0.0) -> None:
        self.offset = offset

    def __call__(self) -> float:
        return time.time() + self.offset


def wait_until(predicate: Callable[[], Any], within: float = 10.0, what: str = "it") -> None:
    """Block until ``predicate()`` is true; `TimeoutError` after ``within`` seconds."""
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not happen within {within} s")
        time.sleep(0.002)


async def eventually(predicate: Callable[[], Any], within: float = 10.0, what: str = "it") -> None:
    """`wait_until` for async tests: the event loop keeps running meanwhile."""
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not happen within {within} s")
        await asyncio.sleep(0.005)


async def notices_to(queue: TaskQueue, chat_id: int) -> list[tuple[str, int, str]]:
    """The notice rows of ``chat_id`` in any state, oldest first: (kind, chat, the reason
    its sentence gives), read the way `xbot.tasks.notices` reads it when it sends."""
    rows = await queue.list(chat_id=chat_id, limit=1000)
    return [(t.kind, t.chat_id, read_notice(t)[1]) for t in reversed(rows) if t.kind == NOTICE_KIND]


def load_soak() -> Any:
    """``bench/soak.py`` (not a package: loaded from its file, once)."""
    if "xbot_soak" in sys.modules:
        return sys.modules["xbot_soak"]
    spec = importlib.util.spec_from_file_location("xbot_soak", ROOT / "bench" / "soak.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["xbot_soak"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(autouse=True)
def _root_log_level() -> Iterator[None]:
    """The root logger's level put back after each test: `run_demo` sets it to CRITICAL
    and `setup_logging` to its own, and a later test in the same process (which one
    depends on how xdist shares the tests out) would find its warnings never logged."""
    root = logging.getLogger()
    level = root.level
    try:
        yield
    finally:
        root.setLevel(level)


@pytest.fixture(scope="session")
def streams(tmp_path_factory: pytest.TempPathFactory) -> Streams:
    """The clip's DASH/HLS renditions (`standins.streams`), encoded once per session."""
    if not have_ffmpeg():
        pytest.skip("ffmpeg is not installed (CI installs it: .ci/run)")
    return make_streams(tmp_path_factory.mktemp("streams"))


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "xbot.sqlite3"


@pytest.fixture
async def pool(db_path: Path) -> AsyncIterator[DbPool]:
    p = await open_store(db_path)
    try:
        yield p
    finally:
        await p.close()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def start_harness(tmp_path: Path) -> AsyncIterator[Callable[..., Awaitable[Harness]]]:
    """``await start_harness(**options)``: a harness as `Harness.start` takes options."""
    started: list[Harness] = []

    async def start(**options: Any) -> Harness:
        h = await Harness.start(tmp_path / "data", **options)
        started.append(h)
        return h

    try:
        yield start
    finally:
        for h in reversed(started):
            await h.stop()


@pytest.fixture
async def harness(start_harness: Callable[..., Awaitable[Harness]]) -> Harness:
    return await start_harness()


@pytest.fixture
async def harness_no_url_fetch(start_harness: Callable[..., Awaitable[Harness]]) -> Harness:
    """Like the real Telegram: it cannot fetch URLs on our loopback, so we upload."""
    return await start_harness(allow_url_fetch=False)
