"""The bot's Prometheus metrics: one registry per bot, and the few calls that move them.

A base value, like `xbot.logs`: every layer may import it, and it imports
nothing of xbot. `xbot.app` builds one `Metrics` and hands it to the
constructors that count (the worker, the sender, the Bot API request);
everything else is read when Prometheus scrapes (`Metrics.readings`, filled
by `xbot.ops.telemetry` just before the text is rendered).

The registry is the bot's own, never prometheus_client's global default:
tests run several bots in one process, and nothing that imports a library
adds its metrics to ours.

Naming follows Prometheus's rules: ``xbot_`` first, the unit last
(``_seconds``, ``_bytes``), ``_total`` on counters, and label values from
small fixed sets (a task kind, a site, a Bot API method) — never a chat id,
a user id or a URL.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

import attrs
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = ["BOT_API_RESULTS", "LATENCY_BUCKETS", "MEDIA_BY", "Metrics", "Readings", "api_method"]

# Seconds from the link's message to its media in the chat: a cache hit is well under
# a second, a fresh post a few, a large upload or an outage minutes.
LATENCY_BUCKETS = (0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0, 3600.0)
BOT_API_RESULTS = ("ok", "429", "4xx", "5xx", "network")
MEDIA_BY = ("file_id", "url", "upload")
# The API method is the last part of the URL (".../bot<token>/sendPhoto"); a file
# download (".../file/bot<token>/photos/file_1.jpg") is no method.
_METHOD = re.compile(r"/bot[^/]*/([A-Za-z]{2,64})$")


def api_method(url: str) -> str:
    """The Bot API method a request URL calls (``sendPhoto``), or ``file`` for a download.

    Method names are a fixed vocabulary of the Bot API, so they bound the label.
    """
    match = _METHOD.search(url)
    return match.group(1) if match else "file"


@attrs.define
class Readings:
    """Values read at scrape time from the parts that already keep them.

    `xbot.ops.telemetry` fills them just before each scrape; the collector below
    turns them into metric families. Counters here are running totals kept by
    their owners (a breaker's failures, the link cache's hits), exported as they are.

    Attributes:
        tasks: (kind, state) -> tasks in the queue now.
        oldest_runnable_age: seconds the most overdue runnable task has waited (0: none).
        held_chats: chats on hold after a 429.
        database_bytes, wal_bytes: the SQLite file and its write-ahead log.
        disk_free_bytes, disk_total_bytes: the filesystem of the data dir.
        ytdlp_age_seconds: how old the installed yt-dlp release is (None: not a date).
        telegram_reachable: whether the Bot API answers.
        breaker_open: source -> its breaker is open (the source is skipped).
        source_failures, source_successes: source -> running totals.
        source_answers: source -> posts it delivered.
        canary_broken: source -> the canary saw a changed shape.
        cache_hits, cache_misses: link-cache lookups since start.
        cache_entries: link-cache entries now.
    """

    tasks: Mapping[tuple[str, str], int] = attrs.field(factory=dict)
    oldest_runnable_age: float = 0.0
    held_chats: int = 0
    database_bytes: int = 0
    wal_bytes: int = 0
    disk_free_bytes: int = 0
    disk_total_bytes: int = 0
    ytdlp_age_seconds: float | None = None
    telegram_reachable: bool = True
    breaker_open: Mapping[str, bool] = attrs.field(factory=dict)
    source_failures: Mapping[str, int] = attrs.field(factory=dict)
    source_successes: Mapping[str, int] = attrs.field(factory=dict)
    source_answers: Mapping[str, int] = attrs.field(factory=dict)
    canary_broken: Mapping[str, bool] = attrs.field(factory=dict)
    cache_hits: int = 0
    cache_misses: int = 0
    cache_entries: int = 0


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


def _per_source(
    family: GaugeMetricFamily | CounterMetricFamily, values: Mapping[str, float]
) -> Metric:
    for source, value in sorted(values.items()):
        family.add_metric([source], value)
    return family


@attrs.define(eq=False)  # hashable by identity: the registry keys its collectors
class _ReadingsCollector(Collector):
    """Turns the latest `Readings` into metric families (prometheus_client's custom
    collector: values that live elsewhere, exported as they are at scrape time)."""

    metrics: Metrics

    def describe(self) -> Iterable[Metric]:
        # The same families, so the registry checks their names once, at registration.
        return self.collect()

    def collect(self) -> Iterable[Metric]:
        r = self.metrics.readings
        tasks = GaugeMetricFamily(
            "xbot_tasks", "Tasks in the queue, by kind and state.", labels=["kind", "state"]
        )
        for (kind, state), n in sorted(r.tasks.items()):
            tasks.add_metric([kind, state], n)
        yield tasks
        yield _gauge(
            "xbot_queue_oldest_runnable_age_seconds",
            "How long the most overdue runnable task has waited (0 when none waits).",
            r.oldest_runnable_age,
        )
        yield _gauge("xbot_queue_held_chats", "Chats on hold after a 429.", r.held_chats)
        yield _gauge("xbot_database_size_bytes", "Size of the SQLite file.", r.database_bytes)
        yield _gauge(
            "xbot_database_wal_size_bytes", "Size of SQLite's write-ahead log.", r.wal_bytes
        )
        yield _gauge(
            "xbot_disk_free_bytes", "Free space where the database lives.", r.disk_free_bytes
        )
        yield _gauge(
            "xbot_disk_size_bytes", "Size of the filesystem the database is on.", r.disk_total_bytes
        )
        if r.ytdlp_age_seconds is not None:
            yield _gauge(
                "xbot_ytdlp_age_seconds",
                "How old the installed yt-dlp release is.",
                r.ytdlp_age_seconds,
            )
        yield _gauge(
            "xbot_telegram_reachable",
            "1 while the Bot API answers, 0 while it does not.",
            1.0 if r.telegram_reachable else 0.0,
        )
        yield _per_source(
            GaugeMetricFamily(
                "xbot_source_breaker_open",
                "1 while the source's circuit breaker is open (it is skipped).",
                labels=["source"],
            ),
            {k: float(v) for k, v in r.breaker_open.items()},
        )
        yield _per_source(
            CounterMetricFamily(
                "xbot_source_failures",
                "Transient failures of a source (down, 5xx, 429, timeouts).",
                labels=["source"],
            ),
            {k: float(v) for k, v in r.source_failures.items()},
        )
        yield _per_source(
            CounterMetricFamily(
                "xbot_source_successes",
                "Answers of a source (a post or a definite not found).",
                labels=["source"],
            ),
            {k: float(v) for k, v in r.source_successes.items()},
        )
        yield _per_source(
            CounterMetricFamily(
                "xbot_source_posts", "Posts each source delivered.", labels=["source"]
            ),
            {k: float(v) for k, v in r.source_answers.items()},
        )
        yield _per_source(
            GaugeMetricFamily(
                "xbot_source_broken",
                "1 while the canary finds the source's answers in a changed shape.",
                labels=["source"],
            ),
            {k: float(v) for k, v in r.canary_broken.items()},
        )
        hits = CounterMetricFamily(
            "xbot_link_cache_lookups", "Link-cache lookups, by result.", labels=["result"]
        )
        hits.add_metric(["hit"], r.cache_hits)
        hits.add_metric(["miss"], r.cache_misses)
        yield hits
        yield _gauge("xbot_link_cache_entries", "Entries in the link cache.", r.cache_entries)


@attrs.define
class Metrics:
    """One bot's registry and the instruments its parts move.

    Attributes:
        registry: this bot's own (rendered by `xbot.ops.telemetry`).
        readings: what the last scrape read from the queue, the database, the sources.
    """

    registry: CollectorRegistry = attrs.field(factory=lambda: CollectorRegistry(auto_describe=True))
    readings: Readings = attrs.field(factory=Readings)
    tasks_finished: Counter = attrs.field(init=False)
    deliveries: Counter = attrs.field(init=False)
    delivery_latency: Histogram = attrs.field(init=False)
    media_sent: Counter = attrs.field(init=False)
    bot_api_requests: Counter = attrs.field(init=False)
    retry_after: Counter = attrs.field(init=False)
    dead_letters: Counter = attrs.field(init=False)
    alerts: Counter = attrs.field(init=False)
    canary_checks: Counter = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        reg = self.registry
        self.tasks_finished = Counter(
            "xbot_tasks_finished",
            "Task runs, by kind and how each ended "
            "(done, retry, rate_limited, outage_retry, dead, ...).",
            ["kind", "outcome"],
            registry=reg,
        )
        self.deliveries = Counter(
            "xbot_deliveries",
            "Links answered with their media, by site (a native site's name, or other).",
            ["site"],
            registry=reg,
        )
        self.delivery_latency = Histogram(
            "xbot_delivery_latency_seconds",
            "Seconds from a link's message to the last of its media in the chat, by site.",
            ["site"],
            buckets=LATENCY_BUCKETS,
            registry=reg,
        )
        self.media_sent = Counter(
            "xbot_media_sent",
            "Media items Telegram accepted, by how they went "
            "(file_id: from the cache, url: Telegram fetched it, upload: sent from disk).",
            ["by"],
            registry=reg,
        )
        self.bot_api_requests = Counter(
            "xbot_bot_api_requests",
            "Bot API calls, by method and result (ok, 429, 4xx, 5xx, network).",
            ["method", "result"],
            registry=reg,
        )
        self.retry_after = Counter(
            "xbot_bot_api_retry_after_seconds",
            "Seconds of holds Telegram asked for with its 429s (retry_after, summed).",
            registry=reg,
        )
        self.dead_letters = Counter(
            "xbot_dead_letters", "Tasks that failed for good, by kind.", ["kind"], registry=reg
        )
        self.alerts = Counter(
            "xbot_alerts",
            "Alerts queued for the admins, by condition and phase (raised, cleared).",
            ["condition", "phase"],
            registry=reg,
        )
        self.canary_checks = Counter(
            "xbot_canary_checks",
            "Canary fetches, by source and result (ok, down, broken).",
            ["source", "result"],
            registry=reg,
        )
        reg.register(_ReadingsCollector(self))
        for by in MEDIA_BY:
            self.media_sent.labels(by)  # present at 0 from the start: rate() needs a first sample

    # -- the calls the bot's parts make ------------------------------------------------

    def task_finished(
        self, kind: str, outcome: str, *, site: str | None = None, latency: float | None = None
    ) -> None:
        """A task run ended; a delivery's (``site`` given, outcome done) counts as delivered."""
        self.tasks_finished.labels(kind, outcome).inc()
        if outcome in ("dead", "chat_unavailable"):
            self.dead_letters.labels(kind).inc()
        if site is not None and outcome == "done":
            self.deliveries.labels(site).inc()
            if latency is not None:
                self.delivery_latency.labels(site).observe(max(0.0, latency))

    def sent(self, by: Iterable[str]) -> None:
        """Telegram accepted these media items (each item's ``file_id``/``url``/``upload``)."""
        for how in by:
            self.media_sent.labels(how).inc()

    def alert(self, condition: str, phase: str) -> None:
        """An alert was queued for the admins (`xbot.tasks.alerts`)."""
        self.alerts.labels(condition, phase).inc()

    def canary(self, source: str, result: str) -> None:
        """One canary fetch's verdict (`xbot.sources.canary.RESULTS`)."""
        self.canary_checks.labels(source, result).inc()

    def bot_api(self, method: str, result: str, retry_after: float = 0.0) -> None:
        """One Bot API call's result (one of `BOT_API_RESULTS`)."""
        self.bot_api_requests.labels(method, result).inc()
        if retry_after > 0:
            self.retry_after.inc(retry_after)
