"""`xbot demo`: the real bot, offline, against the project's own stand-ins.

A short scripted conversation — a photo post, a video post, a 4-item album,
the same link again (answered from the cache), a post quoting another one's
photo, a 45-second 1080p video that goes out as the 720p version that fits,
a link while the fxtwitter API is down (answered by the next source), a
deleted post, a Bluesky post, a pixiv work, a Mastodon post with three
pictures (through gallery-dl, run as a process), the album asked for inline
(``@bot <link>``), and a second user whose Telegram is in German — printed
as a readable transcript. No token, no network: everything is on 127.0.0.1.
"""

from __future__ import annotations

import html
import json
import logging
import re
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from standins.fxapi import X_LADDER, x_formats
from standins.gallery_sites import MastodonServer, gallerydl_config
from standins.harness import Harness
from xbot.logs import setup_logging
from xbot.media.models import MediaItem, Variant
from xbot.sending import video_choice
from xbot.sources.x import SourceChain

CHAT = 4242
USER = "Ann"
# The second user: her Telegram app is in German, so the bot answers her in German.
CHAT_DE, USER_DE, LANGUAGE_DE = 4343, "Lena", "de"


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


def _answered_by(harness: Harness) -> str:
    chain = harness.services.sources.by_kind.get("x")
    return chain.last_answer if isinstance(chain, SourceChain) else "?"


def _size(n: int) -> str:
    return f"{n} bytes" if n < 1024 else f"{n // 1024} KB"


class Transcript:
    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.seen: dict[int, int] = {}

    def say(self, who: str, text: str) -> None:
        lines = text.splitlines() or [""]
        self.out.write(f"{who:>6} │ {lines[0]}\n")
        for line in lines[1:]:
            self.out.write(f"{'':>6} │ {line}\n")

    def note(self, text: str) -> None:
        self.out.write(f"{'':>6} ┆ ({text})\n")

    def bot_replies(self, harness: Harness, chat: int = CHAT) -> None:
        sent = harness.sent(chat)
        group = None
        for message in sent[self.seen.get(chat, 0) :]:
            album = message.get("media_group_id")
            if album and album == group:
                self.say("", describe(message))
            else:
                self.say("xbot", describe(message))
            group = album
        self.seen[chat] = len(sent)


async def _step(
    harness: Harness,
    t: Transcript,
    text: str,
    note: str | None = None,
    sent: Callable[[], str] | None = None,
    *,
    chat: int = CHAT,
    user: str = USER,
    language_code: str = "en",
) -> None:
    t.say(user, text)
    before = len(harness.sent(chat))
    hits = harness.media_hits()
    harness.api.user_message(chat, text, first_name=user, language_code=language_code)
    await harness.api.wait_for(lambda: len(harness.sent(chat)) > before, 15.0)
    await harness.wait_idle(15.0)
    t.bot_replies(harness, chat)
    downloads = harness.media_hits() - hits
    if note:
        t.note(note.format(downloads=downloads, sent=sent() if sent else "sent"))


def _video_note(urls: list[str], duration: float, upload_limit: int) -> str:
    """What the bot decided for the demo's long video, in words (from the same pure choice)."""
    variants = tuple(
        Variant(url, "mp4", "h264", bitrate)
        for url, (bitrate, _) in zip(urls, X_LADDER, strict=True)
    )
    item = MediaItem("video", urls[-1], variants=variants, duration=duration)
    best = video_choice.estimate(variants[-1], duration) or 0
    pick = video_choice.choose(item, upload_limit=upload_limit)
    assert pick is not None
    dims = dict(zip(urls, (dim for _, dim in X_LADDER), strict=True))
    how = "Telegram fetches it by URL" if pick.path == "url" else "uploaded"
    return (
        f"1920x1080 would be ~{best // 2**20} MB, over the {upload_limit // 2**20} MB upload "
        f"limit; {{sent}} {dims[pick.variant.url]} (~{(pick.estimate or 0) // 2**20} MB): {how}"
    )


def _sent_video(harness: Harness, urls: list[str]) -> str:
    """ "sent" when the bot's last sendVideo carried the chosen URL, else what it did send."""
    calls = [c for c in harness.api.calls if c.method == "sendVideo" and c.status == 200]
    sent = calls[-1].params.get("video") if calls else None
    return "sent" if sent in urls else f"sent something else ({sent!r}) than"


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


async def _mastodon(tmp: Path) -> tuple[MastodonServer, Path]:
    """A Mastodon instance with one post, and the gallery-dl config that names it
    (an extra instance, as an operator's ``XBOT_GALLERYDL_CONFIG`` would)."""
    masto = await MastodonServer().start()
    masto.add_status(
        "113500000000000042", photos=3, name="Town Gardens", acct="gardens",
        content="<p>Three pictures from the spring show 🌷</p>",
    )  # fmt: skip
    config = tmp / "gallery-dl.json"
    config.write_text(json.dumps(gallerydl_config(masto)), encoding="utf-8")
    return masto, config


async def run_demo(*, verbose: bool = False, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    if verbose:
        setup_logging("INFO")
    else:
        logging.getLogger().setLevel(logging.CRITICAL)
    with tempfile.TemporaryDirectory(prefix="xbot-demo-") as tmp:
        masto, config = await _mastodon(Path(tmp))
        harness = await Harness.start(Path(tmp) / "data", x_sources=True, gallerydl_config=config)
        try:
            fx = harness.fx
            harness.add_post(
                "1790000000000000001",
                author=("NASA", "NASA"),
                text="The Moon, as seen from the ISS this morning. 🌕",
                photos=[harness.photo("moon")],
            )
            harness.add_post(
                "1790000000000000002",
                author=("Cats of X", "catsofx"),
                text="He did NOT expect that.",
                videos=[harness.video("cat", 256 * 1024)],
            )
            harness.add_post(
                "1790000000000000003",
                author=("Trail Notes", "trailnotes"),
                text="Four days on the ridge, four pictures.",
                photos=[harness.photo(f"ridge{i}") for i in range(4)],
            )
            fx.add_post("1790000000000000004", author=("Gone", "gone"), text="", deleted=True)
            quoted = fx.add_post(
                "1790000000000000005",
                author=("Bird Watch", "birdwatch"),
                text="A kingfisher, at last.",
                photos=[harness.photo("kingfisher")],
            )
            fx.add_post(
                "1790000000000000006",
                author=("Ann's friend", "annsfriend"),
                text="This is the best bird picture of the year.",
                quote=quoted,
            )
            rungs = [harness.video(f"launch{dim}") for _, dim in X_LADDER]
            fx.add_post(
                "1790000000000000007",
                author=("Launch Desk", "launchdesk"),
                text="Liftoff, 45 seconds of it.",
                videos=[{"url": rungs[-1], "duration": 45.0, "formats": x_formats(rungs)}],
            )
            harness.add_post(
                "1790000000000000008",
                author=("Harbour Cam", "harbourcam"),
                text="Fog rolling in at 7:02.",
                photos=[harness.photo("fog")],
            )
            harness.bsky.add_post(
                "sky.example.com", "3lbdemo2024ab", name="Sky Watcher",
                text="Two shots of tonight's aurora.",
                images=[harness.photo("aurora1"), harness.photo("aurora2")],
            )  # fmt: skip
            harness.pixiv.add_work(
                "120000777", title="港の朝", user=("Mika", "4338012", "mika_draws"),
                tags=["オリジナル", "風景"],
            )  # fmt: skip

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
            await _step(
                harness,
                t,
                "https://x.com/annsfriend/status/1790000000000000006",
                "a post with no media of its own: the quoted post's photo, both authors named",
            )
            await _step(
                harness,
                t,
                "https://x.com/launchdesk/status/1790000000000000007",
                _video_note(rungs, 45.0, harness.settings.upload_limit),
                sent=lambda: _sent_video(harness, rungs),
            )
            fx.set_fault("503")  # every request: 503 UPSTREAM_UNAVAILABLE
            t.note("the fxtwitter API goes down: 503 UPSTREAM_UNAVAILABLE on every request")
            await _step(harness, t, "https://x.com/harbourcam/status/1790000000000000008")
            t.note(f"answered by {_answered_by(harness)}, in the same attempt; nothing waited")
            fx.set_fault(None)
            await _step(harness, t, "https://x.com/gone/status/1790000000000000004")
            await _step(harness, t, "https://bsky.app/profile/sky.example.com/post/3lbdemo2024ab")
            await _step(
                harness, t, "https://www.pixiv.net/en/artworks/120000777",
                "pixiv's image host wants its Referer: downloaded with it, then uploaded",
            )  # fmt: skip
            await _step(
                harness, t, masto.status_url("113500000000000042", "gardens"),
                "gallery-dl (a separate process) read the post; the bot downloaded the three "
                "files itself, through its network guard",
            )  # fmt: skip
            harness.api.set_inline_mode(True)  # BotFather's /setinline
            await _inline_step(harness, t, "https://x.com/trailnotes/status/1790000000000000003")
            out.write("\n")
            t.note(f"{USER_DE}'s Telegram is in German ({LANGUAGE_DE}): the bot answers in German")
            await _step(harness, t, "/start", chat=CHAT_DE, user=USER_DE, language_code=LANGUAGE_DE)
            out.write(
                f"\n{len(harness.api.calls)} Bot API calls, "
                f"{harness.media_hits()} media downloads, "
                f"{time.monotonic() - started:.1f} s\n"
            )
        finally:
            await harness.stop()
            await masto.stop()
    return 0
