"""The cost of metrics: CPU per link with the listener on (and scraped) and off.

    .venv/bin/python bench/metrics_bench.py [--rounds 5] [--links 1000]

Runs bench/bot_bench.py (``--starts 0``) alternately without and with
``--metrics``, each run a fresh process and data dir, and compares the
medians of CPU ms per link of its fresh and cache-hit phases. Alternating
spreads the machine's other load over both sides. Target (issue 22): metrics
on costs under 5 % of a link's CPU. Prints a markdown table and one line;
exits 1 when the target is missed.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

BENCH = Path(__file__).resolve().parent / "bot_bench.py"
TARGET = 0.05
PHASES = ("fresh (burst)", "cache (burst)")


def one_run(links: int, metrics: bool) -> dict[str, float]:
    """CPU ms per link of each phase of one bot_bench run."""
    cmd = [sys.executable, str(BENCH), "--links", str(links), "--starts", "0"]
    if metrics:
        cmd.append("--metrics")
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False).stdout
    found: dict[str, float] = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells and cells[0] in PHASES and len(cells) >= 6 and "/" in cells[1]:
            found[cells[0]] = float(cells[5])
    if set(found) != set(PHASES):
        raise SystemExit(f"bot_bench printed no phase table:\n{out[-2000:]}")
    return found


def hooks_per_link_us(n: int = 20_000) -> tuple[float, float]:
    """What metrics on adds to one X link, timed alone (no machine noise): the worker's
    ending hook (the payload read, a counter, the latency histogram), the sender's media
    counter, and two Bot API calls counted (the send and its share of getUpdates).
    Also one scrape's rendering, in ms. Returns (µs per link, ms per scrape)."""
    import time as _time

    sys.path.insert(0, str(BENCH.parent.parent))
    import attrs

    from xbot.links import classify
    from xbot.metrics import Metrics, Readings, api_method
    from xbot.sending.destination import Destination
    from xbot.sending.sent import SentItem
    from xbot.sending.telegram_health import TelegramHealth
    from xbot.storage.queue import Task
    from xbot.tasks.delivery import count_finished
    from xbot.tasks.payloads import DeliverPayload, SentStep

    link = classify("https://x.com/alice/status/1900000000000000001")
    assert link is not None
    payload = DeliverPayload.for_link(link, Destination(5, "private"))
    payload = attrs.evolve(payload, sent=(SentStep(0, (SentItem("photo", "AgADfileid"),)),))
    task = Task(1, "deliver", 5, payload.to_json(), "done", None, 1, 5, 0.0, None, None, None,
                0.0, 0.0)  # fmt: skip
    metrics, health = Metrics(), TelegramHealth()
    finished = count_finished(metrics, _time.time)
    url = "http://127.0.0.1:1/bot123:abc/sendPhoto"

    def one_link() -> None:
        finished(task, "done")
        metrics.sent(["url"])
        for _ in range(2):
            method = api_method(url)
            metrics.bot_api(method, "ok")
            health.observed(method, "ok")

    started = _time.perf_counter()
    for _ in range(n):
        one_link()
    per_link = (_time.perf_counter() - started) / n * 1e6
    metrics.readings = Readings(
        tasks={("deliver", "pending"): 3, ("notice", "dead"): 1},
        ytdlp_age_seconds=86400.0,
        breaker_open=dict.fromkeys(("fxtwitter", "vxtwitter", "syndication"), False),
        source_failures=dict.fromkeys(("fxtwitter", "vxtwitter", "syndication"), 1),
    )
    from prometheus_client import generate_latest

    started = _time.perf_counter()
    for _ in range(200):
        generate_latest(metrics.registry)
    return per_link, (_time.perf_counter() - started) / 200 * 1e3


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5, help="runs of each side (default 5)")
    ap.add_argument("--links", type=int, default=1000, help="links per phase (default 1000)")
    ap.add_argument("--micro", action="store_true", help="only the hooks' cost, timed alone")
    args = ap.parse_args(argv)
    per_link, per_scrape = hooks_per_link_us()
    print(f"hooks per link: {per_link:.1f} µs; one scrape rendered: {per_scrape:.2f} ms")
    if args.micro:
        return 0
    runs: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    for n in range(args.rounds):
        for metrics in (False, True):
            runs[metrics].append(one_run(args.links, metrics))
            print(f"  round {n + 1}, metrics {'on' if metrics else 'off'}: "
                  f"{runs[metrics][-1]}", flush=True)  # fmt: skip
    print()
    print("| phase | CPU ms/link, off (median) | on (median) | difference |")
    print("| --- | --- | --- | --- |")
    worst = 0.0
    for phase in PHASES:
        off = statistics.median(r[phase] for r in runs[False])
        on = statistics.median(r[phase] for r in runs[True])
        share = (on - off) / off
        worst = max(worst, share)
        print(f"| {phase} | {off:.3f} | {on:.3f} | {100 * share:+.1f} % |")
    print()
    print(f"metrics-bench: {args.rounds} rounds of {args.links} links, worst {100 * worst:+.1f} %")
    return 1 if worst >= TARGET else 0


if __name__ == "__main__":
    sys.exit(main())
