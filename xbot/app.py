"""The composition root: the one place that wires settings, store, queue, fetchers,
sender, workers and PTB handlers together, and runs them until told to stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import httpx
from telegram import Update
from telegram.error import BadRequest, Forbidden, InvalidToken, TelegramError
from telegram.ext import (
    Application,
    ApplicationBuilder,
    ContextTypes,
    Defaults,
    MessageHandler,
    filters,
)
from telegram.request import BaseRequest, HTTPXRequest

from xbot import __version__, versions
from xbot.clock import Clocks, SteppedClocks, StepWatch, SystemClocks
from xbot.config import Settings, WebhookConfig
from xbot.errors import PayloadError, StoreBusy, StoreError
from xbot.handlers import callbacks, caption_edit, commands, inline, language, messages
from xbot.links import OTHER_SITE, classify, site_named
from xbot.logs import add_secret, kv
from xbot.media import netguard
from xbot.media.speed_floor import SpeedFloor, task_budget
from xbot.media.tempfiles import sweep_temp
from xbot.metrics import Metrics, api_method
from xbot.ops.instance import instance_lock
from xbot.ops.listener import Listener
from xbot.ops.sdnotify import SystemdNotifier
from xbot.ops.telemetry import Telemetry, routes
from xbot.periodic import Periodic
from xbot.receiving.intake import note_failure
from xbot.receiving.polling import DurablePoller, error_detail, reconnect_delay
from xbot.sending.api_request import CountingRequest
from xbot.sending.durable_request import DurableRequest
from xbot.sending.pacing import Pacer
from xbot.sending.sender import Sender
from xbot.sending.telegram_health import RECORD_NAME as HEALTH_RECORD
from xbot.sending.telegram_health import TELEGRAM_BUDGET, TelegramHealth
from xbot.sending.upload_request import StreamingRequest
from xbot.services import ChatMover, Services, XContext
from xbot.services.auth import Authority
from xbot.services.inline_fetch import InlineFetches
from xbot.sources import PostSource, SourceRouter, YtdlpSource
from xbot.sources.bsky import BskySource
from xbot.sources.canary import Canary, CanaryTarget
from xbot.sources.gallerydl import GalleryDlSource
from xbot.sources.jsonget import USER_AGENT, source_timeout
from xbot.sources.pixiv import PixivSource
from xbot.sources.x import SourceChain, x_sources
from xbot.storage.db import open_store
from xbot.storage.link_cache import LinkCache
from xbot.storage.queue import Task, TaskQueue
from xbot.storage.state import ChatStore
from xbot.storage.time_line import mark as mark_time_line
from xbot.storage.time_line import resume as resume_time_line
from xbot.storage.webhook_updates import AnsweredUpdates
from xbot.tasks.alerts import KIND as ALERT
from xbot.tasks.alerts import Alerts, AlertWatch
from xbot.tasks.delivery import KIND as DELIVER
from xbot.tasks.delivery import Delivery
from xbot.tasks.forwarding import KIND as FORWARD
from xbot.tasks.forwarding import Forwarding
from xbot.tasks.notices import KIND as NOTICE
from xbot.tasks.notices import Notices
from xbot.tasks.other_sites import OtherSites
from xbot.tasks.outbox import Outbox
from xbot.tasks.payloads import DeliverPayload
from xbot.tasks.worker import FinishedHook, Workers
from xbot.tls import client_context

if TYPE_CHECKING:
    from xbot.receiving.webhook import WebhookListener

log = logging.getLogger(__name__)

SWEEP_EVERY = 300.0
CLOCK_CHECK_EVERY = 5.0  # how often the two clocks are compared (a step is logged, and marked)
STOP_GRACE = 6.0  # running tasks get this long to finish on SIGTERM; the unit allows more
START_CALL_TIMEOUT = 10.0  # getMe/deleteWebhook at start: tiny calls; longer means a hang

AppType = Application[Any, XContext, Any, Any, Any, Any]


ApiResult = Callable[[str, str, float], None]


def build_application(
    settings: Settings,
    on_api_result: ApiResult | None = None,
    *,
    read_timeout: float = 30.0,
    durable: Callable[[], Awaitable[None]] | None = None,
) -> AppType:
    """PTB's Application with our request settings and typed context; no handlers yet.

    `on_api_result` hears every Bot API call's result (method, result, retry_after):
    the metrics, without any sender knowing. `read_timeout`: how long a call waits
    for Telegram's answer before it is `TimedOut` (an outage that hangs); tests scale
    it down. `durable`: awaited before every call, so nothing reaches Telegram before
    what was committed is on the disk (`DurableRequest`; the bot's is `DbPool.sync`).
    """
    # Uploads stream from the temp file (see upload_request); the rest is PTB's HTTPXRequest.
    request: BaseRequest = StreamingRequest(
        connection_pool_size=64,
        connect_timeout=10.0,
        read_timeout=read_timeout,
        write_timeout=30.0,
        media_write_timeout=120.0,
    )
    updates: BaseRequest = HTTPXRequest(
        connection_pool_size=1,
        read_timeout=40.0,
        httpx_kwargs={"verify": client_context(trust_env=True)},
    )
    if on_api_result is not None:
        request = CountingRequest(request, api_method, on_api_result)
        updates = CountingRequest(updates, api_method, on_api_result)
    if durable is not None:
        request = DurableRequest(request, durable)
        updates = DurableRequest(updates, durable)
    builder = (
        ApplicationBuilder()
        .token(settings.token)
        .base_url(settings.bot_api_url)
        .base_file_url(settings.bot_api_file_url)
        .request(request)
        .get_updates_request(updates)
        .context_types(ContextTypes(context=XContext))
        # A reply to a message deleted meanwhile (an anti-spam bot removing commands,
        # a user quick to delete) goes out without the quote instead of failing.
        .defaults(Defaults(allow_sending_without_reply=True))
        # Handlers only enqueue; letting them overlap keeps one slow reply from
        # holding up every other chat.
        .concurrent_updates(True)
    )
    return builder.build()


class OneClock:
    """A test's clock that is one number (``now``): wall and monotonic alike, never a step."""

    def __init__(self, now: Callable[[], float]) -> None:
        self._now = now

    def wall(self) -> float:
        return self._now()

    def mono(self) -> float:
        return self._now()

    def boot_id(self) -> str:
        return "one-clock"


def clock_pair(clock: Clocks | Callable[[], float]) -> Clocks:
    """The pair to build the time line on: given, or a test's one-number clock wrapped."""
    if isinstance(clock, Clocks):
        return clock
    return OneClock(clock)


def _default_clocks(settings: Settings) -> Clocks:
    """The real clock pair; with XBOT_TEST_WALL_CLOCK_FILE, a test's stepped wall clock."""
    if settings.wall_clock_file is not None:
        return SteppedClocks(settings.wall_clock_file)
    return SystemClocks()


async def build_services(
    settings: Settings,
    application: AppType,
    *,
    clocks: Clocks | None = None,
    pacer: Pacer | None = None,
    health: TelegramHealth,
    telegram_budget: float = TELEGRAM_BUDGET,
    read_timeout: float = 30.0,
    metrics: Metrics | None = None,
) -> Services:
    pool = await open_store(settings.db_path)
    # Before anything reads a stored time: what is stored goes back onto the wall
    # clock, and this process's time line starts (xbot.clock's rule).
    resumed = await resume_time_line(pool, clocks or SystemClocks())
    if resumed.shift or resumed.clamped:
        log.warning(
            "stored times rebased %s",
            kv(shift=f"{resumed.shift:+.1f}", clamped=resumed.clamped),
        )
    line = resumed.line
    clock = line.now
    queue = TaskQueue(pool)
    chats = ChatStore(pool)
    cache = LinkCache(pool)
    # Telegram's reachability: the one hold of every call while it does not answer,
    # and the one fact "Telegram answers", read by /stats, STATUS=, the metrics,
    # /readyz, the alerts and (through its record file) `xbot doctor`.
    if health.record_path is None:
        health.record_path = settings.data_dir / HEALTH_RECORD
    health.write_record()
    sender = Sender(
        application.bot,
        pacer or Pacer(),
        health=health,
        read_timeout=read_timeout,
        on_sent=metrics.sent if metrics is not None else None,
    )
    x_client = httpx.AsyncClient(
        headers={"User-Agent": USER_AGENT},
        timeout=source_timeout(),
        trust_env=False,
        verify=client_context(trust_env=False),
    )
    guarded = netguard.make_client(
        allow_private=settings.allow_private_networks,
        timeout=httpx.Timeout(30.0, connect=10.0),
        user_agent=USER_AGENT,
    )
    # Every delivery sends, records and announces (the forward prompt) through it, and
    # a forward sends its items through it too. Its follow-up is the forward prompt
    # (built next) and the workers' wake is theirs (built below, from the task handlers
    # this wiring makes): both looked up when called, so nothing is assigned after
    # construction.
    outbox = Outbox(
        sender, cache, settings.cache_ttl,
        on_delivered=lambda ctx, done: forwarding.on_delivered(ctx, done),  # noqa: PLW0108 - late binding
    )  # fmt: skip
    # The forward prompt after each delivery, and the forward task it starts.
    forwarding = Forwarding(
        settings, sender, chats, queue, clock, outbox,
        wake=lambda: workers.wake(),  # noqa: PLW0108 - late binding: workers comes below
    )  # fmt: skip
    sources = SourceRouter(source_table(settings, x_client, guarded, clock, line.wall))
    # Other sites through yt-dlp; yt_dlp itself is imported on the first such link.
    other_sites = OtherSites(settings, outbox, YtdlpSource(settings), guarded)
    delivery = Delivery(settings, outbox, sources, chats, guarded, other_sites)

    authority = Authority(sender, operators=settings.admin_ids)
    mover = ChatMover(queue, chats, authority, clock)

    # Alerts to the operators (XBOT_ADMIN_IDS), queued and sent like every message.
    chains = [s for s in sources.by_kind.values() if isinstance(s, SourceChain)]
    canary = None
    if settings.canary_interval > 0:
        canary = Canary(
            canary_targets(settings.canary_posts, sources),
            settings.canary_interval,
            clock=clock,
            on_result=None if metrics is None else metrics.canary,
        )
    alerts = None
    if settings.admin_ids:
        alerts = AlertWatch(
            admins=settings.admin_ids,
            after=settings.alert_after,
            queue=queue,
            chats=chats,
            chains=chains,
            reachable=lambda: health.reachable,
            down_since=lambda: health.down_since,
            ytdlp_version=versions.installed().ytdlp,
            data_dir=settings.data_dir,
            broken=canary.broken if canary is not None else dict,
            # A tenth of the threshold, so an alert comes within 10 % of it; at most 10 s.
            every=min(10.0, max(0.05, settings.alert_after / 10)),
            wake=lambda: workers.wake(),  # noqa: PLW0108 - late binding: workers comes below
            on_alert=None if metrics is None else metrics.alert,
            clock=clock,
        )
    hooks: list[FinishedHook] = []
    if metrics is not None:
        hooks.append(count_finished(metrics, clock))
    if alerts is not None:
        hooks.append(alerts.on_finished)

    def finished(task: Task, outcome: str) -> None:
        for hook in hooks:
            hook(task, outcome)

    # A forward's failure is told on its prompt, a delivery's by a message.
    notices = Notices(sender, {FORWARD: forwarding.report_failure})
    workers = Workers(
        queue,
        {
            DELIVER: delivery.run,
            FORWARD: forwarding.run,
            NOTICE: notices.run,
            ALERT: Alerts(sender).run,
        },
        count=settings.workers,
        clock=clock,
        on_chat_moved=mover.move,
        # Nothing is leased while Telegram's hold stands but the probe; its end wakes them.
        telegram_wait=health.lease_wait,
        telegram_budget=telegram_budget,
        on_finished=finished if hooks else None,
        # Slow runs go on beside the workers (xbot.tasks.worker): a few per worker, so a
        # handful of slow links never holds back a fresh one, and their number is bounded.
        long_running=4 * settings.workers,
        task_budget=task_budget(settings.upload_limit, SpeedFloor.configured(settings)),
    )
    health.add_listener(lambda sendable: workers.wake() if sendable else None)
    services = Services(
        settings=settings,
        pool=pool,
        queue=queue,
        chats=chats,
        cache=cache,
        sender=sender,
        delivery=delivery,
        workers=workers,
        forwarding=forwarding,
        authority=authority,
        sources=sources,
        mover=mover,
        x_client=x_client,
        guarded=guarded,
        # @bot <link>: the same sources, joining a chat delivery of the link in flight.
        inline=InlineFetches(sources.fetch, outbox.hold, resolve=sources.resolve),
        alerts=alerts,
        canary=canary,
        clock=clock,
        line=line,
        started_at=clock(),
    )
    services.attach(application)
    return services


def source_table(
    settings: Settings,
    x_client: httpx.AsyncClient,
    guarded: httpx.AsyncClient,
    clock: Callable[[], float],
    wall: Callable[[], float],
) -> dict[str, PostSource]:
    """Which source serves a link, by its kind: the one table that wires sources in.

    One entry per site of `xbot.links.SITES`, under the site's name (a test holds
    that every site has one), and gallery-dl for the image posts of other sites.
    """
    return {
        # X is a chain of sources (fxtwitter, vxtwitter, syndication), each behind its
        # breaker.
        "x": SourceChain(x_sources(settings, x_client), clock=clock, wall=wall),
        # Bluesky and pixiv: posts like X posts, on in every chat.
        "bsky": BskySource(x_client, guarded, settings.bsky_api_url, settings.bsky_plc_url),
        "pixiv": PixivSource(x_client, settings.pixiv_api_url),
        # Image posts of other sites: gallery-dl, run as a process (never imported:
        # GPL-2.0), asked before or after yt-dlp by `xbot.sources.other_route`.
        "gallery": GalleryDlSource(settings),
    }


def canary_targets(posts: Sequence[str], router: SourceRouter) -> list[CanaryTarget]:
    """The canary's (source, post) pairs: an X post for every X source, a post of another
    site for its site's source; a post of a site the bot does not serve is left out."""
    targets: list[CanaryTarget] = []
    for url in posts:
        link = classify(url)
        source = router.by_kind.get(link.kind) if link is not None else None
        if link is None or source is None:
            continue
        each = source.sources if isinstance(source, SourceChain) else [source]
        targets.extend(CanaryTarget(s, link) for s in each)
    return targets


def count_finished(metrics: Metrics, clock: Callable[[], float]) -> FinishedHook:
    """The worker's ending hook for the metrics: every run by kind and outcome, and a
    delivery that sent media by site, with the time from its link to its last album."""

    def finished(task: Task, outcome: str) -> None:
        site, latency = None, None
        if task.kind == DELIVER and outcome == "done":
            try:
                payload = DeliverPayload.from_task(task)
            except PayloadError:
                payload = None
            if payload is not None and payload.sent:  # an answer in words is no delivery
                native = site_named(payload.kind)
                site = native.name if native is not None else OTHER_SITE
                latency = clock() - task.created_at
        metrics.task_finished(task.kind, outcome, site=site, latency=latency)

    return finished


def add_handlers(application: AppType) -> None:
    # A pending caption edit takes its text before the link handler sees it.
    application.add_handlers(caption_edit.handlers(), group=caption_edit.GROUP)
    application.add_handlers(commands.handlers())
    application.add_handlers(callbacks.handlers())
    application.add_handlers(language.handlers())
    application.add_handlers(inline.handlers())
    # New messages only: an edit (a typo fixed, a channel post reworded) must not deliver
    # the same post again; the dedup key only spans tasks still queued.
    fresh = filters.UpdateType.MESSAGE | filters.UpdateType.CHANNEL_POST
    text_like = (filters.TEXT | filters.CAPTION) & ~filters.COMMAND & fresh
    application.add_handler(MessageHandler(text_like, messages.on_message))
    application.add_error_handler(on_error)


async def on_error(update: object, context: XContext) -> None:
    """The one error handler: a log line, never a traceback to a user."""
    err = context.error
    chat = update.effective_chat.id if isinstance(update, Update) and update.effective_chat else ""
    # An update whose work could not be stored comes again (a webhook's 500, or polling
    # that does not confirm it): one line, no traceback; the database's state is no bug.
    if note_failure(err):
        log.warning("update not stored, it comes again %s", kv(chat=chat, error=err))
        return
    log.error("handler failed %s", kv(chat=chat, error=type(err).__name__), exc_info=err)


async def sweep_once(services: Services) -> dict[str, int]:
    """The periodic sweep: every step cheap because each is served by an index."""
    now = services.clock()
    done: dict[str, int] = {}
    # How far the line has got, and how far from the wall clock: what a start in
    # another boot resumes from (xbot.storage.time_line).
    await mark_time_line(services.pool, services.line)
    done["cache_pruned"] = await services.cache.prune(now, services.settings.cache_ttl)
    expired = await services.chats.prune_expired(now)
    done["records_expired"] = len(expired)
    # An expired forward prompt is edited to say nothing was forwarded; its buttons go.
    done["prompts_expired"] = sum(
        [await services.forwarding.expire(chat_id, record) for chat_id, record in expired]
    )
    # A file's mtime is the wall clock's: compared with the wall clock.
    wall = services.line.wall()
    done["temp_removed"] = await asyncio.to_thread(sweep_temp, services.settings.data_dir, wall)
    done["leases_repaired"] = await services.queue.repair_expired(now)
    done["holds_released"] = await services.queue.release_expired_holds(now)
    done["tasks_pruned"] = await services.queue.prune_done(now)
    done["webhook_updates_pruned"] = await AnsweredUpdates(services.pool).prune(now)
    await services.pool.checkpoint()
    return done


def sweeps(services: Services) -> Periodic:
    """`sweep_once` every `SWEEP_EVERY` seconds, each one a log line of what it did."""

    async def sweep() -> None:
        log.info("sweep %s", kv(**await sweep_once(services)))

    return Periodic("sweep", sweep, SWEEP_EVERY, logger=log)


def clock_watch(services: Services) -> Periodic:
    """Compare the two clocks now and then: a step is logged and marked, never followed."""
    watch = StepWatch(services.line)

    async def look() -> None:
        if watch.check():
            await mark_time_line(services.pool, services.line)

    return Periodic("time line mark", look, CLOCK_CHECK_EVERY, logger=log)


T = TypeVar("T")
STORE_WAIT = 60.0  # how long a start waits out a locked database or a full disk


async def _patiently(step: Callable[[], Awaitable[T]], within: float = STORE_WAIT) -> T:
    """Run a start-up step, waiting out `StoreBusy` (a lock, a full disk) for a while.

    Exiting at once would have systemd restart us every 5 s against its start
    limit, and leave the unit failed after a full disk longer than ~25 s.
    """
    deadline = time.monotonic() + within
    pause = 1.0
    while True:
        try:
            return await step()
        except StoreBusy as exc:
            if time.monotonic() + pause > deadline:
                raise
            log.warning("start waits for the database %s", kv(error=exc, retry_in=pause))
            await asyncio.sleep(pause)
            pause = min(pause * 2, 10.0)


# What the bot is doing, for the watchdog, STATUS= and a readiness check (`Bot.phase`).
STARTING = "starting"  # opening the database, asking getMe for the first time
WAITING = "waiting"  # Telegram did not answer a start-up call: trying again, in a while
POLLING = "polling"  # long polling runs (xbot.receiving.polling)
WEBHOOK = "webhook"  # the webhook listener runs
STOPPING = "stopping"


class Bot:
    """The running bot: PTB polling, workers and the sweep, with a clean stop.

    Attributes:
        phase: one of STARTING, WAITING, POLLING, WEBHOOK, STOPPING.
        waiting_for: while WAITING, one line saying on what (for STATUS= and logs).
        on_waiting: called with that line at each failed start-up try (the systemd
            glue in `run_until_signalled` uses it to report READY and STATUS).
    """

    def __init__(
        self,
        settings: Settings,
        *,
        clock: Clocks | Callable[[], float] | None = None,
        pacer: Pacer | None = None,
        poll_timeout: int = 30,
        webhook: WebhookConfig | None = None,
        health: TelegramHealth | None = None,
        telegram_budget: float = TELEGRAM_BUDGET,
        read_timeout: float = 30.0,
        metrics: bool | None = None,
    ) -> None:
        """`health`, `telegram_budget`, `read_timeout`: Telegram's hold, how long a link
        waits for Telegram, how long a call waits for an answer (tests scale them down)."""
        self.settings = settings
        # Built before the first call of the start-up: every call's result is told to it.
        self.health = health or TelegramHealth()
        self.telegram_budget = telegram_budget
        self.read_timeout = read_timeout
        self.webhook = webhook
        if webhook is not None:
            # PTB logs setWebhook's parameters at DEBUG, the secret among them.
            add_secret(webhook.secret_token)
        self.poller: DurablePoller | None = None
        self.hook_listener: WebhookListener | None = None
        # The clock pair the time line is built on (a test's one-number clock, wrapped).
        self.clocks = _default_clocks(settings) if clock is None else clock_pair(clock)
        self.pacer = pacer
        self.poll_timeout = poll_timeout
        # Counting costs a little CPU per link: only with a listener to read it
        # (`metrics` overrides, for the benchmark's "on" without a scraper).
        counting = settings.metrics_addr is not None if metrics is None else metrics
        self.metrics = Metrics() if counting else None
        self.application = build_application(
            settings, self._api_result, read_timeout=read_timeout, durable=self._durable
        )
        self.telemetry: Telemetry | None = None
        self.listener: Listener | None = None
        self.services: Services | None = None
        # The periodic loops (sweep, clock watch, alerts, canary): started with the bot,
        # stopped together.
        self._loops: list[Periodic] = []
        self._menus: asyncio.Task[None] | None = None
        self.on_waiting: Callable[[str], None] | None = None
        self.phase = STARTING
        self.waiting_for = ""
        self._lock = instance_lock(settings.data_dir)

    async def _durable(self) -> None:
        """What was committed is on the disk (before a Bot API call: `DurableRequest`)."""
        if self.services is not None:
            await self.services.pool.sync()

    def _api_result(self, method: str, result: str, retry_after: float) -> None:
        self.health.observed(method, result)
        if self.metrics is not None:
            self.metrics.bot_api(method, result, retry_after)

    @property
    def receiving(self) -> bool:
        """True while updates can come in: polling runs or the webhook listener listens.

        Not whether Telegram answers (a poller waiting out an outage still runs)."""
        if self.phase == POLLING:
            return self.poller is not None and self.poller.running and self.application.running
        if self.phase == WEBHOOK:
            hook = self.hook_listener
            return hook is not None and hook.running and self.application.running
        return False

    async def start(self) -> Services:
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
        connection, a timeout, a DNS failure: PTB's NetworkError and its kin) is
        one log line and another try after a capped backoff, for as long as it
        takes: exiting would only have systemd restart us against its start limit.
        A refused token (InvalidToken: 401/404) is raised at once.
        """
        failures = 0
        while True:
            try:
                result = await call()
            except InvalidToken:
                raise
            except TelegramError as exc:
                failures += 1
                delay = reconnect_delay(exc, failures, scale=self.settings.time_scale)
                detail = error_detail(exc)
                self.phase = WAITING
                self.waiting_for = (
                    f"waiting for Telegram: {what} failed ({detail}); try {failures + 1} "
                    f"in {delay:.0f}s"
                )
                log.warning(
                    "start waits for Telegram %s",
                    kv(
                        call=what,
                        error=type(exc).__name__,
                        detail=detail,
                        tries=failures,
                        retry_in=round(delay, 3),
                    ),
                )
                if self.on_waiting is not None:
                    self.on_waiting(self.waiting_for)
                await asyncio.sleep(delay)
                continue
            if failures:
                log.info("Telegram answers %s", kv(call=what, tries=failures + 1))
            self.phase, self.waiting_for = STARTING, ""
            return result

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
        services = await _patiently(
            lambda: build_services(
                self.settings,
                self.application,
                clocks=self.clocks,
                pacer=self.pacer,
                health=self.health,
                telegram_budget=self.telegram_budget,
                read_timeout=self.read_timeout,
                metrics=self.metrics,
            )
        )
        self.services = services
        orphans = await _patiently(lambda: services.queue.reclaim_orphans(services.clock()))
        swept = await _patiently(lambda: sweep_once(services))
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
            # Our own long polling: an update is confirmed to Telegram only after
            # its handler queued the work (xbot.receiving.polling), so a kill loses nothing.
            self.poller = DurablePoller(
                self.application, timeout=self.poll_timeout, time_scale=self.settings.time_scale
            )
            await self.poller.start()
            self.phase = POLLING
            log.info("polling %s", kv(version=__version__, workers=self.settings.workers))
        else:
            # Our own listener: a POST is answered only after its update's work is
            # queued (xbot.receiving.webhook), so a kill loses nothing acknowledged.
            # Imported here: tornado comes with the optional webhooks extra, and
            # `xbot run` checks for it before it gets this far.
            from xbot.receiving.webhook import WebhookListener

            hook = self.webhook
            self.hook_listener = WebhookListener(
                self.application,
                AnsweredUpdates(services.pool),
                path="/" + hook.url_path,
                secret_token=hook.secret_token,
                listen=hook.listen,
                port=hook.port,
                max_connections=hook.max_connections,
                clock=services.clock,  # the line stored times are on (xbot.clock)
            )
            await self.hook_listener.start()  # listening before Telegram is told to post
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
            log.info(
                "webhook %s",
                kv(
                    version=__version__,
                    listen=f"{hook.listen}:{self.hook_listener.port}",
                    path=hook.url_path,
                    max_connections=hook.max_connections,
                ),
            )
        if self.metrics is not None:
            await self._start_telemetry(services, self.metrics)
        if services.alerts is not None:
            self._run(services.alerts.periodic())
        if services.canary is not None:
            self._run(services.canary.periodic())
        return services

    def _run(self, loop: Periodic) -> None:
        loop.start()
        self._loops.append(loop)

    async def _start_telemetry(self, services: Services, metrics: Metrics) -> None:
        """The operator's listener (`XBOT_METRICS_ADDR`): /metrics, /livez, /readyz."""
        chains = [s for s in services.sources.by_kind.values() if isinstance(s, SourceChain)]
        health = services.sender.health
        self.telemetry = Telemetry(
            metrics=metrics,
            queue=services.queue,
            pool=services.pool,
            cache=services.cache,
            db_path=self.settings.db_path,
            chains=chains,
            reachable=lambda: health.reachable,
            down_since=lambda: health.down_since,
            running=lambda: self.receiving,
            ytdlp_version=versions.installed().ytdlp,
            broken=services.canary.broken if services.canary is not None else dict,
            clock=services.clock,
        )
        self.telemetry.start()
        if self.settings.metrics_addr is not None:
            host, port = self.settings.metrics_addr
            self.listener = Listener(host, port, routes(self.telemetry))
            await self.listener.start()

    async def _set_menus(self) -> None:
        """The command menu in every language (Telegram shows each user theirs), at once
        (nine round trips one after another would take nine times as long), each menu
        tried again while Telegram does not answer; one refused outright is left alone."""
        bot = self.application.bot
        pending = list(commands.menus())
        failures = 0
        while pending:
            results = await asyncio.gather(
                *(bot.set_my_commands(menu, language_code=code) for code, menu in pending),
                return_exceptions=True,
            )
            again: list[Any] = []
            for item, result in zip(pending, results, strict=True):
                if isinstance(result, BadRequest | Forbidden | InvalidToken):
                    lang = item[0] or "default"
                    log.error(
                        "setMyCommands refused %s", kv(lang=lang, detail=error_detail(result))
                    )
                elif isinstance(result, TelegramError):
                    again.append((item, result))
                elif isinstance(result, BaseException):
                    raise result
            if not again:
                return
            failures += 1
            delay = reconnect_delay(again[0][1], failures, scale=self.settings.time_scale)
            log.warning(
                "setMyCommands waits for Telegram %s",
                kv(
                    error=type(again[0][1]).__name__,
                    detail=error_detail(again[0][1]),
                    menus=len(again),
                    tries=failures,
                    retry_in=round(delay, 3),
                ),
            )
            pending = [item for item, _ in again]
            await asyncio.sleep(delay)

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
        self._lock.release()


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


def _polling_healthy(bot: Bot) -> bool:
    """What the watchdog vouches for: the start-up is waiting for Telegram, or updates can
    come in (the poller task or the webhook listener runs). Not whether Telegram answers:
    restarting the bot cannot bring Telegram back, and a poller waiting out an outage
    still runs. A wedged event loop sends no ping at all (the ping is a task on it)."""
    if bot.phase == WAITING:
        return True
    return bot.receiving


async def _status_line(bot: Bot) -> str:
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
    bot: Bot,
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
                systemd.serve(lambda: _polling_healthy(bot), lambda: _status_line(bot))
            )
        else:
            systemd.status(status)

    bot.on_waiting = supervise
    starting = asyncio.create_task(bot.start(), name="xbot-start")
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
