"""Languages: the decision, the catalogues (complete, consistent with English, up to date
with the code and compiled), every message of every language through the stand-in's HTML
parser, and the bot answering in the user's or the chat's language end to end."""

from __future__ import annotations

import asyncio
import gettext
import io
import re
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from babel.messages.catalog import Catalog, Message
from babel.messages.extract import DEFAULT_KEYWORDS, extract_from_dir
from babel.messages.frontend import parse_mapping_cfg
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po

from standins import EntityParseError, parse_html
from standins.harness import Harness
from xbot.handlers.commands import COMMANDS, help_text
from xbot.i18n import (
    DEFAULT,
    LANGUAGES,
    LOCALE_DIR,
    Translator,
    chat_language,
    mo_path,
    normalize,
    telegram_code,
    translate_reason,
    translator,
)
from xbot.media import download, netguard
from xbot.sources.x import DELETED

ROOT = Path(__file__).resolve().parent.parent
POT = LOCALE_DIR / "xbot.pot"
TRANSLATED = [lang for lang in LANGUAGES if lang != DEFAULT]
_PLACEHOLDER = re.compile(r"\{(\w+)\}")
_TAG = re.compile(r"</?[a-zA-Z][^>]*>")


def _catalogue(path: Path, lang: str | None = None) -> Catalog:
    with path.open("rb") as f:
        return read_po(f, locale=lang)


def _po(lang: str) -> Path:
    return LOCALE_DIR / lang / "LC_MESSAGES" / "xbot.po"


def _messages(catalog: Catalog) -> Iterator[Message]:
    return (m for m in catalog if m.id)


def _ids(message: Message) -> list[str]:
    return list(message.id) if isinstance(message.id, (list, tuple)) else [message.id]


def _strings(message: Message) -> list[str]:
    s = message.string
    return list(s) if isinstance(s, (list, tuple)) else [s]


def english_ids() -> list[str]:
    return [_ids(m)[0] for m in _messages(_catalogue(POT))]


# --- the decision -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "lang"),
    [
        ("en", "en"),
        ("en-GB", "en"),
        ("ru", "ru"),
        ("pt-br", "pt_BR"),
        ("pt-BR", "pt_BR"),
        ("pt_BR", "pt_BR"),
        ("pt", "pt_BR"),
        ("es-419", "es"),
        ("de-AT", "de"),
        ("DE", "de"),
        ("in", "id"),
        ("fa", "fa"),
        ("zh-hans", "en"),
        ("", "en"),
        (None, "en"),
        ("  ja ", "ja"),
    ],
    ids=repr,
)
def test_normalize(code: str | None, lang: str) -> None:
    assert normalize(code) == lang


@pytest.mark.parametrize(
    ("chat_type", "user", "setting", "adder", "lang"),
    [
        ("private", "de", None, None, "de"),
        ("private", "de", "ru", "tr", "de"),  # a private chat has no group setting to follow
        ("private", None, None, None, "en"),
        ("private", "xx", None, None, "en"),
        ("supergroup", "de", "ru", "tr", "ru"),  # an admin's pick wins
        ("supergroup", "de", None, "tr", "tr"),  # else whoever added the bot
        ("supergroup", "de", None, None, "en"),  # never the speaker's own: many people read it
        ("group", None, "pt-br", None, "pt_BR"),
        ("channel", None, None, "ja", "ja"),
        ("supergroup", None, "xx", "tr", "en"),  # an unknown pick is English, not the adder's
    ],
    ids=["private", "private-ignores-group", "private-none", "private-unknown", "group-setting",
         "group-adder", "group-default", "group-region", "channel-adder", "group-unknown"],
)  # fmt: skip
def test_chat_language(
    chat_type: str, user: str | None, setting: str | None, adder: str | None, lang: str
) -> None:
    assert (
        chat_language(chat_type, user_language=user, chat_setting=setting, adder_language=adder)
        == lang
    )


def test_telegram_codes() -> None:
    assert telegram_code("en") is None  # the default menu
    assert [telegram_code(lang) for lang in TRANSLATED] == [
        "ru", "es", "pt", "de", "tr", "id", "ja", "fa"
    ]  # fmt: skip


# --- the catalogues -----------------------------------------------------------------------------


def test_languages_shipped() -> None:
    assert {"en", "ru", "es", "pt_BR", "de", "tr", "id", "ja", "fa"} <= set(LANGUAGES)
    for lang in TRANSLATED:
        assert _po(lang).is_file(), lang
        assert mo_path(lang).is_file(), lang


@pytest.mark.parametrize("lang", TRANSLATED)
def test_every_catalogue_is_complete(lang: str) -> None:
    """Every English sentence has a translation, every plural form filled, none fuzzy."""
    catalog = _catalogue(_po(lang), lang)
    ids = {_ids(m)[0] for m in _messages(catalog)}
    assert ids == set(english_ids())
    for message in _messages(catalog):
        assert not message.fuzzy, message.id
        strings = _strings(message)
        assert all(strings), message.id
        if message.pluralizable:
            assert len(strings) == catalog.num_plurals, message.id
    # What `pybabel compile` checks too (a printf-style flag it infers, plural counts).
    assert [(m.id, [str(e) for e in errors]) for m, errors in catalog.check()] == []


@pytest.mark.parametrize("lang", TRANSLATED)
def test_placeholders_and_tags_match_english(lang: str) -> None:
    for message in _messages(_catalogue(_po(lang), lang)):
        english = _ids(message)
        want_fields = Counter(_PLACEHOLDER.findall(english[-1]))
        want_tags = Counter(_TAG.findall(english[-1]))
        assert Counter(_PLACEHOLDER.findall(english[0])) == want_fields  # singular = plural
        for text in _strings(message):
            assert Counter(_PLACEHOLDER.findall(text)) == want_fields, (message.id, text)
            assert Counter(_TAG.findall(text)) == want_tags, (message.id, text)
            # Commands and the example link are the same in every language.
            for literal in re.findall(r"/[a-z_]+(?: off| reset)?|https://\S+", english[0]):
                assert literal in text, (literal, text)


def test_the_template_is_up_to_date_with_the_code() -> None:
    """Every marked sentence in xbot/ is in xbot.pot, and nothing else (run `make catalogs`)."""
    with (ROOT / "babel.cfg").open() as cfg:
        method_map, options_map = parse_mapping_cfg(cfg)
    keywords = {**DEFAULT_KEYWORDS, "N_": None}
    found = {
        msg[0] if isinstance(msg, tuple) else msg
        for _, _, msg, *_ in extract_from_dir(
            ROOT / "xbot", method_map, options_map, keywords=keywords
        )
    }
    assert found == set(english_ids())


@pytest.mark.parametrize("lang", TRANSLATED)
def test_the_compiled_catalogue_is_the_po(lang: str) -> None:
    """The shipped .mo is what `pybabel compile` makes of the .po now (run `make catalogs`)."""
    out = io.BytesIO()
    write_mo(out, _catalogue(_po(lang), lang))
    assert mo_path(lang).read_bytes() == out.getvalue()


def _sample(text: str) -> str:
    """A message with its placeholders filled the way the code fills them (escaped HTML)."""
    values = {
        "channel": "<b>My &lt;Channel&gt;</b>",
        "title": "My &lt;Channel&gt;",
        "caption": "Alice (@alice): hi &amp; bye",
        "reason": "Bad Request: chat not found",
        "listed": "{foo} {bar}",
        "placeholders": "{author} {handle} {text} {url}",
        "limit": "512",
        "state": "on",
        "style": "short",
        "quality": "at most 720p",
        "language": "Deutsch",
        "size": "31 MB",
        "percent": "42",
        "total": "31 MB",
        "done": "812 KB",
        "n": "42",
        "what": "https://x.com/a/status/1?a=1&amp;b=2",
        "url": "https://x.com/a/status/1",
        "length": "1100",
        "example": "/format {author}: {text} {url}",
        "status": "502",
        "error": "Bad Request: message is too long",
        "host": "'example.invalid'",
        "who": "the X API",
        "note": "Context &amp; sources",
        # The alerts to the operators (xbot.tasks.alerts).
        "start": "12:03",
        "end": "12:19",
        "minutes": "16",
        "rate": "10",
        "seconds": "60",
        "delayed": "37",
        "lost": "0",
        "waiting": "12",
        "count": "5",
        "free": "180",
        "version": "2025.01.15",
        "days": "320",
        "command": "/opt/xbot/venv/bin/python -m pip install -U yt-dlp",
        "sources": "fxtwitter, vxtwitter",
    }
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], text)


@pytest.mark.parametrize("lang", list(LANGUAGES))
def test_every_message_parses_as_telegram_html(lang: str) -> None:
    """Every sentence of every language, filled in, is accepted by the stand-in's HTML parser
    (Telegram's rules: balanced known tags, escaped < > &) and fits a message."""
    tr = translator(lang)
    for message in _messages(_catalogue(POT)):
        ids = _ids(message)
        texts = (
            [tr.ngettext(ids[0], ids[1], n) for n in (1, 2, 5)]
            if message.pluralizable
            else [tr.gettext(ids[0])]
        )
        for text in texts:
            assert text
            try:
                plain, _ = parse_html(_sample(text))
            except EntityParseError as exc:  # pragma: no cover - the failure message
                pytest.fail(f"{lang}: {text!r}: {exc}")
            assert 0 < len(plain) <= 4096
    for command in COMMANDS:
        assert 1 <= len(tr.gettext(command.description)) <= 256  # setMyCommands' limit


# --- the lookups --------------------------------------------------------------------------------


def test_a_missing_translation_falls_back_to_english_sentence_by_sentence() -> None:
    partial = Catalog(locale="de")
    partial.add("Close", "Schließen")
    partial.add("Skip", "")  # untranslated
    partial.add("Forward", "Weiterleiten", flags=["fuzzy"])  # not trusted: not compiled
    partial.add(("One {n}.", "Many {n}."), ("Ein {n}.", "Viele {n}."))
    out = io.BytesIO()
    write_mo(out, partial)
    out.seek(0)
    tr = Translator("de", catalogue=gettext.GNUTranslations(out))
    assert tr.gettext("Close") == "Schließen"
    assert tr.gettext("Skip") == "Skip"
    assert tr.gettext("Forward") == "Forward"
    assert tr.gettext("Never marked") == "Never marked"
    assert [tr.ngettext("One {n}.", "Many {n}.", n) for n in (1, 3)] == ["Ein {n}.", "Viele {n}."]
    assert [tr.ngettext("A {n}.", "As {n}.", n) for n in (1, 3)] == ["A {n}.", "As {n}."]


def test_one_translator_per_language_whatever_the_spelling() -> None:
    assert translator("de-AT") is translator("de") is translator("DE")
    assert translator("zh-hans") is translator(None) is translator("en")
    assert translator("de").lang == "de"


def test_plurals_follow_each_language() -> None:
    one, many = "Unknown placeholder: {listed}.", "Unknown placeholders: {listed}."
    ru = translator("ru")
    assert ru.ngettext(one, many, 1) == "Неизвестная подстановка: {listed}."
    assert ru.ngettext(one, many, 3) == "Неизвестные подстановки: {listed}."
    assert translator("en").ngettext(one, many, 2) == many
    assert translator("ja").ngettext(one, many, 1) == translator("ja").ngettext(one, many, 7)


def test_help_lists_the_same_commands_in_every_language() -> None:
    for lang in LANGUAGES:
        text = help_text(lang)
        for command in COMMANDS:
            assert (f"/{command.name} — " in text) == (not command.admin), (lang, command.name)
    assert help_text("de").startswith("Schick mir einen Link")


def test_the_posts_words_are_never_translated() -> None:
    """A caption that happens to be a msgid stays as the author wrote it."""
    from xbot.tasks.prompts import Prompt, prompt_view

    prompt = Prompt(id=1, owner=None, url="https://x.com/a/status/1", items=(), caption="Close",
                    stage="confirm")  # fmt: skip
    text, _ = prompt_view(prompt, "Chan", "de")
    assert "\n\nClose\n\n" in text
    assert text.startswith("Die Beschriftung wird:")


@pytest.mark.parametrize(
    ("reason", "lang", "said"),
    [
        (DELETED, "ru", "Этот пост удалён или не существует."),  # a msgid
        (download.SERVER_ERROR.format(status=502), "de",
         "Der Medienserver hatte einen Fehler (HTTP 502)."),  # a template, refilled
        (netguard.NO_HOST.format(host="'a.invalid'"), "ja",
         "ホスト 'a.invalid' が見つかりませんでした。"),
        (download.SERVER_ERROR.format(status=502), "en",
         "The media server had an error (HTTP 502)."),
        ("The X API is having trouble.", "de", "Die X-API hat Probleme."),  # who, translated
        ("pixiv is having trouble; I will try again.", "es",
         "pixiv tiene problemas; lo intentaré de nuevo."),  # a name: as it is, lowercase kept
        ("No answer in time from the media server.", "ru", "Медиасервер: нет ответа вовремя."),
        ("lease lost on task 7", "de", "lease lost on task 7"),  # neither: as written
        ("The media server had an error (HTTP 502). And more", "de",
         "The media server had an error (HTTP 502). And more"),  # the whole text or nothing
    ],
    ids=["msgid", "template", "template-ja", "english", "who", "a-name", "who-inside", "unknown",
         "not-anchored"],
)  # fmt: skip
def test_a_reason_is_translated_whole_or_left_as_written(reason: str, lang: str, said: str) -> None:
    assert translate_reason(reason, lang) == said


def test_our_words_in_a_caption_follow_the_language_and_the_posts_do_not() -> None:
    """A poll's head, a community note's and "quoting" are ours; choices, notes and
    quoted words are the post's."""
    from xbot.media.models import Poll, PollChoice, Post
    from xbot.sending.caption import build_caption

    quoted = Post(
        key="x:2",
        url="https://x.com/b/status/2",
        author_name="Bob",
        author_handle="bob",
        text="Close",
    )
    post = Post(
        key="x:1", url="https://x.com/a/status/1", author_name="Ann", author_handle="ann",
        text="Skip", quote=quoted, note="Forward",
        poll=Poll((PollChoice("Close", 3, 75.0), PollChoice("Skip", 1, 25.0)), 4, closed=True),
    )  # fmt: skip
    german = build_caption(post, lang="de")
    assert "📊 Umfrage, Endergebnis (4 Stimmen):\n• Close: 75%\n• Skip: 25%" in german
    assert "Community-Notiz: Forward" in german
    assert "↪ zitiert <b>Bob</b> (@bob):\nClose" in german
    english = build_caption(post)
    assert "📊 Poll, final result (4 votes):" in english
    assert "↪ quoting <b>Bob</b> (@bob):" in english


# --- end to end ---------------------------------------------------------------------------------

GROUP = -700
ADMIN = 3001


@pytest.fixture
async def h(tmp_path: Path) -> AsyncIterator[Harness]:
    harness = await Harness.start(tmp_path / "data", start_bot=False)
    harness.api.add_chat(GROUP, "supergroup", title="Grupo", admins=[ADMIN])
    await harness.start_bot()
    try:
        yield harness
    finally:
        await harness.stop()


async def _said(h: Harness, chat: int, text: str, **kw: Any) -> dict[str, Any]:
    before = len(h.sent(chat))
    h.api.user_message(chat, text, **kw)
    await h.api.wait_for(lambda: len(h.sent(chat)) > before, 5)
    return h.sent(chat)[before]


async def test_a_private_chat_is_answered_in_the_users_language(h: Harness) -> None:
    assert (await _said(h, 1001, "/start", language_code="ru"))["text"].startswith("Пришлите")
    assert (await _said(h, 1001, "/start", language_code="pt-br"))["text"].startswith("Me mande")
    assert (await _said(h, 1001, "/start", language_code="zh-hans"))["text"].startswith("Send")


async def test_a_group_speaks_its_adders_language_then_its_admins_pick(h: Harness) -> None:
    kw: dict[str, Any] = {"chat_type": "supergroup", "user_id": ADMIN}
    before = await _said(h, GROUP, "/help", language_code="de", **kw)
    assert before["text"].startswith("Send me")  # nobody chose: English, not the speaker's
    h.api.bot_added(GROUP, ADMIN, language_code="es")
    # No message follows a my_chat_member update: wait (bounded) for the setting it writes.
    async with asyncio.timeout(5):
        while (await h.services.chats.get(GROUP, h.clock())).settings.adder_language != "es":
            await asyncio.sleep(0.01)
    assert (await _said(h, GROUP, "/help", language_code="de", **kw))["text"].startswith("Envíame")
    assert (await h.services.chats.get(GROUP, h.clock())).settings.language is None

    menu = await _said(h, GROUP, "/settings", language_code="de", **kw)
    assert menu["text"].startswith("Configuración de este chat")  # as Telegram stores it
    buttons = [b for row in menu["reply_markup"]["inline_keyboard"] for b in row]
    lang_button = next(b for b in buttons if b["text"].startswith("Idioma: "))
    assert lang_button["text"] == "Idioma: Español"
    answered = len(h.api.calls_for("answerCallbackQuery"))
    h.api.callback_query(GROUP, menu["message_id"], lang_button["callback_data"], ADMIN)
    await h.api.wait_for(lambda: len(h.api.calls_for("answerCallbackQuery")) > answered, 5)
    order = list(LANGUAGES)
    picked = order[order.index("es") + 1]
    text = (await _said(h, GROUP, "/help", language_code="es", **kw))["text"]
    assert text == help_text(picked)
    assert (await h.services.chats.get(GROUP, h.clock())).settings.language == picked


async def test_a_private_user_reads_why_a_post_is_missing_in_their_language(h: Harness) -> None:
    """The language is decided in the handler and carried by the task to the worker."""
    h.fx.add_post("900", deleted=True)
    said = await _said(h, 1001, "https://x.com/a/status/900", language_code="ru")
    assert said["text"] == "Этот пост удалён или не существует."
    said = await _said(h, 1002, "https://x.com/a/status/900", language_code="pt-br")
    assert said["text"] == "Este post foi excluído ou não existe."


async def test_a_groups_dead_letter_notice_keeps_its_language_across_a_restart(
    h: Harness,
) -> None:
    """The group's language is decided when the link is queued and stored in the task: the
    notice, held by a 429 over a restart, is German even after the setting is gone."""
    await h.services.chats.set_settings(GROUP, h.clock(), language="de")
    h.fx.add_raw("901", {"code": 200, "message": "OK", "tweet": "not a post"})
    h.api.fail_next("sendMessage", 429, "Too Many Requests: retry after 3", retry_after=3,
                    chat_id=GROUP)  # fmt: skip
    h.api.user_message(GROUP, "https://x.com/a/status/901", chat_type="supergroup",
                       user_id=ADMIN, language_code="ru")  # fmt: skip
    held = lambda: any(c.status == 429 for c in h.api.calls_for("sendMessage", GROUP))  # noqa: E731
    await h.api.wait_for(held, 10)
    # The admin drops the setting meanwhile: English from now on, not for what was queued.
    await h.services.chats.set_settings(GROUP, h.clock(), language=None)
    await h.stop_bot()
    stopped = time.monotonic()
    await h.start_bot()
    await h.api.wait_for(lambda: len(h.sent(GROUP)) == 1, 15)
    (notice,) = h.sent(GROUP)
    (sent,) = [c for c in h.api.calls_for("sendMessage", GROUP) if c.status == 200]
    assert sent.at > stopped  # said by the bot that started after the restart
    assert notice["text"] == (
        "Tut mir leid, ich konnte https://x.com/a/status/901 nicht zustellen: "
        "Die X-API hat eine Antwort geschickt, die ich nicht lesen konnte."
    )
    assert (await h.services.chats.get(GROUP, h.clock())).settings.language is None


async def test_the_forward_prompt_and_its_ending_speak_the_groups_language(h: Harness) -> None:
    """The prompt is offered, pressed and ended in the language its delivery carried."""
    channel = -1009002
    h.api.add_chat(channel, "channel", title="Kanal", creator=ADMIN)
    await h.services.chats.set_settings(
        GROUP, h.clock(), language="de", channel_id=channel, channel_title="Kanal"
    )
    h.fx.add_post("902", text="hallo", photos=[h.photo("p902")])
    h.api.user_message(GROUP, "https://x.com/a/status/902", chat_type="supergroup",
                       user_id=ADMIN, language_code="en")  # fmt: skip

    def prompt() -> dict[str, Any] | None:
        return next((m for m in h.sent(GROUP) if "weiterleiten?" in m.get("text", "")), None)

    await h.api.wait_for(lambda: prompt() is not None, 10)
    await h.wait_idle()  # the prompt's record is written after the prompt is sent
    shown = prompt()
    assert shown is not None
    assert shown["text"] == "Diesen Beitrag an Kanal weiterleiten?"  # as Telegram stores it
    labels = {b["text"]: b["callback_data"] for row in shown["reply_markup"]["inline_keyboard"]
              for b in row}  # fmt: skip
    update = h.api.callback_query(
        GROUP, shown["message_id"], labels["An den Kanal weiterleiten"], ADMIN
    )
    query_id = update["callback_query"]["id"]
    await h.api.wait_for(lambda: query_id in h.api.callback_answers, 5)
    assert h.api.callback_answers[query_id]["text"] == "Leite weiter…"

    def ending() -> str:
        found = h.api.message(GROUP, shown["message_id"])
        return str(found["text"]) if found else ""

    await h.api.wait_for(lambda: ending() == "An Kanal weitergeleitet.", 10)
    assert len(h.sent(channel)) == 1


async def test_a_caption_says_our_words_in_the_users_language(h: Harness) -> None:
    """The caption is built by the worker in the language the task carries."""
    quoted = h.fx.add_post("1290", author=("Bob B", "bob"), text="the original",
                           photos=[h.photo("q1")])  # fmt: skip
    h.fx.add_post("1204", author=("Alice A", "alice"), text="look", quote=quoted)
    before = len(h.sent(1003))
    h.api.user_message(1003, "https://x.com/alice/status/1204", language_code="de")
    await h.api.wait_for(lambda: any("photo" in m for m in h.sent(1003)[before:]), 10)
    (sent,) = [m for m in h.sent(1003)[before:] if "photo" in m]
    assert "↪ zitiert Bob B (@bob):\nthe original" in sent["caption"]  # as Telegram stores it
