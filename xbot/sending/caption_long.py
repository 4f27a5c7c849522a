"""Long texts: a post's whole text as messages of their own, after its media. Pure.

A caption holds 1024 characters; X allows posts of 25,000 and articles are longer.
When the full caption would cut the post's own text (`needs_long_text`), the media
keep a short caption (author, the start of the text, what X shows with it, the
link: `build_caption(lead=True)`) and the whole text follows as text messages in
reply to the media (`long_messages`). A post without media does the same with a
short first message instead of the media.

`split_text` cuts a `RichText` into pieces that each fit a message (4096 UTF-16 code
units of visible text, as Telegram counts), preferring, within the last half of a
message's room, a paragraph break, then a line break, then a sentence's end, then a
space, and only then any place that splits no character (surrogate pairs, joined
emoji, combining marks). It never cuts inside a formatting span unless the span
alone is longer than a message: then each piece keeps its part of it. A piece holds
at most `SPAN_ROOM` spans: Telegram keeps a message's first 100 entities and drops the
rest without a word (the blockquote is one). The pieces are slices of the text; only
the whitespace at each cut is dropped (Telegram trims a message's text anyway).

Each piece goes as HTML (`piece_html`) inside an expandable blockquote
(``<blockquote expandable>``, Bot API 7.4's ``expandable_blockquote`` entity): the
chat shows about three lines of each and the reader taps to open it, so a post of
twenty thousand characters does not push the conversation off the screen, while the
text itself is whole and searchable. Formatting spans nest inside it (blockquotes
cannot nest in Telegram, and the post's text holds none).
"""

from __future__ import annotations

import bisect
import html
import itertools
from collections.abc import Sequence

import attrs

from xbot.i18n import DEFAULT
from xbot.media.models import Post, RichText, TextSpan
from xbot.sending.caption import (
    CAPTION_LIMIT,
    TEXT_LIMIT,
    CaptionStyle,
    clean_text,
    splits_grapheme,
    text_fits,
)

__all__ = [
    "SPAN_ROOM",
    "Piece",
    "long_messages",
    "long_text",
    "needs_long_text",
    "piece_html",
    "split_text",
]

# Telegram keeps 100 entities of a message; one is the expandable blockquote.
SPAN_ROOM = 99
# Where a cut may fall, best first.
_PARAGRAPH, _LINE, _SENTENCE, _SPACE, _ANYWHERE = range(5)
_ENDS = frozenset(".!?…;")
_ENDS_UNSPACED = frozenset("。！？؟۔")  # CJK and Arabic-script enders need no space after
_CLOSERS = frozenset("\"'”’»)]")
_TAGS = {
    "bold": ("<b>", "</b>"),
    "italic": ("<i>", "</i>"),
    "underline": ("<u>", "</u>"),
    "strikethrough": ("<s>", "</s>"),
    "code": ("<code>", "</code>"),
}


@attrs.frozen
class Piece:
    """One message's share of a long text.

    Attributes:
        text: a slice of the whole text (whitespace at the cuts dropped).
        spans: the formatting over it, offsets relative to this piece (UTF-16).
        start: where the slice begins in the whole text (UTF-16 offset).
    """

    text: str
    spans: tuple[TextSpan, ...]
    start: int


def _offsets(text: str) -> list[int]:
    """UTF-16 offset before each code point, and the total at the end."""
    out = [0] * (len(text) + 1)
    n = 0
    for i, ch in enumerate(text):
        out[i] = n
        n += 2 if ord(ch) > 0xFFFF else 1
    out[len(text)] = n
    return out


def _index(u16: list[int], offset: int, *, up: bool) -> int:
    """The code point index at a UTF-16 offset (one inside a pair rounds down or up)."""
    i = bisect.bisect_left(u16, offset)
    if i < len(u16) and u16[i] == offset:
        return i
    return min(i, len(u16) - 1) if up else max(0, i - 1)


def _tier(text: str, p: int) -> int:
    """How good a cut before ``text[p]`` is (`_PARAGRAPH` best)."""
    before = text[p - 1]
    if before == "\n":
        return _PARAGRAPH if p >= 2 and text[p - 2] == "\n" else _LINE
    if before in _ENDS_UNSPACED:
        return _SENTENCE
    if before.isspace():
        k = p - 2
        while k >= 0 and text[k] in _CLOSERS:
            k -= 1
        return _SENTENCE if k >= 0 and text[k] in _ENDS else _SPACE
    return _ANYWHERE


def _cut(
    text: str,
    u16: list[int],
    inside: tuple[list[int], list[int]],
    *,
    span: tuple[int, int],
    room: int,
) -> int:
    """Where the piece that begins at `start` ends: a cut in ``(start, end]``.

    The best kind of place in the last half of the room; else the best anywhere in
    it. A cut inside a span only when no other place exists: first inside spans too
    long for any message (they are cut anyway), last inside one that would fit.
    """
    fitting, longer = inside
    start, end = span
    half = u16[start] + room // 2
    tables: list[list[int | None]] = [[None] * 5 for _ in range(3)]
    clean = tables[0]
    for p in range(end, start, -1):
        if u16[p] < half and any(found is not None for found in clean):
            break  # a clean place in the last half wins over anything before it
        if p < len(text) and splits_grapheme(text, p):
            continue
        table = tables[2 if fitting[p] else 1 if longer[p] else 0]
        tier = _tier(text, p)
        if tier == _PARAGRAPH and table is clean and u16[p] >= half:
            return p  # the last paragraph break in the last half: nothing is better
        if table[tier] is None:
            table[tier] = p
    for table in tables:
        for found in table:
            if found is not None and u16[found] >= half:
                return found
        for found in table:
            if found is not None:
                return found
    return end  # every place in reach splits a character: the room ends it


def _inside(n: int, ranges: Sequence[tuple[int, int]]) -> list[int]:
    """For each cut position p (before ``text[p]``), how many ranges it falls inside."""
    depth = [0] * (n + 2)
    for a, b in ranges:
        depth[a + 1] += 1
        depth[b] -= 1
    out = [0] * (n + 1)
    running = 0
    for p in range(n + 1):
        running += depth[p]
        out[p] = running
    return out


def split_text(
    rich: RichText, limit: int = TEXT_LIMIT, *, max_spans: int = SPAN_ROOM
) -> list[Piece]:
    """`rich` cut into pieces of at most `limit` UTF-16 units and `max_spans` spans each
    (see the module)."""
    if limit < 2:
        raise ValueError(f"a piece needs room for a surrogate pair, got {limit}")
    text = rich.text
    u16 = _offsets(text)
    n = len(text)
    spans = []
    for span in rich.spans:
        a = _index(u16, max(0, span.offset), up=False)
        b = _index(u16, min(u16[n], span.offset + span.length), up=True)
        if a < b:
            spans.append((a, b, span))
    # Where a cut would break a span that fits a message, and one that fits none.
    fits = [(a, b) for a, b, span in spans if span.length <= limit]
    longer = [(a, b) for a, b, span in spans if span.length > limit]
    inside = (_inside(n, fits), _inside(n, longer))
    starts = sorted(a for a, _, _ in spans)
    pieces: list[Piece] = []
    start = _skip_space(text, 0)
    while start < n:
        end = (
            n if u16[n] - u16[start] <= limit else bisect.bisect_right(u16, u16[start] + limit) - 1
        )
        end = _span_bound(spans, starts, start, end, max_spans)
        cut = n if end == n else _cut(text, u16, inside, span=(start, end), room=limit)
        stop = cut
        while stop > start and text[stop - 1].isspace():
            stop -= 1
        pieces.append(_piece(text, u16, spans, start, stop))
        start = _skip_space(text, cut)
    return pieces


def _span_bound(
    spans: Sequence[tuple[int, int, TextSpan]], starts: list[int], start: int, end: int, most: int
) -> int:
    """`end`, or earlier: where the piece from `start` would take in more than `most` spans
    (the start of the first span too many; those open at `start` count as well)."""
    open_at_start = sum(1 for a, b, _ in spans if a < start < b)
    first = bisect.bisect_left(starts, start)
    room = most - open_at_start
    if room < 0 or first + room >= len(starts):
        return end
    bound = starts[first + room]
    return min(end, bound) if bound > start else end


def _skip_space(text: str, i: int) -> int:
    while i < len(text) and text[i].isspace():
        i += 1
    return i


def _piece(
    text: str, u16: list[int], spans: Sequence[tuple[int, int, TextSpan]], start: int, stop: int
) -> Piece:
    base = u16[start]
    own = []
    for a, b, span in spans:
        lo, hi = max(a, start), min(b, stop)
        if lo < hi:
            own.append(attrs.evolve(span, offset=u16[lo] - base, length=u16[hi] - u16[lo]))
    return Piece(text[start:stop], tuple(own), base)


def _open(span: TextSpan) -> str:
    if span.kind == "text_link":
        return f'<a href="{html.escape(span.url, quote=True)}">'
    return _TAGS[span.kind][0]


def _close(span: TextSpan) -> str:
    return "</a>" if span.kind == "text_link" else _TAGS[span.kind][1]


def piece_html(piece: Piece, *, expandable: bool = True) -> str:
    """The piece in Telegram's HTML: its spans as tags (overlapping ones closed and
    opened again, so the markup always nests), inside an expandable blockquote."""
    text = piece.text
    u16 = _offsets(text)
    spans = []
    for span in piece.spans:
        a = _index(u16, span.offset, up=False)
        b = _index(u16, span.offset + span.length, up=True)
        if a < b:
            spans.append((a, b, span))
    cuts = sorted({0, len(text), *(a for a, _, _ in spans), *(b for _, b, _ in spans)})
    out: list[str] = []
    stack: list[tuple[int, int, TextSpan]] = []
    for lo, hi in itertools.pairwise(cuts):
        # The spans over this stretch, outermost first (the longest of those that open first).
        active = sorted(
            (s for s in spans if s[0] <= lo and hi <= s[1]), key=lambda s: (s[0], -s[1])
        )
        keep = 0
        while keep < len(stack) and keep < len(active) and stack[keep] == active[keep]:
            keep += 1
        out.extend(_close(s[2]) for s in reversed(stack[keep:]))
        out.extend(_open(s[2]) for s in active[keep:])
        stack = active
        out.append(html.escape(text[lo:hi], quote=False))
    out.extend(_close(s[2]) for s in reversed(stack))
    body = "".join(out)
    return f"<blockquote expandable>{body}</blockquote>" if expandable else body


def long_text(post: Post) -> RichText:
    """What goes as messages of their own: an X article's body, else the post's text."""
    if post.article_body is not None and post.article_body.text.strip():
        return post.article_body
    return RichText(clean_text(post.text))


def needs_long_text(
    post: Post,
    *,
    style: CaptionStyle = "full",
    limit: int = CAPTION_LIMIT,
    lang: str = DEFAULT,
) -> bool:
    """Whether the whole text follows the media (or a post's short first message).

    An article's body always does (no caption holds it). A post's text does when the
    full caption (`limit`: 1024 under media, 4096 for a message) would cut it; a chat
    that chose short captions or the link alone asked for little text and gets none.
    """
    if post.article_body is not None and post.article_body.text.strip():
        return True
    if style != "full" or not post.text.strip():
        return False
    return not text_fits(post, limit=limit, lang=lang)


def long_messages(post: Post, limit: int = TEXT_LIMIT) -> list[str]:
    """The HTML of each text message that carries the post's whole text, in order."""
    return [piece_html(piece) for piece in split_text(long_text(post), limit)]
