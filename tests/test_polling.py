"""Long polling through a Bot API outage (issue 20, item 5): the poller lives on, the
watchdog keeps vouching for the bot, and polling resumes by itself."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from conftest import eventually
from telegram.error import Conflict, NetworkError, RetryAfter, TimedOut

from xbot.app import _polling_healthy, _status_line
from xbot.handlers.polling import error_detail, reconnect_delay
from xbot.standins.harness import Harness

CHAT = 515
SCALE = 0.01
FAILURES = 12  # per stretch: many times the longest (scaled) pause of 0.3 s


def failed_polls(caplog: pytest.LogCaptureFixture, detail: str) -> int:
    return sum(
        1
        for r in caplog.records
        if r.name == "xbot.handlers.polling"
        and r.getMessage().startswith("getUpdates failed")
        and detail in r.getMessage()
    )


async def test_polling_lives_through_502_refused_and_hung_polls_and_resumes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    h = await Harness.start(tmp_path / "data", time_scale=SCALE)
    try:
        bot = h.bot
        assert bot is not None
        assert bot.poller is not None
        h.add_post("8080", text="through the outage", photos=[h.photo("poll")])
        healthy: list[bool] = []

        def watch(done: bool) -> bool:
            healthy.append(_polling_healthy(bot))
            return done

        h.api.set_outage("502", methods="all")  # nginx's 502 page, getUpdates included
        await eventually(lambda: watch(failed_polls(caplog, "Bad Gateway (502)") >= FAILURES), 20)
        h.api.set_outage("refuse", methods="all")  # then nothing listens at all
        await eventually(lambda: watch(failed_polls(caplog, "ConnectError") >= FAILURES), 20)
        h.api.set_outage("hang", methods="all")  # then polls go unanswered
        await eventually(lambda: watch(failed_polls(caplog, "error=TimedOut") >= 2), 20)
        h.api.set_outage(None)
        h.api.user_message(CHAT, "https://x.com/a/status/8080")
        await eventually(lambda: watch(bool(h.api.calls_for("sendPhoto", CHAT))), 20)
        assert bot.poller.running
        assert all(healthy), "the watchdog would have been starved during the outage"
        assert any("getUpdates answers again" in r.getMessage() for r in caplog.records)
        # No traceback of ours (PTB's own JSON one is quieted by setup_logging: see the
        # process tests).
        assert not [r for r in caplog.records if r.exc_info and r.name.startswith("xbot")]
    finally:
        await h.stop()


async def test_a_dead_poller_is_unhealthy(tmp_path: Path) -> None:
    """The other side of the rule: the watchdog still catches a poller that is gone."""
    h = await Harness.start(tmp_path / "data")
    try:
        assert h.bot is not None
        assert _polling_healthy(h.bot)
        assert h.bot.poller is not None
        await h.bot.poller.stop()
        assert not _polling_healthy(h.bot)
    finally:
        await h.stop()


@pytest.mark.parametrize(
    ("exc", "failures", "expected"),
    [
        (NetworkError("Bad Gateway (502)"), 1, 0.5),
        (NetworkError("Bad Gateway (502)"), 3, 2.0),
        (TimedOut(), 10, 15.0),
        (Conflict("terminated by other getUpdates request"), 1, 15.0),
        (RetryAfter(42), 1, 42.0),
    ],
    ids=["first", "third", "capped", "conflict-at-cap", "retry-after-as-told"],
)
def test_reconnect_delay(exc: NetworkError, failures: int, expected: float) -> None:
    assert reconnect_delay(exc, failures, jitter=0.0) == pytest.approx(expected)


def test_reconnect_delay_scales_but_never_telegrams_retry_after() -> None:
    assert reconnect_delay(TimedOut(), 10, jitter=0.0, scale=0.01) == pytest.approx(0.15)
    assert reconnect_delay(RetryAfter(7), 1, jitter=0.0, scale=0.01) == pytest.approx(7.0)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Bad Gateway (502). Parsing the server response b'<html>\\r\\n<head>' failed",
            "Bad Gateway (502)",
        ),
        ("httpx.ConnectError: All connection attempts failed", None),
        ("", "NetworkError"),
        ("x" * 500, "x" * 120),
    ],
    ids=["nginx-page", "refused", "empty", "long"],
)
def test_error_detail_is_one_short_line(text: str, expected: str | None) -> None:
    assert error_detail(NetworkError(text)) == (text if expected is None else expected)


async def test_the_status_line_says_since_when_telegram_is_unreachable(tmp_path: Path) -> None:
    h = await Harness.start(tmp_path / "data")
    try:
        assert h.bot is not None
        assert (await _status_line(h.bot)).startswith("polling; queue pending=0")
        health = h.services.sender.health
        health.failed("NetworkError")  # what the sender does when a send gets no answer
        line = await _status_line(h.bot)
        assert "; Telegram unreachable since 20" in line
        assert line.endswith(" UTC")
        assert _polling_healthy(h.bot), "an outage is no reason for the watchdog"
    finally:
        await h.stop()
