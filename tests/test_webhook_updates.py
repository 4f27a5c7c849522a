"""The webhook's answered updates (xbot.storage.webhook_updates), on a real SQLite file."""

from __future__ import annotations

from pathlib import Path

from xbot.storage.db import open_store
from xbot.storage.webhook_updates import KEEP, AnsweredUpdates


async def test_marked_is_answered_twice_is_once_and_pruned_by_age(tmp_path: Path) -> None:
    pool = await open_store(tmp_path / "x.sqlite3")
    try:
        updates = AnsweredUpdates(pool)
        assert not await updates.answered(7)
        await updates.mark(7, now=1000.0)
        await updates.mark(7, now=2000.0)  # a redelivery marked again: no error, one row
        await updates.mark(8, now=1000.0 + KEEP)
        assert await updates.answered(7)
        assert await updates.answered(8)
        assert await updates.prune(now=1000.0 + KEEP) == 0  # exactly KEEP old: kept
        assert await updates.prune(now=1000.5 + KEEP) == 1
        assert not await updates.answered(7)
        assert await updates.answered(8)
    finally:
        await pool.close()
