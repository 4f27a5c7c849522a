"""Alert rules (pure, table-driven) and the watch that applies them, on a real SQLite queue."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import date
from pathlib import Path
from typing import Any

import attrs
import pytest

from xbot.storage.db import open_store
from xbot.storage.queue import TaskQueue
from xbot.storage.state import ChatStore
from xbot.tasks.alert_rules import RULES, Condition, Phase, Watch, step
from xbot.tasks.alerts import DEAD_RATE, WORDS, AlertWatch, muted
from xbot.tasks.vitals import Vitals

R, C = Phase.RAISED, Phase.CLEARED


@pytest.mark.parametrize(
    ("watch", "bad", "now", "after", "quiet", "expected", "phase"),
    [
        (Watch(), False, 10.0, 5.0, 60.0, Watch(), None),
        (Watch(), True, 10.0, 5.0, 60.0, Watch(bad_since=10.0), None),
        (Watch(bad_since=10.0), True, 14.9, 5.0, 60.0, Watch(bad_since=10.0), None),
        (Watch(bad_since=10.0), True, 15.0, 5.0, 60.0, Watch(10.0, True, 15.0), R),
        (Watch(), True, 10.0, 0.0, 60.0, Watch(10.0, True, 10.0), R),
        (Watch(10.0, True, 15.0), True, 500.0, 5.0, 60.0, Watch(10.0, True, 15.0), None),
        (Watch(10.0, True, 15.0), False, 20.0, 5.0, 60.0, Watch(raised_at=15.0), C),
        (Watch(bad_since=10.0), False, 12.0, 5.0, 60.0, Watch(), None),
        (Watch(bad_since=30.0, raised_at=15.0), True, 40.0, 5.0, 60.0,
         Watch(bad_since=30.0, raised_at=15.0), None),
        (Watch(bad_since=30.0, raised_at=15.0), True, 75.0, 5.0, 60.0, Watch(30.0, True, 75.0), R),
        (Watch(raised_at=15.0), False, 80.0, 5.0, 60.0, Watch(raised_at=15.0), None),
    ],
    ids=[
        "fine-stays-fine",
        "bad-starts-the-clock",
        "not-yet-after",
        "after-raises",
        "after-zero-raises-at-once",
        "raised-stays-quiet-while-bad",
        "fine-again-clears-once",
        "a-blip-is-forgotten",
        "within-quiet-no-second-raise",
        "quiet-over-raises-again",
        "cleared-stays-cleared",
    ],
)  # fmt: skip
def test_step(
    watch: Watch,
    bad: bool,
    now: float,
    after: float,
    quiet: float,
    expected: Watch,
    phase: Phase | None,
) -> None:
    assert step(watch, bad, now, after=after, quiet=quiet) == (expected, phase)


def test_a_flapping_condition_is_one_alert_per_quiet_period() -> None:
    watch, said = Watch(), []
    for t in range(0, 3600, 10):  # bad for 20 s of every 30, for an hour
        watch, phase = step(watch, t % 30 < 20, float(t), after=0.0, quiet=1800.0)
        said.append(phase)
    assert said.count(R) == 2
    assert said.count(C) == 2


def test_every_condition_has_a_rule_and_says_something() -> None:
    for condition in Condition:
        rule = RULES[condition]
        phases = [p for p in Phase if (condition, p) in WORDS]
        assert Phase.CLEARED in phases, condition
        assert (Phase.RAISED in phases) == rule.tell_raise, condition


@pytest.mark.parametrize(
    ("setting", "names"),
    [(None, set()), ("", set()), ("x_down", {"x_down"}), ("disk,x_down", {"disk", "x_down"})],
    ids=["none", "empty", "one", "two"],
)
def test_muted(setting: str | None, names: set[str]) -> None:
    assert muted(setting) == names


# -- the watch, on a real queue -----------------------------------------------------------

ADMIN, OTHER = 41, 42
GB = 1024**3


class World:
    """What the watch reads, set by each test."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0
        self.reachable = True
        self.down_since: float | None = None
        self.disk = (100 * GB, 50 * GB, 50 * GB)
        self.broken: dict[str, bool] = {}


@pytest.fixture
async def watch(tmp_path: Path) -> AsyncIterator[tuple[AlertWatch, World, TaskQueue, ChatStore]]:
    pool = await open_store(tmp_path / "x.sqlite3")
    queue, chats, world = TaskQueue(pool), ChatStore(pool), World()
    w = AlertWatch(
        admins=frozenset({ADMIN, OTHER}), after=300.0, queue=queue, chats=chats,
        vitals=Vitals(
            chains=[], telegram=world, ytdlp_version="2026.11.20", data_dir=tmp_path,
            broken=lambda: world.broken, today=lambda: date(2026, 12, 1),
            disk_usage=lambda _path: world.disk,
        ),
        clock=lambda: world.now,
    )  # fmt: skip
    try:
        yield w, world, queue, chats
    finally:
        await pool.close()


async def alerts(queue: TaskQueue) -> list[dict[str, Any]]:
    tasks = await queue.list(state="pending", limit=100)
    return [
        {"chat": t.chat_id, **json.loads(t.payload)} for t in reversed(tasks) if t.kind == "alert"
    ]


async def test_telegram_is_said_once_it_is_back_with_how_long(watch: Any) -> None:
    w, world, queue, _ = watch
    world.reachable, world.down_since = False, world.now
    for _step in range(40):  # 20 minutes down, looked at every 30 s: nothing said meanwhile
        assert await w.check() == 0
        world.now += 30
    world.reachable = True
    assert await w.check() == 2  # both admins
    said = await alerts(queue)
    assert {a["chat"] for a in said} == {ADMIN, OTHER}
    assert all(a["condition"] == "telegram" for a in said)
    assert "was not answering 08:00–08:20 UTC (20 min)" in said[0]["text"]
    assert await w.check() == 0


async def test_a_short_telegram_blip_is_not_said(watch: Any) -> None:
    w, world, queue, _ = watch
    world.reachable, world.down_since = False, world.now
    await w.check()
    world.now += 60
    world.reachable = True
    assert await w.check() == 0
    assert await alerts(queue) == []


async def test_an_alert_is_in_the_operators_language_and_a_muted_one_is_not_sent(
    watch: Any,
) -> None:
    w, world, queue, chats = watch
    await chats.set_settings(ADMIN, world.now, operator_language="de")
    await chats.set_settings(OTHER, world.now, muted_alerts="disk")
    world.disk = (100 * GB, 99 * GB, GB // 10)  # 102 MB free
    assert await w.check() == 1
    (said,) = await alerts(queue)
    assert said["chat"] == ADMIN
    assert said["lang"] == "de"
    assert "102 MB" in said["text"]
    assert "nearly full" not in said["text"]  # German, not English


async def test_dead_letters_above_the_rate_and_back(watch: Any) -> None:
    w, world, queue, _ = watch
    w.admins = frozenset({ADMIN})
    task = await queue.enqueue("deliver", "{}", 5, now=world.now)

    def dead(n: int) -> None:
        for _ in range(n):
            w.on_finished(task, "dead")

    dead(DEAD_RATE - 1)
    assert await w.check() == 0
    dead(1)
    assert await w.check() == 1
    world.now += 3600
    assert await w.check() == 1
    texts = [a["text"] for a in await alerts(queue)]
    assert texts[0].startswith(f"{DEAD_RATE} tasks failed for good in the last 15 minutes")
    assert texts[1].startswith("Dead letters are back to normal")


async def test_an_old_ytdlp_and_a_broken_source_are_said_once(watch: Any) -> None:
    w, world, queue, _ = watch
    w.admins = frozenset({ADMIN})
    w.vitals = attrs.evolve(w.vitals, ytdlp_version="2026.01.02")
    world.broken = {"fxtwitter": True, "vxtwitter": False}
    assert await w.check() == 2
    assert await w.check() == 0
    texts = sorted(a["text"] for a in await alerts(queue))
    assert "fxtwitter answering in a shape" in texts[0]
    assert "vxtwitter" not in texts[0]
    assert texts[1].startswith("yt-dlp 2026.01.02 is 333 days old (over 90)")
