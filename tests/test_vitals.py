"""The bot's vital signs: one value the alerts and the metrics both read."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from xbot.tasks.vitals import Disk, Vitals, days_since


@pytest.mark.parametrize(
    ("version", "today", "days"),
    [
        pytest.param("2026.11.20", date(2026, 12, 1), 11, id="release"),
        pytest.param("2026.11.20.1", date(2026, 11, 20), 0, id="same-day-patch"),
        pytest.param("2026.12.01", date(2026, 11, 30), -1, id="from-tomorrow"),
        pytest.param("2026.02.30", date(2026, 3, 1), None, id="no-such-date"),
        pytest.param("master", date(2026, 3, 1), None, id="not-a-release"),
    ],
)
def test_days_since(version: str, today: date, days: int | None) -> None:
    assert days_since(version, today) == days


class Telegram:
    reachable = True
    down_since = None


def test_vitals_read_the_disk_of_the_data_dir_and_the_age_on_today(tmp_path: Path) -> None:
    asked: list[Path] = []

    def usage(path: Path) -> tuple[int, int, int]:
        asked.append(path)
        return (10, 4, 6)

    vitals = Vitals(
        chains=[], telegram=Telegram(), ytdlp_version="2026.11.20", data_dir=tmp_path,
        today=lambda: date(2026, 11, 30), disk_usage=usage,
    )  # fmt: skip
    assert (vitals.disk(), asked) == (Disk(10, 4, 6), [tmp_path])
    assert vitals.ytdlp_age_days() == 10
    assert vitals.sources() == {}
