"""Captions: the default shape, cutting to Telegram's limits, user templates.

Every caption is checked by `parse_telegram_html`, a strict reading of what
Telegram's HTML parse mode accepts (only the tags we emit, balanced; every
``&`` starts an entity), which also yields the visible text Telegram counts.
"""

from __future__ import annotations

import html
import re

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xbot.media.models import MediaItem, Poll, PollChoice, Post
from xbot.sending.caption import (
    CAPTION_LIMIT,
    MALFORMED,
    MIN_LIMIT,
    TEXT_LIMIT,
    TOO_LONG,
    build_caption,
    build_text_reply,
    caption_parts,
    post_from_parts,
    render_template,
    validate_template,
    visible_length,
)

URL = "https://x.com/alice/status/1234567890"
LINK = f'<a href="{URL}">{URL}</a>'

_TOKEN = re.compile(
    r'<a href="(?P<href>[^"<>]*)">|<(?P<open>b|i|code)>|</(?P<close>a|b|i|code)>'
    r"|(?P<entity>&(?:lt|gt|amp|quot|#[0-9]+|#x[0-9a-fA-F]+);)|(?P<bad>[<>&])"
)


@attrs.frozen
class Parsed:
    visible: str
    hrefs: tuple[str, ...]
    bold: tuple[str, ...]


def parse_telegram_html(markup: str) -> Parsed:
    """Parse as Telegram's HTML mode would, failing the test on anything it would refuse."""
    visible: list[str] = []
    hrefs: list[str] = []
    bold: list[str] = []
    stack: list[tuple[str, int]] = []
    pos = 0
    for m in _TOKEN.finditer(markup):
        visible.append(markup[pos : m.start()])
        pos = m.end()
        if m["bad"]:
            pytest.fail(f"bare {m['bad']!r} at {m.start()} in {markup!r}")
        elif m["entity"]:
            visible.append(html.unescape(m["entity"]))
        elif m["href"] is not None:
            hrefs.append(html.unescape(m["href"]))
            stack.append(("a", len("".join(visible))))
        elif m["open"]:
            stack.append((m["open"], len("".join(visible))))
        else:
            assert stack, f"closing </{m['close']}> without an opening tag in {markup!r}"
            tag, start = stack.pop()
            assert tag == m["close"], f"<{tag}> closed by </{m['close']}> in {markup!r}"
            if tag == "b":
                bold.append("".join(visible)[start:])
    visible.append(markup[pos:])
    assert not stack, f"unclosed tags {stack} in {markup!r}"
    return Parsed("".join(visible), tuple(hrefs), tuple(bold))


def u16(text: str) -> int:
    """UTF-16 code units, counted independently of the module under test."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def post(**kw: object) -> Post:
    base: dict[str, object] = {
        "key": "x:1234567890",
        "url": URL,
        "author_name": "Alice",
        "author_handle": "alice",
        "text": "Hello world",
        "media": (MediaItem("photo", "https://pbs.twimg.com/media/a.jpg"),),
    }
    base.update(kw)
    return Post(**base)  # type: ignore[arg-type]


SHAPES = [
    (post(), "full", f"<b>Alice</b> (@alice)\n\nHello world\n\n{LINK}", "full"),
    (post(), "short", f"<b>Alice</b> (@alice)\n\nHello world\n\n{LINK}", "short-fits"),
    (post(), "none", LINK, "none"),
    (post(author_handle=""), "full", f"<b>Alice</b>\n\nHello world\n\n{LINK}", "no-handle"),
    (post(author_name=""), "full", f"<b>@alice</b>\n\nHello world\n\n{LINK}", "no-name"),
    (post(author_name="", author_handle=""), "full", f"Hello world\n\n{LINK}", "no-author"),
    (post(author_handle="@alice"), "full", f"<b>Alice</b> (@alice)\n\nHello world\n\n{LINK}", "at"),
    (post(text=""), "full", f"<b>Alice</b> (@alice)\n\n{LINK}", "no-text"),
    (post(text="  \n spaced \n\n "), "full", f"<b>Alice</b> (@alice)\n\nspaced\n\n{LINK}", "strip"),
    (
        post(author_name="<b>Eve</b> & co", text="1 < 2 && 3 > 2 <a href='x'>"),
        "full",
        "<b>&lt;b&gt;Eve&lt;/b&gt; &amp; co</b> (@alice)\n\n"
        f"1 &lt; 2 &amp;&amp; 3 &gt; 2 &lt;a href='x'&gt;\n\n{LINK}",
        "escaped",
    ),
    (
        post(author_name="Al\nice\x00", text="a\r\nb\x07c\ud800"),
        "full",
        f"<b>Al ice</b> (@alice)\n\na\nbc\ufffd\n\n{LINK}",
        "controls-and-lone-surrogates",
    ),
    (
        post(
            source="ytdlp",
            url="https://www.youtube.com/watch?v=1&t=2",
            author_name="Uploader",
            author_handle="UC123",
            text="A title",
        ),
        "full",
        "<b>Uploader</b>\n\nA title\n\n"
        '<a href="https://www.youtube.com/watch?v=1&amp;t=2">'
        "https://www.youtube.com/watch?v=1&amp;t=2</a>",
        "other-site-uploader",
    ),
    (
        post(source="ytdlp", author_name="", author_handle="uploader_id"),
        "full",
        f'<b>uploader_id</b>\n\nHello world\n\n<a href="{URL}">{URL}</a>',
        "other-site-no-name",
    ),
    (
        post(url="https://example.com/a\"b'c<d>"),
        "none",
        '<a href="https://example.com/a&quot;b&#x27;c&lt;d&gt;">'
        "https://example.com/a\"b'c&lt;d&gt;</a>",
        "quotes-in-href",
    ),
]


@pytest.mark.parametrize(
    ("p", "style", "expected"), [c[:3] for c in SHAPES], ids=[c[3] for c in SHAPES]
)
def test_caption_shapes(p: Post, style: str, expected: str) -> None:
    caption = build_caption(p, style=style)  # type: ignore[arg-type]
    assert caption == expected
    parse_telegram_html(caption)


def _fixed(p: Post) -> int:
    """Visible length of the caption of ``p`` with an empty text (author + link)."""
    return visible_length(build_caption(attrs.evolve(p, text="")))


# Texts that must be cut, and what the kept text must end with.
CUTS = [
    ("word " * 300, "word…", "at-a-word"),
    ("x" * 2000, "x…", "no-spaces"),
    ("🎉" * 1000, "🎉…", "astral-counts-two"),
    ("e\u0301" * 1000, "e\u0301…", "combining-kept-whole"),
    ("👨\u200d👩\u200d👧" * 300, "👧…", "zwj-family-kept-whole"),
    ("🇺🇦" * 600, "🇺🇦…", "flags-kept-whole"),
    ("👍🏽" * 600, "👍🏽…", "skin-tone-kept"),
    ("&<>" * 500, "…", "entities-never-split"),
]


@pytest.mark.parametrize(("text", "tail"), [c[:2] for c in CUTS], ids=[c[2] for c in CUTS])
# Several limits, so that the cut falls at every offset inside a multi-unit grapheme.
@pytest.mark.parametrize("limit", [CAPTION_LIMIT - k for k in range(8)])
def test_long_text_is_cut_cleanly(text: str, tail: str, limit: int) -> None:
    p = post(text=text)
    caption = build_caption(p, limit=limit)
    parsed = parse_telegram_html(caption)
    assert u16(parsed.visible) == visible_length(caption) <= limit
    # Close to the limit: a cut wastes at most a word's worth of room.
    assert visible_length(caption) > limit - 40
    assert parsed.hrefs == (URL,)
    assert parsed.visible.endswith(f"\n\n{URL}")
    body = parsed.visible.removesuffix(f"\n\n{URL}")
    assert body.endswith(tail)
    assert body.startswith("Alice (@alice)\n\n")
    kept = body.removeprefix("Alice (@alice)\n\n").removesuffix("…")
    assert text.startswith(kept)


def test_text_that_exactly_fits_is_not_cut_and_one_more_unit_is() -> None:
    room = CAPTION_LIMIT - _fixed(post()) - 2  # the blank line before the text
    exact = build_caption(post(text="a" * room))
    assert visible_length(exact) == CAPTION_LIMIT
    assert "…" not in exact
    over = build_caption(post(text="a" * (room + 1)))
    assert visible_length(over) == CAPTION_LIMIT
    assert "a" * (room - 1) + "…" in over


def test_short_style_keeps_about_200_units() -> None:
    caption = build_caption(post(text="word " * 300), style="short")
    parsed = parse_telegram_html(caption)
    body = parsed.visible.split("\n\n")[1]
    assert body.endswith("…")
    assert 180 <= u16(body) <= 200


def test_absurd_name_is_cut_but_author_and_link_survive() -> None:
    p = post(author_name="N" * 5000, text="some text")
    caption = build_caption(p)
    parsed = parse_telegram_html(caption)
    assert visible_length(caption) <= CAPTION_LIMIT
    assert parsed.bold[0].startswith("NNN")
    assert parsed.bold[0].endswith("…")
    assert "(@alice)" in parsed.visible
    assert parsed.visible.endswith(URL)
    assert "some text" not in parsed.visible


def test_garbage_handle_is_capped() -> None:
    parsed = parse_telegram_html(build_caption(post(author_handle="h" * 500)))
    assert "(@" + "h" * 31 + "…)" in parsed.visible


def test_overlong_url_keeps_its_href_behind_a_short_text() -> None:
    url = "https://example.com/" + "p" * 3000
    caption = build_caption(post(url=url, source="ytdlp"), style="none")
    parsed = parse_telegram_html(caption)
    assert parsed.hrefs == (url,)
    assert parsed.visible.endswith("…")
    assert u16(parsed.visible) <= 96


def test_text_reply_uses_the_message_limit() -> None:
    reply = build_text_reply(post(text="word " * 2000, media=()))
    assert CAPTION_LIMIT < visible_length(reply) <= TEXT_LIMIT
    parse_telegram_html(reply)


def test_limit_below_minimum_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="at least"):
        build_caption(post(), limit=MIN_LIMIT - 1)


# --- templates ---------------------------------------------------------------

VALIDATE = [
    ("{author}: {text} {url}", [], "all-known"),
    ("@{handle} {handle}", [], "repeat"),
    ("plain, no placeholder", [], "none"),
    ("{{literal braces}}", [], "escaped-braces"),
    ("{foo} {text} {bar} {foo}", ["foo", "bar"], "unknown-once-each"),
    ("{author.__class__}", ["author.__class__"], "attribute-access"),
    ("{author[0]}", ["author[0]"], "indexing"),
    ("{0} {}", ["0", ""], "positional"),
    ("{text!r}", ["text!r"], "conversion"),
    ("{text:>9}", ["text:>9"], "format-spec"),
    ("{text:{author}}", ["text:{author}"], "nested"),
    ("{ text }", [" text "], "spaces"),
    ("{text", [MALFORMED], "open-brace"),
    ("text}", [MALFORMED], "close-brace"),
    ("{a{b}c}", [MALFORMED], "brace-in-name"),
    ("x" * 513, [TOO_LONG], "too-long"),
    ("x" * 512 + "{text}", [], "just-fits"),
]


@pytest.mark.parametrize(
    ("template", "problems"), [c[:2] for c in VALIDATE], ids=[c[2] for c in VALIDATE]
)
def test_validate_template(template: str, problems: list[str]) -> None:
    assert validate_template(template) == problems


RENDER = [
    ("{author} wrote: {text} {url}", f"Alice wrote: Hello world {LINK}", "inline"),
    ("{text}\n— @{handle}\n{url}", f"Hello world\n— @alice\n{LINK}", "multiline"),
    ("{text}", f"Hello world\n\n{LINK}", "url-appended"),
    ("<b>{author}</b> & {url}", f"&lt;b&gt;Alice&lt;/b&gt; &amp; {LINK}", "literal-escaped"),
    ("{{{author}}} {url}", f"{{Alice}} {LINK}", "escaped-braces"),
    ("   ", LINK, "blank-template"),
]


@pytest.mark.parametrize(
    ("template", "expected"), [c[:2] for c in RENDER], ids=[c[2] for c in RENDER]
)
def test_render_template(template: str, expected: str) -> None:
    assert render_template(template, post()) == expected
    assert build_caption(post(), template=template) == expected


def test_template_values_are_escaped() -> None:
    p = post(author_name="<i>x</i>", text="&amp;")
    rendered = render_template("{author} {text} {url}", p)
    assert rendered.startswith("&lt;i&gt;x&lt;/i&gt; &amp;amp; ")
    parse_telegram_html(rendered)


def test_template_text_is_cut_first_in_every_occurrence() -> None:
    rendered = render_template("{text} | {text} | {url}", post(text="word " * 500))
    parsed = parse_telegram_html(rendered)
    assert visible_length(rendered) <= CAPTION_LIMIT
    first, second, link = parsed.visible.split(" | ")
    assert first == second
    assert first.endswith("…")
    assert link == URL


@pytest.mark.parametrize("template", ["{author.__class__}", "{text", "{0}"])
def test_refused_templates_raise_in_render_and_fall_back_in_build(template: str) -> None:
    with pytest.raises(ValueError, match="bad caption template"):
        render_template(template, post())
    assert build_caption(post(), template=template) == build_caption(post())


def test_template_whose_fixed_text_cannot_fit_falls_back() -> None:
    template = "y" * 500 + "{text}{url}"
    with pytest.raises(ValueError, match="does not fit"):
        render_template(template, post(), limit=MIN_LIMIT)
    assert build_caption(post(), template=template, limit=MIN_LIMIT) == build_caption(
        post(), limit=MIN_LIMIT
    )


# --- properties --------------------------------------------------------------

# Any code point, lone surrogates and controls included: the caption cleans them.
_any_text = st.text(st.characters(codec=None, categories=None), max_size=300)
_long_text = st.text(min_size=1, max_size=40).map(lambda s: (s * (10_000 // len(s) + 1))[:10_000])
# URLs come canonical from xbot.links: no spaces, no control characters.
_url_chars = st.characters(codec="utf-8", exclude_categories=("Cc", "Cs", "Zs", "Zl", "Zp"))
_urls = st.one_of(
    st.just(URL),
    st.text(_url_chars, max_size=200).map(lambda s: "https://example.com/" + s),
    st.text(_url_chars, min_size=100, max_size=3000).map(lambda s: "https://example.com/" + s),
)


@settings(max_examples=150, deadline=None)
@given(
    name=_any_text,
    handle=_any_text,
    text=st.one_of(_any_text, _long_text),
    url=_urls,
    source=st.sampled_from(["x", "ytdlp"]),
    style=st.sampled_from(["full", "short", "none"]),
    limit=st.sampled_from([MIN_LIMIT, 300, CAPTION_LIMIT, TEXT_LIMIT]),
)
def test_property_every_caption_is_valid_html_within_the_limit(
    name: str, handle: str, text: str, url: str, source: str, style: str, limit: int
) -> None:
    p = post(author_name=name, author_handle=handle, text=text, url=url, source=source)
    caption = build_caption(p, style=style, limit=limit)  # type: ignore[arg-type]
    parsed = parse_telegram_html(caption)
    assert u16(parsed.visible) == visible_length(caption) <= limit
    caption.encode("utf-8")  # no lone surrogates reach Telegram
    assert parsed.hrefs == (url,)
    if style != "none" and any(ch.isalnum() for ch in name + handle):
        assert parsed.bold, "the author survives"


@settings(max_examples=100, deadline=None)
@given(
    template=st.text(st.sampled_from("{}atuxhorendl <&>\n"), max_size=60),
    name=_any_text,
    text=st.one_of(_any_text, _long_text),
)
def test_property_templates_never_escape_the_rules(template: str, name: str, text: str) -> None:
    p = post(author_name=name, text=text)
    caption = build_caption(p, template=template)
    parsed = parse_telegram_html(caption)
    assert visible_length(caption) <= CAPTION_LIMIT
    assert URL in parsed.hrefs
    if not validate_template(template):
        assert caption == render_template(template, p)


# -- quotes, polls, notes, articles (issue 12) ----------------------------------------

QURL = "https://x.com/bob/status/99"
QLINK = f'<a href="{QURL}">{QURL}</a>'


def quoted(**kw: object) -> Post:
    base: dict[str, object] = {
        "key": "x:99", "url": QURL, "author_name": "Bob", "author_handle": "bob",
        "text": "the original",
    }  # fmt: skip
    base.update(kw)
    return Post(**base)  # type: ignore[arg-type]


def test_a_quote_names_both_authors_and_carries_both_links() -> None:
    caption = build_caption(post(text="look at this", quote=quoted()))
    assert caption == (
        "<b>Alice</b> (@alice)\n\nlook at this\n\n"
        f"↪ quoting <b>Bob</b> (@bob):\nthe original\n{QLINK}\n\n{LINK}"
    )
    parsed = parse_telegram_html(caption)
    assert parsed.hrefs == (QURL, URL)
    assert parsed.bold == ("Alice", "Bob")


def test_a_long_quote_is_cut_before_the_post_text_and_both_links_survive() -> None:
    caption = build_caption(post(text="mine " * 50, quote=quoted(text="theirs " * 400)))
    parsed = parse_telegram_html(caption)
    assert u16(parsed.visible) <= CAPTION_LIMIT
    assert parsed.hrefs == (QURL, URL)
    assert ("mine " * 50).strip() in parsed.visible  # the post's own text whole
    assert "theirs …" in parsed.visible or "theirs…" in parsed.visible


def test_a_huge_post_and_quote_still_fit_with_both_links() -> None:
    caption = build_caption(post(text="mine " * 400, quote=quoted(text="theirs " * 400)))
    parsed = parse_telegram_html(caption)
    assert u16(parsed.visible) <= CAPTION_LIMIT
    assert parsed.hrefs == (QURL, URL)
    assert parsed.bold == ("Alice", "Bob")


POLL_OPEN = Poll(
    choices=(PollChoice("Cats", 10, 62.5), PollChoice("Dogs", 6, 37.5)), total_votes=16
)
POLL_CLOSED = attrs.evolve(POLL_OPEN, closed=True)


def test_an_open_poll_shows_its_choices_and_a_closed_one_its_result() -> None:
    open_caption = parse_telegram_html(build_caption(post(text="vote", poll=POLL_OPEN))).visible
    assert "📊 Poll:\n• Cats\n• Dogs" in open_caption
    assert "%" not in open_caption
    closed = parse_telegram_html(build_caption(post(text="vote", poll=POLL_CLOSED))).visible
    assert "📊 Poll, final result (16 votes):\n• Cats: 62.5%\n• Dogs: 37.5%" in closed


def test_a_community_note_is_quoted_under_the_text_and_an_article_title_above() -> None:
    caption = build_caption(
        post(text="claim", note="Context: it is not so.", article_title="My essay")
    )
    visible = parse_telegram_html(caption).visible
    assert visible.index("📰 My essay") < visible.index("claim")
    assert visible.index("claim") < visible.index("Community note: Context: it is not so.")


def test_a_text_reply_has_the_poll_too() -> None:
    reply = parse_telegram_html(build_text_reply(post(media=(), poll=POLL_CLOSED))).visible
    assert "• Cats: 62.5%" in reply


def test_caption_parts_round_trip_rebuilds_the_same_caption() -> None:
    p = post(
        quote=quoted(),
        poll=POLL_CLOSED,
        note="a note",
        article_title="T",
        title="A work's title",
        sensitive=True,
        media=(MediaItem("photo", "https://pbs.twimg.com/media/a.jpg", alt_text="a cat"),),
    )
    parts = caption_parts(p)
    assert parts["alt"] == '["a cat"]'
    again = post_from_parts(p.key, p.url, parts)
    assert build_caption(again) == build_caption(p)
    assert again.sensitive


PIXIV = "https://www.pixiv.net/artworks/1"


def pixiv_work(**kw: object) -> Post:
    base: dict[str, object] = {"key": "pixiv:1", "url": PIXIV, "author_name": "みつき",
                               "author_handle": "mitsuki_art", "text": "#tag #blue_sky",
                               "source": "pixiv", "title": "夏の空"}  # fmt: skip
    base.update(kw)
    return post(**base)


def test_a_title_comes_first_then_the_artist_the_tags_and_the_link() -> None:
    caption = build_caption(pixiv_work())
    assert caption == (
        "<b>夏の空</b>\n\n<b>みつき</b> (@mitsuki_art)\n\n#tag #blue_sky\n\n"
        f'<a href="{PIXIV}">{PIXIV}</a>'
    )
    parse_telegram_html(caption)
    again = post_from_parts("pixiv:1", PIXIV, caption_parts(pixiv_work()))
    assert build_caption(again) == caption  # the link cache and forwards: the same order


@pytest.mark.parametrize("style", ["full", "short"], ids=["full", "short"])
def test_a_long_title_is_cut_and_the_author_line_and_the_link_survive(style: str) -> None:
    p = pixiv_work(title="題" * 300, text="#tag " * 300)
    caption = build_caption(p, style=style, limit=MIN_LIMIT)  # type: ignore[arg-type]
    visible = parse_telegram_html(caption).visible
    assert visible_length(caption) <= MIN_LIMIT
    assert visible.startswith("題" * 10)
    assert "(@mitsuki_art)" in visible
    assert visible.endswith(PIXIV)


def test_a_template_shows_the_title_at_the_head_of_text() -> None:
    rendered = render_template("{author}: {text} {url}", pixiv_work())
    assert rendered.startswith("みつき: 夏の空\n\n#tag #blue_sky <a href=")
    assert build_caption(pixiv_work(), template="{text}").startswith("夏の空\n\n#tag")


@pytest.mark.parametrize(
    ("parts", "source", "author_line"),
    [
        ({"author_name": "Ann", "author_handle": "ann", "text": "t"}, "x", "Ann (@ann)"),
        ({"author_name": "", "author_handle": "ann", "text": "t"}, "x", "@ann"),
        ({"author_name": "Up", "author_handle": "", "text": "t", "source": "ytdlp",
          "ytdlp_key": "yt:a:1"}, "ytdlp", "Up"),
        ({"author_handle": "someone", "text": "t", "source": "ytdlp"}, "ytdlp", "someone"),
    ],
    ids=["x", "x-handle-only", "ytdlp", "ytdlp-id-is-no-handle"],
)  # fmt: skip
def test_one_decoder_reads_every_record(
    parts: dict[str, str], source: str, author_line: str
) -> None:
    again = post_from_parts("k", URL, parts)
    assert again.source == source
    first = parse_telegram_html(build_caption(again)).visible.split("\n\n")[0]
    assert first == author_line


def test_caption_parts_of_a_plain_post_stay_the_four_old_keys() -> None:
    assert set(caption_parts(post())) == {"author_name", "author_handle", "text", "sensitive"}
    damaged = post_from_parts("x:1", URL, {"text": "t", "poll": "{not json"})
    assert damaged.poll is None


@settings(max_examples=100, deadline=None)
@given(
    name=_any_text,
    text=st.one_of(_any_text, _long_text),
    qname=_any_text,
    qtext=st.one_of(_any_text, _long_text),
    qurl=_urls,
    limit=st.sampled_from([MIN_LIMIT, CAPTION_LIMIT]),
)
def test_property_quote_captions_are_valid_and_fit(
    name: str, text: str, qname: str, qtext: str, qurl: str, limit: int
) -> None:
    p = post(author_name=name, text=text, quote=quoted(author_name=qname, text=qtext, url=qurl))
    caption = build_caption(p, limit=limit)
    parsed = parse_telegram_html(caption)
    assert u16(parsed.visible) == visible_length(caption) <= limit
    assert parsed.hrefs[-1] == URL
