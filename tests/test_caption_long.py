"""The long-text split (`xbot.sending.caption_long`): a table of cases and a property.

Telegram counts a message's 4096 in UTF-16 code units of its visible text; the split
must keep every piece within that, cut where a reader expects (a paragraph, a
sentence), never split a character or a formatting span that fits a message, and
lose nothing but the whitespace at each cut.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from standins._tgtext import parse_html
from xbot.media.models import Post, RichText, TextSpan
from xbot.sending.caption import build_caption, splits_grapheme, utf16_len, visible_length
from xbot.sending.caption_long import (
    long_messages,
    needs_long_text,
    piece_html,
    split_text,
)

LIMIT = 4096
SENTENCE = "The queue keeps every job. "  # 27 characters
FA = "صف هر کاری را نگه می‌دارد؟ "  # Persian, a question, then a space
HE = "התור שומר על כל משימה. "


def _units(text: str) -> bytes:
    return text.encode("utf-16-le", "surrogatepass")


def _pieces(text: str, spans: tuple[TextSpan, ...] = (), limit: int = LIMIT) -> list[str]:
    return [p.text for p in split_text(RichText(text, spans), limit)]


def _spans_of(text: str, spans: tuple[TextSpan, ...] = (), limit: int = LIMIT) -> list[tuple]:
    return [p.spans for p in split_text(RichText(text, spans), limit)]


CASES = [
    pytest.param("a" * 4096, (), [4096], id="exactly-4096-one-message"),
    pytest.param("a" * 4097, (), [4096, 1], id="one-over-two-messages"),
    pytest.param(
        "a" * 4095 + "😀" + "b", (), [4095, 3], id="surrogate-pair-across-the-boundary-moves-whole"
    ),
    pytest.param(
        "x" * 3000 + "\n\n" + "y" * 3000, (), [3000, 3000], id="cut-at-the-paragraph-break"
    ),
    pytest.param(
        SENTENCE * 400, (), [4076, 4076, 2645], id="a-paragraph-longer-than-a-message-at-sentences"
    ),
    pytest.param(
        "w " * 2000 + "z" * 4000, (), [3999, 4000], id="no-sentence-a-space-in-the-last-half"
    ),
]


@pytest.mark.parametrize(("text", "spans", "lengths"), CASES)
def test_split_table(text: str, spans: tuple[TextSpan, ...], lengths: list[int]) -> None:
    pieces = split_text(RichText(text, spans))
    assert [utf16_len(p.text) for p in pieces] == lengths
    assert all(utf16_len(p.text) <= LIMIT for p in pieces)
    assert re.sub(r"\s", "", "".join(p.text for p in pieces)) == re.sub(r"\s", "", text)


def test_a_span_across_the_boundary_moves_to_the_next_message_whole() -> None:
    text = "a " * 2040 + "see the link here and more"  # the link starts at 4080
    link = TextSpan("text_link", 4080 + 8, 13, "https://example.com/x")  # "link here and"
    pieces = split_text(RichText(text, (link,)))
    assert len(pieces) == 2
    assert pieces[0].spans == ()
    (moved,) = pieces[1].spans
    assert moved.length == 13
    assert moved.url == link.url
    start = moved.offset
    assert pieces[1].text[start : start + 13] == "link here and"


def test_a_span_longer_than_a_message_is_split_and_each_part_kept() -> None:
    text = "b" * 9000
    pieces = split_text(RichText(text, (TextSpan("bold", 0, 9000),)))
    assert [len(p.text) for p in pieces] == [4096, 4096, 808]
    assert [p.spans for p in pieces] == [
        (TextSpan("bold", 0, 4096),),
        (TextSpan("bold", 0, 4096),),
        (TextSpan("bold", 0, 808),),
    ]


def test_no_message_holds_more_spans_than_telegram_keeps() -> None:
    """Telegram keeps a message's first 100 entities (the blockquote is one): 150 links
    in 900 characters go as two messages, every link whole."""
    text = " ".join(f"l{i:03d}" for i in range(150))
    links = tuple(TextSpan("text_link", 5 * i, 4, f"https://e.x/{i}") for i in range(150))
    pieces = split_text(RichText(text, links))
    assert [len(p.spans) for p in pieces] == [99, 51]
    assert {s.url for p in pieces for s in p.spans} == {s.url for s in links}
    for piece in pieces:
        _, entities = parse_html(piece_html(piece))
        assert len(entities) <= 100


def test_mixed_rtl_text_is_cut_at_its_own_sentence_ends() -> None:
    text = (FA + HE + SENTENCE) * 60  # about 4,500 characters of Persian, Hebrew, English
    pieces = _pieces(text)
    assert len(pieces) == 2
    assert pieces[0].endswith(("؟", ".")), pieces[0][-10:]
    assert "".join(pieces).replace(" ", "") == text.replace(" ", "")
    # Persian's zero-width non-joiner and Hebrew stay whole.
    assert "می‌دارد" in pieces[1]


def test_a_joined_emoji_is_never_split() -> None:
    family = "👨\u200d👩\u200d👧"  # one grapheme, five code points
    text = "c" * 4090 + family + "d" * 10
    first, second = _pieces(text)
    assert first == "c" * 4090
    assert second.startswith(family)


def test_piece_html_nests_overlapping_spans_inside_an_expandable_blockquote() -> None:
    piece = split_text(
        RichText(
            "bold and linked <text> & more",
            (TextSpan("bold", 0, 15), TextSpan("text_link", 9, 13, "https://e.x/?a=1&b=2")),
        )
    )[0]
    markup = piece_html(piece)
    assert markup == (
        '<blockquote expandable><b>bold and <a href="https://e.x/?a=1&amp;b=2">linked</a></b>'
        '<a href="https://e.x/?a=1&amp;b=2"> &lt;text&gt;</a> &amp; more</blockquote>'
    )
    # Telegram's parser (the stand-in's) reads it back: the text, and a link over "linked <text>".
    text, entities = parse_html(markup)
    assert text == "bold and linked <text> & more"
    kinds = sorted(e["type"] for e in entities)
    assert kinds == ["bold", "expandable_blockquote", "text_link", "text_link"]


def _post(text: str, **kw: object) -> Post:
    return Post(key="x:1", url="https://x.com/a/status/1", author_name="Ann",
                author_handle="ann", text=text, **kw)  # type: ignore[arg-type]  # fmt: skip


def test_needs_long_text_only_when_the_caption_would_cut_the_text() -> None:
    assert not needs_long_text(_post("short"))
    assert needs_long_text(_post("word " * 300))
    assert not needs_long_text(_post("word " * 300), style="short")
    assert not needs_long_text(_post("word " * 300), limit=4096)
    assert needs_long_text(_post("", article_body=RichText("A body.")))
    # A short post quoting a long one: the quote is cut, as before, and no text follows.
    quoted = Post(key="", url="https://x.com/b/status/2", author_name="Bo", author_handle="bo",
                  text="quoted words " * 200)  # fmt: skip
    assert not needs_long_text(_post("short", quote=quoted))


def test_the_lead_caption_keeps_the_start_and_every_message_fits() -> None:
    post = _post(SENTENCE * 300)
    caption = build_caption(post, lead=True)
    assert visible_length(caption) < 400
    assert "https://x.com/a/status/1" in caption
    messages = long_messages(post)
    assert len(messages) == 2
    for markup in messages:
        text, _ = parse_html(markup)
        assert utf16_len(text) <= LIMIT


# --- the property -----------------------------------------------------------------------------

ALPHABET = st.sampled_from(["a", "b", " ", "\n", ".", "😀", "ש", "ف", "\u0301", "?", "é"])


@st.composite
def rich_texts(draw: st.DrawFn) -> tuple[RichText, int]:
    text = "".join(draw(st.lists(ALPHABET, min_size=0, max_size=300)))
    bounds = [0]
    for ch in text:
        bounds.append(bounds[-1] + len(_units(ch)) // 2)
    spans = []
    for _ in range(draw(st.integers(0, 6))):
        a = draw(st.integers(0, len(text)))
        b = draw(st.integers(a, len(text)))
        if a < b:
            kind = draw(st.sampled_from(["bold", "italic", "text_link"]))
            url = "https://e.x/" if kind == "text_link" else ""
            spans.append(TextSpan(kind, bounds[a], bounds[b] - bounds[a], url))  # type: ignore[arg-type]
    return RichText(text, tuple(spans)), draw(st.integers(2, 80))


@settings(max_examples=300, deadline=None)
@given(rich_texts())
def test_split_property(case: tuple[RichText, int]) -> None:
    rich, limit = case
    pieces = split_text(rich, limit)
    whole = _units(rich.text)
    position = 0
    for piece in pieces:
        units = _units(piece.text)
        # Every message within the limit, a slice of the text, only whitespace skipped.
        assert 0 < len(units) // 2 <= limit
        assert whole[2 * piece.start : 2 * piece.start + len(units)] == units
        gap = whole[2 * position : 2 * piece.start].decode("utf-16-le", "surrogatepass")
        assert gap.strip() == ""
        position = piece.start + len(units) // 2
        # Every entity inside its message, on code point boundaries.
        for span in piece.spans:
            assert span.offset >= 0
            assert span.offset + span.length <= len(units) // 2
            assert span.length > 0
            units[2 * span.offset : 2 * (span.offset + span.length)].decode("utf-16-le")
    assert whole[2 * position :].decode("utf-16-le", "surrogatepass").strip() == ""
    # The joined visible text is the post's text (whitespace at the cuts aside).
    joined = "".join(p.text for p in pieces)
    assert re.sub(r"\s", "", joined) == re.sub(r"\s", "", rich.text)
    # Every entity that fits a message is whole in one of them: all but those that
    # overlap others so that together they reach further than a message does.
    for span in rich.spans:
        if _reach(span, rich.spans) > limit:
            continue
        covered = whole[2 * span.offset : 2 * (span.offset + span.length)]
        inner = covered.decode("utf-16-le", "surrogatepass").strip()
        # A span too long for a message is cut (each part kept, checked above); one that
        # begins or ends inside a character (before a combining mark) is junk input.
        if span.length > limit or not inner or _splits(rich.text, span):
            continue
        assert any(
            s.kind == span.kind
            and s.url == span.url
            and inner in p.text[_cp(p.text, s.offset) : _cp(p.text, s.offset + s.length)]
            for p in pieces
            for s in p.spans
        ), (span, pieces)


def _reach(span: TextSpan, spans: tuple[TextSpan, ...]) -> int:
    """How far the spans that overlap `span` (and those overlapping them…) reach together."""
    lo, hi = span.offset, span.offset + span.length
    grown = True
    while grown:
        grown = False
        for other in spans:
            a, b = other.offset, other.offset + other.length
            if a < hi and lo < b and (a < lo or b > hi):
                lo, hi, grown = min(lo, a), max(hi, b), True
    return hi - lo


def _splits(text: str, span: TextSpan) -> bool:
    for unit in (span.offset, span.offset + span.length):
        i = _cp(text, unit)
        if 0 < i < len(text) and splits_grapheme(text, i):
            return True
    return False


def _cp(text: str, unit: int) -> int:
    """The code point index at a UTF-16 offset."""
    n = 0
    for i, ch in enumerate(text):
        if n >= unit:
            return i
        n += len(_units(ch)) // 2
    return len(text)
