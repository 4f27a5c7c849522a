"""Inline mode: the time from an inline query to its answer, for a fresh and a cached post.

    .venv/bin/python bench/inline_latency.py [--posts 15]

The real bot against the stand-ins in one process (`standins.harness`).
For each post: ``@bot <link>`` while nothing is known (a fresh fetch from the
fxtwitter stand-in, answered with URL results), then the link in a private
chat (which fills the link cache), then ``@bot <link>`` again (answered by
``file_id``). The latency is the Bot API stand-in's: from the injection of the
``inline_query`` update to the arrival of ``answerInlineQuery`` (the bot's long
poll, the lookup and the answer). Telegram allows about 10 s.
Prints one line per case: ``inline <case>: p50 X ms, max Y ms, n=N``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
from pathlib import Path

from standins.harness import Harness

CHAT = 4242


async def _ask(h: Harness, user: int, link: str) -> tuple[float, str]:
    query_id = h.api.inline_query(user, link)["inline_query"]["id"]
    await h.api.wait_for(lambda: h.api.inline_answer(query_id) is not None, 10)
    answer = h.api.inline_answer(query_id)
    assert answer is not None
    return answer.latency, "photo_file_id" if "photo_file_id" in answer.results[0] else "photo_url"


async def run(posts: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"fresh": [], "cached": []}
    with tempfile.TemporaryDirectory(prefix="xbot-bench-") as tmp:
        h = await Harness.start(Path(tmp))
        h.api.set_inline_mode(True)
        try:
            for i in range(posts):
                post_id = str(1790000000000100000 + i)
                link = f"https://x.com/a/status/{post_id}"
                h.fx.add_post(
                    post_id, text=f"post {i}", photos=[h.photo(f"b{i}a"), h.photo(f"b{i}b")]
                )
                latency, by = await _ask(h, 42, link)
                assert by == "photo_url"
                out["fresh"].append(latency)
                before = len(h.sent(CHAT))
                h.api.user_message(CHAT, link)
                await h.api.wait_for(lambda n=before: len(h.sent(CHAT)) >= n + 2, 10)
                await h.wait_idle()
                latency, by = await _ask(h, 43, link)
                assert by == "photo_file_id"
                out["cached"].append(latency)
        finally:
            await h.stop()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--posts", type=int, default=15)
    args = parser.parse_args()
    for case, seconds in asyncio.run(run(args.posts)).items():
        ms = sorted(s * 1000 for s in seconds)
        print(
            f"inline {case}: p50 {statistics.median(ms):.1f} ms, max {ms[-1]:.1f} ms, n={len(ms)}"
        )


if __name__ == "__main__":
    main()
