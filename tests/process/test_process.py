"""The real `xbot run` process: killed between albums, stopped with SIGTERM, run twice.

The stand-ins run in this test process; the bot is a child process talking
HTTP to them, with its data dir in tmp_path.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import apsw
import pytest
from conftest import eventually as wait_until  # the async wait

from standins import tiny_jpeg
from standins.botapi import BotApiServer, Call
from standins.fxapi import FxApiServer
from standins.media_server import MediaServer

pytestmark = pytest.mark.slow

CHAT = 77


class Stage:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.data = tmp / "data"
        self.media = MediaServer()
        self.fx = FxApiServer()
        self.api = BotApiServer(allow_url_fetch_from_loopback=True)
        self.runs = 0

    async def start(self) -> None:
        await self.media.start()
        await self.fx.start()
        await self.api.start()

    async def stop(self) -> None:
        await self.api.stop()
        await self.fx.stop()
        await self.media.stop()

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("XBOT_")}
        env.update(
            XBOT_TOKEN=self.api.token,
            XBOT_BOT_API_URL=f"{self.api.url}/bot",
            XBOT_BOT_API_FILE_URL=f"{self.api.url}/file/bot",
            XBOT_X_API_URL=self.fx.url,
            XBOT_VX_API_URL="",  # the fallback sources would leave 127.0.0.1
            XBOT_X_SYNDICATION_URL="",
            XBOT_DATA_DIR=str(self.data),
            XBOT_ALLOW_PRIVATE_NETWORKS="1",
            XBOT_LOG_LEVEL="INFO",
        )
        return env

    def spawn(self) -> subprocess.Popen[bytes]:
        self.runs += 1
        with (self.tmp / f"bot{self.runs}.log").open("wb") as log:
            return subprocess.Popen(
                [sys.executable, "-m", "xbot.cli", "run"],
                env=self.env(),
                stdout=log,
                stderr=log,
            )

    def log(self) -> str:
        return "".join(
            (self.tmp / f"bot{i}.log").read_text(errors="replace") for i in range(1, self.runs + 1)
        )

    def settled(self) -> bool:
        """Every task done or dead: nothing is left that could send (a wrong resend
        would come from a task still pending or running), so a test stops here."""
        path = self.data / "xbot.sqlite3"
        conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
        try:
            conn.set_busy_timeout(1000)
            states = [r[0] for r in conn.execute("SELECT state FROM tasks").fetchall()]
        except apsw.BusyError:
            return False
        finally:
            conn.close()
        return bool(states) and all(state in ("done", "dead") for state in states)

    def album_calls(self) -> list[Any]:
        return [c for c in self.api.calls_for("sendMediaGroup", CHAT) if c.status == 200]

    def payloads(self) -> list[dict[str, Any]]:
        path = self.data / "xbot.sqlite3"
        if not path.exists():
            return []
        conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
        try:
            conn.set_busy_timeout(1000)
            rows = conn.execute("SELECT payload FROM tasks").fetchall()
        except apsw.Error:
            return []
        finally:
            conn.close()
        return [json.loads(r[0]) for r in rows]


@pytest.fixture
async def stage(tmp_path: Path) -> AsyncIterator[Stage]:
    s = Stage(tmp_path)
    await s.start()
    try:
        yield s
    finally:
        await s.stop()


def stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM, within: float = 15) -> float:
    started = time.monotonic()
    proc.send_signal(sig)
    proc.wait(within)
    return time.monotonic() - started


class SecondAlbumHeldBack(BotApiServer):
    """Answers the album after the first with a 429 (retry_after 5): a kill lands between."""

    armed = True

    def recorded(self, call: Call) -> None:
        if call.method == "sendMediaGroup" and call.status == 200 and self.armed:
            self.armed = False  # before the bot even has the answer to the first album
            self.fail_next(call.method, 429, "Too Many Requests: retry after 5", retry_after=5)


async def test_sigkill_between_two_albums_resends_neither(stage: Stage) -> None:
    await stage.api.stop()
    stage.api = SecondAlbumHeldBack(allow_url_fetch_from_loopback=True)
    await stage.api.start()
    urls = [stage.media.add(f"/m/{i}.jpg", tiny_jpeg(), "image/jpeg") for i in range(12)]
    stage.fx.add_post("555", text="twelve", photos=urls)
    proc = stage.spawn()
    try:
        await wait_until(lambda: stage.api.calls_for("deleteWebhook"), 15, "polling")
        stage.api.user_message(CHAT, "https://x.com/a/status/555")
        # The first album is confirmed and recorded; Telegram's 429 holds the
        # second one back: kill now.
        await wait_until(
            lambda: any(p.get("sent") for p in stage.payloads()), 15, "first album recorded"
        )
        proc.kill()
        proc.wait(5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert len(stage.album_calls()) == 1, "the kill must land between the two albums"

    proc = stage.spawn()
    try:
        try:
            await wait_until(lambda: len(stage.album_calls()) >= 2, 30, "second album")
        except TimeoutError as exc:
            calls = [(c.method, c.status, c.chat_id) for c in stage.api.calls]
            raise AssertionError(f"{exc}\ncalls: {calls}\nlog:\n{stage.log()}") from exc
        await wait_until(stage.settled, 15, "every task done")  # a third album before it
    finally:
        stop(proc)
    albums = [[m["media"] for m in c.params["media"]] for c in stage.album_calls()]
    assert len(albums) == 2, f"an album was resent: {albums}"
    assert albums[0] + albums[1] == urls
    assert "Traceback" not in stage.log()


async def test_sigterm_exits_within_ten_seconds_and_loses_nothing(stage: Stage) -> None:
    for i in range(30):
        stage.fx.add_post(
            str(600 + i),
            text=f"t{i}",
            photos=[stage.media.add(f"/t/{i}.jpg", tiny_jpeg(), "image/jpeg", delay=0.2)],
        )
    proc = stage.spawn()
    try:
        await wait_until(lambda: stage.api.calls_for("deleteWebhook"), 15, "polling")
        for i in range(30):
            stage.api.user_message(CHAT + i % 5, f"https://x.com/a/status/{600 + i}")
        await wait_until(
            lambda: any(c.method == "sendPhoto" for c in stage.api.calls), 15, "work under way"
        )
        took = stop(proc, signal.SIGTERM)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert proc.returncode == 0
    assert took < 10, f"SIGTERM took {took:.1f}s"

    proc = stage.spawn()
    try:

        def delivered() -> set[str]:
            return {
                c.params["caption"].split("\n\n")[1]
                for c in stage.api.calls_for("sendPhoto")
                if c.status == 200
            }

        await wait_until(lambda: len(delivered()) == 30, 60, "every link delivered")
    finally:
        stop(proc)
    photos = [c for c in stage.api.calls_for("sendPhoto") if c.status == 200]
    assert len(photos) == 30, "a link was sent twice or lost"
    assert "Traceback" not in stage.log()


async def test_a_second_bot_on_the_same_data_dir_is_refused(stage: Stage) -> None:
    proc = stage.spawn()
    try:
        await wait_until(lambda: stage.api.calls_for("deleteWebhook"), 15, "polling")
        second = subprocess.run(
            [sys.executable, "-m", "xbot.cli", "run"],
            env=stage.env(),
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    finally:
        stop(proc)
    assert second.returncode == 2
    lines = second.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "another xbot is already running" in lines[0]
    assert stage.api.token not in second.stderr


def test_run_without_a_token_says_where_one_comes_from(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("XBOT_")}
    env["XBOT_DATA_DIR"] = str(tmp_path)
    out = subprocess.run(
        [sys.executable, "-m", "xbot.cli", "run"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert out.returncode != 0
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "@BotFather" in lines[0]
    assert "xbot demo" in lines[0]


async def test_an_update_is_not_lost_when_the_bot_dies_before_queueing_it(stage: Stage) -> None:
    """The offset is confirmed only after the handler queued the link (xbot.receiving.polling)."""
    stage.fx.add_post(
        "777", text="kept", photos=[stage.media.add("/k.jpg", tiny_jpeg(), "image/jpeg")]
    )
    proc = stage.spawn()
    lock = None
    try:
        await wait_until(lambda: stage.api.calls_for("deleteWebhook"), 15, "polling")
        # Another process holds the write lock: the handler waits in its enqueue.
        lock = apsw.Connection(str(stage.data / "xbot.sqlite3"))
        # Patient like any process: the idle bot's own lease polls hold the lock
        # for a millisecond now and then, and an impatient BEGIN fails on them.
        lock.set_busy_timeout(5000)
        lock.execute("BEGIN EXCLUSIVE")
        polls = len(stage.api.calls_for("getUpdates"))
        stage.api.user_message(CHAT, "https://x.com/a/status/777")
        await wait_until(
            lambda: len(stage.api.calls_for("getUpdates")) > polls, 15, "the update fetched"
        )
        await asyncio.sleep(0.5)  # the handler is now blocked on the locked database
        proc.kill()
        proc.wait(5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        if lock is not None:
            lock.execute("ROLLBACK")
            lock.close()
    assert not stage.api.calls_for("sendPhoto", CHAT)

    proc = stage.spawn()
    try:
        await wait_until(lambda: stage.api.calls_for("sendPhoto", CHAT), 20, "the link delivered")
        await wait_until(stage.settled, 15, "every task done")  # a second photo before it
    finally:
        stop(proc)
    assert len([c for c in stage.api.calls_for("sendPhoto", CHAT) if c.status == 200]) == 1


async def test_a_start_waits_out_a_locked_database_instead_of_exiting(stage: Stage) -> None:
    from xbot.storage.db import prepare_store

    prepare_store(stage.data / "xbot.sqlite3")
    lock = apsw.Connection(str(stage.data / "xbot.sqlite3"))
    lock.execute("BEGIN EXCLUSIVE")
    proc = stage.spawn()
    try:
        # Past the 5 s busy timeout the start says it waits (and waits), rather than exit.
        # Waited for, not slept: a bot slow to start (a loaded machine) reached its first
        # write only seconds after the spawn, and a fixed 7 s then ended the lock too early.
        await wait_until(lambda: "start waits for the database" in stage.log(), 30, "the wait")
        assert proc.poll() is None, stage.log()
        lock.execute("ROLLBACK")
        await wait_until(lambda: stage.api.calls_for("deleteWebhook"), 30, "polling")
        assert "start waits for the database" in stage.log()
    finally:
        if lock.in_transaction:
            lock.execute("ROLLBACK")
        lock.close()
        stop(proc)
    assert proc.returncode == 0
