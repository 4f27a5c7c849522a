"""The bot benchmark: 1,000 X links across 100 chats through the real bot.

    .venv/bin/python bench/bot_bench.py [--links 1000] [--chats 100] [--rate 50] [--starts 5]

The bot (`xbot.runtime.Runtime`, 4 workers, the production log set-up at INFO into a
file) runs in this process with its pacer off; the stand-ins (Bot API, which
also fetches every photo by URL as Telegram would, fxtwitter API, media host)
run in a child process (bench/_standins_proc.py) with no latency and no rate
limits, so `getrusage(RUSAGE_SELF)` and `ru_maxrss` are the bot's alone.

- fresh: every link new (fxtwitter fetch, sendPhoto by URL), all injected at once;
- cache, burst: the same links again from other chats, all at once: answered by file_id;
- cache, paced: the same links from yet other chats at ``--rate`` per second: the
  cache-hit path's latency, from the update's injection to the arrival of the
  bot's sendPhoto at the stand-in (both CLOCK_MONOTONIC, one clock per host);
- start: the real ``xbot run`` from Popen to the arrival of its first getUpdates
  (a fresh data dir each time, one update waiting so the poll answers at once),
  ``--starts`` times; and whether importing xbot.cli and xbot.app loads yt-dlp.

``--metrics``: the same with the operator's listener on (`XBOT_METRICS_ADDR`, every
counter moving) and /metrics scraped every ``--scrape-every`` seconds (1 s by
default: thirty times Prometheus's usual pace, so the cost is not understated);
bench/metrics_bench.py runs both and compares them (issue 22: under 5 %).

Targets (issue 3): < 5 ms CPU per link, peak RSS < 120 MB, start < 1.5 s.
Prints markdown tables, then one line:
``bot-bench: cpu/link X ms, peak RSS Y MB, cache-hit p50/p99 A/B ms, start C s``.
Exits 1 when a target is missed or a link was lost or answered twice.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import platform
import re
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from xbot.config import Settings  # noqa: E402
from xbot.logs import setup_logging  # noqa: E402
from xbot.runtime import Runtime  # noqa: E402
from xbot.sending.pacing import Pacer  # noqa: E402

POST_BASE = 1_900_000_000_000_000_000  # as in _standins_proc.py
CPU_TARGET_MS = 5.0
RSS_TARGET_MB = 120.0
START_TARGET_S = 1.5
PHASE_TIMEOUT = 90.0
START_TIMEOUT = 15.0


def post_url(i: int) -> str:
    return f"https://x.com/bench/status/{POST_BASE + i}"


def usage_now() -> tuple[float, float, int]:
    """User and system CPU seconds, and context switches (voluntary + involuntary)."""
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime, u.ru_stime, u.ru_nvcsw + u.ru_nivcsw


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def rss_now_mb() -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest rank: the smallest value with at least p % of the values at or below it."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * p // 100))
    return ordered[int(rank) - 1]


class Standins:
    """The child process holding the stand-ins; one JSON line each way per command."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    @classmethod
    async def spawn(cls) -> Standins:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(REPO / "bench" / "_standins_proc.py"),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            limit=64 * 1024 * 1024,  # the reports carry every latency
        )
        return cls(proc)

    async def call(self, op: str, timeout: float = 120.0, **args: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.proc.stdin.write((json.dumps({"op": op, **args}) + "\n").encode())
        await self.proc.stdin.drain()
        line = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
        if not line:
            raise RuntimeError(f"the stand-ins process died during {op!r}")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise RuntimeError(answer["error"])
        return answer

    async def close(self) -> None:
        if self.proc.returncode is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(b'{"op": "quit"}\n')
                await self.proc.stdin.drain()
                await asyncio.wait_for(self.proc.wait(), 10)
            except (TimeoutError, ConnectionError):
                self.proc.kill()
                await self.proc.wait()


@dataclass
class Phase:
    name: str
    links: int
    delivered: int = 0
    duplicates: int = 0
    errors: int = 0
    wall: float = 0.0
    cpu: float = 0.0
    sys_cpu: float = 0.0
    switches: int = 0
    latencies: list[float] = field(default_factory=list)
    sources: dict[str, int] = field(default_factory=dict)
    methods: dict[str, int] = field(default_factory=dict)
    media_hits: int = 0
    fx_hits: int = 0
    timed_out: bool = False
    intake: float | None = None  # injection → the getUpdates confirming the last update

    @property
    def cpu_ms_per_link(self) -> float:
        return 1000 * self.cpu / self.delivered if self.delivered else float("nan")

    def detail(self) -> str:
        """Where the CPU went: the kernel's share, and thread/process switches per link."""
        n = max(1, self.delivered)
        intake = f"{self.intake:.2f}" if self.intake is not None else "—"
        return (
            f"| {self.name} | {intake} | {1000 * (self.cpu - self.sys_cpu) / n:.2f} "
            f"| {1000 * self.sys_cpu / n:.2f} | {self.switches / n:.1f} |"
        )

    def row(self) -> str:
        ms = [1000 * v for v in self.latencies]
        calls = sum(self.methods.values())
        return (
            f"| {self.name} | {self.delivered}/{self.links} | {self.duplicates} "
            f"| {self.wall:.2f} | {self.delivered / self.wall if self.wall else 0:.0f} "
            f"| {self.cpu_ms_per_link:.2f} | {percentile(ms, 50):.1f} | {percentile(ms, 99):.1f} "
            f"| {max(ms, default=float('nan')):.1f} | {calls / max(1, self.delivered):.2f} "
            f"| {self.sources.get('url', 0)}/{self.sources.get('file_id', 0)}"
            f"/{self.sources.get('upload', 0)} | {self.fx_hits}/{self.media_hits} |"
        )


async def run_phase(
    name: str,
    bot: Runtime,
    standins: Standins,
    chats: list[int],
    shift: int,
    links_per_chat: int,
    rate: float,
    before: dict[str, Any],
) -> tuple[Phase, dict[str, Any]]:
    """Inject one link per message, round-robin over `chats`; wait until every task is done."""
    services = bot.services
    assert services is not None
    n_chats = len(chats)
    messages = [
        [chat, post_url(((c + shift) % n_chats) * links_per_chat + k)]
        for k in range(links_per_chat)
        for c, chat in enumerate(chats)
    ]
    phase = Phase(name, len(messages))
    done0 = services.workers.done_count
    user0, sys0, switches0 = usage_now()
    t0 = time.monotonic()
    injecting = asyncio.create_task(standins.call("inject", messages=messages, rate=rate))
    deadline = t0 + PHASE_TIMEOUT
    while services.workers.done_count - done0 < len(messages):
        if time.monotonic() > deadline:
            phase.timed_out = True
            break
        await asyncio.sleep(0.02)
    phase.wall = time.monotonic() - t0
    user1, sys1, switches1 = usage_now()
    phase.cpu = (user1 - user0) + (sys1 - sys0)
    phase.sys_cpu = sys1 - sys0
    phase.switches = switches1 - switches0
    await injecting
    report = await standins.call("report", chats=chats)
    phase.delivered = report["delivered"]
    phase.duplicates = report["duplicates"]
    phase.errors = report["errors"]
    phase.latencies = report["latencies"]
    phase.intake = report["intake"]
    phase.sources = report["sources"]
    phase.methods = report["methods"]
    phase.fx_hits = report["fx_hits"] - before.get("fx_hits", 0)
    phase.media_hits = report["media_hits"] - before.get("media_hits", 0)
    return phase, report


# --- start time ---------------------------------------------------------------------------------


def xbot_command() -> list[str]:
    script = Path(sys.executable).with_name("xbot")
    return [str(script)] if script.exists() else [sys.executable, "-m", "xbot.cli"]


async def time_start(standins: Standins, root: Path, n: int) -> tuple[float | None, str]:
    """Popen of ``xbot run`` → arrival of its first getUpdates, in seconds (None: never came)."""
    target = await standins.call("start_api")
    data = root / f"start{n}"
    env = {
        "PATH": os.environ.get("PATH", ""),
        "XBOT_TOKEN": target["token"],
        "XBOT_BOT_API_URL": f"{target['botapi']}/bot",
        "XBOT_BOT_API_FILE_URL": f"{target['botapi']}/file/bot",
        "XBOT_X_API_URL": "http://127.0.0.1:9",  # never asked: the waiting update has no link
        "XBOT_DATA_DIR": str(data),
        "XBOT_ALLOW_PRIVATE_NETWORKS": "1",
    }
    log = root / f"start{n}.log"
    with log.open("wb") as err:
        began = time.monotonic()
        proc = subprocess.Popen(
            [*xbot_command(), "run"], env=env, stdout=subprocess.DEVNULL, stderr=err
        )
        try:
            poll = await standins.call(
                "first_poll", timeout=START_TIMEOUT + 5, within=START_TIMEOUT
            )
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.to_thread(proc.wait, 15)
            except subprocess.TimeoutExpired:
                proc.kill()
                await asyncio.to_thread(proc.wait, 5)
            await standins.call("stop_api")
    at = poll.get("at")
    return (at - began if at is not None else None), log.read_text(errors="replace")


def import_check() -> dict[str, Any]:
    """What importing the CLI and the app costs and loads, in a fresh interpreter."""
    code = (
        "import sys, json; import xbot.cli, xbot.app; "
        "print(json.dumps({'yt_dlp': sorted(m for m in sys.modules if m.split('.')[0] == 'yt_dlp'),"
        " 'modules': len(sys.modules)}))"
    )
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    result: dict[str, Any] = json.loads(proc.stdout)
    # -X importtime: "import time: self [us] | cumulative | imported package"
    cumulative: dict[str, int] = {}
    for line in proc.stderr.splitlines():
        m = re.match(r"import time:\s+\d+ \|\s+(\d+) \|(\s*)(\S+)", line)
        if m and m.group(3) not in cumulative:
            cumulative[m.group(3)] = int(m.group(1))
    result["import_ms"] = {
        name: cumulative.get(name, 0) / 1000 for name in ("xbot.app", "telegram", "httpx", "apsw")
    }
    return result


# --- main ---------------------------------------------------------------------------------------


async def scrape_forever(port: int, every: float) -> None:
    """GET /metrics every `every` seconds, as Prometheus would (a raw request: the
    client's own cost stays out of the bot's CPU as far as it can)."""
    request = b"GET /metrics HTTP/1.1\r\nHost: bench\r\n\r\n"
    while True:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(request)
        await reader.read()
        writer.close()
        await asyncio.sleep(every)


async def bench(args: argparse.Namespace, root: Path) -> int:
    standins = await Standins.spawn()
    try:
        return await _bench(args, root, standins)
    finally:
        await standins.close()


async def _bench(args: argparse.Namespace, root: Path, standins: Standins) -> int:
    # Other work on the machine shows in the wall times (less in CPU seconds).
    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    n_links = args.links
    per_chat = n_links // args.chats
    n_links = per_chat * args.chats
    info = await standins.call("start", posts=n_links)
    settings = Settings(
        token=info["token"],
        bot_api_url=f"{info['botapi']}/bot",
        bot_api_file_url=f"{info['botapi']}/file/bot",
        x_api_url=info["fx"],
        vx_api_url="",
        x_syndication_url="",
        data_dir=root / "data",
        allow_private_networks=True,
        workers=4,
        metrics_addr=("127.0.0.1", 0) if args.metrics else None,
    )
    log_path = root / "bot.log"
    log_file = log_path.open("w")
    setup_logging("INFO", stream=log_file)  # as `xbot run` logs, into a file

    rss_before = rss_now_mb()
    t0 = time.monotonic()
    bot = Runtime(settings, pacer=Pacer(enabled=False), poll_timeout=10)
    try:
        await bot.start()
    except BaseException:
        log_file.close()
        raise
    startup = time.monotonic() - t0
    rss_started = rss_now_mb()
    scraper = None
    if bot.listener is not None:
        scraper = asyncio.create_task(scrape_forever(bot.listener.port, args.scrape_every))

    chats = list(range(1, args.chats + 1))
    phases: list[Phase] = []
    before: dict[str, Any] = {}
    try:
        plan = [("fresh (burst)", 0.0), ("cache (burst)", 0.0), ("cache (paced)", args.rate)]
        for i, (name, rate) in enumerate(plan[: 1 if args.fresh_only else 3]):
            group = [c + i * 1_000_000 for c in chats]  # other chats each phase
            phase, before = await run_phase(
                name, bot, standins, group, 37 * i, per_chat, rate, before
            )
            phases.append(phase)
            print(f"  {name}: {phase.delivered}/{phase.links} in {phase.wall:.1f} s", flush=True)
        rss_end = rss_now_mb()
    finally:
        if scraper is not None:
            scraper.cancel()
            await asyncio.gather(scraper, return_exceptions=True)
        await bot.stop()
        log_file.close()
    peak = peak_rss_mb()
    log_text = log_path.read_text(errors="replace")
    tracebacks = log_text.count("Traceback")

    starts: list[float] = []
    start_fail = ""
    for n in range(args.starts):
        took, text = await time_start(standins, root, n)
        if took is None:
            start_fail = text[-2000:]
            break
        starts.append(took)
    imports = await asyncio.to_thread(import_check)

    if args.fresh_only:  # for a profiler: the table and nothing else
        print("| phase | delivered | twice | wall s | links/s | CPU ms/link |")
        print(phases[0].row())
        print(phases[0].detail())
        return 0
    fresh, burst, paced = phases
    hit_ms = [1000 * v for v in paced.latencies]
    start_med = statistics.median(starts) if starts else float("nan")

    # httpcore retries `import sniffio` on every lock and event it sets up; when
    # the import fails (anyio >= 4.11 no longer installs it) each retry scans
    # sys.path: ~100 µs, several times per request. Worth a line of its own.
    sniffio = importlib.util.find_spec("sniffio") is not None
    print()
    print(
        f"Machine: {os.cpu_count()} CPUs ({platform.machine()}), Python "
        f"{platform.python_version()}, {platform.system()} {platform.release()}; "
        f"{n_links} links across {args.chats} chats, 4 workers, pacer off; "
        f"paced at {args.rate:g} links/s; sniffio {'installed' if sniffio else 'absent'}; "
        f"load average before {load_before}"
    )
    print()
    print(
        "| phase | delivered | twice | wall s | links/s | CPU ms/link | p50 ms | p99 ms | max ms "
        "| Bot API calls/link | sent by url/file_id/upload | fx/media hits |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for phase in phases:
        print(phase.row())
    print()
    print(
        "| phase | intake s (every update stored and confirmed) | user CPU ms/link "
        "| system CPU ms/link | context switches/link |"
    )
    print("| --- | --- | --- | --- | --- |")
    for phase in phases:
        print(phase.detail())
    print()
    print("| measure | value | target |")
    print("| --- | --- | --- |")
    print(f"| RSS before the bot / after start / at the end | {rss_before:.1f} / "
          f"{rss_started:.1f} / {rss_end:.1f} MB | |")  # fmt: skip
    print(f"| peak RSS (ru_maxrss) | {peak:.1f} MB | < {RSS_TARGET_MB:.0f} MB |")
    print(f"| in-process start (Runtime.start) | {startup:.2f} s | |")
    if starts:
        print(
            f"| `xbot run`: Popen → first getUpdates, median / max of {len(starts)} "
            f"| {start_med:.2f} / {max(starts):.2f} s | < {START_TARGET_S} s |"
        )
    elif start_fail:
        print("| `xbot run`: Popen → first getUpdates | never arrived | |")
    im = imports["import_ms"]
    print(
        f"| import xbot.cli + xbot.app (-X importtime, cumulative) "
        f"| xbot.app {im['xbot.app']:.0f} ms (telegram {im['telegram']:.0f}, "
        f"httpx {im['httpx']:.0f}, apsw {im['apsw']:.0f}),"
        f" {imports['modules']} modules | |"
    )
    print(f"| yt_dlp loaded by that import | {'yes' if imports['yt_dlp'] else 'no'} | no |")
    print(f"| tracebacks in the bot's log | {tracebacks} | 0 |")

    problems = []
    for phase in phases:
        if phase.timed_out or phase.delivered != phase.links:
            problems.append(f"{phase.name}: {phase.delivered}/{phase.links} delivered")
        if phase.duplicates or phase.errors:
            problems.append(f"{phase.name}: {phase.duplicates} twice, {phase.errors} errors")
    if burst.fx_hits or burst.media_hits or paced.fx_hits or paced.media_hits:
        problems.append("a cache hit fetched from the API or the media host")
    if fresh.cpu_ms_per_link >= CPU_TARGET_MS:
        problems.append(f"CPU/link {fresh.cpu_ms_per_link:.2f} ms ≥ {CPU_TARGET_MS} ms")
    if peak >= RSS_TARGET_MB:
        problems.append(f"peak RSS {peak:.0f} MB ≥ {RSS_TARGET_MB:.0f} MB")
    if start_fail:
        problems.append("xbot run never polled:\n" + start_fail)
    elif start_med >= START_TARGET_S:
        problems.append(f"start {start_med:.2f} s ≥ {START_TARGET_S} s")
    if imports["yt_dlp"]:
        problems.append(f"yt_dlp imported at start: {imports['yt_dlp'][:5]}")
    if tracebacks:
        problems.append(f"{tracebacks} tracebacks in the bot's log")
    print()
    for problem in problems:
        print(f"MISSED: {problem}")
    print(
        f"bot-bench: cpu/link {fresh.cpu_ms_per_link:.2f} ms, peak RSS {peak:.0f} MB, "
        f"cache-hit p50/p99 {percentile(hit_ms, 50):.1f}/{percentile(hit_ms, 99):.1f} ms, "
        f"start {start_med:.2f} s"
    )
    return 1 if problems else 0


def main(argv: Sequence[str] | None = None) -> int:
    assert __doc__ is not None
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--links", type=int, default=1000, help="links per phase (default 1000)")
    ap.add_argument("--chats", type=int, default=100, help="chats per phase (default 100)")
    ap.add_argument(
        "--rate", type=float, default=50.0, help="links/s in the paced phase (default 50)"
    )
    ap.add_argument("--starts", type=int, default=5, help="`xbot run` starts timed (default 5)")
    ap.add_argument(
        "--fresh-only",
        action="store_true",
        help="run the fresh phase alone and print its row (to profile it)",
    )
    ap.add_argument("--keep", type=Path, help="keep the data dirs and logs here")
    ap.add_argument("--metrics", action="store_true", help="the metrics listener on, and scraped")
    ap.add_argument(
        "--scrape-every", type=float, default=1.0, help="seconds between scrapes (default 1)"
    )
    args = ap.parse_args(argv)
    if not 1 <= args.chats <= args.links:
        ap.error("--chats must be between 1 and --links")
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        return asyncio.run(bench(args, args.keep))
    with tempfile.TemporaryDirectory(prefix="xbot-bench-") as tmp:
        return asyncio.run(bench(args, Path(tmp)))


if __name__ == "__main__":
    sys.exit(main())
