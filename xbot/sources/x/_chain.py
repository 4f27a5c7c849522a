"""X posts from an ordered chain of sources, each behind its own circuit breaker.

    fxtwitter ──transient──▶ vxtwitter ──transient──▶ syndication ──transient──▶ AllSourcesDown
        │                        │                        │
     a post or a definite answer (private, deleted, suspended) ends the chain

- *Transient* (the source, not the post): connection refused or reset, no
  answer within `deadline`, 5xx, 429, a 200 that is not the source's JSON, an
  error envelope such as fxtwitter's 503 ``UPSTREAM_UNAVAILABLE``. The next
  source is asked at once, in the same task attempt, and the failure counts
  against the source's breaker. Junk (JSON that is no post) moves on too but
  says nothing about the source's health; when junk is all that came back the
  post is junk (a permanent failure), not an outage.
- *Slow*: a source that has not answered within `hedge_after` gets company:
  the next source is asked as well and the first post wins. Too slow to wait
  for counts as a failure at once; the slow request runs on in the background
  to its `deadline` (and an answer that does come still counts as a success).
- *Definite*: "not found", "private", "suspended" from a source that answered.
  That is the answer, with one exception: a "not found" for a post younger
  than `recent` asks the next source too, because a mirror may lag behind X
  by a few minutes (fxtwitter caches, X's own endpoints propagate); whatever
  the next source says that is not a post, the first "not found" stands.
- *Skipped*: a source whose breaker is open costs nothing: no request, no
  timeout. When every source failed or was skipped the chain raises
  `AllSourcesDown` with the time until the soonest probe, and the task waits
  for it (counted in time, not attempts: see `xbot.errors.OutageRetry`).

Nothing downstream knows which source answered: each returns the same `Post`.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import attrs

from xbot.clock import SystemClocks, TimeLine
from xbot.errors import (
    AllSourcesDown,
    FetchError,
    PostUnavailable,
    TransientFetch,
    UnsupportedLink,
)
from xbot.i18n import N_
from xbot.links import Link
from xbot.logs import kv
from xbot.media.models import Post
from xbot.sources.base import PostSource
from xbot.sources.x._breaker import BreakerPolicy, SourceHealth, Verdict
from xbot.sources.x._fxtwitter import XApi, XApiSource
from xbot.sources.x._status import DELETED
from xbot.sources.x._syndication import Syndication
from xbot.sources.x._vxtwitter import VxApi

if TYPE_CHECKING:
    import httpx

    from xbot.config import Settings

log = logging.getLogger("xbot.sources.x")

TWITTER_EPOCH_MS = 1288834974657
DOWN = N_("X is not answering right now; I will send this when it is back.")
# A public post that has stood since 2006 (x.com/jack/status/20): what `xbot doctor` asks for.
PROBE_POST = Link(
    url="https://x.com/jack/status/20", key="x:20", kind="x", post_id="20", handle="jack"
)


def snowflake_time(post_id: str) -> float | None:
    """When an X post was made, from its id (seconds since the epoch); None for pre-2010 ids."""
    try:
        value = int(post_id)
    except ValueError:
        return None
    if value < 2**32:  # sequential ids from before snowflakes carry no time
        return None
    return ((value >> 22) + TWITTER_EPOCH_MS) / 1000


def x_sources(settings: Settings, client: httpx.AsyncClient) -> list[PostSource]:
    """The configured X sources, in order; an empty URL leaves a source out."""
    sources: list[PostSource] = [XApiSource(XApi(client, settings.x_api_url))]
    if settings.vx_api_url:
        sources.append(VxApi(client, settings.vx_api_url))
    if settings.x_syndication_url:
        sources.append(Syndication(client, settings.x_syndication_url))
    return sources


@attrs.frozen
class SourceReport:
    """One source as the operator sees it (`/stats`, `xbot doctor`)."""

    name: str
    skipped_until: float | None
    successes: int
    failures: int
    last_error: str

    def line(self) -> str:
        if self.skipped_until is None:
            state = "healthy"
        else:
            when = datetime.fromtimestamp(self.skipped_until, tz=UTC).strftime("%H:%M")
            state = f"skipped until {when} UTC"
        text = (
            f"{self.name}: {state}, {self.successes} ok / {self.failures} failed in the last hour"
        )
        return text + (f"; last error: {self.last_error}" if self.last_error else "")


def _not_json(exc: FetchError) -> bool:
    """`XApi` raises FetchError both for a body that is not JSON (an HTML error page
    with 200, a CDN challenge: the source is unwell) and for JSON that is no status
    (this one post); only the first comes from a decoding error."""
    return isinstance(exc.__cause__, ValueError)


def _log_change(name: str, what: str, health: SourceHealth) -> None:
    if what == "opened":
        log.warning(
            "source breaker opened %s",
            kv(source=name, skipped_for=round(health.state.cool_down), error=health.last_error),
        )
    else:
        log.info("source breaker closed %s", kv(source=name))


@attrs.define
class _Tally:
    """What one fetch has heard so far, short of a post."""

    definite: PostUnavailable | None = None
    junk: FetchError | None = None
    down: bool = False  # a source was skipped or failed transiently


@attrs.define
class SourceChain:
    """The X sources in order, each with its breaker; itself a `PostSource`.

    Attributes:
        sources: asked in this order (at least one).
        deadline: the longest one source may take for one request, whatever its
            own client's timeouts; past it the source failed transiently.
        hedge_after: seconds a source may take before the next one is asked as
            well (the first post wins; the slow request runs on to its deadline).
        recent: seconds; a "not found" for a post younger than this asks the next source.
        answered: how many posts each source delivered (for the demo and benchmarks).
    """

    sources: Sequence[PostSource]
    policy: BreakerPolicy = attrs.field(factory=BreakerPolicy)
    # Breakers and hedges measure durations: the bot's time line (xbot.clock), not the
    # wall clock. `wall` is for dates from outside (a post's snowflake time); None: `clock`.
    clock: Callable[[], float] = attrs.field(factory=lambda: TimeLine.from_wall(SystemClocks()).now)
    wall: Callable[[], float] | None = None
    deadline: float = 12.0
    hedge_after: float = 2.0
    recent: float = 600.0
    name: str = "x"
    health: dict[str, SourceHealth] = attrs.field(init=False)
    _background: set[asyncio.Task[Post]] = attrs.field(factory=set, init=False)
    _slow: set[asyncio.Task[Post]] = attrs.field(factory=set, init=False)
    answered: collections.Counter[str] = attrs.field(factory=collections.Counter, init=False)
    last_answer: str = attrs.field(default="", init=False)

    def __attrs_post_init__(self) -> None:
        if not self.sources:
            raise ValueError("a source chain needs at least one source")
        self.health = {
            s.name: SourceHealth(s.name, self.policy, on_change=_log_change) for s in self.sources
        }

    async def fetch(self, link: Link) -> Post:
        """The post, from the first source that has it.

        A source that has not answered within `hedge_after` seconds gets company:
        the next source is asked too, and the first post wins. The slow request
        goes on in the background until its `deadline`, so its breaker still
        learns that it hangs; the link does not wait for it.

        Raises:
            PostUnavailable: a definite answer (see the module's notes on "not found").
            AllSourcesDown: every source failed transiently or was skipped.
            UnsupportedLink: the link is no post.
            FetchError: every source that answered sent junk.
        """
        tally = _Tally()
        waiting = list(self.sources)
        pending: dict[asyncio.Task[Post], PostSource] = {}

        def ask_next() -> None:
            while waiting:
                source = waiting.pop(0)
                if self.health[source.name].admit(self.clock()) is Verdict.SKIP:
                    tally.down = True
                    continue
                pending[asyncio.create_task(self._ask(source, link))] = source
                return

        hedging = self.hedge_after < self.deadline
        ask_next()
        try:
            while pending:
                done, _ = await asyncio.wait(
                    pending,
                    timeout=self.hedge_after if hedging and waiting else None,
                    return_when=asyncio.FIRST_COMPLETED,
                )
                if not done:
                    self._note_slow(pending)
                    ask_next()  # the one asked is slow: ask the next one as well
                    continue
                for task in done:
                    source = pending.pop(task)
                    self._slow.discard(task)
                    post = self._settle(task, link, tally)
                    if post is not None:
                        self.answered[source.name] += 1
                        self.last_answer = source.name
                        return post
                if not pending:
                    ask_next()  # whoever is still running is already the next source
        finally:
            # What is still running finishes in the background (its breaker learns).
            for task in pending:
                self._background.add(task)
                task.add_done_callback(self._forget)
        if tally.definite is not None:
            raise tally.definite
        if tally.junk is not None and not tally.down:
            raise tally.junk
        all_open = all(h.state.is_open for h in self.health.values())
        raise AllSourcesDown(DOWN, retry_in=self.next_probe_in(), all_open=all_open)

    def _forget(self, task: asyncio.Task[Post]) -> None:
        """A request nobody waits for any more ended; its outcome is on its health."""
        self._background.discard(task)
        self._slow.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: asyncio would log it as never retrieved

    def _settle(self, task: asyncio.Task[Post], link: Link, tally: _Tally) -> Post | None:
        """A finished request: its post, or None after noting why there is none.

        Raises the definite answer when it ends the chain, and `UnsupportedLink`.
        """
        try:
            return task.result()
        except PostUnavailable as exc:
            if tally.definite is None:
                tally.definite = exc
            if not (exc is tally.definite and exc.reason == DELETED and self._may_lag(link)):
                raise tally.definite from None
        except UnsupportedLink:
            raise
        except (TransientFetch, TimeoutError):
            tally.down = True
        except FetchError as exc:
            if _not_json(exc):
                tally.down = True
            else:
                tally.junk = tally.junk or exc
        return None

    def _note_slow(self, pending: dict[asyncio.Task[Post], PostSource]) -> None:
        """Too slow to wait for counts as a failure now, not at the deadline: three
        slow answers open the breaker as soon as three failures would."""
        for task, source in pending.items():
            if task not in self._slow:
                self._slow.add(task)
                self.health[source.name].failed(
                    self.clock(), f"no answer within {self.hedge_after:g}s"
                )

    async def _ask(self, source: PostSource, link: Link) -> Post:
        """One request to one source, its outcome recorded on the source's health."""
        health = self.health[source.name]
        try:
            async with asyncio.timeout(self.deadline):
                post = await source.fetch(link)
        except TimeoutError:
            if asyncio.current_task() not in self._slow:  # a slow one was counted already
                health.failed(self.clock(), f"no answer within {self.deadline:g}s")
            raise
        except PostUnavailable:
            health.succeeded(self.clock())  # a definite answer is a healthy source
            raise
        except UnsupportedLink:
            raise
        except TransientFetch as exc:
            health.failed(self.clock(), exc.reason)
            raise
        except FetchError as exc:
            if _not_json(exc):
                health.failed(self.clock(), "answered with something that is not JSON")
            else:
                # JSON that is no post: this post's problem, not the source's health.
                health.junk(self.clock(), exc.reason)
            raise
        health.succeeded(self.clock())
        return post

    def _may_lag(self, link: Link) -> bool:
        made = snowflake_time(link.post_id or "")
        now = (self.wall or self.clock)()  # X's date: compared with the wall clock
        return made is not None and now - made < self.recent

    def next_probe_in(self) -> float | None:
        """Seconds until the soonest skipped source may be probed (None: none is skipped)."""
        now = self.clock()
        waits = [u - now for h in self.health.values() if (u := h.skipped_until(now)) is not None]
        return max(0.0, min(waits)) if waits else None

    def report(self) -> list[SourceReport]:
        now = self.clock()
        out = []
        for source in self.sources:
            health = self.health[source.name]
            ok, failed = health.counts(now)
            until = health.skipped_until(now)
            if until is not None and self.wall is not None:
                until += self.wall() - now  # shown as a wall-clock time (a step since start)
            out.append(SourceReport(source.name, until, ok, failed, health.last_error))
        return out


@attrs.frozen
class ProbeResult:
    name: str
    ok: bool
    detail: str
    seconds: float


async def probe(
    sources: Sequence[PostSource], link: Link = PROBE_POST, *, within: float = 15.0
) -> list[ProbeResult]:
    """Ask every source for `link` once, breakers aside (`xbot doctor`)."""
    results = []
    for source in sources:
        started = time.monotonic()
        try:
            async with asyncio.timeout(within):
                post = await source.fetch(link)
            ok, detail = True, f"answered (@{post.author_handle or '?'}, {len(post.media)} media)"
        except TimeoutError:
            ok, detail = False, f"no answer within {within:g}s"
        except PostUnavailable as exc:
            ok, detail = True, f"answered: {exc.reason}"
        except FetchError as exc:
            ok, detail = False, exc.reason
        results.append(ProbeResult(source.name, ok, detail, time.monotonic() - started))
    return results
