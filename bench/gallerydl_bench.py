"""What one gallery-dl run costs: process start, CPU and wall, and the whole link.

    .venv/bin/python bench/gallerydl_bench.py [--runs 7]

Rows, each the median and worst of `--runs`:

- ``--version``: the interpreter and gallery-dl's import, nothing else (the
  floor of any run).
- ``unsupported URL``: what a link gallery-dl does not know costs before it goes
  on to yt-dlp (pattern match over every extractor, no request; exit 64).
- ``Mastodon status, 3 files``: a real ``-j`` run against the local Mastodon
  stand-in (one API request), as `xbot.sources.gallerydl.run_gallerydl` runs it.
- ``link to album``: the whole path through the real bot (update in, gallery-dl
  run, three downloads through the guard, the album out), fresh post each time.
- ``same link again``: from the link cache (no process, no download).

CPU is the child's user + system time (``RUSAGE_CHILDREN``, taken around each
run; the bot's own CPU is not in it). Everything on 127.0.0.1, with the
stand-ins in this process. Prints a markdown table. Not a timed test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from standins.gallery_sites import MastodonServer, gallerydl_config
from standins.harness import Harness
from xbot.sources.gallerydl import gallerydl_command, run_gallerydl

ANSWERS = ("sendMediaGroup", "sendPhoto", "sendMessage")


def _row(name: str, walls: list[float], cpus: list[float] | None = None) -> str:
    wall = f"{statistics.median(walls) * 1000:.0f} / {max(walls) * 1000:.0f}"
    cpu = "—" if cpus is None else f"{statistics.median(cpus) * 1000:.0f}"
    return f"| {name} | {wall} | {cpu} |"


async def _process_rows(runs: int, masto: MastodonServer, config: Path) -> list[str]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="xbot-bench-") as tmp:
        folder = Path(tmp)
        cases: list[tuple[str, Callable[[int], list[str]]]] = [
            ("`--version` (start and import)",
             lambda n: [sys.executable, "-m", "gallery_dl", "--version"]),
            ("unsupported URL (exit 64, no request)",
             lambda n: gallerydl_command("https://example.invalid/p/1", folder, config=config)),
            ("Mastodon status, 3 files (`-j`)",
             lambda n: gallerydl_command(masto.status_url(f"11350000000000{n:04d}"), folder,
                                         config=config)),
        ]  # fmt: skip
        for name, command in cases:
            walls, cpus = [], []
            for n in range(runs):
                result = await run_gallerydl(command(n), folder)
                walls.append(result.wall)
                cpus.append(result.cpu)
            rows.append(_row(name, walls, cpus))
    return rows


async def _timed(h: Harness, chat: int, link: str) -> float:
    started = time.monotonic()
    h.api.user_message(chat, link)
    await h.api.wait_for(
        lambda: any(c.chat_id == chat and c.method in ANSWERS and c.status == 200
                    for c in h.api.calls), 60)  # fmt: skip
    await h.wait_idle(60)
    arrived = max(c.at for c in h.api.calls
                  if c.chat_id == chat and c.method in ANSWERS and c.status == 200)  # fmt: skip
    return arrived - started


async def _bot_rows(runs: int, masto: MastodonServer, config: Path) -> list[str]:
    fresh, again = [], []
    with tempfile.TemporaryDirectory(prefix="xbot-bench-") as tmp:
        h = await Harness.start(Path(tmp), gallerydl_config=config)
        try:
            for n in range(runs):
                link = masto.status_url(f"11350000000000{n:04d}")
                fresh.append(await _timed(h, 1000 + n, link))
                again.append(await _timed(h, 2000 + n, link))
        finally:
            await h.stop()
    return [_row("link to album (whole bot, 3 downloads)", fresh),
            _row("same link again (link cache, no process)", again)]  # fmt: skip


async def main(runs: int) -> None:
    logging.getLogger().setLevel(logging.CRITICAL)
    async with MastodonServer() as masto:
        for n in range(runs):
            masto.add_status(f"11350000000000{n:04d}", photos=3)
        with tempfile.TemporaryDirectory(prefix="xbot-bench-") as tmp:
            config = Path(tmp) / "gallery-dl.json"
            config.write_text(json.dumps(gallerydl_config(masto)))
            steps: list[Callable[[], Awaitable[list[str]]]] = [
                lambda: _process_rows(runs, masto, config),
                lambda: _bot_rows(runs, masto, config),
            ]
            rows = []
            for step in steps:
                rows += await step()
    print(f"{runs} runs each; wall median / worst in ms; CPU: gallery-dl's own, median ms\n")
    print("| what | wall (ms) | CPU (ms) |")
    print("| --- | --- | --- |")
    print("\n".join(rows))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    asyncio.run(main(parser.parse_args().runs))
