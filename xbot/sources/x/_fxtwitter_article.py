"""An X article's body out of FxEmbed's JSON: its Draft.js ``content`` as a `RichText`.

FxEmbed's v2 status carries ``article`` (``TwitterArticleSchema`` in its
``packages/atmosphere/src/types/api-schemas.ts``): ``title``, ``preview_text``,
``cover_media`` and ``content`` = ``{blocks, entityMap}``, X's Draft.js content
state. Each block is ``{key, type, text, inlineStyleRanges[{offset, length, style}],
entityRanges[{key, offset, length}], data}``, offsets in UTF-16 code units of the
block's text; ``entityMap`` is a list of ``{key, value: {type, data}}`` (a dict keyed
the same way in plain Draft.js, read too).

What becomes of it, pure and never raising:

- paragraphs (``unstyled``) apart by a blank line; headings (``header-*``) in bold;
  list items as ``• `` or ``1. `` lines; a quote (``blockquote``) in italic (a
  Telegram blockquote cannot sit inside the expandable one the text goes in);
  ``code-block`` as code;
- inline styles Bold, Italic, Underline and Strikethrough; ``LINK`` entities as links;
- an embedded post (``TWEET``) as its link on a line of its own.

Left out: embedded images and videos (``MEDIA`` entities in ``atomic`` blocks; the
cover photo is the post's media), and ``MARKDOWN`` blocks' rendering (their source
text is kept as code).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from xbot.media.models import RichText, SpanKind, TextSpan

__all__ = ["article_body"]

_STYLES: dict[str, SpanKind] = {
    "bold": "bold",
    "italic": "italic",
    "underline": "underline",
    "strikethrough": "strikethrough",
}
# What Telegram will not take in a message, replaced one unit for one so offsets hold.
_UNSENDABLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def _u16(text: str) -> int:
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def _entities(raw: object) -> dict[str, Mapping[str, Any]]:
    """The entity map by key, from FxEmbed's list or Draft.js's dict."""
    out: dict[str, Mapping[str, Any]] = {}
    if isinstance(raw, list):
        for entry in raw:
            if isinstance(entry, Mapping) and isinstance(entry.get("value"), Mapping):
                out[str(entry.get("key"))] = entry["value"]
    elif isinstance(raw, Mapping):
        for key, value in raw.items():
            if isinstance(value, Mapping):
                out[str(key)] = value
    return out


def _ranges(raw: object) -> list[Mapping[str, Any]]:
    return [r for r in raw if isinstance(r, Mapping)] if isinstance(raw, list) else []


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class _Builder:
    def __init__(self) -> None:
        self.parts: list[str] = []
        self.spans: list[TextSpan] = []
        self.length = 0  # UTF-16 units so far

    def add(self, text: str, spans: Sequence[TextSpan] = (), *, sep: str = "\n\n") -> None:
        if self.parts:
            self.parts.append(sep)
            self.length += _u16(sep)
        base = self.length
        self.parts.append(text)
        self.length += _u16(text)
        for span in spans:
            self.spans.append(TextSpan(span.kind, span.offset + base, span.length, span.url))

    def result(self) -> RichText:
        return RichText("".join(self.parts), tuple(self.spans))


def _block_spans(
    block: Mapping[str, Any], size: int, shift: int, entities: Mapping[str, Mapping[str, Any]]
) -> list[TextSpan]:
    spans: list[TextSpan] = []
    for style in _ranges(block.get("inlineStyleRanges")):
        kind = _STYLES.get(str(style.get("style", "")).lower())
        offset, length = _int(style.get("offset")), _int(style.get("length"))
        if kind and offset is not None and length and offset >= 0 and offset + length <= size:
            spans.append(TextSpan(kind, offset + shift, length))
    for ref in _ranges(block.get("entityRanges")):
        entity = entities.get(str(ref.get("key")), {})
        data = entity.get("data")
        url = data.get("url") if isinstance(data, Mapping) else None
        offset, length = _int(ref.get("offset")), _int(ref.get("length"))
        if (
            str(entity.get("type", "")).upper() == "LINK"
            and isinstance(url, str)
            and url.startswith(("https://", "http://"))
            and offset is not None
            and length
            and offset >= 0
            and offset + length <= size
        ):
            spans.append(TextSpan("text_link", offset + shift, length, url))
    return spans


def _atomic(
    block: Mapping[str, Any], entities: Mapping[str, Mapping[str, Any]]
) -> tuple[str, bool]:
    """An atomic block's text: an embedded post's link, or a markdown block's source (as
    code: True); ("", False) for what is left out (embedded media)."""
    for ref in _ranges(block.get("entityRanges")):
        entity = entities.get(str(ref.get("key")), {})
        kind = str(entity.get("type", "")).upper()
        data = entity.get("data")
        if not isinstance(data, Mapping):
            continue
        if kind == "TWEET" and str(data.get("tweetId", "")).isdigit():
            return f"https://x.com/i/status/{data['tweetId']}", False
        if kind == "MARKDOWN" and isinstance(data.get("markdown"), str):
            return _UNSENDABLE.sub(" ", str(data["markdown"])).strip(), True
    return "", False


def article_body(article: object) -> RichText | None:
    """The article's body as text with formatting, or None when it has none."""
    if not isinstance(article, Mapping):
        return None
    content = article.get("content")
    if not isinstance(content, Mapping) or not isinstance(content.get("blocks"), list):
        return None
    entities = _entities(content.get("entityMap"))
    out = _Builder()
    number = 0
    previous = ""
    for block in content["blocks"]:
        if not isinstance(block, Mapping):
            continue
        kind = str(block.get("type", "unstyled"))
        raw = block.get("text")
        text = _UNSENDABLE.sub(" ", raw) if isinstance(raw, str) else ""
        number = number + 1 if kind == "ordered-list-item" else 0
        if kind == "atomic":
            embedded, as_code = _atomic(block, entities)
            if embedded:
                out.add(embedded, [TextSpan("code", 0, _u16(embedded))] if as_code else [])
            previous = kind
            continue
        if not text.strip():
            continue
        prefix = {"unordered-list-item": "• ", "ordered-list-item": f"{number}. "}.get(kind, "")
        shift = _u16(prefix)
        size = _u16(text)
        spans = _block_spans(block, size, shift, entities)
        whole = shift + size
        if kind.startswith("header-"):
            spans.insert(0, TextSpan("bold", 0, whole))
        elif kind == "blockquote":
            spans.insert(0, TextSpan("italic", 0, whole))
        elif kind == "code-block":
            spans = [TextSpan("code", 0, whole)]  # Telegram takes no entity inside code
        in_list = kind.endswith("list-item") and previous == kind
        out.add(prefix + text, spans, sep="\n" if in_list else "\n\n")
        previous = kind
    body = out.result()
    return body if body.text.strip() else None
