"""The clock pair, the step detector and the time line (xbot.clock)."""

from __future__ import annotations

import ast
import logging
from pathlib import Path

import pytest

from xbot.clock import (
    STEP_TOLERANCE,
    Clocks,
    ManualClocks,
    OneClock,
    Reading,
    StepWatch,
    SystemClocks,
    TimeLine,
    clock_pair,
    detect_step,
)

HOUR = 3600.0

# (wall before, mono before, wall after, mono after) -> the step
STEPS = [
    pytest.param(0.0, 0.0, 10.0, 10.0, 0.0, id="both-moved-alike"),
    pytest.param(0.0, 0.0, 0.0, 0.0, 0.0, id="no-time-passed"),
    pytest.param(0.0, 0.0, 10.0 - 3 * HOUR, 10.0, -3 * HOUR, id="back-three-hours"),
    pytest.param(0.0, 0.0, 10.0 + 3 * HOUR, 10.0, 3 * HOUR, id="forward-three-hours"),
    pytest.param(0.0, 0.0, 10.4, 10.0, 0.0, id="within-tolerance-ahead"),
    pytest.param(0.0, 0.0, 9.6, 10.0, 0.0, id="within-tolerance-behind"),
    pytest.param(0.0, 0.0, 10.0 + STEP_TOLERANCE, 10.0, 0.0, id="at-tolerance-is-noise"),
    pytest.param(0.0, 0.0, 12.5, 10.0, 2.5, id="just-past-tolerance"),
    pytest.param(100.0, 50.0, 100.0, 60.0, -10.0, id="wall-stood-still"),
    pytest.param(5e9, 7.0, 5e9 - 86400.0, 8.0, -86401.0, id="back-a-day-large-epoch"),
]


@pytest.mark.parametrize(("w0", "m0", "w1", "m1", "step"), STEPS)
def test_detect_step(w0: float, m0: float, w1: float, m1: float, step: float) -> None:
    assert detect_step(Reading(w0, m0), Reading(w1, m1)) == pytest.approx(step)


def test_a_tolerance_of_zero_sees_every_difference() -> None:
    assert detect_step(Reading(0.0, 0.0), Reading(10.25, 10.0), tolerance=0.0) == 0.25


def test_the_line_moves_with_the_monotonic_clock_only() -> None:
    clocks = ManualClocks(wall_at=1000.0, mono_at=5.0)
    line = TimeLine.from_wall(clocks)
    assert line.now() == 1000.0
    clocks.advance(30.0)
    assert line.now() == 1030.0
    clocks.step(-3 * HOUR)  # NTP fixes a clock that was three hours ahead
    assert line.now() == 1030.0, "a step of the wall clock moves nothing on the line"
    assert line.offset() == 3 * HOUR
    assert line.wall() == 1030.0 - 3 * HOUR
    assert line.to_wall(1060.0) == 1060.0 - 3 * HOUR
    clocks.advance(10.0)
    assert line.now() == 1040.0


def test_the_watch_logs_each_step_once(caplog: pytest.LogCaptureFixture) -> None:
    clocks = ManualClocks()
    watch = StepWatch(TimeLine.from_wall(clocks))
    clocks.advance(5.0)
    assert watch.check() == 0.0
    clocks.advance(5.0)
    clocks.step(2 * HOUR)
    with caplog.at_level(logging.WARNING, "xbot.clock"):
        assert watch.check() == 2 * HOUR
        clocks.advance(5.0)
        assert watch.check() == 0.0, "the step was seen once; the clocks agree since"
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["wall clock stepped step=+7200.0 line_ahead_by=-7200.0"]
    assert watch.steps == 1


def test_the_system_clocks_are_a_pair_with_a_boot_id() -> None:
    clocks = SystemClocks()
    assert isinstance(clocks, Clocks)
    line = TimeLine.from_wall(clocks)
    assert abs(line.offset()) < 1.0
    assert clocks.boot_id() == SystemClocks().boot_id()


def test_a_tests_one_number_clock_is_wrapped_and_a_pair_passes_through() -> None:
    now = [500.0]
    pair = clock_pair(lambda: now[0])
    assert isinstance(pair, OneClock)
    line = TimeLine.from_wall(pair)
    now[0] += 7.0
    assert line.now() == 507.0
    manual = ManualClocks()
    assert clock_pair(manual) is manual


# Every read of the wall clock in xbot, with why it is the wall clock and not the line.
WALL_READS = {
    "xbot/clock.py": "the wall clock itself (SystemClocks)",
    "xbot/storage/backup.py": "a backup's file name carries the date",
    "xbot/sources/gallerydl/_source.py": "a cookie's expiry is a date",
    "xbot/sources/ytdlp/_cookies.py": "a cookie's expiry is a date",
    "xbot/ops/telemetry.py": "a default only: app gives it the time line",
    "xbot/tasks/alerts.py": "a default only: app gives it the time line",
    "xbot/tasks/vitals.py": "today's date (yt-dlp's age)",
    "xbot/sending/telegram_health.py": "down_since and the doctor's record are dates",
    "xbot/ops/doctor.py": "how old the running bot's Telegram record is (a date it wrote)",
    "xbot/handlers/operator.py": "how long Telegram has been down, from down_since (a date)",
    "xbot/receiving/webhook.py": "a default only: app gives the listener the time line",
}


def _wall_reads(path: Path) -> list[int]:
    """Lines that name ``time.time`` or call ``datetime.now``."""
    wall = {("time", "time"), ("datetime", "now")}
    return [
        node.lineno
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and (node.value.id, node.attr) in wall
    ]


def test_the_wall_clock_is_read_only_where_a_date_is_meant() -> None:
    """Everything else takes ``now`` from the time line (xbot.clock's rule); the
    stand-ins play other services, whose clocks are theirs."""
    root = Path(__file__).resolve().parent.parent
    found = {}
    for path in sorted((root / "xbot").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("standins/"):
            continue
        if lines := _wall_reads(path):
            found[rel] = lines
    assert sorted(found) == sorted(WALL_READS), found
