"""Captions in Telegram's HTML parse mode, cut to Telegram's limits without breaking anything.

Pure functions, no I/O. The default caption is::

    <b>Name</b> (@handle)

    post text

    <a href="https://x.com/handle/status/1">https://x.com/handle/status/1</a>

Telegram counts a caption's length (1024; 4096 for a message) after entity
parsing: tags do not count and ``&amp;`` is one character. We count UTF-16
code units of that visible text, which is never less than what Telegram
counts, so a caption that fits here fits there.

When a caption is too long only the post text is cut (with "…"), at a word
or at least a grapheme boundary, before escaping, so no tag, entity or
surrogate pair is ever split. The author line and the link always survive:
the author's name is cut only when even an empty text does not fit, and an
overlong URL keeps its full ``href`` behind a shortened visible text.

A post that quotes another names both authors and carries both links::

    <b>Name</b> (@handle)

    post text

    ↪ quoting <b>Other</b> (@other):
    quoted text
    <a href="https://x.com/other/status/2">https://x.com/other/status/2</a>

    <a href="https://x.com/handle/status/1">https://x.com/handle/status/1</a>

A post with a `Post.title` (a pixiv work) shows it first, in bold, above the
author line; it is cut to `TITLE_MAX` units so the author line and the link
still fit.

The quoted text is cut before the post's own. A poll (its choices, and the
result once it closed), an article's title and a community note are part
of the post text, in that order after it, so they are cut before the text
itself.

A chat's own template (``/format``) is checked and rendered here too
(`validate_template`, `render_template`), through the same fitting. The link
cache's record of a caption is `xbot.sending.caption_parts`'s; its two names are
re-exported here, where the callers that build captions look for them.
"""

from __future__ import annotations

import html
import re
import string
import unicodedata
from collections.abc import Callable
from typing import Literal

import attrs

from xbot.i18n import DEFAULT, translator
from xbot.links import shows_handles
from xbot.media.models import Poll, Post
from xbot.sending.caption_parts import caption_parts, post_from_parts

__all__ = [
    "CAPTION_LIMIT",
    "MALFORMED",
    "MAX_TEMPLATE_LENGTH",
    "MIN_LIMIT",
    "PLACEHOLDERS",
    "TEXT_LIMIT",
    "TOO_LONG",
    "build_caption",
    "build_text_reply",
    "caption_parts",
    "clean_text",
    "poll_text",
    "post_from_parts",
    "render_template",
    "splits_grapheme",
    "text_fits",
    "utf16_len",
    "validate_template",
    "visible_length",
]

CaptionStyle = Literal["full", "short", "none"]

CAPTION_LIMIT = 1024  # sendPhoto/sendVideo/sendMediaGroup caption
TEXT_LIMIT = 4096  # sendMessage text
# Below this the author line and the link are not guaranteed to fit.
MIN_LIMIT = 256
# "short" keeps about this much of the post text.
SHORT_TEXT = 200
# A URL longer than this shows a shortened text (its href stays whole).
LINK_TEXT_MAX = 96
# X handles are at most 15 characters; anything longer is garbage to cut.
HANDLE_MAX = 32
# A title longer than this is cut (pixiv's own limit is 32 characters).
TITLE_MAX = 64
# A whole word is kept when the cut falls this close to a space.
WORD_SLACK = 30

ELLIPSIS = "…"
_TAG = re.compile(r"<[^>]*>")
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units (what Telegram counts): astral characters count 2."""
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def visible_length(markup: str) -> int:
    """UTF-16 length of what Telegram shows for our HTML: tags stripped, entities unescaped."""
    return utf16_len(html.unescape(_TAG.sub("", markup)))


def _esc(text: str) -> str:
    return html.escape(text, quote=False)


def _clean(text: str, *, one_line: bool = False) -> str:
    """Text Telegram accepts: no lone surrogates (not UTF-8), no control characters."""
    text = _LONE_SURROGATE.sub("\ufffd", text).replace("\r\n", "\n").replace("\r", "\n")
    if one_line:
        text = text.replace("\n", " ").replace("\t", " ")
    return _CONTROLS.sub("", text).strip()


def splits_grapheme(text: str, i: int) -> bool:
    """Whether a cut before ``text[i]`` would split a grapheme (roughly)."""
    ch, prev = text[i], text[i - 1]
    cp = ord(ch)
    if prev == "\u200d" or ch == "\u200d":  # zero-width joiner sequences (family emoji)
        return True
    if unicodedata.category(ch) in {"Mn", "Mc", "Me"}:  # combining marks, viramas
        return True
    if 0xFE00 <= cp <= 0xFE0F or 0xE0100 <= cp <= 0xE01EF:  # variation selectors
        return True
    if 0x1F3FB <= cp <= 0x1F3FF or 0xE0020 <= cp <= 0xE007F:  # skin tones, flag tags
        return True
    if 0x1F1E6 <= cp <= 0x1F1FF:  # regional indicators pair up into flags
        run = 0
        while i - 1 - run >= 0 and 0x1F1E6 <= ord(text[i - 1 - run]) <= 0x1F1FF:
            run += 1
        return run % 2 == 1
    return False


def _cut(text: str, limit: int) -> str:
    """``text`` itself if it fits in ``limit`` UTF-16 units, else a prefix plus "…" that does.

    The cut prefers the last space within `WORD_SLACK` units and never
    splits a surrogate pair or (roughly) a grapheme. Returns "" when not even
    one character and the ellipsis fit.
    """
    if utf16_len(text) <= limit:
        return text
    budget = limit - utf16_len(ELLIPSIS)
    i = used = 0
    while i < len(text):
        step = 2 if ord(text[i]) > 0xFFFF else 1
        if used + step > budget:
            break
        used += step
        i += 1
    while 0 < i < len(text) and splits_grapheme(text, i):
        i -= 1
    space = max(text.rfind(" ", max(0, i - WORD_SLACK), i), text.rfind("\n", 0, i))
    if space > 0 and i - space <= WORD_SLACK:
        i = space
    prefix = text[:i].rstrip()
    return prefix + ELLIPSIS if prefix else ""


@attrs.frozen
class _Fields:
    """The plain (unescaped) values a caption is made of; ``q_*`` the quoted post's."""

    name: str
    handle: str
    text: str
    url: str
    link_text: str
    title: str = ""
    q_name: str = ""
    q_handle: str = ""
    q_text: str = ""
    q_url: str = ""
    q_link_text: str = ""
    lang: str = DEFAULT  # our own words around the post's (poll, note, quoting), never its own


def poll_text(poll: Poll, lang: str = DEFAULT) -> str:
    """A poll as plain lines: its choices, with the result once it closed; our words in
    `lang`, the choices as written."""
    tr = translator(lang)
    if poll.closed:
        head = tr.ngettext(
            "📊 Poll, final result ({n} vote):",
            "📊 Poll, final result ({n} votes):",
            poll.total_votes,
        ).format(n=f"{poll.total_votes:,}")
        lines = [f"• {c.label}: {c.percentage:g}%" for c in poll.choices]
    else:
        head = tr.gettext("📊 Poll:")
        lines = [f"• {c.label}" for c in poll.choices]
    return "\n".join([head, *lines])


def clean_text(text: str) -> str:
    """A post's text as every message of ours carries it (`_clean`: what Telegram accepts)."""
    return _clean(text)


def _full_text(post: Post, lang: str = DEFAULT, text_limit: int | None = None) -> str:
    """The post text and what X shows with it: article title, poll, community note.

    `text_limit` cuts the post's own text alone (its whole text follows as messages
    of their own, `xbot.sending.caption_long`); the rest stays as it is.
    """
    blocks = []
    if post.article_title:
        blocks.append(f"📰 {_clean(post.article_title, one_line=True)}")
    own = _clean(post.text)
    blocks.append(own if text_limit is None else _cut(own, text_limit))
    if post.poll is not None:
        blocks.append(poll_text(post.poll, lang))
    if post.note:
        note = translator(lang).gettext("Community note: {note}")
        blocks.append(note.format(note=_clean(post.note)))
    return "\n\n".join(b for b in blocks if b)


def _names(post: Post) -> tuple[str, str]:
    name = _clean(post.author_name, one_line=True)
    handle = _clean(post.author_handle, one_line=True).removeprefix("@")
    if not shows_handles(post.source):
        # yt-dlp's sites: the author is the uploader; their ids are not @handles.
        name, handle = name or handle, ""
    return name, _cut(handle, HANDLE_MAX)


def _fields(post: Post, lang: str = DEFAULT, text_limit: int | None = None) -> _Fields:
    name, handle = _names(post)
    url = _clean(post.url, one_line=True)
    fields = _Fields(
        name=name, handle=handle, text=_full_text(post, lang, text_limit), url=url,
        link_text=_cut(url, LINK_TEXT_MAX), lang=lang,
        title=_cut(_clean(post.title, one_line=True), TITLE_MAX),
    )  # fmt: skip
    quote = post.quote
    if quote is None or not quote.url:
        return fields
    q_name, q_handle = _names(quote)
    q_url = _clean(quote.url, one_line=True)
    return attrs.evolve(
        fields,
        q_name=q_name,
        q_handle=q_handle,
        q_text=_clean(quote.text),
        q_url=q_url,
        q_link_text=_cut(q_url, LINK_TEXT_MAX),
    )


def _link(f: _Fields) -> str:
    return f'<a href="{html.escape(f.url, quote=True)}">{_esc(f.link_text)}</a>'


def _quote_link(f: _Fields) -> str:
    return f'<a href="{html.escape(f.q_url, quote=True)}">{_esc(f.q_link_text)}</a>'


def _named(name: str, handle: str) -> str:
    if name and handle:
        return f"<b>{_esc(name)}</b> (@{_esc(handle)})"
    if name:
        return f"<b>{_esc(name)}</b>"
    if handle:
        return f"<b>@{_esc(handle)}</b>"
    return ""


def _author(f: _Fields) -> str:
    return _named(f.name, f.handle)


def _quote_block(f: _Fields) -> str:
    if not f.q_url:
        return ""
    _ = translator(f.lang).gettext
    # Translators: stands in for a quoted post's author when it has none ("↪ quoting {who}:").
    who = _named(f.q_name, f.q_handle) or _("a post")
    lines = [_("↪ quoting {who}:").format(who=who), _esc(f.q_text), _quote_link(f)]
    return "\n".join(line for line in lines if line)


def _title(f: _Fields) -> str:
    return f"<b>{_esc(f.title)}</b>" if f.title else ""


def _render_default(f: _Fields) -> str:
    blocks = [_title(f), _author(f), _esc(f.text), _quote_block(f), _link(f)]
    return "\n\n".join(b for b in blocks if b)


def _render_link(f: _Fields) -> str:
    return _link(f)


Render = Callable[[_Fields], str]


def _fits(render: Render, f: _Fields, limit: int) -> bool:
    return visible_length(render(f)) <= limit


def _shrink(render: Render, f: _Fields, field: str, limit: int) -> _Fields | None:
    """``f`` with ``field`` cut as little as possible so the caption fits, else None.

    A binary search over the kept length: the caption grows with it.
    """
    original: str = getattr(f, field)
    lo, hi = 0, utf16_len(original)
    best: _Fields | None = None
    while lo <= hi:
        mid = (lo + hi) // 2
        candidate = attrs.evolve(f, **{field: _cut(original, mid)})
        if _fits(render, candidate, limit):
            best, lo = candidate, mid + 1
        else:
            hi = mid - 1
    return best


def _fit(render: Render, f: _Fields, limit: int) -> str | None:
    """Render within ``limit``: cut the quoted text, then the text, then the names.

    None if even that fails. Both links always survive.
    """
    if _fits(render, f, limit):
        return render(f)
    if f.q_text:
        shrunk = _shrink(render, f, "q_text", limit)
        if shrunk is not None:
            return render(shrunk)
        f = attrs.evolve(f, q_text="")
    shrunk = _shrink(render, f, "text", limit)
    if shrunk is None and f.q_name:
        shrunk = _shrink(render, attrs.evolve(f, text=""), "q_name", limit)
        if shrunk is None:
            f = attrs.evolve(f, q_name="")
    if shrunk is None:
        shrunk = _shrink(render, attrs.evolve(f, text=""), "name", limit)
    return None if shrunk is None else render(shrunk)


def _check_limit(limit: int) -> None:
    if limit < MIN_LIMIT:
        raise ValueError(f"caption limit must be at least {MIN_LIMIT}, got {limit}")


def build_caption(
    post: Post,
    *,
    style: CaptionStyle = "full",
    template: str | None = None,
    limit: int = CAPTION_LIMIT,
    lang: str = DEFAULT,
    lead: bool = False,
) -> str:
    """The HTML caption of ``post``, at most ``limit`` visible UTF-16 units; our own words
    in it (a poll's head, a community note's, "quoting") in `lang`.

    ``lead``: the post's whole text follows as messages of their own, so the
    caption keeps only its start (about `SHORT_TEXT` units); the quote, poll and
    community note stay in it as they are.

    ``full``: author line, text, link. ``short``: the same with the text cut
    to about `SHORT_TEXT` units. ``none``: the link alone. A ``template``
    (a chat's ``/format``) takes precedence over ``style``; one that does not
    validate, or cannot fit, falls back to the ``full`` caption rather than
    failing a send. The sender puts the caption on the first item of the
    first send step (see `xbot.sending.albums.plan_sends`).
    """
    _check_limit(limit)
    fields = _fields(post, lang, SHORT_TEXT if lead else None)
    if template is not None and not validate_template(template):
        rendered = _fit(_template_renderer(template), fields, limit)
        if rendered is not None:
            return rendered
    if style == "none":
        return _render_link(fields)
    if style == "short":
        fields = attrs.evolve(
            fields, text=_cut(fields.text, SHORT_TEXT), q_text=_cut(fields.q_text, SHORT_TEXT // 2)
        )
    rendered = _fit(_render_default, fields, limit)
    if rendered is None and fields.q_url:
        # Two overlong links leave no room: the post's own link wins.
        rendered = _fit(_render_default, attrs.evolve(fields, q_url=""), limit)
    # With limit >= MIN_LIMIT the title (<= 64), the handle (<= 32) and the
    # link text (<= 96) leave the name over fifty units, so this cannot be None.
    assert rendered is not None
    return rendered


def text_fits(post: Post, *, limit: int = CAPTION_LIMIT, lang: str = DEFAULT) -> bool:
    """Whether the full caption carries the post's whole text, nothing cut.

    A quoted post's text is cut first (`_fit`), so it never decides: a short post
    quoting a long one fits.
    """
    _check_limit(limit)
    return _fits(_render_default, attrs.evolve(_fields(post, lang), q_text=""), limit)


def build_text_reply(post: Post, lang: str = DEFAULT) -> str:
    """The answer to a post without media: the full caption shape, within a message's 4096."""
    return build_caption(post, style="full", limit=TEXT_LIMIT, lang=lang)


# --- a chat's own template (/format) ----------------------------------------------------------
#
# Templates use the placeholders ``{author}``, ``{handle}``, ``{text}`` and ``{url}``.
# They are parsed with `string.Formatter.parse` and substituted by hand: nothing is
# ever looked up on an object, so ``{author.__class__}`` is just an unknown
# placeholder. A title rides at the head of ``{text}``, so a template written before
# titles existed still shows it.

PLACEHOLDERS = ("author", "handle", "text", "url")
# The visible text a template may add around its placeholders.
MAX_TEMPLATE_LENGTH = 512
# Entries of `validate_template`'s answer that are not placeholder names.
MALFORMED = "unbalanced braces"
TOO_LONG = f"longer than {MAX_TEMPLATE_LENGTH} characters"

_FORMATTER = string.Formatter()


def validate_template(template: str) -> list[str]:
    """What is wrong with a ``/format`` template; an empty list when it is usable.

    Each unknown or decorated placeholder is listed as written
    (``foo``, ``author.__class__``, ``text!r``, ``text:>9``, ``""`` for
    ``{}``), once, in order. Unbalanced braces give the single entry
    `MALFORMED`; too much fixed text adds `TOO_LONG`.
    """
    try:
        parsed = list(_FORMATTER.parse(template))
    except ValueError:
        return [MALFORMED]
    problems: list[str] = []
    literal_length = 0
    for literal, field, spec, conversion in parsed:
        literal_length += utf16_len(literal)
        if field is None:
            continue
        written = field + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "")
        bad = field not in PLACEHOLDERS or bool(spec) or conversion is not None
        if bad and written not in problems:
            problems.append(written)
    if literal_length > MAX_TEMPLATE_LENGTH:
        problems.append(TOO_LONG)
    return problems


def _template_renderer(template: str) -> Render:
    parsed = [(_clean_literal(lit), field) for lit, field, _, _ in _FORMATTER.parse(template)]
    has_url = any(field == "url" for _, field in parsed)

    def render(f: _Fields) -> str:
        values = {
            "author": _esc(f.name),
            "handle": _esc(f.handle),
            "text": _esc("\n\n".join(t for t in (f.title, f.text) if t)),
            "url": _link(f),
        }
        out = "".join(_esc(lit) + (values[field] if field else "") for lit, field in parsed)
        out = out.strip()
        if has_url:
            return out
        # The link always survives, even when the template forgot it.
        return f"{out}\n\n{_link(f)}" if out else _link(f)

    return render


def _clean_literal(text: str) -> str:
    # Like _clean, but keeps the edges: a template's spacing is the user's choice.
    text = _LONE_SURROGATE.sub("\ufffd", text).replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROLS.sub("", text)


def render_template(template: str, post: Post, *, limit: int = CAPTION_LIMIT) -> str:
    """``post`` through a ``/format`` template, at most ``limit`` visible units.

    Values are HTML-escaped; so is the template's own text (it is plain text,
    not HTML). ``{text}`` is cut first, then ``{author}``. Without ``{url}``
    the link is appended. Raises ValueError for a template
    `validate_template` refuses, or one whose fixed text cannot fit.
    """
    _check_limit(limit)
    problems = validate_template(template)
    if problems:
        raise ValueError(f"bad caption template: {', '.join(problems)}")
    rendered = _fit(_template_renderer(template), _fields(post), limit)
    if rendered is None:
        raise ValueError("caption template does not fit the limit")
    return rendered
