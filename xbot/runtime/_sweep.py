"""The periodic sweep and the clock watch of a running bot."""

from __future__ import annotations

import asyncio
import logging

from xbot.clock import StepWatch
from xbot.logs import kv
from xbot.media.tempfiles import sweep_temp
from xbot.periodic import Periodic
from xbot.services import Services
from xbot.storage.time_line import mark as mark_time_line
from xbot.storage.webhook_updates import AnsweredUpdates

log = logging.getLogger("xbot.runtime")

SWEEP_EVERY = 300.0
CLOCK_CHECK_EVERY = 5.0  # how often the two clocks are compared (a step is logged, and marked)


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
