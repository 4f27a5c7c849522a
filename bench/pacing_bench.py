"""The pacing benchmark: the real bot against a Bot API that enforces Telegram's limits.

    .venv/bin/python bench/pacing_bench.py [--only burst,storm] [--seed 1]

The bot (`xbot.runtime.Runtime`, 4 workers, its pacer on) runs in this process; the
stand-ins run on their own threads. The Bot API stand-in enforces Telegram's
flood limits (`standins.botapi._limits`: ~1 request/s per chat with
bursts of 3, 20 messages/min per group, 30 messages/s per bot, an album
counting as its items) by answering 429 with ``retry_after``, as Telegram does.

- burst: 60 private chats × 1 link (every third post an album of 3 photos)
  and 25 links in one group, all injected at once;
- storm: 20 chats × 3 links (a third of the chats groups), 30 % of sends
  answered 429 with ``retry_after`` 1–2 s on top of the limits, and, as in
  the soak and for an operator whose media host Telegram cannot reach, every
  URL refused ("failed to get HTTP URL content"): each photo goes by URL,
  is refused, then is uploaded.

Reported: the total time from the injection to the last accepted send, the
ideal schedule the limits allow for exactly the messages the bot sent (and,
in the storm, for the 429s it drew: each costs its ``retry_after`` in its
chat, no more), their ratio (target ≤ 1.15), and the 429s the limits
provoked (target 0: the bot's own pacing never crosses a limit). Wall time
depends on the machine; compare the ratio, measured within one run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from standins import (  # noqa: E402
    COUNTED_METHODS,
    TelegramLimits,
    ideal_makespan,
    tiny_jpeg,
)
from standins.botapi import BotApiServer  # noqa: E402
from standins.fxapi import FxApiServer  # noqa: E402
from standins.media_server import MediaServer  # noqa: E402
from xbot.config import Settings  # noqa: E402
from xbot.runtime import Runtime  # noqa: E402
from xbot.sending.pacing import Pacer  # noqa: E402

POST_BASE = 1_800_000_000_000_000_000
TARGET_RATIO = 1.15
PHASE_TIMEOUT = 400.0
SEND_MEDIA = ("sendPhoto", "sendVideo", "sendAnimation", "sendDocument", "sendMediaGroup")


@dataclass
class Result:
    name: str
    links: int
    delivered: int
    wall: float
    ideal: float
    limit_429s: int
    storm_429s: int
    early: int

    @property
    def ratio(self) -> float:
        return self.wall / self.ideal if self.ideal else float("inf")

    def row(self) -> str:
        return (
            f"| {self.name} | {self.delivered}/{self.links} | {self.wall:.1f} s | "
            f"{self.ideal:.1f} s | {self.ratio:.2f}× | {self.limit_429s} | {self.storm_429s} | "
            f"{self.early} |"
        )


def _reply_to(params: dict[str, Any]) -> int | None:
    reply = params.get("reply_parameters")
    if isinstance(reply, str):
        reply = json.loads(reply)
    if isinstance(reply, dict) and "message_id" in reply:
        return int(reply["message_id"])
    return None


def _items(call: Any) -> int:
    if call.method != "sendMediaGroup":
        return 1
    media = call.params.get("media")
    if isinstance(media, str):
        media = json.loads(media)
    return len(media) if isinstance(media, list) else 1


def ideal_with_refusals(
    sends: list[tuple[int, int, float | None]], limits: TelegramLimits, step: float = 0.01
) -> float:
    """Like `ideal_makespan`, with the storm's 429s in place: (chat, items, retry_after).

    A refused send goes out as early as the limits allow and costs its chat
    exactly its ``retry_after``; it counts against no limit.
    """
    model = TelegramLimits(
        limits.chat_rate, limits.chat_burst, limits.group_max, limits.group_window
    )
    queues: dict[int, list[tuple[int, float | None]]] = {}
    for chat, items, retry in sends:
        queues.setdefault(chat, []).append((items, retry))
    heads = dict.fromkeys(queues, 0)
    not_before = dict.fromkeys(queues, 0.0)
    now, last = 0.0, 0.0
    for _ in range(10_000_000):  # bounded
        if all(heads[c] >= len(q) for c, q in queues.items()):
            return last
        for chat, todo in queues.items():
            while heads[chat] < len(todo) and now >= not_before[chat]:
                items, retry = todo[heads[chat]]
                if model.wait(chat, items, now) > 0:
                    break
                heads[chat] += 1
                last = now
                if retry is not None:
                    not_before[chat] = now + retry
                    break
                model.admit("sendMessage", chat, items, now)
        now += step
    raise RuntimeError("ideal_with_refusals: never done")


async def run_scenario(
    name: str,
    messages: list[tuple[int, str, str]],
    *,
    storm: float,
    url_fetch: bool,
    root: Path,
    posts: dict[int, int],
    seed: int,
) -> Result:
    """Inject ``messages`` (chat, chat type, link) at once; wait for every answer."""
    media, fx = MediaServer(), FxApiServer()
    api = BotApiServer(allow_url_fetch_from_loopback=url_fetch, max_records=1_000_000, seed=seed)
    for server in (media, fx, api):
        server.start_sync()
    limits = TelegramLimits()
    api.set_telegram_limits(limits)
    if storm:
        api.set_rate_limit_storm(storm, retry_after_range=(1, 2))
    photo = tiny_jpeg()
    for post, n_photos in posts.items():
        urls = [media.add(f"/m/{post}-{k}.jpg", photo, "image/jpeg") for k in range(n_photos)]
        fx.add_post(POST_BASE + post, author=("Bench", "bench"), text=f"post {post}", photos=urls)
    settings = Settings(
        token=api.token,
        bot_api_url=f"{api.url}/bot",
        bot_api_file_url=f"{api.url}/file/bot",
        x_api_url=fx.url,
        data_dir=root / name,
        allow_private_networks=True,
        workers=4,
    )
    bot = Runtime(settings, pacer=Pacer(), poll_timeout=10)
    await bot.start()
    try:
        injected: dict[tuple[int, int], float] = {}
        t0 = time.monotonic()
        for chat, kind, link in messages:
            update = api.user_message(chat, link, chat_type=kind)
            injected[(chat, update["message"]["message_id"])] = time.monotonic()
        deadline = t0 + PHASE_TIMEOUT
        answered: dict[tuple[int, int], float] = {}
        while len(answered) < len(injected) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
            for call in api.calls:
                if call.method in SEND_MEDIA and call.status == 200 and call.chat_id is not None:
                    reply = _reply_to(call.params)
                    if reply is not None and (call.chat_id, reply) in injected:
                        answered.setdefault((call.chat_id, reply), call.at)
        calls = api.calls
    finally:
        await bot.stop()
        for server in (api, fx, media):
            server.stop_sync()
    last = max(answered.values(), default=t0)
    mine = [c for c in calls if c.method in COUNTED_METHODS and c.chat_id is not None]
    # The bot's own 429s (the limits', the referee's) are its cost, not the ideal's.
    own = {(chat, at) for chat, at in limits.refusals}
    own |= {(e.chat_id, e.at) for e in api.early_requests}
    sends: list[tuple[int, int, float | None]] = []
    storm_429s = 0
    for c in mine:
        if c.status == 200:
            sends.append((c.chat_id, _items(c), None))  # type: ignore[arg-type]
        elif c.status == 429 and (c.chat_id, c.at) not in own:
            text = str(c.description or "")
            retry = float(text.rsplit(" ", 1)[-1]) if text[-1:].isdigit() else 1.0
            sends.append((c.chat_id, _items(c), retry))  # type: ignore[arg-type]
            storm_429s += 1
    limit_429s = len(limits.refusals)
    if limits.refusals:
        print(
            f"  {name}: the limits refused (chat, s after the start): "
            + ", ".join(f"({c}, {at - t0:.2f})" for c, at in limits.refusals),
            flush=True,
        )
    accepted = [(chat, items) for chat, items, retry in sends if retry is None]
    ideal = ideal_with_refusals(sends, limits) if storm else ideal_makespan(accepted, limits)
    return Result(
        name,
        len(injected),
        len(answered),
        last - t0,
        ideal,
        limit_429s,
        storm_429s,
        len(api.early_requests),
    )


def burst() -> tuple[list[tuple[int, str, str]], dict[int, int]]:
    messages, posts = [], {}
    for i in range(60):
        posts[i] = 3 if i % 3 == 2 else 1
        messages.append((10_000 + i, "private", f"https://x.com/bench/status/{POST_BASE + i}"))
    for k in range(25):
        posts[100 + k] = 1
        messages.append((-1_000_100, "supergroup", f"https://x.com/b/status/{POST_BASE + 100 + k}"))
    return messages, posts


def storm() -> tuple[list[tuple[int, str, str]], dict[int, int]]:
    messages, posts = [], {}
    chats = [(-2_000_000 - c, "supergroup") if c % 3 == 0 else (20_000 + c, "private")
             for c in range(20)]  # fmt: skip
    for k in range(3):
        for c, (chat, kind) in enumerate(chats):
            post = 200 + c * 3 + k
            posts[post] = 1
            messages.append((chat, kind, f"https://x.com/s/status/{POST_BASE + post}"))
    return messages, posts


async def main_async(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.CRITICAL)
    only = set(args.only.split(",")) if args.only else {"burst", "storm"}
    results = []
    with tempfile.TemporaryDirectory(prefix="xbot-pacing-") as tmp:
        root = Path(tmp)
        if "burst" in only:
            msgs, posts = burst()
            results.append(
                await run_scenario(
                    "burst", msgs, storm=0.0, url_fetch=True, root=root, posts=posts, seed=args.seed
                )
            )
            print(f"  burst: {results[-1].wall:.1f} s", flush=True)
        if "storm" in only:
            msgs, posts = storm()
            seed = args.seed
            result = await run_scenario(
                "storm", msgs, storm=0.3, url_fetch=False, root=root, posts=posts, seed=seed
            )
            results.append(result)
            print(f"  storm: {results[-1].wall:.1f} s", flush=True)
    print()
    print(
        "| scenario | answered | total | ideal | ratio | 429s the limits provoked |"
        " 429s of the storm | early requests |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        print(r.row())
    missed = [
        r.name
        for r in results
        if r.ratio > TARGET_RATIO or r.limit_429s or r.early or r.delivered < r.links
    ]
    print(f"\npacing-bench: {'missed ' + ', '.join(missed) if missed else 'every target met'}")
    return 1 if missed else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="burst,storm")
    parser.add_argument("--seed", type=int, default=1)
    return asyncio.run(main_async(parser.parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
