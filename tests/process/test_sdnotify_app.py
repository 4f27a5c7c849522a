"""`xbot run` under Type=notify: the real bot against the stand-ins tells a real notify
socket READY, then WATCHDOG and STATUS with the queue depth, then STOPPING on SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
from pathlib import Path

from standins.harness import Harness
from xbot.ops.sdnotify import SystemdNotifier
from xbot.runtime import Runtime, run_until_signalled


async def test_a_bot_session_speaks_sd_notify(tmp_path: Path) -> None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(tmp_path / "notify"))
    sock.setblocking(False)
    harness = await Harness.start(tmp_path / "data", start_bot=False)
    bot = Runtime(harness.settings, poll_timeout=1)
    notifier = SystemdNotifier(socket_path=str(tmp_path / "notify"), watchdog_every=0.02)
    got: list[str] = []

    async def until(predicate: object, timeout: float = 10.0) -> None:
        async with asyncio.timeout(timeout):
            while not predicate():  # type: ignore[operator]
                try:
                    got.append(sock.recv(4096).decode())
                except BlockingIOError:
                    await asyncio.sleep(0.01)

    session = asyncio.create_task(run_until_signalled(bot, notifier=notifier))
    try:
        await until(lambda: "WATCHDOG=1" in got and any("queue pending=" in m for m in got))
        assert got[0] == "READY=1\nSTATUS=polling"
        assert bot.poller is not None
        assert bot.poller.running
        os.kill(os.getpid(), signal.SIGTERM)  # what systemctl stop sends
        async with asyncio.timeout(15):
            await session
        await until(lambda: any(m.startswith("STOPPING=1") for m in got))
    finally:
        if not session.done():
            session.cancel()
        await harness.stop()
        sock.close()
    stopping = next(i for i, m in enumerate(got) if m.startswith("STOPPING=1"))
    assert "WATCHDOG=1" not in got[stopping + 1 :]  # no ping vouches for a bot on its way out


async def test_a_start_waiting_for_telegram_is_ready_and_pinging(tmp_path: Path) -> None:
    """Telegram answers getMe with nginx's 502 page: the bot says READY=1 at the first failed
    try with a STATUS= saying what it waits for, and pings the watchdog while it waits (a
    restart could not bring Telegram back); once getMe answers it polls and says so."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(tmp_path / "notify"))
    sock.setblocking(False)
    harness = await Harness.start(tmp_path / "data", start_bot=False, time_scale=0.01)
    harness.api.set_5xx(1.0, methods={"getMe"})
    bot = Runtime(harness.settings, poll_timeout=1)
    notifier = SystemdNotifier(socket_path=str(tmp_path / "notify"), watchdog_every=0.02)
    got: list[str] = []

    async def until(predicate: object, timeout: float = 10.0) -> None:
        async with asyncio.timeout(timeout):
            while not predicate():  # type: ignore[operator]
                try:
                    got.append(sock.recv(4096).decode())
                except BlockingIOError:
                    await asyncio.sleep(0.01)

    session = asyncio.create_task(run_until_signalled(bot, notifier=notifier))
    try:
        await until(lambda: got.count("WATCHDOG=1") >= 3)
        assert got[0].startswith("READY=1\nSTATUS=waiting for Telegram: getMe failed (Bad Gateway")
        assert bot.phase == "waiting"
        assert not bot.receiving
        harness.api.set_5xx(0.0)
        await until(lambda: any(m.startswith("STATUS=polling") for m in got))
        assert bot.receiving
        assert sum(m.startswith("READY=1") for m in got) == 1
        os.kill(os.getpid(), signal.SIGTERM)
        async with asyncio.timeout(15):
            await session
    finally:
        if not session.done():
            session.cancel()
        await harness.stop()
        sock.close()


async def test_sigterm_while_waiting_for_telegram_stops_at_once(tmp_path: Path) -> None:
    harness = await Harness.start(tmp_path / "data", start_bot=False, time_scale=0.01)
    await harness.api.stop()  # connections refused
    bot = Runtime(harness.settings, poll_timeout=1)
    session = asyncio.create_task(run_until_signalled(bot, notifier=SystemdNotifier()))
    try:
        async with asyncio.timeout(10):
            while bot.phase != "waiting":
                await asyncio.sleep(0.01)
        os.kill(os.getpid(), signal.SIGTERM)
        async with asyncio.timeout(5):
            await session  # returns: no exception, nothing left running
        assert bot.phase == "stopping"
        assert bot.services is None
    finally:
        if not session.done():
            session.cancel()
        await harness.stop()
