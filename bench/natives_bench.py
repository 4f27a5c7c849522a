"""Link to media for Bluesky and pixiv, through the real bot against the stand-ins.

    .venv/bin/python bench/natives_bench.py [--runs 5]

For each link form and post kind: the time from the update's injection into
the Bot API stand-in to the arrival of the bot's last answer (the last album,
or the sentence), median and worst of `--runs` fresh posts, plus the same link
again from another chat (a cache hit for media; answers are not cached).
Everything on 127.0.0.1 with no added latency, in one process (the stand-ins
share its cores with the bot): what it measures is the bot's own path, not the real sites'.
Prints a markdown table. Not a timed test: nothing asserts on these numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from standins.harness import Harness
from standins.media_server import fake_mp4

ANSWERS = ("sendPhoto", "sendVideo", "sendDocument", "sendMediaGroup", "sendMessage")


async def _time_link(h: Harness, chat: int, link: str) -> float:
    started = time.monotonic()
    h.api.user_message(chat, link)
    await h.api.wait_for(
        lambda: any(c.chat_id == chat and c.method in ANSWERS and c.status == 200
                    for c in h.api.calls), 30)  # fmt: skip
    await h.wait_idle(30)
    arrived = max(c.at for c in h.api.calls
                  if c.chat_id == chat and c.method in ANSWERS and c.status == 200)  # fmt: skip
    return arrived - started


Case = tuple[str, Callable[[Harness, int], str]]


def _cases() -> list[Case]:
    def bsky_photos(h: Harness, n: int) -> str:
        h.bsky.add_post("a.bsky.social", f"3lbphoto{n:05d}", text="two",
                        images=[h.photo(f"bp{n}a"), h.photo(f"bp{n}b")])  # fmt: skip
        return f"https://bsky.app/profile/a.bsky.social/post/3lbphoto{n:05d}"

    def bsky_video(h: Harness, n: int) -> str:
        h.bsky.add_post("a.bsky.social", f"3lbvideo{n:05d}", text="clip",
                        video=fake_mp4(512 * 1024 + n))  # fmt: skip
        return f"https://fxbsky.app/profile/a.bsky.social/post/3lbvideo{n:05d}"

    def bsky_text(h: Harness, n: int) -> str:
        h.bsky.add_post("a.bsky.social", f"3lbtext0{n:05d}", text="words only")
        return f"https://bsky.app/profile/a.bsky.social/post/3lbtext0{n:05d}"

    def bsky_deleted(h: Harness, n: int) -> str:
        h.bsky.add_deleted("a.bsky.social", f"3lbgone0{n:05d}")
        return f"https://bsky.app/profile/a.bsky.social/post/3lbgone0{n:05d}"

    def pixiv_one(h: Harness, n: int) -> str:
        h.pixiv.add_work(f"1300{n:05d}")
        return f"https://www.pixiv.net/en/artworks/1300{n:05d}"

    def pixiv_forty(h: Harness, n: int) -> str:
        h.pixiv.add_work(f"1400{n:05d}", pages=40)
        return f"https://phixiv.net/artworks/1400{n:05d}"

    def pixiv_big(h: Harness, n: int) -> str:
        h.pixiv.add_work(f"1500{n:05d}", big_originals=True)
        return f"https://www.pixiv.net/artworks/1500{n:05d}"

    def pixiv_ugoira(h: Harness, n: int) -> str:
        h.pixiv.add_work(f"1600{n:05d}", illust_type=2)
        return f"https://www.pixiv.net/member_illust.php?illust_id=1600{n:05d}"

    return [
        ("Bluesky, 2 photos (handle link)", bsky_photos),
        ("Bluesky, video from the PDS (fxbsky mirror)", bsky_video),
        ("Bluesky, text only", bsky_text),
        ("Bluesky, deleted (a sentence)", bsky_deleted),
        ("pixiv, 1 page", pixiv_one),
        ("pixiv, 40 pages (4 albums)", pixiv_forty),
        ("pixiv, 11 MB original (regular sent)", pixiv_big),
        ("pixiv, ugoira (a sentence)", pixiv_ugoira),
    ]


async def main(runs: int) -> None:
    logging.getLogger().setLevel(logging.CRITICAL)
    with tempfile.TemporaryDirectory(prefix="xbot-natives-") as tmp:
        h = await Harness.start(Path(tmp))
        try:
            print("| link form, post kind | fresh p50 ms | fresh max ms | again p50 ms |")
            print("| --- | ---: | ---: | ---: |")
            chat = 10_000
            for label, make in _cases():
                fresh, cached = [], []
                for n in range(runs):
                    link = make(h, n)
                    chat += 2
                    fresh.append(await _time_link(h, chat, link))
                    cached.append(await _time_link(h, chat + 1, link))
                p50, worst = statistics.median(fresh), max(fresh)
                again = statistics.median(cached)
                print(f"| {label} | {1000 * p50:.0f} | {1000 * worst:.0f} | {1000 * again:.0f} |")
        finally:
            await h.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    asyncio.run(main(parser.parse_args().runs))
