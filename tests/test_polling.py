"""Long polling through a Bot API outage (issue 20, item 5): the poller lives on, the
watchdog keeps vouching for the bot, and polling resumes by itself."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import eventually
from telegram import Update
from telegram.error import Conflict, NetworkError, RetryAfter, TimedOut

from standins.harness import Harness
from xbot.errors import StoreBusy
from xbot.receiving.intake import telegram_resends
from xbot.receiving.polling import STORE_TRIES, DurablePoller
from xbot.runtime import polling_healthy, status_line
from xbot.sending.bot_errors import classify, error_detail
from xbot.tasks.backoff import reconnect_delay

CHAT = 515
SCALE = 0.01
FAILURES = 12  # per stretch: many times the longest (scaled) pause of 0.3 s


def failed_polls(caplog: pytest.LogCaptureFixture, detail: str) -> int:
    return sum(
        1
        for r in caplog.records
        if r.name == "xbot.receiving.polling"
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
            healthy.append(polling_healthy(bot))
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
        assert polling_healthy(h.bot)
        assert h.bot.poller is not None
        await h.bot.poller.stop()
        assert not polling_healthy(h.bot)
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
    assert reconnect_delay(classify(exc), failures, jitter=0.0) == pytest.approx(expected)


def test_reconnect_delay_scales_but_never_telegrams_retry_after() -> None:
    assert reconnect_delay(classify(TimedOut()), 10, jitter=0.0, scale=0.01) == pytest.approx(0.15)
    assert reconnect_delay(classify(RetryAfter(7)), 1, jitter=0.0, scale=0.01) == pytest.approx(7.0)


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
        assert (await status_line(h.bot)).startswith("polling; queue pending=0")
        health = h.services.sender.health
        health.failed("NetworkError")  # what the sender does when a send gets no answer
        line = await status_line(h.bot)
        assert "; Telegram unreachable since 20" in line
        assert line.endswith(" UTC")
        assert polling_healthy(h.bot), "an outage is no reason for the watchdog"
    finally:
        await h.stop()


# -- an update whose work could not be stored: asked for again, like a webhook's 500 -------


class Handled:
    """What a message handler saw of each update, and how it failed the first times."""

    def __init__(self, failures: dict[str, int]) -> None:
        self.failures = failures  # text: how many tries raise StoreBusy (-1: every one)
        self.seen: list[tuple[str, bool]] = []  # (text, telegram_resends()) per try

    async def handler(self, update: Update, context: object) -> None:
        text = update.effective_message.text if update.effective_message else ""
        assert text is not None
        self.seen.append((text, telegram_resends()))
        left = self.failures.get(text, 0)
        if left:
            self.failures[text] = left - 1 if left > 0 else left
            raise StoreBusy("database is locked")

    def tries(self, text: str) -> list[bool]:
        return [resends for seen, resends in self.seen if seen == text]


async def poll_batch(
    tmp_path: Path, texts: list[str], handled: Handled, done: Callable[[], bool]
) -> tuple[DurablePoller, Harness]:
    """The real PTB application (our error handler) polling the Bot API stand-in, with
    `texts` waiting as one batch; returns once `done()`."""
    from telegram.ext import ApplicationBuilder, MessageHandler, filters

    from xbot.handlers.errors import on_error

    h = await Harness.start(tmp_path / "data", start_bot=False)
    for text in texts:
        h.api.user_message(CHAT, text)
    app = ApplicationBuilder().token(h.api.token).base_url(f"{h.api.url}/bot").build()
    app.add_handler(MessageHandler(filters.ALL, handled.handler))
    app.add_error_handler(on_error)  # type: ignore[arg-type]
    await app.initialize()
    poller = DurablePoller(app, timeout=0, time_scale=SCALE)
    await poller.start()
    try:
        await eventually(done, 20, "the batch's handling")
    finally:
        await poller.stop()
        await app.shutdown()
    return poller, h


async def test_an_update_not_stored_comes_again_and_the_rest_of_its_batch_runs_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The middle update of a batch meets a locked database twice: it is not confirmed,
    so getUpdates brings it again (with the two after it, which are not handled twice),
    nobody is asked to send it again, and once stored the whole batch is confirmed."""
    caplog.set_level(logging.INFO)
    handled = Handled({"flaky": 2})
    _, h = await poll_batch(
        tmp_path, ["first", "flaky", "after"], handled, lambda: len(handled.tries("flaky")) == 3
    )
    try:
        assert handled.tries("flaky") == [True, True, True], "told to send it again"
        assert len(handled.tries("first")) == 1
        assert len(handled.tries("after")) == 1, "a stored update was handled again"
        assert not h.api.calls_for("sendMessage", CHAT)
        assert h.api.pending_updates == 0, "the batch was not confirmed when stored"
        asked_again = [r for r in caplog.records if "asking for them again" in r.getMessage()]
        assert len(asked_again) == 2
        # A locked database is no bug: one line each time, never a traceback.
        assert not [r for r in caplog.records if r.exc_info]
        assert (
            sum("update not stored, it comes again" in r.getMessage() for r in caplog.records) == 2
        )
    finally:
        await h.stop()


async def test_an_update_that_is_never_stored_is_answered_politely_and_let_go(
    tmp_path: Path,
) -> None:
    """A poison update cannot hold every later one behind it: after STORE_TRIES tries
    its last is the polite one (the user is asked to send it again) and polling goes on."""
    handled = Handled({"poison": -1})
    _, h = await poll_batch(
        tmp_path, ["poison", "next"], handled, lambda: len(handled.tries("poison")) == STORE_TRIES
    )
    try:
        assert handled.tries("poison") == [True] * (STORE_TRIES - 1) + [False]
        assert len(handled.tries("next")) == 1
        assert h.api.pending_updates == 0
    finally:
        await h.stop()


async def test_a_link_not_stored_while_polling_is_delivered_after_a_restart(
    tmp_path: Path,
) -> None:
    """The whole bot: the database is gone when a link arrives. No apology in the chat
    (the link is not lost), the update is not confirmed, so the restarted bot gets it
    again and delivers it once."""
    h = await Harness.start(tmp_path / "data")
    try:
        h.add_post("8090", text="stored later", photos=[h.photo("later")])
        await h.services.pool.close()  # every store call fails from now on
        h.api.user_message(CHAT, "https://x.com/a/status/8090")
        polls = len(h.api.calls_for("getUpdates"))
        await eventually(lambda: len(h.api.calls_for("getUpdates")) >= polls + 3, 20)
        assert h.api.pending_updates == 1, "confirmed to Telegram, yet not stored"
        assert not h.api.calls_for("sendMessage", CHAT), "the user was told to send it again"
        await h.restart()
        await eventually(lambda: bool(h.api.calls_for("sendPhoto", CHAT)), 20)
        await h.wait_idle()
        assert len(h.api.calls_for("sendPhoto", CHAT)) == 1
    finally:
        await h.stop()
