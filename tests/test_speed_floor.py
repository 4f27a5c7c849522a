"""The speed floor and the task budget: the pure rule, and downloads from dripping servers."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from standins.media_server import MediaServer
from xbot.config import Settings
from xbot.errors import TooSlow
from xbot.media.download import download
from xbot.media.speed_floor import (
    BASE_BUDGET,
    Pace,
    SpeedFloor,
    SpeedWatch,
    due,
    step,
    task_budget,
)

FLOOR = SpeedFloor(rate=100.0, window=10.0)  # blocks of 1000 bytes, each within 10 s


@pytest.mark.parametrize(
    ("pace", "now", "done", "after"),
    [
        (Pace(0.0), 1.0, 0, Pace(0.0)),
        (Pace(0.0), 9.99, 999, Pace(0.0)),
        (Pace(0.0), 10.0, 999, None),
        (Pace(0.0), 10.0, 0, None),
        (Pace(0.0), 3.0, 1000, Pace(3.0, 1000)),
        # A full block on its due time still counts: the next one starts then.
        (Pace(0.0), 10.0, 1000, Pace(10.0, 1000)),
        (Pace(0.0), 50.0, 5000, Pace(50.0, 5000)),
        (Pace(20.0, 4000), 29.0, 4999, Pace(20.0, 4000)),
        (Pace(20.0, 4000), 30.0, 4999, None),
        (Pace(20.0, 4000), 25.0, 6000, Pace(25.0, 6000)),
    ],
    ids=[
        "early-nothing-yet",
        "just-short-before-due",
        "short-at-due",
        "nothing-at-due",
        "block-full-early",
        "block-full-on-due",
        "late-but-full",
        "second-block-on-time",
        "second-block-short",
        "more-than-a-block",
    ],
)
def test_step(pace: Pace, now: float, done: int, after: Pace | None) -> None:
    assert step(FLOOR, pace, now, done) == after


@pytest.mark.parametrize(
    ("floor", "block", "due_at"),
    [
        (SpeedFloor(), 600_000, 60.0),
        (SpeedFloor(rate=100.0, window=10.0), 1000, 10.0),
        (SpeedFloor(rate=0.01, window=1.0), 1, 1.0),
    ],
    ids=["default", "small", "at-least-one-byte"],
)
def test_blocks(floor: SpeedFloor, block: int, due_at: float) -> None:
    assert floor.block == block
    assert due(floor, Pace(0.0)) == due_at


@pytest.mark.parametrize(
    ("limit_mb", "rate", "budget"),
    [
        (50, 10_000.0, BASE_BUDGET + 50 * 2**20 / 10_000),
        (2000, 10_000.0, BASE_BUDGET + 2000 * 2**20 / 10_000),
        (50, 1_000_000.0, BASE_BUDGET + 50 * 2**20 / 1_000_000),
    ],
    ids=["cloud-limit", "local-server-limit", "fast-floor"],
)
def test_task_budget(limit_mb: int, rate: float, budget: float) -> None:
    assert task_budget(limit_mb * 2**20, SpeedFloor(rate=rate)) == pytest.approx(budget)


def test_the_floor_comes_from_the_settings() -> None:
    floor = SpeedFloor.configured(
        Settings(min_speed_kbps=2.5, speed_window=30.0)  # type: ignore[call-arg]
    )
    assert floor == SpeedFloor(rate=2500.0, window=30.0)
    assert SpeedFloor.configured(Settings()) == SpeedFloor()


def test_the_sentence_names_the_floor() -> None:
    error = SpeedFloor(rate=10_000.0, window=60.0).error()
    assert isinstance(error, TooSlow)
    assert error.reason == (
        "The server sent the file too slowly (under 10 kB a second for 60 seconds), so I gave up."
    )


# -- the real mechanism: a server on 127.0.0.1 that sends its headers, then drips ----------

# Each test's floor is small (a window of a fraction of a second), so it takes as long
# as a few windows; the drips come much slower than the floor allows.
QUICK = SpeedFloor(rate=2000.0, window=0.4)


@pytest.fixture
def media() -> Iterator[MediaServer]:
    with MediaServer() as server:
        yield server


@pytest.fixture
async def client() -> httpx.AsyncClient:
    return httpx.AsyncClient(timeout=httpx.Timeout(30, connect=10))


async def test_a_dripping_download_is_given_up(
    media: MediaServer, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    # One byte every 0.05 s: every read is quick, so no read timeout ever fires.
    url = media.add("/drip.mp4", b"x" * 100_000, "video/mp4", drip=0.05)
    dest = tmp_path / "drip.mp4"
    async with client:
        with pytest.raises(TooSlow, match="too slowly"):
            await asyncio.wait_for(download(client, url, dest, max_bytes=10**6, floor=QUICK), 30)
    assert not dest.exists()


async def test_a_silent_server_is_given_up_by_the_timer(
    media: MediaServer, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    # Headers, a few bytes, then nothing: no chunk comes to check the pace on, and the
    # read timeout (30 s) is far away; the block's due time ends it.
    url = media.add("/stall.mp4", b"x" * 100_000, "video/mp4", stall_after=10)
    dest = tmp_path / "stall.mp4"
    async with client:
        with pytest.raises(TooSlow):
            await asyncio.wait_for(download(client, url, dest, max_bytes=10**6, floor=QUICK), 30)
    assert not dest.exists()


async def test_the_connection_is_closed(
    media: MediaServer, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    url = media.add("/drip.mp4", b"x" * 100_000, "video/mp4", drip=0.05)
    async with client:
        fetch = download(client, url, tmp_path / "d.mp4", max_bytes=10**6, floor=QUICK)
        with pytest.raises(TooSlow):
            await asyncio.wait_for(fetch, 30)
        # No connection is left open in the client's pool: it was closed, not kept.
        pool = client._transport._pool  # type: ignore[attr-defined]
        assert pool.connections == []


async def test_a_fast_download_passes_many_blocks(
    media: MediaServer, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    body = bytes(range(256)) * 4000  # about a megabyte: hundreds of blocks of QUICK
    url = media.add("/fast.mp4", body, "video/mp4")
    async with client:
        result = await download(client, url, tmp_path / "f.mp4", max_bytes=10**7, floor=QUICK)
    assert result.path.read_bytes() == body


async def test_the_watch_outside_a_download() -> None:
    """An unrelated TimeoutError inside the watch is not taken for slowness."""
    watch = SpeedWatch(SpeedFloor(rate=1.0, window=60.0))
    with pytest.raises(TimeoutError):
        async with watch.held():
            raise TimeoutError


async def test_the_floor_rests_while_a_merge_runs_and_resumes_with_the_bytes() -> None:
    floor = SpeedFloor(rate=1000.0, window=60.0)
    watch = SpeedWatch(floor)
    loop = asyncio.get_running_loop()
    async with watch.held():
        assert watch.due_at is not None
        watch.rest()  # no bytes arrive while ffmpeg merges: no block is due
        assert watch.due_at is None
        before = loop.time()
        watch.resume(5000)  # a step down downloads again: a fresh block from now
        due = watch.due_at
        assert due is not None
        assert before + floor.window <= due <= loop.time() + floor.window
    assert watch.due_at is None
