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


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5, help="runs of each side (default 5)")
    ap.add_argument("--links", type=int, default=1000, help="links per phase (default 1000)")
    args = ap.parse_args(argv)
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
