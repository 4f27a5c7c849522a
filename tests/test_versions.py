"""The versions a bug report needs, and when yt-dlp is too old."""

from __future__ import annotations

from datetime import date
from importlib import metadata

import attrs
import pytest

from xbot import __version__
from xbot.ops.doctor import version_findings
from xbot.versions import (
    YTDLP_MAX_AGE_DAYS,
    gallerydl_staleness,
    installed,
    installed_on,
    staleness,
    ytdlp_release,
)

TODAY = date(2026, 12, 1)


@pytest.mark.parametrize(
    ("version", "released"),
    [
        ("2026.10.26", date(2026, 10, 26)),
        ("2026.10.26.232417", date(2026, 10, 26)),
        ("2026.1.5", date(2026, 1, 5)),
        ("2026.10.26.dev0", date(2026, 10, 26)),
        ("2026.13.01", None),
        ("1.2", None),
        ("not installed", None),
    ],
    ids=["release", "nightly", "short", "dev", "bad-month", "semver", "missing"],
)
def test_ytdlp_release(version: str, released: date | None) -> None:
    assert ytdlp_release(version) == released


@pytest.mark.parametrize(
    ("version", "stale", "words"),
    [
        ("2026.10.26", False, "released 36 days ago"),
        ("2026.09.02", False, f"released {YTDLP_MAX_AGE_DAYS} days ago"),
        ("2026.09.01", True, "91 days old (over 90)"),
        ("2025.01.01", True, "pip install -U yt-dlp"),
        ("not installed", True, "not a release date"),
        ("2026.12.02", False, "released 0 days ago"),
    ],
    ids=["fresh", "edge", "one-day-over", "old-says-how", "missing", "clock-behind"],
)
def test_staleness(version: str, stale: bool, words: str) -> None:
    got_stale, text = staleness(version, TODAY)
    assert got_stale == stale
    assert words in text


def test_installed_reads_the_distributions() -> None:
    found = installed()
    assert found.xbot == __version__
    assert found.ptb == metadata.version("python-telegram-bot")
    assert found.ytdlp == metadata.version("yt-dlp")
    assert found.lines()[0] == f"xbot {__version__}"
    for piece in ("python-telegram-bot", "yt-dlp", "SQLite", "Python"):
        assert piece in found.one_line()


def test_doctor_names_the_versions_and_warns_on_an_old_ytdlp() -> None:
    old = attrs.evolve(installed(), ytdlp="2025.01.01")
    first, ytdlp = version_findings(old, TODAY)
    assert first.level == "ok"
    assert first.text.startswith(f"xbot {__version__} (python-telegram-bot ")
    assert ytdlp.level == "warn"
    assert ytdlp.subject == "yt-dlp"
    assert "-m pip install -U yt-dlp" in ytdlp.text


@pytest.mark.parametrize(
    ("version", "installed_on", "stale", "words"),
    [
        ("1.32.18", date(2026, 11, 20), False, "installed 11 days ago"),
        ("1.32.18", date(2026, 9, 2), False, "installed 90 days ago"),
        ("1.30.0", date(2026, 9, 1), True, "-m pip install -U gallery-dl"),
        ("1.32.18", None, False, "unknown"),
        ("not installed", None, True, "yt-dlp alone"),
        ("1.32.18", date(2026, 12, 5), False, "installed 0 days ago"),
    ],
    ids=["fresh", "edge", "old-says-how", "unknown-date", "missing", "clock-behind"],
)
def test_gallerydl_staleness(
    version: str, installed_on: date | None, stale: bool, words: str
) -> None:
    got_stale, text = gallerydl_staleness(version, installed_on, TODAY)
    assert got_stale == stale
    assert words in text


def test_gallerydl_is_installed_with_the_bot_and_its_day_is_known() -> None:
    found = installed()
    assert found.gallerydl == metadata.version("gallery-dl")
    assert "gallery-dl" in found.one_line()
    assert installed_on("gallery-dl") is not None
    assert installed_on("no-such-distribution-xbot") is None
