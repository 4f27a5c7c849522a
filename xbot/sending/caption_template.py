"""User caption templates (``/format``): checked, and rendered through the caption's fitting.

Templates use the placeholders ``{author}``, ``{handle}``, ``{text}`` and
``{url}``. They are parsed with `string.Formatter.parse` and substituted by
hand: nothing is ever looked up on an object, so ``{author.__class__}`` is
just an unknown placeholder. A title rides at the head of ``{text}``, so a
template written before titles existed still shows it.

This module builds on `xbot.sending.caption` (its fields, its fitting); that
module re-exports these names and reaches them on first use, so neither has
to be imported first (issue 11: no module over ~500 lines).
"""

from __future__ import annotations

import string

from xbot.media.models import Post
from xbot.sending.caption import (
    _CONTROLS,
    _LONE_SURROGATE,
    CAPTION_LIMIT,
    Render,
    _check_limit,
    _esc,
    _Fields,
    _fields,
    _fit,
    _link,
    utf16_len,
)

__all__ = [
    "MALFORMED",
    "MAX_TEMPLATE_LENGTH",
    "PLACEHOLDERS",
    "TOO_LONG",
    "render_template",
    "validate_template",
]

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
