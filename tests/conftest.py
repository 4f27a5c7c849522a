"""Shared fixtures: the real bot against the local stand-ins, on a temp data dir."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from xbot.testing.harness import Harness


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    h = await Harness.start(tmp_path / "data")
    try:
        yield h
    finally:
        await h.stop()


@pytest.fixture
async def harness_no_url_fetch(tmp_path: Path) -> AsyncIterator[Harness]:
    """Like the real Telegram: it cannot fetch URLs on our loopback, so we upload."""
    h = await Harness.start(tmp_path / "data", allow_url_fetch=False)
    try:
        yield h
    finally:
        await h.stop()
