"""Which language a chat is answered in, and the sentences in it.

Every sentence a user reads is an English msgid in one gettext catalogue
(``xbot/locale/<lang>/LC_MESSAGES/xbot.po``); `make catalogs` extracts,
updates and compiles them with Babel, and the compiled ``.mo`` files ship in
the package: nothing is compiled at run time, and the bot needs only the
standard library's `gettext` to read them. A sentence missing from a
catalogue (untranslated or fuzzy) falls back to its English text, sentence
by sentence, never to a key.

Marking: ``_("...")`` where the translator is at hand (``_ = tr.gettext``),
``N_("...")`` for a module-level constant translated where it is used, and
``tr.ngettext(singular, plural, n)`` for counts. Placeholders are
`str.format` names (``{title}``), filled after translation; the catalogue
tests check that each translation keeps the English placeholders and HTML
tags. The post's own text (author, words) is data, never a msgid.

A failure reason is raised deep inside, in English, and stored with a dead
task as text: it is translated when the chat's sentence is built
(`translate_reason`). A reason with a detail in it (an HTTP status, who
answered) is a template registered with `reason_template`, so the stored
English is matched back to its template and refilled after translation.

The language a worker speaks is decided by the handler when the task is
queued and carried in it (`xbot.sending.destination.Destination.lang`).

The language (`chat_language`, a pure function): in a private chat the
user's Telegram ``language_code``; in a group or channel the language an
admin picked in ``/settings``, else that of whoever added the bot, else
English. Codes are normalised (`normalize`): ``pt-br`` -> ``pt_BR``,
``de-AT`` -> ``de``; one we have no catalogue for is English.
"""

from __future__ import annotations

import functools
import gettext
import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import Final

import attrs

log = logging.getLogger(__name__)

__all__ = [
    "DEFAULT",
    "LANGUAGES",
    "LOCALE_DIR",
    "N_",
    "Translator",
    "chat_language",
    "gettext_for",
    "mo_path",
    "normalize",
    "reason_template",
    "telegram_code",
    "translate_reason",
    "translator",
]

DOMAIN: Final = "xbot"
LOCALE_DIR: Final = Path(__file__).with_name("locale")
DEFAULT: Final = "en"
# Every language shipped, English first, each in its own name (the /settings menu
# shows them so: a reader finds their language whatever the menu is in now).
LANGUAGES: Final[dict[str, str]] = {
    "en": "English",
    "ru": "Русский",
    "es": "Español",
    "pt_BR": "Português (Brasil)",
    "de": "Deutsch",
    "tr": "Türkçe",
    "id": "Bahasa Indonesia",
    "ja": "日本語",
    "fa": "فارسی",
}
# Codes Telegram clients send that mean one of ours without saying it the same way.
_ALIASES: Final[dict[str, str]] = {
    "pt": "pt_BR",  # the only Portuguese we have; closer than English for pt-PT
    "in": "id",  # the withdrawn ISO 639 code for Indonesian, still sent by old Androids
}


def N_(message: str) -> str:
    """Mark `message` for extraction without translating it (translated where used)."""
    return message


def normalize(code: str | None) -> str:
    """A Telegram ``language_code`` (IETF tag) as one of `LANGUAGES`; English if none fits."""
    if not code:
        return DEFAULT
    parts = code.strip().replace("_", "-").split("-")
    lang = parts[0].lower()
    region = parts[1].upper() if len(parts) > 1 else ""
    if f"{lang}_{region}" in LANGUAGES:
        return f"{lang}_{region}"
    if lang in LANGUAGES:
        return lang
    return _ALIASES.get(lang, DEFAULT)


def telegram_code(lang: str) -> str | None:
    """The ``language_code`` setMyCommands takes for `lang` (two letters); None for the
    default menu, which English is."""
    if lang == DEFAULT:
        return None
    return lang.split("_", maxsplit=1)[0]


def chat_language(
    chat_type: str,
    *,
    user_language: str | None,
    chat_setting: str | None = None,
    adder_language: str | None = None,
) -> str:
    """The language to answer in.

    A private chat follows the user's own Telegram language. A group, supergroup
    or channel is many people: the language an admin picked (`chat_setting`),
    else the language of whoever added the bot (`adder_language`), else English.
    """
    if chat_type == "private":
        return normalize(user_language)
    if chat_setting:
        return normalize(chat_setting)
    return normalize(adder_language)


@attrs.frozen
class Translator:
    """The sentences of one language.

    Attributes:
        lang: one of `LANGUAGES`.
    """

    lang: str
    _catalogue: gettext.NullTranslations = attrs.field(repr=False, alias="catalogue")

    def gettext(self, message: str) -> str:
        return self._catalogue.gettext(message)

    def ngettext(self, singular: str, plural: str, n: int) -> str:
        return self._catalogue.ngettext(singular, plural, n)


def mo_path(lang: str) -> Path:
    return LOCALE_DIR / lang / "LC_MESSAGES" / f"{DOMAIN}.mo"


def translator(lang: str | None) -> Translator:
    """The translator for `lang` (normalised first), loaded once from its ``.mo``.

    A catalogue that cannot be read (a broken install) answers in English and
    says so in the log once: a user gets the sentence, never an error.
    """
    # Cached by the normalised code: whatever codes clients send, at most one each.
    return _load(normalize(lang))


@functools.cache
def _load(lang: str) -> Translator:
    if lang == DEFAULT:
        return Translator(lang, catalogue=gettext.NullTranslations())
    try:
        with mo_path(lang).open("rb") as mo:
            return Translator(lang, catalogue=gettext.GNUTranslations(mo))
    except OSError as exc:
        log.error("catalogue missing, answering in English: %s: %s", lang, exc)
        return Translator(lang, catalogue=gettext.NullTranslations())


# Reasons with placeholders, each with the pattern that reads its English back.
_REASONS: list[tuple[str, re.Pattern[str]]] = []


def reason_template(template: str) -> str:
    """Register a reason with ``{placeholders}`` (marked ``N_`` inside the call); returns
    it. Raise it filled in (``template.format(status=502)``): `translate_reason` finds
    the template again in the English, however the text was stored."""
    fields = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>.+?)", re.escape(template))
    _REASONS.append((template, re.compile(f"^{fields}$", re.DOTALL)))
    return template


def translate_reason(reason: str, lang: str | None) -> str:
    """A failure reason (English, as raised or stored) in `lang`: a msgid directly, a
    filled `reason_template` by its template; anything else as it was written.

    A filled-in value that is itself a msgid (who answered: ``N_("the X API")``) is
    translated too; the sentence starts with a capital when the English one did.
    """
    tr = translator(lang)
    said = tr.gettext(reason)
    if said != reason or tr.lang == DEFAULT:
        return said
    for template, pattern in _REASONS:
        match = pattern.match(reason)
        if match:
            values = {k: _value(tr, v) for k, v in match.groupdict().items()}
            said = tr.gettext(template).format(**values)
            return said[:1].upper() + said[1:] if reason[:1].isupper() else said
    return reason


def _value(tr: Translator, value: str) -> str:
    for candidate in (value, value[:1].lower() + value[1:]):  # "The X API" opens a sentence
        said = tr.gettext(candidate)
        if said != candidate:
            return said
    return value


def gettext_for(lang: str | None) -> Callable[[str], str]:
    """The ``_`` of one language: ``_ = gettext_for("de"); _("Close")``."""
    return translator(lang).gettext
