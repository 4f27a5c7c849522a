"""systemd's supervision of the running bot."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections.abc import Callable

from xbot.logs import kv
from xbot.ops.sdnotify import SystemdNotifier
from xbot.runtime._runtime import WAITING, Runtime

log = logging.getLogger("xbot.runtime")


# --- systemd (xbot.ops.sdnotify): READY, WATCHDOG while healthy, STATUS, STOPPING -------------
#
# When to say READY=1. Once polling (or the webhook) runs, as before; but when Telegram
# does not answer a start-up call, READY=1 goes out at that first failed try, with
# STATUS= saying what the bot waits for, and the watchdog pings from then on. Not
# EXTEND_TIMEOUT_USEC= (staying "activating" while waiting): a start job that does not
# finish for as long as Telegram is down would hang every `systemctl start/restart` and
# anything ordered after the unit, and systemd arms the watchdog only at READY=1
# (service_enter_start_post), so a loop wedged during that wait would go unnoticed until
# the extension lapsed. With READY=1 early the unit is "active" with a STATUS= line that
# says it waits, exactly as during an outage in mid-run, and a wedged loop is caught by
# the watchdog. A refused token is still a failed start whenever Telegram answers at
# once: getMe's 401 comes before READY=1.


def polling_healthy(bot: Runtime) -> bool:
    """What the watchdog vouches for: the start-up is waiting for Telegram, or updates can
    come in (the poller task or the webhook listener runs). Not whether Telegram answers:
    restarting the bot cannot bring Telegram back, and a poller waiting out an outage
    still runs. A wedged event loop sends no ping at all (the ping is a task on it)."""
    if bot.phase == WAITING:
        return True
    return bot.receiving


async def status_line(bot: Runtime) -> str:
    if bot.phase == WAITING:
        return bot.waiting_for
    if bot.services is None:
        return bot.phase
    stats = await bot.services.queue.stats(bot.services.clock())
    counts = stats.counts_by_state
    line = (
        f"{bot.phase}; queue pending={counts.get('pending', 0)} "
        f"running={counts.get('running', 0)} dead={counts.get('dead', 0)}"
    )
    health = bot.services.sender.health
    if not health.reachable and health.down_since is not None:
        # `systemctl status` says why nothing goes out, and since when.
        since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(health.down_since))
        line += f"; Telegram unreachable since {since}"
    return line


async def run_until_signalled(
    bot: Runtime,
    *,
    ready: Callable[[], None] | None = None,
    notifier: SystemdNotifier | None = None,
) -> None:
    """`xbot run`: start, wait for SIGTERM/SIGINT, stop within the grace period.

    A signal while the start-up still waits for Telegram ends the wait at once
    and returns cleanly (exit 0: systemd asked for the stop)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    systemd = notifier or SystemdNotifier.from_env()
    supervision: asyncio.Task[None] | None = None

    def supervise(status: str) -> None:
        nonlocal supervision
        if supervision is None:
            systemd.ready(status=status)
            supervision = asyncio.create_task(
                systemd.serve(lambda: polling_healthy(bot), lambda: status_line(bot))
            )
        else:
            systemd.status(status)

    starting = asyncio.create_task(bot.start(on_waiting=supervise), name="xbot-start")
    stopped = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({starting, stopped}, return_when=asyncio.FIRST_COMPLETED)
        if not starting.done():
            log.info("stopping %s", kv(phase=bot.phase))
            systemd.stopping()
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await starting  # start() cleans up after itself when cancelled
            log.info("stopped")
            return
        starting.result()  # a refused token or a broken database: raised here
        supervise(bot.phase)
        if ready is not None:
            ready()
        await stop.wait()
        systemd.stopping()
        log.info("stopping")
    finally:
        stopped.cancel()
        if supervision is not None:
            supervision.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await supervision
        if starting.done() and not starting.cancelled() and starting.exception() is None:
            await bot.stop()
        systemd.close()
