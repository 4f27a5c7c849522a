"""`xbot demo`: the real bot, offline, against the project's own stand-ins.

A short scripted conversation — a photo post, a video post, a 4-item album,
the same link again (answered from the cache), a deleted post, and the album
asked for inline (``@bot <link>``) — printed as a readable transcript. No
token, no network: everything is on 127.0.0.1.
"""

from __future__ import annotations

import html
import logging
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, TextIO

from xbot.logs import setup_logging
from xbot.testing.harness import Harness

CHAT = 4242
USER = "Ann"


def _plain(caption: str) -> str:
    """The caption as a person reads it (tags dropped, entities unescaped)."""
    return html.unescape(re.sub(r"<[^>]+>", "", caption))


def describe(message: dict[str, Any]) -> str:
    """One line (or a few) per message the bot sent."""
    if "text" in message:
        return _plain(message["text"])
    for kind in ("photo", "video", "animation", "document"):
        if kind in message:
            media = message[kind]
            size = media[-1].get("file_size") if isinstance(media, list) else media.get("file_size")
            label = f"[{kind}{f', {_size(size)}' if size else ''}]"
            caption = message.get("caption")
            return f"{label} {_plain(caption)}" if caption else label
    return "[message]"


def _size(n: int) -> str:
    return f"{n} bytes" if n < 1024 else f"{n // 1024} KB"


class Transcript:
    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.seen = 0

    def say(self, who: str, text: str) -> None:
        lines = text.splitlines() or [""]
        self.out.write(f"{who:>6} │ {lines[0]}\n")
        for line in lines[1:]:
            self.out.write(f"{'':>6} │ {line}\n")

    def note(self, text: str) -> None:
        self.out.write(f"{'':>6} ┆ ({text})\n")

    def bot_replies(self, harness: Harness) -> None:
        sent = harness.sent(CHAT)
        group = None
        for message in sent[self.seen :]:
            album = message.get("media_group_id")
            if album and album == group:
                self.say("", describe(message))
            else:
                self.say("xbot", describe(message))
            group = album
        self.seen = len(sent)


async def _step(harness: Harness, t: Transcript, text: str, note: str | None = None) -> None:
    t.say(USER, text)
    before = len(harness.sent(CHAT))
    hits = harness.media_hits()
    harness.api.user_message(CHAT, text, first_name=USER)
    await harness.api.wait_for(lambda: len(harness.sent(CHAT)) > before, 15.0)
    await harness.wait_idle(15.0)
    t.bot_replies(harness)
    downloads = harness.media_hits() - hits
    if note:
        t.note(note.format(downloads=downloads))


async def _inline_step(harness: Harness, t: Transcript, link: str) -> None:
    """Ann types ``@bot <link>`` in some other chat; the answer Telegram shows her."""
    api = harness.api
    t.say(USER, f"@{api.bot_user['username']} {link}   (inline, in another chat)")
    query = api.inline_query(CHAT, link, chat_type="group", first_name=USER)["inline_query"]
    await api.wait_for(lambda: api.inline_answer(query["id"]) is not None, 10.0)
    answer = api.inline_answer(query["id"])
    assert answer is not None
    kinds = ", ".join(r["type"] for r in answer.results) or "no results"
    t.say("xbot", f"{len(answer.results)} inline results: {kinds}")
    if answer.button:
        t.say("", f"[button: {answer.button['text']}]")
    t.note(f"answered in {answer.latency * 1000:.0f} ms; Telegram allows about 10 s")


async def run_demo(*, verbose: bool = False, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    if verbose:
        setup_logging("INFO")
    else:
        logging.getLogger().setLevel(logging.CRITICAL)
    with tempfile.TemporaryDirectory(prefix="xbot-demo-") as tmp:
        harness = await Harness.start(Path(tmp))
        try:
            fx = harness.fx
            fx.add_post(
                "1790000000000000001",
                author=("NASA", "NASA"),
                text="The Moon, as seen from the ISS this morning. 🌕",
                photos=[harness.photo("moon")],
            )
            fx.add_post(
                "1790000000000000002",
                author=("Cats of X", "catsofx"),
                text="He did NOT expect that.",
                videos=[harness.video("cat", 256 * 1024)],
            )
            fx.add_post(
                "1790000000000000003",
                author=("Trail Notes", "trailnotes"),
                text="Four days on the ridge, four pictures.",
                photos=[harness.photo(f"ridge{i}") for i in range(4)],
            )
            fx.add_post("1790000000000000004", author=("Gone", "gone"), text="", deleted=True)

            t = Transcript(out)
            out.write("xbot demo — the real bot against local stand-ins (no token, no network)\n\n")
            started = time.monotonic()
            await _step(harness, t, "https://x.com/NASA/status/1790000000000000001")
            await _step(harness, t, "https://twitter.com/catsofx/status/1790000000000000002?s=20")
            await _step(
                harness, t, "look: https://fxtwitter.com/trailnotes/status/1790000000000000003"
            )
            await _step(
                harness,
                t,
                "again: https://vxtwitter.com/NASA/status/1790000000000000001",
                "answered from the link cache: {downloads} downloads, one Bot API call",
            )
            await _step(harness, t, "https://x.com/gone/status/1790000000000000004")
            harness.api.set_inline_mode(True)  # BotFather's /setinline
            await _inline_step(harness, t, "https://x.com/trailnotes/status/1790000000000000003")
            out.write(
                f"\n{len(harness.api.calls)} Bot API calls, "
                f"{harness.media_hits()} media downloads, "
                f"{time.monotonic() - started:.1f} s\n"
            )
        finally:
            await harness.stop()
    return 0
