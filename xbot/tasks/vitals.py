"""The bot's vital signs: what the alerts (`xbot.tasks.alerts`) and the operator's
metrics and health answers (`xbot.ops.telemetry`) both watch, bundled once.

`xbot.app` builds the one `Vitals` and hands it to both, so the two cannot watch
different things under the same name.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, date, datetime
from pathlib import Path
from typing import NamedTuple, Protocol

import attrs

from xbot.sources.x import SourceChain, SourceHealth
from xbot.versions import ytdlp_release

__all__ = ["Disk", "Reachability", "Vitals", "days_since"]


class Reachability(Protocol):
    """Whether Telegram answers now, and since when it has not (`TelegramHealth`)."""

    @property
    def reachable(self) -> bool: ...

    @property
    def down_since(self) -> float | None: ...


class Disk(NamedTuple):
    total: int
    used: int
    free: int


def _utc_today() -> date:
    return datetime.now(tz=UTC).date()


def days_since(version: str, today: date) -> int | None:
    """How many days old a yt-dlp `version` (a release date) is on `today`; None: not a date."""
    released = ytdlp_release(version)
    return None if released is None else (today - released).days


@attrs.frozen
class Vitals:
    """What is watched about the bot.

    Attributes:
        chains: the X source chains (each source's breaker and counts).
        telegram: Telegram's reachability (the bot's one `TelegramHealth`).
        ytdlp_version: the installed yt-dlp's version (its release date).
        data_dir: where the database lives (its disk is watched).
        broken: source -> the canary finds its answers in a changed shape.
        today: the UTC date (yt-dlp's age).
        disk_usage: the disk's (total, used, free) bytes for a path.
    """

    chains: Sequence[SourceChain]
    telegram: Reachability
    ytdlp_version: str
    data_dir: Path
    broken: Callable[[], Mapping[str, bool]] = dict
    today: Callable[[], date] = _utc_today
    disk_usage: Callable[[Path], tuple[int, int, int]] = shutil.disk_usage

    def sources(self) -> dict[str, SourceHealth]:
        """Every X source's health, by its name."""
        return {name: h for chain in self.chains for name, h in chain.health.items()}

    def ytdlp_age_days(self) -> int | None:
        return days_since(self.ytdlp_version, self.today())

    def disk(self) -> Disk:
        """The database's disk (blocks: call it in a thread)."""
        return Disk(*self.disk_usage(self.data_dir))
