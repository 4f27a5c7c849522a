"""sd_notify against a real AF_UNIX datagram socket, as systemd listens for it."""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from xbot.ops.sdnotify import SystemdNotifier, watchdog, watchdog_interval


class Listener:
    """The systemd side: a bound datagram socket that collects messages."""

    def __init__(self, sock: socket.socket, name: str) -> None:
        self.sock = sock
        self.name = name
        sock.settimeout(0)

    def drain(self) -> list[str]:
        out = []
        while True:
            try:
                out.append(self.sock.recv(4096).decode())
            except BlockingIOError:
                return out

    async def wait_for(self, count: int, timeout: float = 5.0) -> list[str]:
        got: list[str] = []
        async with asyncio.timeout(timeout):
            while len(got) < count:
                got += self.drain()
                await asyncio.sleep(0.005)
        return got


@pytest.fixture
def listener(tmp_path: Path) -> Iterator[Listener]:
    path = tmp_path / "notify"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    yield Listener(sock, str(path))
    sock.close()


@pytest.fixture
def abstract_listener() -> Iterator[Listener]:
    name = f"xbot-test-{uuid.uuid4().hex}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind("\0" + name)
    yield Listener(sock, "@" + name)
    sock.close()


def test_ready_status_stopping(listener: Listener) -> None:
    n = SystemdNotifier.from_env({"NOTIFY_SOCKET": listener.name})
    assert n.enabled
    assert n.ready(status="polling; queue\npending=3")
    assert n.status("queue pending=0")
    assert n.stopping()
    n.close()
    assert listener.drain() == [
        "READY=1\nSTATUS=polling; queue pending=3",
        "STATUS=queue pending=0",
        "STOPPING=1\nSTATUS=stopping",
    ]


def test_abstract_socket(abstract_listener: Listener) -> None:
    n = SystemdNotifier.from_env({"NOTIFY_SOCKET": abstract_listener.name})
    assert n.ready()
    n.close()
    assert abstract_listener.drain() == ["READY=1"]


def test_outside_systemd_nothing_happens() -> None:
    n = SystemdNotifier.from_env({})
    assert not n.enabled
    assert not n.ready()
    assert not n.ping()


def test_a_vanished_socket_never_raises(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    n = SystemdNotifier.from_env({"NOTIFY_SOCKET": str(tmp_path / "gone")})
    assert not n.ready()
    assert not n.ping()
    n.close()
    assert len([r for r in caplog.records if "sd_notify failed" in r.message]) == 1


@pytest.mark.parametrize(
    ("env", "pid", "expected"),
    [
        ({"WATCHDOG_USEC": "60000000"}, 10, 30.0),
        ({"WATCHDOG_USEC": "60000000", "WATCHDOG_PID": "10"}, 10, 30.0),
        ({"WATCHDOG_USEC": "60000000", "WATCHDOG_PID": "11"}, 10, None),
        ({"WATCHDOG_USEC": "0"}, 10, None),
        ({"WATCHDOG_USEC": "soon"}, 10, None),
        ({}, 10, None),
    ],
    ids=["half", "our-pid", "other-pid", "zero", "junk", "unset"],
)
def test_watchdog_interval(env: dict[str, str], pid: int, expected: float | None) -> None:
    assert watchdog_interval(env, pid) == expected


async def test_watchdog_pings_only_while_healthy(listener: Listener) -> None:
    # 20 ms between pings: WATCHDOG_USEC is twice that.
    env = {
        "NOTIFY_SOCKET": listener.name,
        "WATCHDOG_USEC": "40000",
        "WATCHDOG_PID": str(os.getpid()),
    }
    n = SystemdNotifier.from_env(env)
    healthy = True
    checks = 0

    def is_healthy() -> bool:
        nonlocal checks
        checks += 1
        return healthy

    task = asyncio.create_task(watchdog(is_healthy, n))
    try:
        assert (await listener.wait_for(3))[:3] == ["WATCHDOG=1"] * 3
        healthy = False
        listener.drain()  # sendto is synchronous: every earlier ping is already queued
        seen = checks
        async with asyncio.timeout(5):
            while checks < seen + 3:  # three unhealthy rounds: a healthy bot pings in each
                await asyncio.sleep(0.005)
        assert listener.drain() == []
        healthy = True
        assert await listener.wait_for(1) == ["WATCHDOG=1"]
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        n.close()


async def test_watchdog_returns_without_watchdog_sec(listener: Listener) -> None:
    n = SystemdNotifier.from_env({"NOTIFY_SOCKET": listener.name})
    async with asyncio.timeout(1):
        await n.run_watchdog(lambda: True)
    assert listener.drain() == []


async def test_status_refreshes_with_queue_depth(listener: Listener) -> None:
    n = SystemdNotifier.from_env({"NOTIFY_SOCKET": listener.name})
    depth = iter(range(100))

    async def describe() -> str:
        return f"queue pending={next(depth)}"

    task = asyncio.create_task(n.run_status(describe, every=0.01))
    try:
        got = await listener.wait_for(2)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        n.close()
    assert got[:2] == ["STATUS=queue pending=0", "STATUS=queue pending=1"]


def test_a_full_socket_never_blocks(listener: Listener) -> None:
    # Nobody reads: the receive queue fills, and sending must fail fast instead of blocking.
    n = SystemdNotifier.from_env({"NOTIFY_SOCKET": listener.name})
    results = [n.ping() for _ in range(5000)]
    n.close()
    assert results[0]
    assert not results[-1]


async def test_serve_runs_watchdog_and_status_together(listener: Listener) -> None:
    env = {"NOTIFY_SOCKET": listener.name, "WATCHDOG_USEC": "40000"}
    n = SystemdNotifier.from_env(env)

    async def describe() -> str:
        return "queue pending=7"

    task = asyncio.create_task(n.serve(lambda: True, describe, status_every=0.01))
    got: list[str] = []
    try:
        async with asyncio.timeout(5):
            while not {"WATCHDOG=1", "STATUS=queue pending=7"} <= set(got):
                got += await listener.wait_for(1)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        n.close()


async def test_serve_outside_systemd_returns() -> None:
    async def describe() -> str:
        raise AssertionError("never asked")

    async with asyncio.timeout(1):
        await SystemdNotifier.from_env({}).serve(lambda: True, describe)
