"""The cost of an X source outage to users: the real bot, the stand-ins, one failure mode at a time.

For each way fxtwitter fails (503 envelope, HTML with 200, connection refused,
a hang past the deadline) it sends links one after another and measures, per
link, the time from the user's message to the photo in the chat, against the
same with every source healthy. The breaker passes through its three states:

- closed: the first links, while fxtwitter's failures are being counted;
- open: fxtwitter skipped, vxtwitter answers at once;
- half-open: the clock moved past the cool-down, one link probes fxtwitter
  (still down), the breaker opens again.

    .venv/bin/python bench/outage_bench.py [--links 8] [--deadline 12]

Prints a Markdown table (docs/benchmarks.md keeps the latest numbers).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from standins.harness import Harness
from xbot.sources.x import SourceChain
from xbot.storage.queue import Task

CHAT = 9001


class Shifted:
    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


async def _link(h: Harness, post_id: int) -> float:
    before = sum(1 for m in h.sent(CHAT) if "photo" in m)
    started = time.monotonic()
    h.api.user_message(CHAT, f"https://x.com/a/status/{post_id}")
    await h.api.wait_for(lambda: sum(1 for m in h.sent(CHAT) if "photo" in m) > before, 60)
    took = time.monotonic() - started
    await h.wait_idle(30)
    return took


async def _mode(mode: str, links: int, deadline: float) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="xbot-outage-") as tmp:
        h = await Harness.start(Path(tmp), x_sources=True, start_bot=False)
        clock = Shifted()
        h.clock = clock
        await h.start_bot()
        try:
            chain = h.services.sources.by_kind["x"]
            assert isinstance(chain, SourceChain)
            chain.deadline = deadline
            for n in range(links + 2):
                h.add_post(1000 + n, text=f"post {n}", photos=[h.photo(f"p{n}")])
            if mode == "503":
                h.fx.set_fault("503")
            elif mode == "html":
                h.fx.set_fault("html")
            elif mode == "hang":
                h.fx.set_fault("hang")
            elif mode == "refused":
                await h.fx.stop()
            closed, opened = [], []
            for n in range(links):
                was_open = chain.health["fxtwitter"].state.is_open
                (opened if was_open else closed).append(await _link(h, 1000 + n))
            clock.offset += chain.policy.cool_down + 1  # past the cool-down: the next link probes
            half_open = await _link(h, 1000 + links)
            delivered = sum(1 for m in h.sent(CHAT) if "photo" in m)
            return {
                "mode": mode,
                "delivered": f"{delivered}/{links + 1}",
                "closed": closed,
                "open": opened,
                "half_open": [half_open],
                "answered": dict(chain.answered),
            }
        finally:
            await h.stop()


async def _all_down(minutes: float) -> dict[str, object]:
    """Every source down for `minutes` of the bot's clock (moved, not waited), then back."""
    with tempfile.TemporaryDirectory(prefix="xbot-outage-") as tmp:
        h = await Harness.start(Path(tmp), x_sources=True, start_bot=False)
        clock = Shifted()
        h.clock = clock
        await h.start_bot()
        assert h.vx is not None
        assert h.syn is not None
        try:
            h.add_post(2000, text="patience", photos=[h.photo("p")])
            h.fx.set_fault("503")
            h.vx.set_outage("html")
            await h.syn.refuse()
            started = clock()
            h.api.user_message(CHAT, "https://x.com/a/status/2000")
            looks, seen = 0, 0.0
            while True:
                task = await _waiting(h, seen)
                seen = task.updated_at
                looks += 1
                if task.run_after - started > minutes * 60:
                    break
                clock.offset += task.run_after - clock() + 0.01
                h.services.workers.wake()
            recovered = clock()
            h.fx.set_fault(None)
            h.vx.set_outage(None)
            await h.syn.accept()
            back_after = task.run_after - recovered
            clock.offset += task.run_after - clock() + 0.01
            h.services.workers.wake()
            await h.api.wait_for(lambda: any("photo" in m for m in h.sent(CHAT)), 30)
            sentences = [m["text"] for m in h.sent(CHAT) if "text" in m]
            return {"looks": looks, "sentences": sentences, "back_after": back_after}
        finally:
            await h.stop()


async def _waiting(h: Harness, seen: float) -> Task:
    """The one task, once it is back in the queue (rescheduled after `seen`)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        tasks = await h.services.queue.list(limit=1)
        task = tasks[0] if tasks else None
        if task and task.state == "pending" and task.lease_token is None and task.updated_at > seen:
            return task
        await asyncio.sleep(0.01)
    raise TimeoutError("the task did not go back to the queue")


def _ms(values: list[float], base: float) -> str:
    if not values:
        return "–"
    extra = statistics.median(values) - base
    return f"{extra:+.2f} s (n={len(values)})"


async def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--links", type=int, default=8)
    ap.add_argument("--deadline", type=float, default=12.0, help="the chain's per-source deadline")
    ap.add_argument(
        "--outage-minutes", type=float, default=40.0, help="every source down this long"
    )
    args = ap.parse_args(argv)
    healthy = await _mode("healthy", args.links, args.deadline)
    base = statistics.median([*healthy["closed"], *healthy["open"]])  # type: ignore[misc]
    print(f"baseline (all healthy): {base * 1000:.0f} ms per link, median of {args.links}\n")
    print("| fxtwitter fails by | links delivered | extra per link, closed | open | half-open |")
    print("| --- | --- | --- | --- | --- |")
    for mode in ("503", "html", "refused", "hang"):
        r = await _mode(mode, args.links, args.deadline)
        print(
            f"| {mode} | {r['delivered']} | {_ms(r['closed'], base)} | "  # type: ignore[arg-type]
            f"{_ms(r['open'], base)} | {_ms(r['half_open'], base)} |"  # type: ignore[arg-type]
        )
    down = await _all_down(args.outage_minutes)
    print(
        f"\nevery source down for {args.outage_minutes:g} min (the bot's clock moved, not waited):"
        f" {down['looks']} looks at the sources, sentences to the chat: {down['sentences']},"
        f" delivered {down['back_after']:.0f} s after the sources came back"
    )
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
