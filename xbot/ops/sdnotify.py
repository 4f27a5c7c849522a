"""systemd's notify protocol in a few lines of the standard library (no libsystemd).

Under ``Type=notify`` systemd waits for ``READY=1`` before it calls the unit
started, and with ``WatchdogSec=`` it kills and restarts the service when no
``WATCHDOG=1`` arrives in time. A message is one datagram to the AF_UNIX
socket named by ``$NOTIFY_SOCKET`` (a leading ``@`` names an abstract
socket). Outside systemd there is no socket and every call does nothing.

The watchdog ping comes from a task on the event loop and only while the
caller's health check passes: a blocked loop sends nothing because the task
never runs, and a loop that runs while polling has died sends nothing because
the check fails. Either way systemd restarts the bot.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Awaitable, Callable, Mapping

import attrs

log = logging.getLogger(__name__)

STATUS_EVERY = 30.0


def _address(raw: str) -> str:
    # "@name" is Linux's abstract namespace: a NUL byte where the path would start.
    return "\0" + raw[1:] if raw.startswith("@") else raw


def watchdog_interval(env: Mapping[str, str], pid: int) -> float | None:
    """Seconds between pings (half of ``$WATCHDOG_USEC``), or None when no watchdog is set.

    ``$WATCHDOG_PID``, when present, names the process the watchdog is for:
    a child that inherited the environment must not ping on its parent's behalf.
    """
    raw = env.get("WATCHDOG_USEC", "")
    if not raw.isdigit() or int(raw) == 0:
        return None
    owner = env.get("WATCHDOG_PID", "")
    if owner and owner != str(pid):
        return None
    return int(raw) / 1_000_000 / 2


@attrs.define
class SystemdNotifier:
    """Talks to systemd when ``$NOTIFY_SOCKET`` is set; a no-op otherwise.

    Attributes:
        socket_path: the notify socket as systemd gave it (None outside systemd).
        watchdog_every: seconds between watchdog pings (None without ``WatchdogSec=``).
    """

    socket_path: str | None = None
    watchdog_every: float | None = None
    _sock: socket.socket | None = attrs.field(default=None, init=False)
    _warned: bool = attrs.field(default=False, init=False)

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, pid: int | None = None
    ) -> SystemdNotifier:
        environ = os.environ if env is None else env
        return cls(
            socket_path=environ.get("NOTIFY_SOCKET") or None,
            watchdog_every=watchdog_interval(environ, os.getpid() if pid is None else pid),
        )

    @property
    def enabled(self) -> bool:
        return self.socket_path is not None

    def send(self, *fields: str) -> bool:
        """Send ``fields`` as one message (newline-separated). Never raises."""
        if self.socket_path is None:
            return False
        message = "\n".join(fields).encode("utf-8", "replace")
        try:
            if self._sock is None:
                # Non-blocking: if systemd stops reading, a full queue must cost us a
                # message, never a blocked event loop.
                self._sock = socket.socket(
                    socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC | socket.SOCK_NONBLOCK
                )
            self._sock.sendto(message, _address(self.socket_path))
        except OSError as exc:
            # Losing a notification must not take the bot down; say it once.
            if not self._warned:
                log.warning("sd_notify failed socket=%s error=%s", self.socket_path, exc)
                self._warned = True
            return False
        return True

    def ready(self, status: str | None = None) -> bool:
        fields = ["READY=1"]
        if status is not None:
            fields.append(f"STATUS={_one_line(status)}")
        return self.send(*fields)

    def stopping(self) -> bool:
        return self.send("STOPPING=1", "STATUS=stopping")

    def status(self, text: str) -> bool:
        return self.send(f"STATUS={_one_line(text)}")

    def ping(self) -> bool:
        return self.send("WATCHDOG=1")

    async def run_watchdog(self, is_healthy: Callable[[], bool]) -> None:
        """Ping every `watchdog_every` seconds while ``is_healthy()``; return at once if no
        watchdog is configured. Cancel it to stop."""
        every = self.watchdog_every
        if every is None or not self.enabled:
            return
        withheld = False
        while True:
            if is_healthy():
                self.ping()
                if withheld:
                    log.info("watchdog healthy again")
                withheld = False
            elif not withheld:
                log.error(
                    "watchdog withheld: the bot is not healthy; systemd restarts it "
                    "when WatchdogSec passes"
                )
                withheld = True
            await asyncio.sleep(every)

    async def run_status(
        self, describe: Callable[[], Awaitable[str]], every: float = STATUS_EVERY
    ) -> None:
        """Refresh ``STATUS=`` (what `systemctl status` shows) every `every` seconds."""
        if not self.enabled:
            return
        while True:
            try:
                self.status(await describe())
            except Exception as exc:  # noqa: BLE001 - a status line is never worth a crash
                log.debug("status line failed error=%s", exc)
            await asyncio.sleep(every)

    async def serve(
        self,
        is_healthy: Callable[[], bool],
        describe: Callable[[], Awaitable[str]],
        status_every: float = STATUS_EVERY,
    ) -> None:
        """The watchdog and the status line together, until cancelled (a no-op outside
        systemd). Start it after `ready`; cancel it before stopping."""
        if not self.enabled:
            return
        async with asyncio.TaskGroup() as group:
            group.create_task(self.run_watchdog(is_healthy))
            group.create_task(self.run_status(describe, status_every))

    def close(self) -> None:
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
            self._sock = None


def _one_line(text: str) -> str:
    return " ".join(text.split())


async def watchdog(is_healthy: Callable[[], bool], notifier: SystemdNotifier | None = None) -> None:
    """Ping systemd's watchdog while ``is_healthy()``; a no-op outside systemd."""
    if notifier is not None:
        await notifier.run_watchdog(is_healthy)
        return
    own = SystemdNotifier.from_env()
    try:
        await own.run_watchdog(is_healthy)
    finally:
        own.close()
