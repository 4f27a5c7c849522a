"""The long-text split (`xbot.sending.caption_long`): CPU time per post, by text length.

A worker splits a long post's text on every delivery, cache hits included (the
messages are rebuilt from the caption parts), so the split must stay cheap next to the
Bot API calls it leads to. Prints a Markdown table for docs/benchmarks.md.

    .venv/bin/python bench/long_text_bench.py
"""

from __future__ import annotations

import time

from xbot.media.models import RichText, TextSpan
from xbot.sending.caption_long import piece_html, split_text

SENTENCE = "Every lease carries a token, and every write is fenced by it. "


def _text(n: int) -> RichText:
    paragraphs: list[str] = []
    size = 0
    while size < n:
        paragraphs.append(SENTENCE * 5)
        size += len(paragraphs[-1]) + 2
    text = "\n\n".join(paragraphs)[:n]
    # A link every 500 characters, as an article has them.
    spans = tuple(
        TextSpan("text_link", i, 20, "https://example.com/") for i in range(0, n - 20, 500)
    )
    return RichText(text, spans)


def main() -> None:
    print("| text (characters) | messages | split + HTML, ms per post (median of 21) |")
    print("| --- | --- | --- |")
    for n in (3_000, 25_000, 100_000):
        rich = _text(n)
        times = []
        pieces = []
        for _ in range(21):
            start = time.perf_counter()
            pieces = split_text(rich)
            for piece in pieces:
                piece_html(piece)
            times.append(time.perf_counter() - start)
        times.sort()
        print(f"| {n:,} | {len(pieces)} | {times[len(times) // 2] * 1000:.2f} |")


if __name__ == "__main__":
    main()
