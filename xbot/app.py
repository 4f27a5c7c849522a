"""The composition root: the one place that builds and wires the bot's parts, each
whole by its constructor: `build_front` (PTB's application, Telegram's health, the
metrics, the workers' doorbell) before the start-up's first call, then `build` (the
services, the poller or the webhook listener, the operator's listener). `xbot.runtime`
starts and stops what these build.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs
import httpx
from telegram.ext import (
    Application,
    ApplicationBuilder,
    ContextTypes,
    Defaults,
    MessageHandler,
    filters,
)
from telegram.request import BaseRequest, HTTPXRequest

from xbot import versions
from xbot.clock import Clocks, SystemClocks
from xbot.config import Settings, WebhookConfig
from xbot.handlers import callbacks, caption_edit, commands, errors, inline, language, messages
from xbot.logs import kv
from xbot.media import netguard
from xbot.media.ffmpeg import ffmpeg_path
from xbot.media.speed_floor import SpeedFloor, task_budget
from xbot.metrics import Metrics, api_method
from xbot.ops.listener import Listener
from xbot.ops.telemetry import Telemetry, routes
from xbot.receiving import Receiver
from xbot.receiving.polling import DurablePoller
from xbot.sending.api_request import CountingRequest
from xbot.sending.pacing import Pacer
from xbot.sending.sender import Sender
from xbot.sending.telegram_health import (
    FIRST_PROBE,
    PROBE_CAP,
    TELEGRAM_BUDGET,
    TelegramHealth,
)
from xbot.sending.telegram_health import RECORD_NAME as HEALTH_RECORD
from xbot.sending.upload_request import StreamingRequest
from xbot.services import ChatMover, Services, XContext
from xbot.services.auth import Authority
from xbot.services.inline_fetch import InlineFetches
from xbot.sources import PostSource, SourceRouter, YtdlpSource
from xbot.sources.bsky import BskySource
from xbot.sources.canary import Canary, canary_targets
from xbot.sources.gallerydl import GalleryDlSource
from xbot.sources.jsonget import USER_AGENT, source_timeout
from xbot.sources.pixiv import PixivSource
from xbot.sources.x import SourceChain, x_sources
from xbot.storage.db import open_store
from xbot.storage.link_cache import LinkCache
from xbot.storage.queue import Task, TaskQueue
from xbot.storage.state import ChatStore
from xbot.storage.time_line import resume as resume_time_line
from xbot.storage.webhook_updates import AnsweredUpdates
from xbot.tasks.alerts import KIND as ALERT
from xbot.tasks.alerts import Alerts, AlertWatch
from xbot.tasks.delivery import KIND as DELIVER
from xbot.tasks.delivery import Delivery, count_finished
from xbot.tasks.forwarding import KIND as FORWARD
from xbot.tasks.forwarding import Forwarding
from xbot.tasks.notices import KIND as NOTICE
from xbot.tasks.notices import Notices
from xbot.tasks.other_sites import OtherSites
from xbot.tasks.outbox import Outbox
from xbot.tasks.vitals import Vitals
from xbot.tasks.worker import Doorbell, FinishedHook, Workers
from xbot.tls import client_context

if TYPE_CHECKING:
    from xbot.receiving.webhook import WebhookListener

log = logging.getLogger(__name__)


AppType = Application[Any, XContext, Any, Any, Any, Any]


ApiResult = Callable[[str, str, float], None]


def build_application(
    settings: Settings, on_api_result: ApiResult | None = None, *, read_timeout: float = 30.0
) -> AppType:
    """PTB's Application with our request settings and typed context; no handlers yet.

    `on_api_result` hears every Bot API call's result (method, result, retry_after):
    the metrics, without any sender knowing. `read_timeout`: how long a call waits
    for Telegram's answer before it is `TimedOut` (an outage that hangs); tests scale
    it down.
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


@attrs.frozen
class Front:
    """What is built before the start-up's first call to Telegram.

    Attributes:
        application: PTB's, with our requests; every call's result goes to `health`
            and, when counted, to `metrics`.
        health: Telegram's reachability and the hold; its return rings `doorbell`.
        doorbell: what the workers nap on (every enqueue rings it too).
        metrics: the bot's counters (None: not counted, no listener to read them).
    """

    application: AppType
    health: TelegramHealth
    doorbell: Doorbell
    metrics: Metrics | None


def build_front(
    settings: Settings,
    *,
    counting: bool,
    read_timeout: float = 30.0,
    first_probe: float = FIRST_PROBE,
    probe_cap: float = PROBE_CAP,
) -> Front:
    """`first_probe`, `probe_cap`: the hold's probe backoff (tests scale it down)."""
    doorbell = Doorbell()
    health = TelegramHealth(
        first_probe=first_probe,
        probe_cap=probe_cap,
        record_path=settings.data_dir / HEALTH_RECORD,
        listeners=[doorbell.ring_if],
    )
    metrics = Metrics() if counting else None
    heard = ApiResults(health, metrics)
    application = build_application(settings, heard.tell, read_timeout=read_timeout)
    return Front(application, health, doorbell, metrics)


@attrs.frozen
class ApiResults:
    """Who hears each Bot API call's result: Telegram's health, and the metrics."""

    health: TelegramHealth
    metrics: Metrics | None

    def tell(self, method: str, result: str, retry_after: float) -> None:
        self.health.observed(method, result)
        if self.metrics is not None:
            self.metrics.bot_api(method, result, retry_after)


@attrs.frozen
class Wired:
    """Everything the runtime runs, each part built whole.

    Attributes:
        services: the bot's services (`xbot.services.Services`).
        poller: long polling (None in webhook mode).
        hook_listener: the webhook listener (None when polling).
        telemetry: what the operator's listener reads (None: not counted).
        listener: the operator's HTTP listener (None: no `XBOT_METRICS_ADDR`).
    """

    services: Services
    poller: DurablePoller | None
    hook_listener: WebhookListener | None
    telemetry: Telemetry | None
    listener: Listener | None

    @property
    def receiver(self) -> Receiver:
        """How updates come in: the poller or the webhook listener."""
        receiver = self.poller or self.hook_listener
        assert receiver is not None  # `build` makes exactly one
        return receiver


async def build(
    settings: Settings,
    front: Front,
    *,
    webhook: WebhookConfig | None = None,
    poll_timeout: int = 30,
    clocks: Clocks | None = None,
    pacer: Pacer | None = None,
    telegram_budget: float = TELEGRAM_BUDGET,
    read_timeout: float = 30.0,
) -> Wired:
    """The services, how updates come in, and the operator's listener, none started."""
    services = await build_services(
        settings,
        front.application,
        clocks=clocks,
        pacer=pacer,
        health=front.health,
        doorbell=front.doorbell,
        telegram_budget=telegram_budget,
        read_timeout=read_timeout,
        metrics=front.metrics,
    )
    poller: DurablePoller | None = None
    hook_listener: WebhookListener | None = None
    receiver: Receiver
    if webhook is None:
        # Our own long polling: an update is confirmed to Telegram only after its
        # handler queued the work (xbot.receiving.polling), so a kill loses nothing.
        receiver = poller = DurablePoller(
            front.application, timeout=poll_timeout, time_scale=settings.time_scale
        )
    else:
        # Our own listener: a POST is answered only after its update's work is queued
        # (xbot.receiving.webhook). Imported here: tornado comes with the optional
        # webhooks extra, and `xbot run` checks for it before it gets this far.
        from xbot.receiving.webhook import WebhookListener

        receiver = hook_listener = WebhookListener(
            front.application,
            AnsweredUpdates(services.pool),
            path="/" + webhook.url_path,
            secret_token=webhook.secret_token,
            listen=webhook.listen,
            port=webhook.port,
            max_connections=webhook.max_connections,
            clock=services.clock,  # the line stored times are on (xbot.clock)
        )
    telemetry = listener = None
    if front.metrics is not None:
        telemetry = Telemetry(
            metrics=front.metrics,
            queue=services.queue,
            pool=services.pool,
            cache=services.cache,
            db_path=settings.db_path,
            vitals=services.vitals,
            receiver=receiver,
            clock=services.clock,
        )
        if settings.metrics_addr is not None:
            host, port = settings.metrics_addr
            listener = Listener(host, port, routes(telemetry))
    return Wired(services, poller, hook_listener, telemetry, listener)


async def build_services(
    settings: Settings,
    application: AppType,
    *,
    clocks: Clocks | None = None,
    pacer: Pacer | None = None,
    health: TelegramHealth,
    doorbell: Doorbell,
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
    # `doorbell`: what an enqueue rings; the workers nap on it, the forward prompt, the
    # alerts and Telegram's return (`build_front`) ring it.
    # The forward prompt after each delivery, and the forward task it starts.
    forwarding = Forwarding(settings, sender, chats, queue, clock, wake=doorbell.ring)
    # Every delivery sends, records and announces (the forward prompt) through it.
    outbox = Outbox(sender, cache, settings.cache_ttl, on_delivered=forwarding.on_delivered)
    # Looked up once: yt-dlp's merge and pixiv's animations agree whether there is one.
    ffmpeg = ffmpeg_path()
    sources = SourceRouter(
        source_table(settings, x_client, guarded, clock, line.wall, ffmpeg=ffmpeg)
    )
    # Other sites through yt-dlp; yt_dlp itself is imported on the first such link.
    other_sites = OtherSites(settings, outbox, YtdlpSource(settings, ffmpeg=ffmpeg), guarded)
    delivery = Delivery(settings, outbox, sources, chats, guarded, other_sites)

    authority = Authority(sender, operators=settings.admin_ids)
    mover = ChatMover(queue, chats, authority, clock)

    canary = None
    if settings.canary_interval > 0:
        canary = Canary(
            canary_targets(settings.canary_posts, sources),
            settings.canary_interval,
            clock=clock,
            on_result=None if metrics is None else metrics.canary,
        )
    # What the alerts and the operator's metrics both watch: built once, for both.
    vitals = Vitals(
        chains=[s for s in sources.by_kind.values() if isinstance(s, SourceChain)],
        telegram=health,
        ytdlp_version=versions.installed().ytdlp,
        data_dir=settings.data_dir,
        broken=canary.broken if canary is not None else dict,
    )
    # Alerts to the operators (XBOT_ADMIN_IDS), queued and sent like every message.
    alerts = None
    if settings.admin_ids:
        alerts = AlertWatch(
            admins=settings.admin_ids,
            after=settings.alert_after,
            queue=queue,
            chats=chats,
            vitals=vitals,
            # A tenth of the threshold, so an alert comes within 10 % of it; at most 10 s.
            every=min(10.0, max(0.05, settings.alert_after / 10)),
            wake=doorbell.ring,
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
        doorbell=doorbell,
    )
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
        vitals=vitals,
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
    *,
    ffmpeg: str | None,
) -> dict[str, PostSource]:
    """Which source serves a link, by its kind: the one table that wires sources in.

    One entry per site of `xbot.links.SITES`, under the site's name (a test holds
    that every site has one), and gallery-dl for the image posts of other sites.
    `ffmpeg`: the program (`xbot.media.ffmpeg.ffmpeg_path`), None without one.
    """
    return {
        # X is a chain of sources (fxtwitter, vxtwitter, syndication), each behind its
        # breaker.
        "x": SourceChain(x_sources(settings, x_client), clock=clock, wall=wall),
        # Bluesky and pixiv: posts like X posts, on in every chat.
        "bsky": BskySource(x_client, guarded, settings.bsky_api_url, settings.bsky_plc_url),
        # The operator's pixiv login goes to pixiv's ajax API only, never to its image host.
        "pixiv": PixivSource(
            x_client,
            settings.pixiv_api_url,
            session=settings.pixiv_session,
            animations=ffmpeg is not None,
        ),
        # Image posts of other sites: gallery-dl, run as a process (never imported:
        # GPL-2.0), asked before or after yt-dlp by `xbot.sources.other_route`.
        "gallery": GalleryDlSource(settings),
    }


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
    application.add_error_handler(errors.on_error)
