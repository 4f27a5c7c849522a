"""The running bot: started, supervised from outside, stopped cleanly."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from telegram import Update

from xbot import __version__
from xbot.app import Wired, add_handlers, build, build_front
from xbot.clock import Clocks, SteppedClocks, SystemClocks, clock_pair
from xbot.config import Settings, WebhookConfig
from xbot.errors import Permanent, SendError, StoreError, TokenRefused, XbotError
from xbot.handlers import commands
from xbot.logs import add_secret, kv
from xbot.ops.instance import instance_lock
from xbot.ops.listener import Listener
from xbot.ops.telemetry import Telemetry
from xbot.periodic import Periodic
from xbot.receiving.polling import DurablePoller
from xbot.runtime._retry import T, patiently, retrying, telegram_did_not_answer
from xbot.runtime._sweep import clock_watch, sweep_once, sweeps
from xbot.sending.bot_errors import error_detail, library_name, translated
from xbot.sending.pacing import Pacer
from xbot.sending.telegram_health import FIRST_PROBE, PROBE_CAP, TELEGRAM_BUDGET
from xbot.services import Services
from xbot.storage.time_line import mark as mark_time_line
from xbot.tasks.backoff import reconnect_delay

if TYPE_CHECKING:
    from xbot.receiving.webhook import WebhookListener

log = logging.getLogger("xbot.runtime")

STOP_GRACE = 6.0  # running tasks get this long to finish on SIGTERM; the unit allows more
START_CALL_TIMEOUT = 10.0  # getMe/deleteWebhook at start: tiny calls; longer means a hang


def _default_clocks(settings: Settings) -> Clocks:
    """The real clock pair; with XBOT_TEST_WALL_CLOCK_FILE, a test's stepped wall clock."""
    if settings.wall_clock_file is not None:
        return SteppedClocks(settings.wall_clock_file)
    return SystemClocks()


# What the bot is doing, for the watchdog, STATUS= and a readiness check (`Runtime.phase`).
STARTING = "starting"  # opening the database, asking getMe for the first time
WAITING = "waiting"  # Telegram did not answer a start-up call: trying again, in a while
POLLING = "polling"  # long polling runs (xbot.receiving.polling)
WEBHOOK = "webhook"  # the webhook listener runs
STOPPING = "stopping"


class Runtime:
    """The running bot: PTB polling, workers and the sweep, with a clean stop.

    Attributes:
        phase: one of STARTING, WAITING, POLLING, WEBHOOK, STOPPING.
        waiting_for: while WAITING, one line saying on what (for STATUS= and logs).
    """

    def __init__(
        self,
        settings: Settings,
        *,
        clock: Clocks | Callable[[], float] | None = None,
        pacer: Pacer | None = None,
        poll_timeout: int = 30,
        webhook: WebhookConfig | None = None,
        first_probe: float = FIRST_PROBE,
        probe_cap: float = PROBE_CAP,
        telegram_budget: float = TELEGRAM_BUDGET,
        read_timeout: float = 30.0,
        metrics: bool | None = None,
    ) -> None:
        """`first_probe`, `probe_cap`, `telegram_budget`, `read_timeout`: Telegram's hold,
        how long a link waits for Telegram, how long a call waits for an answer (tests
        scale them down)."""
        self.settings = settings
        self.telegram_budget = telegram_budget
        self.read_timeout = read_timeout
        self.webhook = webhook
        if webhook is not None:
            # PTB logs setWebhook's parameters at DEBUG, the secret among them.
            add_secret(webhook.secret_token)
        # The clock pair the time line is built on (a test's one-number clock, wrapped).
        self.clocks = _default_clocks(settings) if clock is None else clock_pair(clock)
        self.pacer = pacer
        self.poll_timeout = poll_timeout
        # Counting costs a little CPU per link: only with a listener to read it
        # (`metrics` overrides, for the benchmark's "on" without a scraper).
        counting = settings.metrics_addr is not None if metrics is None else metrics
        # Built before the first call of the start-up: every call's result is told to it.
        self.front = build_front(
            settings,
            counting=counting,
            read_timeout=read_timeout,
            first_probe=first_probe,
            probe_cap=probe_cap,
        )
        self.health = self.front.health
        self.metrics = self.front.metrics
        self.application = self.front.application
        self.wired: Wired | None = None
        self.services: Services | None = None
        # The periodic loops (sweep, clock watch, alerts, canary): started with the bot,
        # stopped together.
        self._loops: list[Periodic] = []
        self._menus: asyncio.Task[None] | None = None
        self._on_waiting: Callable[[str], None] | None = None  # the start's, see `start`
        self.phase = STARTING
        self.waiting_for = ""
        self._lock = instance_lock(settings.data_dir)

    @property
    def poller(self) -> DurablePoller | None:
        return None if self.wired is None else self.wired.poller

    @property
    def hook_listener(self) -> WebhookListener | None:
        return None if self.wired is None else self.wired.hook_listener

    @property
    def telemetry(self) -> Telemetry | None:
        return None if self.wired is None else self.wired.telemetry

    @property
    def listener(self) -> Listener | None:
        """The operator's listener (/metrics, /livez, /readyz), None without one."""
        return None if self.wired is None else self.wired.listener

    @property
    def receiving(self) -> bool:
        """True while updates can come in: polling runs or the webhook listener listens.

        Not whether Telegram answers (a poller waiting out an outage still runs)."""
        if self.phase not in (POLLING, WEBHOOK) or self.wired is None:
            return False
        return self.wired.receiver.running and self.application.running

    async def start(self, on_waiting: Callable[[str], None] | None = None) -> Services:
        """Start everything; `on_waiting` hears the `waiting_for` line at each failed
        start-up try (the systemd glue in `run_until_signalled` reports READY and
        STATUS= with it)."""
        self._on_waiting = on_waiting
        # One bot per data dir; holding the lock, every lease left in the
        # database belongs to a process that is gone.
        self._lock.acquire()
        try:
            return await self._start()
        except BaseException:
            # A refused token, a broken database, or SIGTERM while waiting for
            # Telegram: undo what was built, so the process exits cleanly.
            with contextlib.suppress(Exception):
                await self._close()
            raise

    async def _until_telegram_answers(self, what: str, call: Callable[[], Awaitable[T]]) -> T:
        """Run a start-up call to the Bot API until Telegram answers it.

        A transient failure (a 5xx or nginx's HTML 502 page, a refused or reset
        connection, a timeout, a DNS failure: `TelegramUnreachable` and its kin) is
        one log line and another try after a capped backoff, for as long as it
        takes: exiting would only have systemd restart us against its start limit.
        A refused token (`TokenRefused`: 401/404) is raised at once.
        """

        def on_wait(exc: Exception, failures: int, delay: float) -> None:
            detail = error_detail(exc.__cause__ or exc)
            self.phase = WAITING
            self.waiting_for = (
                f"waiting for Telegram: {what} failed ({detail}); try {failures + 1} "
                f"in {delay:.0f}s"
            )
            log.warning(
                "start waits for Telegram %s",
                kv(
                    call=what,
                    error=library_name(exc),
                    detail=detail,
                    tries=failures,
                    retry_in=round(delay, 3),
                ),
            )
            if self._on_waiting is not None:
                self._on_waiting(self.waiting_for)

        def on_answer(failures: int) -> None:
            if failures:
                log.info("Telegram answers %s", kv(call=what, tries=failures + 1))
            self.phase, self.waiting_for = STARTING, ""

        return await retrying(
            lambda: translated(call()),
            transient=telegram_did_not_answer,
            pause=self._reconnect_delay,
            on_wait=on_wait,
            on_answer=on_answer,
        )

    def _reconnect_delay(self, exc: Exception, failures: int) -> float:
        assert isinstance(exc, XbotError)  # telegram_did_not_answer's kind
        return reconnect_delay(exc, failures, scale=self.settings.time_scale)

    async def _start(self) -> Services:
        add_handlers(self.application)
        bot = self.application.bot
        # A call that hangs (packets dropped, a front end that never answers) is a
        # failed try after this long, not after the 30 s read timeout of a send.
        hang = max(1.0, START_CALL_TIMEOUT * self.settings.time_scale)
        timeouts = {"connect_timeout": hang, "read_timeout": hang, "write_timeout": hang}

        async def get_me() -> None:
            # getMe: the token checked, the bot's name learnt; PTB's initialize asks
            # again (answered at once now), and fails only if Telegram just went away.
            await bot.get_me(**timeouts)
            await self.application.initialize()

        await self._until_telegram_answers("getMe", get_me)
        wired = await patiently(
            lambda: build(
                self.settings,
                self.front,
                webhook=self.webhook,
                poll_timeout=self.poll_timeout,
                clocks=self.clocks,
                pacer=self.pacer,
                telegram_budget=self.telegram_budget,
                read_timeout=self.read_timeout,
            )
        )
        self.wired, services = wired, wired.services
        self.services = services
        orphans = await patiently(lambda: services.queue.reclaim_orphans(services.clock()))
        swept = await patiently(lambda: sweep_once(services))
        log.info("startup sweep %s", kv(leases_reclaimed=orphans, **swept))
        # The command menu is cosmetic: set in the background, never holding up polling.
        self._menus = asyncio.create_task(self._set_menus(), name="xbot-menus")
        services.workers.start()
        self._run(sweeps(services))
        self._run(clock_watch(services))
        await self.application.start()
        if self.webhook is None:
            # getUpdates fails while a webhook is set (a former `--webhook` run).
            await self._until_telegram_answers(
                "deleteWebhook",
                lambda: bot.delete_webhook(drop_pending_updates=False, **timeouts),
            )
            await wired.receiver.start()
            self.phase = POLLING
            log.info("polling %s", kv(version=__version__, workers=self.settings.workers))
        else:
            hook = self.webhook
            await wired.receiver.start()  # listening before Telegram is told to post
            # setWebhook tells Telegram the URL, the secret and how many at once.
            await self._until_telegram_answers(
                "setWebhook",
                lambda: bot.set_webhook(
                    url=hook.url,
                    secret_token=hook.secret_token,
                    max_connections=hook.max_connections,
                    allowed_updates=Update.ALL_TYPES,
                    drop_pending_updates=False,
                    **timeouts,
                ),
            )
            self.phase = WEBHOOK
            assert wired.hook_listener is not None  # webhook mode: `build` made one
            log.info(
                "webhook %s",
                kv(
                    version=__version__,
                    listen=f"{hook.listen}:{wired.hook_listener.port}",
                    path=hook.url_path,
                    max_connections=hook.max_connections,
                ),
            )
        if wired.telemetry is not None:
            wired.telemetry.start()  # the tick that shows the loop turns
        if wired.listener is not None:
            await wired.listener.start()
        if services.alerts is not None:
            self._run(services.alerts.periodic())
        if services.canary is not None:
            self._run(services.canary.periodic())
        return services

    def _run(self, loop: Periodic) -> None:
        loop.start()
        self._loops.append(loop)

    async def _set_menus(self) -> None:
        """The command menu in every language (Telegram shows each user theirs), at once
        (nine round trips one after another would take nine times as long), each menu
        tried again while Telegram does not answer; one refused outright is left alone."""
        bot = self.application.bot
        pending = list(commands.menus())

        async def set_pending() -> None:
            nonlocal pending
            results = await asyncio.gather(
                *(
                    translated(bot.set_my_commands(menu, language_code=code))
                    for code, menu in pending
                ),
                return_exceptions=True,
            )
            again: list[Any] = []
            for item, result in zip(pending, results, strict=True):
                if isinstance(result, Permanent | SendError | TokenRefused):  # a 400, 403, 401
                    lang = item[0] or "default"
                    detail = error_detail(result.__cause__ or result)
                    log.error("setMyCommands refused %s", kv(lang=lang, detail=detail))
                elif isinstance(result, BaseException):
                    if not telegram_did_not_answer(result):
                        raise result
                    again.append((item, result))
            pending = [item for item, _ in again]
            if again:
                raise again[0][1]

        def on_wait(exc: Exception, failures: int, delay: float) -> None:
            log.warning(
                "setMyCommands waits for Telegram %s",
                kv(
                    error=library_name(exc),
                    detail=error_detail(exc.__cause__ or exc),
                    menus=len(pending),
                    tries=failures,
                    retry_in=round(delay, 3),
                ),
            )

        await retrying(
            set_pending,
            transient=telegram_did_not_answer,
            pause=self._reconnect_delay,
            on_wait=on_wait,
        )

    async def stop(self) -> None:
        """Stop polling, let running tasks finish or hand them back, close everything."""
        await self._close()
        log.info("stopped")

    async def _close(self) -> None:
        """Undo what `start` built, however far it got; safe to call twice."""
        self.phase = STOPPING
        app = self.application
        if self.listener is not None:
            await self.listener.stop()
        if self.telemetry is not None:
            await self.telemetry.stop()
        for loop in self._loops:
            await loop.stop()
        self._loops.clear()
        if self.poller is not None:
            await self.poller.stop()
        if self.hook_listener is not None:
            await self.hook_listener.stop()  # the updates in progress are queued first
        if self._menus is not None:
            self._menus.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._menus
            self._menus = None
        if self.services is not None:
            await self.services.workers.stop(STOP_GRACE)
        if app.running:
            await app.stop()
        await app.shutdown()
        if self.services is not None:
            with contextlib.suppress(StoreError):  # where the line got: a reboot resumes there
                await mark_time_line(self.services.pool, self.services.line)
            await self.services.inline.aclose()
            await self.services.x_client.aclose()
            await self.services.guarded.aclose()
            await self.services.pool.close()
            self.services = None
        self.wired = None
        self._lock.release()
