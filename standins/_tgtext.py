"""Telegram's text rules, as pure functions: UTF-16 lengths, HTML entity parsing, auto-entities.

Telegram measures text, captions and entity offsets in UTF-16 code units after
entity parsing; the stand-in applies its length limits to the same count, so a
caption that passes here passes there. The HTML parser follows the Bot API's
documented subset (and tdlib's error texts); an unsupported tag or an unclosed
one is an error, as on Telegram, not silently dropped.
"""

from __future__ import annotations

import re
from typing import Any

Entity = dict[str, Any]

# tag -> entity type; "span" and "a" are handled specially.
_SIMPLE_TAGS = {
    "b": "bold",
    "strong": "bold",
    "i": "italic",
    "em": "italic",
    "u": "underline",
    "ins": "underline",
    "s": "strikethrough",
    "strike": "strikethrough",
    "del": "strikethrough",
    "tg-spoiler": "spoiler",
    "code": "code",
    "pre": "pre",
    "blockquote": "blockquote",
    "tg-emoji": "custom_emoji",
}
_SUPPORTED_TAGS = frozenset({*_SIMPLE_TAGS, "a", "span"})

_NAMED_ENTITIES = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}
_ENTITY_RE = re.compile(r"&(?:(lt|gt|amp|quot)|#([0-9]{1,7})|#[xX]([0-9a-fA-F]{1,6}));")
_TAG_NAME_RE = re.compile(r"[a-zA-Z0-9-]*")
_ATTR_RE = re.compile(r"""\s*([a-zA-Z0-9_-]+)\s*(?:=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+)))?""")


class EntityParseError(ValueError):
    """The text does not parse; `description` is Telegram's full error text."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.description = f"Bad Request: can't parse entities: {detail}"


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units: what Telegram counts for limits and offsets."""
    return len(text.encode("utf-16-le")) // 2


def _byte_offset(text: str, index: int) -> int:
    return len(text[:index].encode("utf-8"))


def _parse_attrs(raw: str) -> dict[str, str]:
    attrs: dict[str, str] = {}
    pos = 0
    while pos < len(raw):
        m = _ATTR_RE.match(raw, pos)
        if m is None or m.end() == pos:
            break
        value = m.group(2) if m.group(2) is not None else m.group(3)
        if value is None:
            value = m.group(4) if m.group(4) is not None else ""
        attrs[m.group(1).lower()] = unescape_html(value)
        pos = m.end()
    return attrs


def unescape_html(text: str) -> str:
    """Decode the entities Telegram decodes; anything else after '&' stays as typed."""

    def one(m: re.Match[str]) -> str:
        if m.group(1):
            return _NAMED_ENTITIES[m.group(1)]
        code = int(m.group(2)) if m.group(2) else int(m.group(3), 16)
        if code == 0 or code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
            return m.group(0)
        return chr(code)

    return _ENTITY_RE.sub(one, text)


def parse_html(text: str) -> tuple[str, list[Entity]]:
    """Telegram's `parse_mode=HTML`: the plain text and its entities (UTF-16 offsets).

    Raises EntityParseError with Telegram's wording for what Telegram refuses.
    """
    parser = _HtmlParser(text)
    i = 0
    while i < len(text):
        if text[i] == "&":
            i = parser.entity(i)
        elif text[i] != "<":
            i = parser.plain(i)
        elif text.startswith("</", i):
            i = parser.end_tag(i)
        else:
            i = parser.start_tag(i)
    return parser.finish()


class _HtmlParser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.out: list[str] = []
        self.pos16 = 0
        self.stack: list[tuple[str, int, dict[str, str]]] = []  # name, start (UTF-16), attrs
        self.entities: list[Entity] = []

    def _emit(self, piece: str) -> None:
        self.out.append(piece)
        self.pos16 += utf16_len(piece)

    def entity(self, i: int) -> int:
        m = _ENTITY_RE.match(self.text, i)
        if m is None:
            self._emit("&")  # an unknown entity stays as typed
            return i + 1
        self._emit(unescape_html(m.group(0)))
        return m.end()

    def plain(self, i: int) -> int:
        j = i
        while j < len(self.text) and self.text[j] not in "<&":
            j += 1
        self._emit(self.text[i:j])
        return j

    def end_tag(self, i: int) -> int:
        offset = _byte_offset(self.text, i)
        close = self.text.find(">", i)
        if close < 0:
            raise EntityParseError(f"Unclosed end tag at byte offset {offset}")
        name = self.text[i + 2 : close].strip().lower()
        if not self.stack:
            raise EntityParseError(f"Unexpected end tag at byte offset {offset}")
        top, start16, attrs = self.stack.pop()
        if name != top:
            raise EntityParseError(
                f'Unmatched end tag at byte offset {offset}, expected "</{top}>", found "</{name}>"'
            )
        entity = _entity_for(top, attrs, start16, self.pos16 - start16)
        if entity is not None:
            self.entities.append(entity)
        return close + 1

    def start_tag(self, i: int) -> int:
        offset = _byte_offset(self.text, i)
        close = self.text.find(">", i)
        if close < 0:
            raise EntityParseError(f"Unclosed start tag at byte offset {offset}")
        m = _TAG_NAME_RE.match(self.text, i + 1)
        name = (m.group(0) if m else "").lower()
        if name not in _SUPPORTED_TAGS:
            raise EntityParseError(f'Unsupported start tag "{name}" at byte offset {offset}')
        attrs = _parse_attrs(self.text[i + 1 + len(name) : close].rstrip("/"))
        if name == "span" and attrs.get("class") != "tg-spoiler":
            raise EntityParseError(
                f'Tag "span" must have class "tg-spoiler" at byte offset {offset}'
            )
        self.stack.append((name, self.pos16, attrs))
        return close + 1

    def finish(self) -> tuple[str, list[Entity]]:
        if self.stack:
            raise EntityParseError(
                f'Can\'t find end tag corresponding to start tag "{self.stack[-1][0]}"'
            )
        self.entities.sort(key=lambda e: (e["offset"], -e["length"]))
        return "".join(self.out), self.entities


def _entity_for(name: str, attrs: dict[str, str], offset: int, length: int) -> Entity | None:
    if length == 0:
        return None  # Telegram drops empty entities
    entity: Entity = {"offset": offset, "length": length}
    if name == "a":
        entity.update(type="text_link", url=attrs.get("href", ""))
    elif name == "span":
        entity["type"] = "spoiler"
    elif name == "blockquote":
        entity["type"] = "expandable_blockquote" if "expandable" in attrs else "blockquote"
    elif name == "tg-emoji":
        entity.update(type="custom_emoji", custom_emoji_id=attrs.get("emoji-id", ""))
    else:
        entity["type"] = _SIMPLE_TAGS[name]
    return entity


def rendered_text(text: str, parse_mode: str | None) -> tuple[str, list[Entity]]:
    """The text as Telegram stores it after applying `parse_mode`.

    Only HTML is parsed; Markdown modes are measured as sent (a documented gap of
    the stand-in: xbot sends HTML).
    """
    if parse_mode is not None and parse_mode.lower() == "html":
        return parse_html(text)
    return text, []


# Telegram's clients and servers mark these in user messages; the bot sees them
# as entities (PTB's CommandHandler needs the bot_command one at offset 0).
_URL_RE = re.compile(r"https?://[^\s<>\"]+", re.IGNORECASE)
_MENTION_RE = re.compile(r"(?<![\w@/])@[A-Za-z][A-Za-z0-9_]{3,31}(?![\w@])")
_COMMAND_RE = re.compile(r"(?<![\w/])/[A-Za-z0-9_]{1,32}(?:@[A-Za-z0-9_]{3,32})?(?![\w/])")
_TRAILING = ".,;:!?'\"»"


def _trim_url(url: str) -> str:
    while url and (url[-1] in _TRAILING or (url[-1] == ")" and url.count("(") < url.count(")"))):
        url = url[:-1]
    return url


def auto_entities(text: str) -> list[Entity]:
    """`url`, `bot_command` and `mention` entities as Telegram would attach them, UTF-16
    offsets."""
    found: list[tuple[int, int, str]] = []
    for m in _URL_RE.finditer(text):
        url = _trim_url(m.group(0))
        if "://" in url and len(url) > url.index("://") + 3:
            found.append((m.start(), m.start() + len(url), "url"))
    for m in _COMMAND_RE.finditer(text):
        if not any(s <= m.start() < e for s, e, _ in found):
            found.append((m.start(), m.end(), "bot_command"))
    for m in _MENTION_RE.finditer(text):
        if not any(s <= m.start() < e for s, e, _ in found):
            found.append((m.start(), m.end(), "mention"))
    found.sort()
    return [
        {"type": kind, "offset": utf16_len(text[:start]), "length": utf16_len(text[start:end])}
        for start, end, kind in found
    ]
