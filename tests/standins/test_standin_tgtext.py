"""The Bot API stand-in's text rules: UTF-16 lengths, HTML entities, auto-entities, decoding."""

from __future__ import annotations

import html

import pytest
from hypothesis import given
from hypothesis import strategies as st

from standins._botapi_wire import ApiError, decode_params, text_of
from standins._mediabytes import image_size, tiny_jpeg
from standins._tgtext import EntityParseError, auto_entities, parse_html, utf16_len

HTML_CASES = [
    ("plain", "hello", "hello", []),
    ("bold", "<b>hi</b> there", "hi there", [("bold", 0, 2)]),
    ("strong-em", "<strong>a</strong><em>b</em>", "ab", [("bold", 0, 1), ("italic", 1, 1)]),
    ("nested", "<b>a<i>b</i></b>", "ab", [("bold", 0, 2), ("italic", 1, 1)]),
    ("escapes", "a &lt;b&gt; &amp; &quot;c&quot;", 'a <b> & "c"', []),
    ("numeric-entities", "&#65;&#x42;", "AB", []),
    ("unknown-entity-kept", "AT&T &nbsp;", "AT&T &nbsp;", []),
    ("link", '<a href="https://x.com/a?b=1&amp;c=2">x</a>', "x", [("text_link", 0, 1)]),
    ("spoiler-span", '<span class="tg-spoiler">s</span>', "s", [("spoiler", 0, 1)]),
    ("emoji-before-tag", "😀<b>x</b>", "😀x", [("bold", 2, 1)]),
    ("empty-entity-dropped", "<b></b>x", "x", []),
    ("upper-case-tag", "<B>x</B>", "x", [("bold", 0, 1)]),
    (
        "blockquote-expandable",
        "<blockquote expandable>q</blockquote>",
        "q",
        [("expandable_blockquote", 0, 1)],
    ),
]


@pytest.mark.parametrize(
    ("source", "plain", "entities"), [c[1:] for c in HTML_CASES], ids=[c[0] for c in HTML_CASES]
)
def test_parse_html(source: str, plain: str, entities: list[tuple[str, int, int]]) -> None:
    text, found = parse_html(source)
    assert text == plain
    assert [(e["type"], e["offset"], e["length"]) for e in found] == entities


def test_parse_html_keeps_link_url_unescaped() -> None:
    _, found = parse_html('<a href="https://x.com/a?b=1&amp;c=2">x</a>')
    assert found[0]["url"] == "https://x.com/a?b=1&c=2"


HTML_ERRORS = [
    ("unsupported", "a <foo>b</foo>", 'Unsupported start tag "foo" at byte offset 2'),
    ("bare-lt", "1 < 2 > 0", 'Unsupported start tag "" at byte offset 2'),
    ("unclosed-start", "x <b", "Unclosed start tag at byte offset 2"),
    ("no-end-tag", "<b>x", 'Can\'t find end tag corresponding to start tag "b"'),
    (
        "unmatched",
        "<b><i>x</b></i>",
        'Unmatched end tag at byte offset 7, expected "</i>", found "</b>"',
    ),
    ("unexpected-end", "x</b>", "Unexpected end tag at byte offset 1"),
    ("byte-offsets-are-utf8", "é<x>", 'Unsupported start tag "x" at byte offset 2'),
    (
        "span-needs-class",
        "<span>x</span>",
        'Tag "span" must have class "tg-spoiler" at byte offset 0',
    ),
]


@pytest.mark.parametrize(
    ("source", "detail"), [c[1:] for c in HTML_ERRORS], ids=[c[0] for c in HTML_ERRORS]
)
def test_parse_html_errors_use_telegrams_words(source: str, detail: str) -> None:
    with pytest.raises(EntityParseError) as info:
        parse_html(source)
    assert info.value.description == f"Bad Request: can't parse entities: {detail}"


@given(st.text())
def test_escaped_text_parses_back_to_itself(text: str) -> None:
    assert parse_html(html.escape(text, quote=False)) == (text, [])


@given(st.text())
def test_utf16_len_counts_surrogate_pairs(text: str) -> None:
    assert utf16_len(text) == sum(2 if ord(c) > 0xFFFF else 1 for c in text)


AUTO_CASES = [
    ("url", "see https://x.com/a/status/1", [("url", 4, 24)]),
    ("emoji-shifts-by-two", "😀 https://x.com/a", [("url", 3, 15)]),
    ("trailing-dot-trimmed", "at https://x.com/a.", [("url", 3, 15)]),
    ("balanced-paren-kept", "(https://en.wikipedia.org/wiki/X_(y))", [("url", 1, 35)]),
    ("command", "/start", [("bot_command", 0, 6)]),
    ("command-with-bot", "/help@xbot_standin_bot now", [("bot_command", 0, 22)]),
    ("path-is-no-command", "a/b /c", [("bot_command", 4, 2)]),
    ("nothing", "just words", []),
    ("mention", "@xbot_standin_bot https://x.com/a", [("mention", 0, 17), ("url", 18, 15)]),
    ("no-mention-in-a-mail-or-a-url", "a@b_cdef https://x.com/@alice", [("url", 9, 20)]),
    ("too-short-for-a-username", "@abc hi", []),
]


@pytest.mark.parametrize(
    ("text", "expected"), [c[1:] for c in AUTO_CASES], ids=[c[0] for c in AUTO_CASES]
)
def test_auto_entities(text: str, expected: list[tuple[str, int, int]]) -> None:
    assert [(e["type"], e["offset"], e["length"]) for e in auto_entities(text)] == expected


LIMIT_CASES = [
    ("caption-at-limit", {"caption": "a" * 1024}, None),
    ("caption-over", {"caption": "a" * 1025}, "Bad Request: message caption is too long"),
    ("tags-do-not-count", {"caption": "<b>" + "a" * 1024 + "</b>", "parse_mode": "HTML"}, None),
    ("escapes-count-once", {"caption": "&amp;" * 1024, "parse_mode": "HTML"}, None),
    ("emoji-count-two", {"caption": "😀" * 512}, None),
    ("emoji-over", {"caption": "😀" * 513}, "Bad Request: message caption is too long"),
    (
        "markdown-counts-raw",
        {"caption": "*" + "a" * 1023 + "*", "parse_mode": "MarkdownV2"},
        "Bad Request: message caption is too long",
    ),
]


@pytest.mark.parametrize(
    ("params", "error"), [c[1:] for c in LIMIT_CASES], ids=[c[0] for c in LIMIT_CASES]
)
def test_caption_limit_after_entity_parsing(params: dict[str, str], error: str | None) -> None:
    if error is None:
        text_of(params, "caption", "caption_entities", 1024)
    else:
        with pytest.raises(ApiError) as info:
            text_of(params, "caption", "caption_entities", 1024)
        assert info.value.description == error


def test_decode_params_urlencoded_keeps_string_params_as_text() -> None:
    body = (
        b"chat_id=42&text=123&reply_markup=%7B%22inline_keyboard%22%3A%5B%5D%7D"
        b"&disable_notification=true"
    )
    params = decode_params("application/x-www-form-urlencoded", body, {})
    assert params == {
        "chat_id": 42,
        "text": "123",
        "reply_markup": {"inline_keyboard": []},
        "disable_notification": True,
    }


def test_decode_params_json_body() -> None:
    params = decode_params("application/json", b'{"chat_id": 5, "text": "hi"}', {})
    assert params == {"chat_id": 5, "text": "hi"}


@given(st.integers(1, 3000), st.integers(1, 3000))
def test_tiny_jpeg_has_the_size_asked_for(width: int, height: int) -> None:
    data = tiny_jpeg(width, height)
    assert data.startswith(b"\xff\xd8")
    assert data.endswith(b"\xff\xd9")
    assert image_size(data) == ("jpeg", width, height)


def test_a_message_keeps_its_first_hundred_entities() -> None:
    """Telegram drops entities past the 100th without an error (xbot's long texts keep
    each message under it: `xbot.sending.caption_long.SPAN_ROOM`)."""
    source = " ".join(f"<b>{i}</b>" for i in range(120))
    text, entities = text_of({"text": source, "parse_mode": "HTML"}, "text", "entities", 4096)
    assert text == " ".join(str(i) for i in range(120))
    assert len(entities) == 100
    assert entities[-1]["offset"] == text.index("99")
