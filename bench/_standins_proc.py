"""The stand-ins for bench/bot_bench.py, in a process of their own.

The benchmark measures the bot's CPU and memory with `getrusage(RUSAGE_SELF)`;
the Bot API stand-in (which also fetches every photo by URL, as Telegram
would), the fxtwitter API and the media host must not count towards them, so
they live here and are driven over a pipe: one JSON object per line on stdin,
one answer per line on stdout.

    {"op": "start", "posts": 1000}           → {"botapi", "fx", "token"}
    {"op": "inject", "messages": [[chat, text], ...], "rate": 0}
                                             → {"injected"}  (rate > 0: paced, per second)
    {"op": "report", "chats": [...]}         → what reached those chats (see `_report`)
    {"op": "start_api"}                      → a fresh Bot API stand-in with one update waiting
    {"op": "first_poll", "within": 10}       → {"at"}: arrival of its first getUpdates
    {"op": "stop_api"}
    {"op": "quit"}

Times are `time.monotonic()`: CLOCK_MONOTONIC is one clock for every process
on a Linux host, so the parent can subtract its own readings from these.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from typing import Any

from standins._mediabytes import tiny_jpeg
from standins.botapi import BotApiServer
from standins.fxapi import FxApiServer
from standins.media_server import MediaServer

POST_BASE = 1_900_000_000_000_000_000
SEND_MEDIA = ("sendPhoto", "sendVideo", "sendAnimation", "sendDocument", "sendMediaGroup")


def post_url(i: int) -> str:
    return f"https://x.com/bench/status/{POST_BASE + i}"


def _reply_to(params: dict[str, Any]) -> int | None:
    reply = params.get("reply_parameters")
    if isinstance(reply, str):
        reply = json.loads(reply)
    if isinstance(reply, dict) and "message_id" in reply:
        return int(reply["message_id"])
    legacy = params.get("reply_to_message_id")
    return int(legacy) if legacy is not None else None


class Standins:
    def __init__(self) -> None:
        self.media = MediaServer()
        self.fx = FxApiServer()
        self.api = BotApiServer(allow_url_fetch_from_loopback=True, max_records=1_000_000)
        self.injected: dict[tuple[int, int], float] = {}
        self.start_api: BotApiServer | None = None
        self.intake: float | None = None  # seconds until the last injection was confirmed

    def start(self, posts: int) -> dict[str, Any]:
        for server in (self.media, self.fx, self.api):
            server.start_sync()
        photo = tiny_jpeg()
        for i in range(posts):
            url = self.media.add(f"/media/p{i}.jpg", photo, "image/jpeg")
            self.fx.add_post(
                POST_BASE + i, author=("Bench", "bench"), text=f"post {i}", photos=[url]
            )
        return {"botapi": self.api.url, "fx": self.fx.url, "token": self.api.token}

    def inject(self, messages: list[list[Any]], rate: float) -> dict[str, Any]:
        """Post the users' messages; open loop at `rate` per second when it is positive."""
        began = time.monotonic()
        for n, (chat, text) in enumerate(messages):
            if rate > 0:
                due = began + n / rate
                pause = due - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
            at = time.monotonic()
            update = self.api.user_message(int(chat), str(text))
            self.injected[(int(chat), update["message"]["message_id"])] = at
        self.intake = None
        threading.Thread(target=self._watch_intake, args=(began,), daemon=True).start()
        return {"injected": len(messages), "seconds": time.monotonic() - began}

    def _watch_intake(self, began: float) -> None:
        """From the first injection until a getUpdates confirmed every update (5 ms grain)."""
        deadline = began + 600
        while self.api.pending_updates and time.monotonic() < deadline:
            time.sleep(0.005)
        self.intake = time.monotonic() - began

    def report(self, chats: list[int]) -> dict[str, Any]:
        """Per injected message in `chats`: did media answer it, once, and how fast.

        Latency is the first successful media call's arrival minus the injection.
        """
        wanted = set(chats)
        first: dict[tuple[int, int], float] = {}
        answers: dict[tuple[int, int], int] = {}
        methods: dict[str, int] = {}
        sources = {"file_id": 0, "url": 0, "upload": 0}
        errors = 0
        for call in self.api.calls:
            if call.chat_id not in wanted:
                continue
            methods[call.method] = methods.get(call.method, 0) + 1
            if call.method not in SEND_MEDIA:
                continue
            if call.status != 200:
                errors += 1
                continue
            reply = _reply_to(call.params)
            if reply is None:
                continue
            key = (call.chat_id, reply)
            answers[key] = answers.get(key, 0) + 1
            first.setdefault(key, call.at)
            if call.files:
                sources["upload"] += 1
            elif str(call.params.get("photo", "")).startswith("http"):
                sources["url"] += 1
            else:
                sources["file_id"] += 1
        mine = {k: at for k, at in self.injected.items() if k[0] in wanted}
        latencies = [first[k] - at for k, at in mine.items() if k in first]
        return {
            "injected": len(mine),
            "delivered": sum(1 for k in mine if k in first),
            "duplicates": sum(1 for k in mine if answers.get(k, 0) > 1),
            "errors": errors,
            "methods": methods,
            "sources": sources,
            "latencies": latencies,
            "last_answer": max(first.values(), default=0.0),
            "intake": self.intake,
            "media_hits": sum(n for p, n in self.media.hits.items() if p.startswith("/media/")),
            "fx_hits": sum(self.fx.hits.values()),
        }

    def start_poll_target(self) -> dict[str, Any]:
        """A fresh Bot API with one update waiting, so the first getUpdates answers at once."""
        self.stop_poll_target()
        api = BotApiServer().start_sync()
        api.user_message(1, "hello")  # no link: the bot reads it and does nothing
        self.start_api = api
        return {"botapi": api.url, "token": api.token}

    def first_poll(self, timeout: float) -> dict[str, Any]:
        api = self.start_api
        assert api is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            polls = api.calls_for("getUpdates")
            if polls:
                return {"at": polls[0].at, "methods": [c.method for c in api.calls]}
            time.sleep(0.002)
        return {"at": None, "methods": [c.method for c in api.calls]}

    def stop_poll_target(self) -> dict[str, Any]:
        if self.start_api is not None:
            self.start_api.stop_sync()
            self.start_api = None
        return {}

    def stop(self) -> None:
        self.stop_poll_target()
        for server in (self.api, self.fx, self.media):
            server.stop_sync()


def main() -> None:
    logging.basicConfig(level=logging.CRITICAL)
    standins = Standins()
    out = sys.stdout
    try:
        for line in sys.stdin:
            cmd = json.loads(line)
            op = cmd["op"]
            if op == "start":
                answer = standins.start(int(cmd["posts"]))
            elif op == "inject":
                answer = standins.inject(cmd["messages"], float(cmd.get("rate", 0)))
            elif op == "report":
                answer = standins.report([int(c) for c in cmd["chats"]])
            elif op == "start_api":
                answer = standins.start_poll_target()
            elif op == "first_poll":
                answer = standins.first_poll(float(cmd.get("within", 10)))
            elif op == "stop_api":
                answer = standins.stop_poll_target()
            elif op == "quit":
                break
            else:
                answer = {"error": f"unknown op {op!r}"}
            out.write(json.dumps(answer) + "\n")
            out.flush()
    finally:
        standins.stop()


if __name__ == "__main__":
    main()
