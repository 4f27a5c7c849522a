"""The real `xbot run` with its wall clock stepped the way NTP steps it (issue 26).

The bot reads its wall clock through XBOT_TEST_WALL_CLOCK_FILE (seconds added to the
real one, read at each look); its monotonic clock is the real one, untouched, as on a
VPS whose stale clock NTP fixes. (libfaketime can step only CLOCK_REALTIME too, with
FAKETIME_DONT_FAKE_MONOTONIC, but Debian's 0.9.10 then fails Python's time.sleep
with EINVAL: the bot's database busy handler sleeps.)
"""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import apsw
import pytest
from test_process import Stage, stop, wait_until

from standins._mediabytes import tiny_jpeg

pytestmark = pytest.mark.slow

HOURS = 3 * 3600


class ClockStage(Stage):
    """The stage of test_process, and a wall clock the test can step."""

    @property
    def wall_file(self) -> Path:
        return self.tmp / "wall-offset"

    def env(self) -> dict[str, str]:
        return super().env() | {"XBOT_TEST_WALL_CLOCK_FILE": str(self.wall_file)}

    def step(self, seconds: float) -> None:
        self.wall_file.write_text(f"{seconds}\n")

    def tasks(self) -> list[tuple[Any, ...]]:
        path = self.data / "xbot.sqlite3"
        if not path.exists():
            return []
        conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
        try:
            conn.set_busy_timeout(1000)
            return conn.execute(
                "SELECT kind, chat_id, state, last_error FROM tasks ORDER BY id"
            ).fetchall()
        except apsw.Error:
            return []
        finally:
            conn.close()

    def sent_photos(self, chat: int) -> int:
        return sum(c.status == 200 for c in self.api.calls_for("sendPhoto", chat))

    def report(self) -> str:
        calls = [(c.method, c.status, c.chat_id) for c in self.api.calls]
        return f"tasks: {self.tasks()}\ncalls: {calls}\nlog:\n{self.log()}"


@pytest.fixture
async def stage(tmp_path: Path) -> AsyncIterator[ClockStage]:
    s = ClockStage(tmp_path)
    s.step(0)
    await s.start()
    try:
        yield s
    finally:
        await s.stop()


async def _polling(stage: ClockStage) -> subprocess.Popen[bytes]:
    proc = stage.spawn()
    try:
        await wait_until(lambda: stage.api.calls_for("deleteWebhook"), 20, "polling")
    except BaseException:
        proc.kill()
        proc.wait(5)
        raise
    return proc


def _post(stage: ClockStage, post_id: int, **fx: Any) -> str:
    stage.fx.add_post(
        str(post_id),
        text=f"post {post_id}",
        photos=[stage.media.add(f"/p/{post_id}.jpg", tiny_jpeg(), "image/jpeg", **fx.pop("m", {}))],
        **fx,
    )
    return f"https://x.com/a/status/{post_id}"


def _waiting_out_x(stage: ClockStage, chats: set[int]) -> bool:
    return {
        chat
        for kind, chat, state, error in stage.tasks()
        if kind == "deliver" and state == "pending" and error
    } >= chats


async def test_a_step_back_of_three_hours_holds_no_retry_for_them(stage: ClockStage) -> None:
    """Two links wait out X (its first answer a 503), a third chat is held by a 429;
    the wall clock goes back 3 h; each is sent after its own few seconds."""
    outage = {201: _post(stage, 1001, fault="503", fault_count=1),
              202: _post(stage, 1002, fault="503", fault_count=1)}  # fmt: skip
    held = _post(stage, 1003)
    stage.api.fail_next(
        "sendPhoto", 429, "Too Many Requests: retry after 3", retry_after=3, chat_id=203
    )
    proc = await _polling(stage)
    try:
        for chat, link in outage.items():
            stage.api.user_message(chat, link)
        stage.api.user_message(203, held)
        await wait_until(lambda: _waiting_out_x(stage, {201, 202}), 20, "two outage retries")
        await wait_until(
            lambda: any(c.status == 429 for c in stage.api.calls_for("sendPhoto", 203)),
            20,
            "the 429",
        )
        stage.step(-HOURS)
        try:
            await wait_until(
                lambda: all(stage.sent_photos(chat) for chat in (201, 202, 203)),
                30,
                "every link sent after the step back",
            )
            await wait_until(lambda: "wall clock stepped" in stage.log(), 15, "the step logged")
        except TimeoutError as exc:
            raise AssertionError(f"{exc}\n{stage.report()}") from exc
    finally:
        stop(proc)
    assert [stage.sent_photos(chat) for chat in (201, 202, 203)] == [1, 1, 1]
    assert "step=-10800" in stage.log()
    assert "Traceback" not in stage.log()


async def test_a_step_forward_takes_no_lease_and_ages_no_task(stage: ClockStage) -> None:
    """A slow download is in flight and a link waits out X when the wall clock jumps 3 h
    forward; more links keep the other workers leasing (each lease runs the repair of
    expired leases first). The slow post goes once, the waiting one is not dead-lettered
    for 3 h it did not wait."""
    slow = _post(stage, 2001, m={"delay": 4.0})
    waiting = _post(stage, 2002, fault="503", fault_count=1)
    more = {303 + i: _post(stage, 2003 + i) for i in range(4)}
    proc = await _polling(stage)
    try:
        stage.api.user_message(301, slow)
        stage.api.user_message(302, waiting)
        await wait_until(
            lambda: (
                (("deliver", 301, "running") in [t[:3] for t in stage.tasks()])
                and _waiting_out_x(stage, {302})
            ),
            20,
            "the slow download under way and the outage retry written",
        )
        stage.step(HOURS)
        for chat, link in more.items():
            stage.api.user_message(chat, link)
        try:
            await wait_until(
                lambda: all(stage.sent_photos(chat) for chat in (301, 302, *more)),
                30,
                "every link sent after the step forward",
            )
        except TimeoutError as exc:
            raise AssertionError(f"{exc}\n{stage.report()}") from exc
    finally:
        stop(proc)
    assert stage.sent_photos(301) == 1, f"the slow post went twice\n{stage.report()}"
    assert [state for kind, _, state, _ in stage.tasks() if kind == "deliver"] == ["done"] * 6
    log = stage.log()
    assert "lease lost" not in log
    assert "dead-lettered" not in log
    assert "Traceback" not in log
