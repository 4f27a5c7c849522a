"""Issue 20, Done-when 2: the VPS boots while Telegram is unreachable.

The real `xbot run` as a child process against the Bot API stand-in in this
process. For the first stretch of the bot's life nothing listens where the Bot
API should be (connections refused), then every method answers nginx's HTML
502 page, then every call hangs; each stretch is many times longer than the
longest (scaled) wait between tries. One process lives through it all: no exit,
no traceback, one line per try; it polls soon after Telegram answers again, and
a link is then delivered.
"""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from test_process import CHAT, Stage, stop, wait_until

from standins._mediabytes import tiny_jpeg
from xbot.tasks.backoff import RECONNECT_CAP

pytestmark = pytest.mark.slow

SCALE = 0.01
LONGEST_WAIT = RECONNECT_CAP * SCALE  # 0.3 s
TRIES_PER_STRETCH = 12  # each stretch lasts at least this many tries: >= 10 x the longest wait


class BootStage(Stage):
    def env(self) -> dict[str, str]:
        env = super().env()
        env["XBOT_TEST_TIME_SCALE"] = str(SCALE)
        return env


@pytest.fixture
async def stage(tmp_path: Path) -> AsyncIterator[BootStage]:
    s = BootStage(tmp_path)
    await s.start()
    try:
        yield s
    finally:
        await s.stop()


def tries(stage: Stage, detail: str) -> int:
    return sum(
        1
        for line in stage.log().splitlines()
        if "start waits for Telegram" in line and detail in line
    )


async def test_a_boot_through_an_outage_is_one_process_that_then_delivers(
    stage: BootStage,
) -> None:
    stage.fx.add_post("4242", text="after the outage", photos=[
        stage.media.add("/boot.jpg", tiny_jpeg(), "image/jpeg")
    ])  # fmt: skip
    stage.api.set_outage("refuse", methods="all")  # the network is not up yet
    proc = stage.spawn()
    try:
        await wait_until(
            lambda: tries(stage, "ConnectError") >= TRIES_PER_STRETCH, 30, "refused tries"
        )
        assert proc.poll() is None, stage.log()
        # Telegram's front end answers, with nginx's 502 page for every method.
        stage.api.set_outage("502", methods="all")
        await wait_until(
            lambda: tries(stage, "Bad Gateway (502)") >= TRIES_PER_STRETCH, 30, "502 tries"
        )
        assert proc.poll() is None, stage.log()
        # Then calls go unanswered: each try ends at the start's (scaled) call timeout.
        stage.api.set_outage("hang", methods="all")
        await wait_until(lambda: tries(stage, "error=TimedOut") >= 3, 30, "hung tries")
        assert proc.poll() is None, stage.log()
        assert not [c for c in stage.api.calls_for("getMe") if c.status == 200]
        stage.api.set_outage(None)
        # Polling soon after: the next try is at most the (scaled) cap away.
        await wait_until(lambda: " polling version=" in stage.log(), 15, "polling after recovery")
        stage.api.user_message(CHAT, "https://x.com/a/status/4242")
        await wait_until(
            lambda: [c for c in stage.api.calls_for("sendPhoto", CHAT) if c.status == 200],
            20,
            "the link delivered",
        )
        assert proc.poll() is None, stage.log()
        took = stop(proc, signal.SIGTERM)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert proc.returncode == 0
    assert took < 10
    assert stage.runs == 1
    log = stage.log()
    assert "Traceback" not in log
    assert "<html>" not in log  # nginx's page is not dumped into the journal
    assert stage.api.token.split(":")[1] not in log
    # The start said where it stood: getMe waited, then answered.
    assert "Telegram answers call=getMe" in log
    lines = [line for line in log.splitlines() if "start waits for Telegram" in line]
    assert all(" call=getMe " in line for line in lines)
    assert len(lines) >= 2 * TRIES_PER_STRETCH
    assert os.path.exists(stage.data / "xbot.sqlite3")
