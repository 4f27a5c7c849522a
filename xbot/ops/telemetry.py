"""What the operator's listener answers: the metrics text, liveness and readiness.

`Telemetry` reads, at each scrape, what the bot's parts already keep — the
queue by kind and state and its oldest runnable task, the database and WAL
sizes and the disk, the breakers of the X sources, the link cache, yt-dlp's
age, Telegram's reachability — into `Metrics.readings`, then renders the
registry with prometheus_client's own `generate_latest`. Nothing is polled
between scrapes: a bot nobody scrapes pays nothing for these gauges.

`live` and `ready` are the health answers: a status and one line each.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

import attrs
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from xbot.errors import StoreError
from xbot.logs import kv
from xbot.metrics import Metrics, Readings
from xbot.ops.listener import Answer, Route
from xbot.receiving import Receiver
from xbot.storage.db import DbPool
from xbot.storage.link_cache import LinkCache
from xbot.storage.queue import TaskQueue
from xbot.tasks.vitals import Vitals

log = logging.getLogger(__name__)

# A write lock not taken within this long is a database that cannot take writes now.
WRITE_PROBE_S = 2.0
# The loop ticks this often; a tick this late means the loop was blocked.
TICK_S = 1.0
STALLED_S = 10.0


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _at(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%H:%M:%S UTC")


@attrs.define
class Telemetry:
    """Reads the bot's state for the metrics and the health answers.

    Attributes:
        metrics: the bot's registry (its readings are refreshed at each scrape).
        db_path: the database (its size, and its WAL's).
        vitals: what is watched (the X sources, Telegram, the disk, yt-dlp, the canary),
            the same value the alerts read.
        receiver: how updates come in (polling, or the webhook listener).
    """

    metrics: Metrics
    queue: TaskQueue
    pool: DbPool
    cache: LinkCache
    db_path: Path
    vitals: Vitals
    receiver: Receiver
    clock: Callable[[], float] = time.time
    _last_tick: float = attrs.field(factory=time.monotonic, init=False)
    _ticker: asyncio.Task[None] | None = attrs.field(default=None, init=False)

    # -- the metrics --------------------------------------------------------------------

    async def read(self) -> Readings:
        """Everything the scrape-time gauges show, read now."""
        now = self.clock()
        stats = await self.queue.stats(now)
        by_kind = await self.queue.counts_by_kind()
        cache = await self.cache.stats()
        vitals = self.vitals
        disk = await asyncio.to_thread(vitals.disk)
        days = vitals.ytdlp_age_days()
        health = vitals.sources()
        answers = {name: n for chain in vitals.chains for name, n in chain.answered.items()}
        return Readings(
            tasks=by_kind,
            oldest_runnable_age=stats.oldest_pending_age or 0.0,
            held_chats=stats.held_chats,
            database_bytes=_size(self.db_path),
            wal_bytes=_size(self.db_path.with_name(self.db_path.name + "-wal")),
            disk_free_bytes=disk.free,
            disk_total_bytes=disk.total,
            ytdlp_age_seconds=None if days is None else days * 86400.0,
            telegram_reachable=vitals.telegram.reachable,
            breaker_open={name: h.state.is_open for name, h in health.items()},
            source_failures={name: h.failures_total for name, h in health.items()},
            source_successes={name: h.successes_total for name, h in health.items()},
            source_answers={name: answers.get(name, 0) for name in health},
            canary_broken=dict(vitals.broken()),
            cache_hits=cache.hits,
            cache_misses=cache.misses,
            cache_entries=cache.entries,
        )

    async def render(self) -> bytes:
        """The registry in Prometheus's text format, its gauges read just now.

        A store that cannot be read leaves the last readings in place (the
        counters are still worth a scrape) and says so in the log.
        """
        try:
            self.metrics.readings = await self.read()
        except StoreError as exc:
            log.warning("metrics read failed %s", kv(error=exc))
        return generate_latest(self.metrics.registry)

    # -- health -------------------------------------------------------------------------

    def start(self) -> None:
        """Start the tick that shows the event loop turns."""
        self._ticker = asyncio.create_task(self._tick())

    async def stop(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            await asyncio.gather(self._ticker, return_exceptions=True)

    async def _tick(self) -> None:
        while True:
            self._last_tick = time.monotonic()
            await asyncio.sleep(TICK_S)

    async def live(self) -> tuple[bool, str]:
        """Alive: this answer itself ran on the loop, and the loop's tick is on time."""
        late = time.monotonic() - self._last_tick
        if self._ticker is not None and late > STALLED_S:
            return False, f"the event loop stalled: its last tick was {late:.0f}s ago"
        return True, "ok: the event loop turns"

    async def ready(self) -> tuple[bool, str]:
        """Ready: updates come in, the database takes a write, Telegram answers."""
        if not self.receiver.running:
            return False, "not ready: polling (or the webhook server) is not running"
        problem = await self._write_probe()
        if problem:
            return False, f"not ready: the database does not take writes ({problem})"
        if not self.vitals.telegram.reachable:
            since = self.vitals.telegram.down_since
            when = f" since {_at(since)}" if since is not None else ""
            return False, f"not ready: Telegram's Bot API is not answering{when}"
        return True, "ok: updates come in, the database takes writes, Telegram answers"

    async def _write_probe(self) -> str:
        """'' when a write transaction opens and commits within `WRITE_PROBE_S`."""
        try:
            async with asyncio.timeout(WRITE_PROBE_S):
                await self.pool.write(lambda conn: None)
        except TimeoutError:
            return f"no write lock within {WRITE_PROBE_S:g}s"
        except StoreError as exc:
            return str(exc)
        return ""


def routes(telemetry: Telemetry) -> dict[str, Route]:
    """Path -> what answers it: (status, content type, body)."""
    text = "text/plain; charset=utf-8"

    async def metrics() -> Answer:
        return 200, CONTENT_TYPE_LATEST, await telemetry.render()

    def health(check: Callable[[], Awaitable[tuple[bool, str]]]) -> Route:
        async def answer() -> Answer:
            ok, line = await check()
            return (200 if ok else 503), text, (line + "\n").encode()

        return answer

    return {
        "/metrics": metrics,
        "/livez": health(telemetry.live),
        "/readyz": health(telemetry.ready),
    }
