"""The canary: one known public post fetched from every source, now and then, to see its shape.

Each source is asked directly (breakers aside, as `xbot doctor` asks), through
its real parser, and nothing is sent. The answer is one of:

- ``ok``: a post with media and an author came back, as the canary post has;
- ``down``: no answer, 5xx, 429, a timeout, a page that is not JSON — the
  breaker's business, and already in the metrics;
- ``broken``: the source answered, in JSON, and it is no post we can read, or a
  post without the media or the author the canary post has. That is the
  source having changed its format ("X changed something"), which no breaker
  sees: every link fails as junk, not as an outage;
- ``gone``: the canary post itself is deleted or private (pick another one:
  ``XBOT_CANARY_POSTS``); neither broken nor down.

`verdict` is the pure part; `Canary` a round of checks and its period (the app
runs `Canary.periodic`). Off unless ``XBOT_CANARY_INTERVAL_S`` is set.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

import attrs

from xbot.errors import FetchError, PostUnavailable, TransientFetch
from xbot.links import Link, classify
from xbot.logs import kv
from xbot.media.models import Post
from xbot.periodic import Periodic
from xbot.sources.base import PostSource
from xbot.sources.router import SourceRouter
from xbot.sources.x import SourceChain

__all__ = ["RESULTS", "Canary", "CanaryTarget", "check", "verdict"]

log = logging.getLogger(__name__)

RESULTS = ("ok", "down", "broken", "gone")
WITHIN = 15.0  # seconds one source may take for the canary post


def verdict(post: Post | None, error: BaseException | None) -> tuple[str, str]:
    """(result, one line of detail) for what a source answered for the canary post."""
    if post is not None:
        if not post.media:
            return "broken", "the post came back without its media"
        if not post.author_handle:
            return "broken", "the post came back without its author"
        return "ok", f"@{post.author_handle}, {len(post.media)} media"
    if isinstance(error, PostUnavailable):
        return "gone", f"the canary post is unavailable: {error.reason}"
    if isinstance(error, TransientFetch | TimeoutError):
        return "down", str(error) or "no answer in time"
    if isinstance(error, FetchError):
        # A body that is not JSON is a source unwell (an HTML error page): down.
        # JSON that is no post we can read is a changed format: broken.
        if isinstance(error.__cause__, ValueError):
            return "down", "answered with something that is not JSON"
        return "broken", f"answered in a shape xbot does not read: {error.reason}"
    return "down", type(error).__name__


@attrs.frozen
class CanaryTarget:
    """One source and the known post it is asked for."""

    source: PostSource
    link: Link


async def check(target: CanaryTarget, within: float = WITHIN) -> tuple[str, str]:
    """Ask one source for its canary post, once; its verdict."""
    try:
        async with asyncio.timeout(within):
            post = await target.source.fetch(target.link)
    except (FetchError, TimeoutError) as exc:
        return verdict(None, exc)
    return verdict(post, None)


@attrs.define
class Canary:
    """Asks every target every `interval` seconds; keeps each source's last verdict.

    Attributes:
        targets: one per source (the X sources each, each other site's source).
        on_result: told (source, result) after each check (the metrics).
        results: source -> (result, detail, when).
    """

    targets: Sequence[CanaryTarget]
    interval: float
    clock: Callable[[], float]  # the bot's time line (when each verdict was made)
    on_result: Callable[[str, str], None] | None = None
    results: dict[str, tuple[str, str, float]] = attrs.field(factory=dict, init=False)
    rounds: int = attrs.field(default=0, init=False)  # rounds done (tests wait on it)

    def broken(self) -> dict[str, bool]:
        """source -> its last answer had a changed shape."""
        return {name: r[0] == "broken" for name, r in self.results.items()}

    def lines(self) -> list[str]:
        """For /stats: each source's last verdict."""
        return [f"  {name}: {r[0]} ({r[1]})" for name, r in sorted(self.results.items())]

    async def run_once(self) -> None:
        verdicts = await asyncio.gather(*(check(t) for t in self.targets))
        now = self.clock()
        for target, (result, detail) in zip(self.targets, verdicts, strict=True):
            name = target.source.name
            before = self.results.get(name, ("ok", "", 0.0))[0]
            self.results[name] = (result, detail, now)
            if result != before:
                log.warning("canary %s", kv(source=name, result=result, detail=detail))
            if self.on_result is not None:
                self.on_result(name, result)
        self.rounds += 1

    def periodic(self) -> Periodic:
        """A round at once, then one every `interval` seconds; a round that fails is
        logged and the next one comes all the same."""
        return Periodic("canary", self.run_once, self.interval, at_once=True, logger=log)


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
