"""Hostile input through the real bot: over 300 updates no one should send, and the bot
answers each clearly or ignores it, keeps serving, and queues nothing that cannot succeed;
then Hypothesis's batches of random and forged updates against who may do what.

The corpus is built from tables: hostile texts (4096 characters, 60 links,
RTL/zero-width/combining characters, entities past the end, SSRF bait, junk
commands) crossed with the containers Telegram delivers them in (private and
group messages, channel posts, edits, forwards, captions, anonymous admins,
bots, topics), plus stickers and other media without text, callback queries
with random or oversized data, inline queries, member updates and update
types PTB has never heard of. It goes through the Bot API stand-in's
getUpdates to the real PTB application, like Telegram's own updates.
"""

from __future__ import annotations

import json
import logging
import random
import re
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import apsw
import attrs
import hypothesis
import pytest
from hypothesis import HealthCheck
from hypothesis import strategies as st
from telegram import Update

from standins._tgtext import auto_entities, utf16_len
from standins.harness import Harness
from xbot.tasks.payloads import DeliverPayload

JSON = dict[str, Any]

USER = 4242  # a private chat's user
GROUP = -1_001_555_000_001
MEMBER = 5151  # an ordinary member of GROUP
CHANNEL = -1_001_555_000_002
REAL_POST = "1700000000000000001"
_MSG_IDS = iter(range(50_000, 10**6))


def _user(uid: int, *, bot: bool = False) -> JSON:
    return {"id": uid, "is_bot": bot, "first_name": f"U{uid}", "username": f"u{uid}"}


PRIVATE_CHAT = {"id": USER, "type": "private", "first_name": "U"}
GROUP_CHAT = {"id": GROUP, "type": "supergroup", "title": "Hostile group"}
CHANNEL_CHAT = {"id": CHANNEL, "type": "channel", "title": "Hostile channel"}


# --- the texts ------------------------------------------------------------------------------

X = "https://x.com/someone/status/"


def _links(n: int, start: int = 1_600_000_000_000_000_000) -> str:
    return " ".join(f"{X}{start + i}" for i in range(n))


def _text_entities(text: str) -> list[JSON]:
    return auto_entities(text)


# name -> (text, entities or None for what Telegram would attach)
TEXTS: dict[str, tuple[str, list[JSON] | None]] = {
    "4096 plain": ("a" * 4096, None),
    "4096 with a link cut at the end": ("b" * 4080 + " " + X + "1600000000000000099", None),
    "4096 emoji": ("😀" * 2048, None),
    "60 links": (_links(60), None),
    "60 times one link": ((X + "1600000000000000500 ") * 60, None),
    "rtl override around a link": ("\u202e" + X + "1600000000000000600" + "\u202c", None),
    "zero-width inside a link": (
        "https://x.com/some\u200bone/status/1600000000000000601",
        [{"type": "url", "offset": 0, "length": 51}],
    ),
    "combining marks on a link": ("https://x\u0301.com/a/status/1600000000000000602", None),
    "cyrillic look-alike host": ("https://\u0445.com/a/status/1600000000000000603", None),
    "entity past the end": ("short", [{"type": "url", "offset": 3, "length": 500}]),
    "entity at a negative offset": (X + "1", [{"type": "url", "offset": -4, "length": 10}]),
    "entity splitting a surrogate pair": (
        "😀" + X + "1",
        [{"type": "url", "offset": 1, "length": 30}],
    ),
    "thousand overlapping entities": (
        X + "1600000000000000604",
        [{"type": "url", "offset": i % 7, "length": 20 + i % 30} for i in range(1000)],
    ),
    "text_link to javascript": (
        "click",
        [{"type": "text_link", "offset": 0, "length": 5, "url": "javascript:alert(1)"}],
    ),
    "text_link to cloud metadata": (
        "meta",
        [{"type": "text_link", "offset": 0, "length": 4, "url": "http://169.254.169.254/latest"}],
    ),
    "loopback spellings": (
        "http://127.0.0.1/a http://2130706433/ http://[::1]/ http://0x7f.1/ http://localhost/",
        None,
    ),
    "file and data urls": ("file:///etc/passwd data:text/html,hi", None),
    "status id absurd": (X + "9" * 40, None),
    "status id zero": (X + "0", None),
    "userinfo disguise": ("https://x.com@evil.example/a/status/1600000000000000605", None),
    "nul and controls": ("\x00\x01\x7f " + X + "1600000000000000606 \x1b[31m", None),
    "start for another bot": ("/start@some_other_bot", None),
    "settings with 4000 characters": ("/settings " + "z" * 4000, None),
    "format with an attribute lookup": ("/format {author.__class__.__init__.__globals__}", None),
    "format 5000 braces": ("/format " + "{" * 2500 + "}" * 2500, None),
    "channel junk": ("/channel @@@ ../../etc", None),
    "unknown command": ("/rm_rf_everything now", None),
    "operator command from a stranger": ("/stats", None),
    "debug a loopback link": ("/debug http://127.0.0.1:1/", None),
    "dead letters from a stranger": ("/dead", None),
}


# --- the containers -------------------------------------------------------------------------


def _message(chat: JSON, text: str, entities: list[JSON] | None, **extra: Any) -> JSON:
    msg: JSON = {"message_id": next(_MSG_IDS), "date": 1_700_000_000, "chat": chat, **extra}
    found = _text_entities(text) if entities is None else entities
    if "photo" in extra:
        msg["caption"] = text
        if found:
            msg["caption_entities"] = found
    else:
        msg["text"] = text
        if found:
            msg["entities"] = found
    return msg


_PHOTO = [{"file_id": "AgAD-hostile", "file_unique_id": "u1", "width": 10, "height": 10}]

CONTAINERS: dict[str, Callable[[str, list[JSON] | None], JSON]] = {
    "private": lambda t, e: {"message": _message(PRIVATE_CHAT, t, e, **{"from": _user(USER)})},
    "group member": lambda t, e: {"message": _message(GROUP_CHAT, t, e, **{"from": _user(MEMBER)})},
    "channel post": lambda t, e: {
        "channel_post": _message(CHANNEL_CHAT, t, e, sender_chat=CHANNEL_CHAT)
    },
    "edited message": lambda t, e: {
        "edited_message": _message(PRIVATE_CHAT, t, e, edit_date=1_700_000_100,
                                   **{"from": _user(USER)})
    },
    "edited channel post": lambda t, e: {
        "edited_channel_post": _message(CHANNEL_CHAT, t, e, edit_date=1_700_000_100,
                                        sender_chat=CHANNEL_CHAT)
    },
    "forwarded": lambda t, e: {
        "message": _message(
            PRIVATE_CHAT, t, e, **{"from": _user(USER)},
            forward_origin={"type": "hidden_user", "date": 1, "sender_user_name": "Someone"},
        )
    },
    "photo caption": lambda t, e: {
        "message": _message(PRIVATE_CHAT, t[:1024], e, photo=_PHOTO, **{"from": _user(USER)})
    },
    "anonymous admin": lambda t, e: {
        "message": _message(
            GROUP_CHAT, t, e, sender_chat=GROUP_CHAT,
            **{"from": {"id": 1087968824, "is_bot": True, "first_name": "Group",
                        "username": "GroupAnonymousBot"}},
        )
    },
    "from another bot": lambda t, e: {
        "message": _message(GROUP_CHAT, t, e, **{"from": _user(777, bot=True)})
    },
    "topic message": lambda t, e: {
        "message": _message(GROUP_CHAT, t, e, message_thread_id=77, is_topic_message=True,
                            **{"from": _user(MEMBER)})
    },
    "reply to a ghost": lambda t, e: {
        "message": _message(
            PRIVATE_CHAT, t, e, **{"from": _user(USER)},
            reply_to_message={"message_id": 1, "date": 0, "chat": PRIVATE_CHAT, "text": "ghost"},
        )
    },
}  # fmt: skip


# --- everything that is not text ------------------------------------------------------------


def _others(rng: random.Random) -> list[tuple[str, JSON]]:
    frm = {"from": _user(USER)}
    sticker = {"file_id": "s", "file_unique_id": "su", "width": 512, "height": 512,
               "is_animated": False, "is_video": False, "type": "regular"}  # fmt: skip
    media: list[tuple[str, JSON]] = [
        ("sticker", {"sticker": sticker}),
        ("photo without text", {"photo": _PHOTO}),
        ("location", {"location": {"latitude": 1.5, "longitude": 2.5}}),
        ("contact", {"contact": {"phone_number": "+100", "first_name": "C"}}),
        ("dice", {"dice": {"emoji": "🎲", "value": 6}}),
        ("new members", {"new_chat_members": [_user(9), _user(10, bot=True)]}),
        ("member left", {"left_chat_member": _user(9)}),
        ("title changed", {"new_chat_title": "\u202eevil"}),
        ("pinned ghost", {"pinned_message": {"message_id": 1, "date": 0, "chat": GROUP_CHAT}}),
        ("empty text", {"text": ""}),
    ]
    out: list[tuple[str, JSON]] = []
    for chat in (PRIVATE_CHAT, GROUP_CHAT):
        for name, fields in media:
            msg = {"message_id": next(_MSG_IDS), "date": 0, "chat": chat, **frm, **fields}
            out.append((f"{name} in {chat['type']}", {"message": msg}))
    member = {"status": "member", "user": _user(USER)}
    left = {"status": "left", "user": _user(USER)}
    out += [
        ("inline query", {"inline_query": {"id": "iq1", "from": _user(USER),
                                           "query": "x" * 300, "offset": ""}}),
        ("chosen inline result", {"chosen_inline_result": {"result_id": "r", "from": _user(USER),
                                                           "query": "q"}}),
        ("my_chat_member kicked", {"my_chat_member": {
            "chat": GROUP_CHAT, "from": _user(MEMBER), "date": 0,
            "old_chat_member": {"status": "member", "user": _user(123456789, bot=True)},
            "new_chat_member": {"status": "kicked", "user": _user(123456789, bot=True),
                                "until_date": 0}}}),
        ("chat_member joined", {"chat_member": {"chat": GROUP_CHAT, "from": _user(USER),
                                                "date": 0, "old_chat_member": left,
                                                "new_chat_member": member}}),
        ("join request", {"chat_join_request": {"chat": GROUP_CHAT, "from": _user(USER),
                                                "user_chat_id": USER, "date": 0}}),
        ("reaction", {"message_reaction": {"chat": GROUP_CHAT, "message_id": 1, "date": 0,
                                           "old_reaction": [],
                                           "new_reaction": [{"type": "emoji", "emoji": "👍"}]}}),
        ("poll", {"poll": {"id": "p", "question": "?", "options": [], "total_voter_count": 0,
                           "is_closed": False, "is_anonymous": True, "type": "regular",
                           "allows_multiple_answers": False, "allows_revoting": False,
                           "members_only": False}}),
        ("poll answer", {"poll_answer": {"poll_id": "p", "option_ids": [0],
                                         "option_persistent_ids": ["0"], "user": _user(USER)}}),
        ("shipping query", {"shipping_query": {"id": "s", "from": _user(USER),
                                               "invoice_payload": "x", "shipping_address": {
                                                   "country_code": "XX", "state": "", "city": "",
                                                   "street_line1": "", "street_line2": "",
                                                   "post_code": ""}}}),
        ("an update type from the future", {"hologram_message": {"id": 1, "depth": 3}}),
        ("an update with nothing in it", {}),
        ("unknown fields in a message", {"message": {
            "message_id": next(_MSG_IDS), "date": 0, "chat": PRIVATE_CHAT, "from": _user(USER),
            "text": X + "1600000000000000700", "quantum_entanglement": {"spin": 0.5},
            "entities": [{"type": "url", "offset": 0, "length": utf16_len(X) + 19}]}}),
    ]  # fmt: skip
    for n in range(20):
        out.append((f"future update {n}", {f"future_{rng.randrange(10**6)}": {"n": n}}))
    return out


def _callback_datas(rng: random.Random) -> list[tuple[str, str, int]]:
    """(name, data, who presses) for callback queries under messages that never had buttons."""
    datas = [
        ("random bytes", bytes(rng.randrange(256) for _ in range(40)).decode("latin-1"), USER),
        ("oversized", "v1:fwd:" + "9" * 500, USER),
        ("empty", "", USER),
        ("nul bytes", "\x00" * 64, USER),
        ("forged retry from a stranger", "v1:retry:1", USER),
        ("forged setting from a member", "v1:set:ytdlp", MEMBER),
        ("forged forward", "v1:fwd:1", USER),
        ("forged menu close", "v1:menu:close", MEMBER),
        ("old version", "v0:fwd:1", USER),
        ("future version", "v9:teleport:1", USER),
        ("non canonical number", "v1:fwd:007", USER),
        ("emoji", "v1:🙂", USER),
    ]
    for n in range(18):
        size = rng.choice([1, 8, 64, 65, 200])
        datas.append(
            (f"random {n}", "".join(chr(rng.randrange(32, 0x2FFF)) for _ in range(size)), USER)
        )
    return datas


def build_corpus(rng: random.Random) -> list[tuple[str, JSON]]:
    """Every update as Telegram could send it (PTB reads each one; a malformed one would
    test PTB, not us)."""
    corpus = [
        (f"{text_name} / {where}", make(text, entities))
        for text_name, (text, entities) in TEXTS.items()
        for where, make in CONTAINERS.items()
    ]
    return corpus + _others(rng)


# --- what the bot said ----------------------------------------------------------------------

# What must never reach a chat: internals, tracebacks, reprs of our objects.
_UNCLEAR = re.compile(
    r"Traceback|Exception|Error\(|xbot\.|telegram\.|apsw|httpx|<[a-z_.]+ object at|"
    r"\bNone\b|^\s*$",
)


def _clear(text: str) -> bool:
    return not _UNCLEAR.search(text) and len(text) <= 4096


def _answers(h: Harness) -> tuple[list[str], dict[str, list[str | None]]]:
    """Texts the bot sent or edited, and callback answers by query id."""
    texts: list[str] = []
    callbacks: dict[str, list[str | None]] = defaultdict(list)
    for call in h.api.calls:
        if call.method in ("sendMessage", "editMessageText") and "text" in call.params:
            texts.append(str(call.params["text"]))
        elif call.method == "answerCallbackQuery":
            callbacks[str(call.params.get("callback_query_id"))].append(call.params.get("text"))
    return texts, callbacks


def _tasks(db: Path) -> list[tuple[str, str, str]]:
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return [
            (str(kind), str(state), str(payload))
            for kind, state, payload in conn.execute("SELECT kind, state, payload FROM tasks")
        ]
    finally:
        conn.close()


# --- the test ---------------------------------------------------------------------------------


@pytest.fixture
async def hostile(tmp_path: Path) -> AsyncIterator[Harness]:
    # As in production: no private networks. Telegram (the stand-in) fetches media by URL.
    h = await Harness.start(tmp_path / "data", allow_private_networks=False, admin_ids=frozenset())
    h.api.add_chat(GROUP, "supergroup", "Hostile group", admins=[USER])
    h.api.add_chat(CHANNEL, "channel", "Hostile channel", admins=[USER])
    try:
        yield h
    finally:
        await h.stop()


def test_the_corpus_is_what_telegram_could_send() -> None:
    corpus = build_corpus(random.Random(7))
    assert len(corpus) >= 300
    for name, update in corpus:
        assert Update.de_json({"update_id": 1, **update}, None) is not None, name


async def test_hostile_corpus_is_answered_clearly_or_ignored(
    hostile: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    h = hostile
    caplog.set_level(logging.INFO)
    rng = random.Random(7)
    corpus = build_corpus(rng)
    for _, update in corpus:
        h.api.inject_update(json.loads(json.dumps(update)))
    queries = []
    for _, data, presser in _callback_datas(rng):
        chat = GROUP if presser == MEMBER else USER
        queries.append(h.api.callback_query(chat, 1, data, user_id=presser)["callback_query"]["id"])
    assert len(corpus) + len(queries) >= 300

    # The bot keeps serving: a real link afterwards still arrives.
    h.fx.add_post(REAL_POST, text="still here", photos=[h.photo("alive")])
    h.api.user_message(USER + 1, f"{X}{REAL_POST}")
    await h.api.wait_for(
        lambda: any(
            c.method == "sendPhoto" and c.status == 200 and c.chat_id == USER + 1
            for c in h.api.calls
        ),
        30,
    )
    await h.wait_idle(60)

    problems = [
        r.getMessage()[:200]
        for r in caplog.records
        if r.levelno >= logging.ERROR or r.exc_info or "Traceback" in r.getMessage()
    ]
    assert problems == []

    texts, callbacks = _answers(h)
    unclear = [t[:120] for t in texts if not _clear(t)]
    assert unclear == [], "every answer is a plain sentence"
    # Every button press gets exactly one answer (else the user's spinner never stops).
    assert {q: len(callbacks.get(q, [])) for q in queries} == dict.fromkeys(queries, 1)
    assert all(_clear(t or "ok") for answers in callbacks.values() for t in answers)

    # Nothing queued that cannot succeed: every task is a deliverable X post, and done.
    tasks = _tasks(h.settings.db_path)
    states = {state for _, state, _ in tasks}
    assert states == {"done"}, f"tasks by state: {states}"
    for kind, _, payload in tasks:
        parsed = DeliverPayload.from_json(payload)
        assert kind == "deliver"
        if parsed.kind == "x":
            assert re.fullmatch(r"x:[1-9][0-9]{0,24}", parsed.key)
        else:
            # Another site (yt-dlp, on in private chats): only a public-looking name,
            # never an address, loopback or a scheme other than http(s).
            assert parsed.kind == "other", parsed
            assert parsed.chat_type == "private"
            assert re.fullmatch(
                r"https?://[a-z0-9.-]+\.(?:[a-z]{2,63}|xn--[a-z0-9-]+)/.*", parsed.url
            )
    # Ten links at most from one message, whatever it carried.
    by_message = defaultdict(int)
    for _, _, payload in tasks:
        parsed = DeliverPayload.from_json(payload)
        by_message[parsed.reply_to] += 1
    assert max(by_message.values()) <= 10


async def test_sixty_links_queue_ten_and_say_so_once(hostile: Harness) -> None:
    h = hostile
    update = h.api.user_message(USER, _links(60, start=1_650_000_000_000_000_000))
    message_id = update["message"]["message_id"]
    await h.api.wait_for(lambda: len(h.sent(USER)) >= 11, 30)
    await h.wait_idle(30)
    notes = [m["text"] for m in h.sent(USER) if "skipped" in m.get("text", "")]
    assert notes == ["I took the first 10 links of your message and skipped 50 more."]
    tasks = [t for t in _tasks(h.settings.db_path) if f'"reply_to":{message_id}' in t[2]]
    assert len(tasks) == 10


async def test_an_edit_of_a_delivered_message_does_not_resend_it(hostile: Harness) -> None:
    h = hostile
    h.fx.add_post("1700000000000000002", text="edit me", photos=[h.photo("edit")])
    update = h.api.user_message(USER, f"{X}1700000000000000002")
    await h.api.wait_for(lambda: any("photo" in m for m in h.sent(USER)), 15)
    await h.wait_idle(15)
    edited = dict(update["message"], edit_date=update["message"]["date"] + 5)
    edited["text"] += " (typo fixed)"
    h.api.inject_update({"edited_message": edited})
    h.api.user_message(USER, "ping " + X + "1")  # something after the edit, to wait on
    await h.api.wait_for(lambda: len(h.sent(USER)) >= 2, 15)
    await h.wait_idle(15)
    photos = [m for m in h.sent(USER) if "photo" in m]
    assert len(photos) == 1, "an edit must not deliver the same post again"


# --- hypothesis: random and malicious updates against who may do what ---------------------
#
# A world with every role of `xbot.services.auth`: a group with its admin, the member who
# sent a link and another member, its linked channel with a subscriber, private chats (one
# user linked the channel once and is no admin of it now), the bot's operator, a stranger.
# Hypothesis draws batches of updates, Telegram-shaped or forged: messages, edits, channel
# posts, messages without a sender, chats of types unknown to us, huge texts, odd
# entities, replies to the bot's prompts, and button presses with junk data or data naming
# other chats' prompts, tasks and settings, by anyone, under any of the bot's messages.
# After each batch has been handled: no error logged, every press answered once, nothing
# sent to a chat that did not ask (the channel only after a press by someone who may post
# there), and no chat's settings changed unless the batch held an update from someone
# allowed to change them.

W_GROUP = -1_001_777_000_001
W_CHANNEL = -1_001_777_000_002
W_ELSEWHERE = -1_001_777_000_003  # a chat of a type we do not know
W_ADMIN, W_OWNER, W_MEMBER, W_SUBSCRIBER = 8001, 8002, 8003, 8004
W_USER, W_OPERATOR, W_STRANGER = 8005, 8006, 8007
W_USERS = (W_ADMIN, W_OWNER, W_MEMBER, W_SUBSCRIBER, W_USER, W_OPERATOR, W_STRANGER)
W_POST = "1700000000000000777"
W_GROUP_CHAT = {"id": W_GROUP, "type": "supergroup", "title": "Rights group"}
W_CHANNEL_CHAT = {"id": W_CHANNEL, "type": "channel", "title": "Rights channel"}
ANONYMOUS_ADMIN = {"id": 1087968824, "is_bot": True, "first_name": "Group",
                   "username": "GroupAnonymousBot"}  # fmt: skip
CHANNEL_BOT = {"id": 136817688, "is_bot": True, "first_name": "Channel", "username": "Channel_Bot"}
# Only the channel's creator may post there: the one whose press may reach it.
W_POSTERS = frozenset({W_ADMIN})
HYPOTHESIS = hypothesis.settings(
    max_examples=100,
    deadline=None,  # each example waits for the real bot: seconds, not milliseconds
    derandomize=True,  # the same batches on every run: a failure is repeatable
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@attrs.define
class World:
    """The harness with the world's chats, and what the bot showed in them at the start."""

    h: Harness
    buttons: list[tuple[int, int]]  # (chat, message id) of the bot's messages with buttons
    datas: list[str]  # every callback data the bot ever showed
    prompt_ids: list[int]


class _Errors(logging.Handler):
    """Every error, and every line with a traceback, logged anywhere."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR or record.exc_info or "Traceback" in record.getMessage():
            self.seen.append(f"{record.name}: {record.getMessage()[:200]}")


async def _build_world(h: Harness) -> World:
    h.api.add_chat(W_GROUP, "supergroup", "Rights group", admins=[W_ADMIN],
                   members={W_SUBSCRIBER: "left"})  # fmt: skip
    h.api.add_chat(W_CHANNEL, "channel", "Rights channel", creator=W_ADMIN,
                   members={W_SUBSCRIBER: "member"})  # fmt: skip
    h.fx.add_post(W_POST, text="to forward", photos=[h.photo("world")])
    for chat in (W_GROUP, W_USER):  # the private user linked it once; no admin there now
        await h.services.chats.set_settings(
            chat, h.clock(), channel_id=W_CHANNEL, channel_title="Rights channel"
        )
    h.api.user_message(W_GROUP, f"{X}{W_POST}", user_id=W_OWNER, chat_type="supergroup")
    h.api.user_message(W_USER, f"{X}{W_POST}")
    h.api.user_message(W_GROUP, "/settings", user_id=W_ADMIN, chat_type="supergroup")
    h.api.user_message(W_CHANNEL, "/settings", chat_type="channel")
    h.api.user_message(W_OPERATOR, "/dead")

    def with_buttons() -> list[tuple[int, int]]:
        return [
            (chat, m["message_id"])
            for chat in (W_GROUP, W_USER, W_CHANNEL)
            for m in h.sent(chat)
            if m.get("reply_markup")
        ]

    await h.api.wait_for(lambda: len(with_buttons()) >= 4, 15)
    await h.wait_idle(15)
    datas = sorted(
        {
            b["callback_data"]
            for chat, mid in with_buttons()
            for row in (h.api.message(chat, mid) or {}).get("reply_markup", {})["inline_keyboard"]
            for b in row
        }
    )
    prompt_ids = sorted({int(d.split(":")[2]) for d in datas if d.startswith("v1:fwd:")})
    assert len(prompt_ids) == 2, datas
    return World(h, with_buttons(), datas, prompt_ids)


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    h = await Harness.start(
        tmp_path / "data", allow_private_networks=False, admin_ids=frozenset({W_OPERATOR})
    )
    try:
        yield await _build_world(h)
    finally:
        await h.stop()


_COMMANDS = ["/settings", "/settings@xbot_test_bot", "/settings@another_bot", "/channel off",
             f"/channel {W_CHANNEL}", "/channel @nobody_here", "/format {text} {url}",
             "/format reset", "/cancel", "/get", "/stats", "/dead", "/clear_cache", "/start",
             "/help", "/debug " + X + "1"]  # fmt: skip
_ENTITY_TYPES = ["url", "bot_command", "mention", "text_link", "hashtag", "bold", "custom_emoji",
                 "spoiler", "expandable_blockquote", "a_type_from_the_future"]  # fmt: skip
_ENTITY = st.fixed_dictionaries(
    {"type": st.sampled_from(_ENTITY_TYPES), "offset": st.integers(-3, 5000),
     "length": st.integers(-3, 5000)},
    optional={"url": st.sampled_from(["http://127.0.0.1/", X + "1", "javascript:x"]),
              "custom_emoji_id": st.just("5")},
)  # fmt: skip
_TEXTS = st.one_of(
    st.text(max_size=40),
    st.sampled_from(_COMMANDS),
    st.tuples(st.sampled_from(_COMMANDS), st.text(max_size=30)).map(" ".join),
    st.integers(0, 10**22).map(lambda n: f"{X}{n}"),
    st.just(f"{X}{W_POST}"),
    st.integers(4000, 6000).map(lambda n: "ы" * n),
)
_ACTIONS = ["fwd", "edit", "skip", "conf", "set", "retry", "menu", "mute", "teleport", ""]
_ARGS = ["0", "1", "2", "3", "99", "close", "keep", "ytdlp", "lang", "delete", "dead", "disk",
         "9" * 30, "-1", "007", "x y"]  # fmt: skip


@st.composite
def _sender(draw: st.DrawFn) -> JSON:
    """Who a group message is from: a member, an anonymous admin, the linked channel, or
    (never from Telegram, but forged) nobody at all."""
    how = draw(st.sampled_from(["user", "anonymous admin", "linked channel", "nobody"]))
    if how == "user":
        return {"from": _user(draw(st.sampled_from(W_USERS)))}
    if how == "anonymous admin":
        return {"from": ANONYMOUS_ADMIN, "sender_chat": W_GROUP_CHAT}
    if how == "linked channel":
        return {"from": CHANNEL_BOT, "sender_chat": W_CHANNEL_CHAT}
    return {}


# Who is in each chat of the world, the one its buttons are for first: the member whose
# link the group's prompt answers, the channel's subscriber, the private chat's user.
_PEOPLE = {W_GROUP: (W_OWNER, W_ADMIN, W_MEMBER), W_CHANNEL: (W_SUBSCRIBER, W_ADMIN),
           W_USER: (W_USER,)}  # fmt: skip


@attrs.frozen
class Press:
    """A button press as drawn; what it presses is read when it is made (`_data_now`)."""

    chat: int
    message_id: int
    presser: int
    which: int  # index into the buttons the message shows then
    shown: bool  # press one of those (if any), else `other`
    other: str  # data from another message, forged or junk


@attrs.frozen
class Post:
    """A message update as drawn; `reply_to` names one of the bot's messages, read when
    the update is sent (it is a reply to the message as it is then)."""

    kind: str
    chat: JSON
    text: str
    entities: list[JSON] | None
    extra: JSON
    reply_to: int | None


def _presses(world: World) -> st.SearchStrategy[Press]:
    """Mostly a button the message shows, pressed by someone in the chat; else anyone,
    data from another message, forged or junk, and now and then under a message that
    never had buttons."""
    ghosts = [(W_GROUP, 1), (W_USER, 10**6), (W_CHANNEL, 2)]
    args = st.one_of(st.sampled_from(_ARGS), st.sampled_from([str(p) for p in world.prompt_ids]))
    forged = st.tuples(
        st.sampled_from(["v1", "v2", "v0", ""]),
        st.sampled_from(_ACTIONS),
        st.lists(args, max_size=3),
    ).map(lambda t: ":".join([t[0], t[1], *t[2]]))

    @st.composite
    def press(draw: st.DrawFn) -> Press:
        ghost = draw(st.integers(0, 9)) == 0
        chat, mid = draw(st.sampled_from(ghosts if ghost else world.buttons))
        people = _PEOPLE[chat]
        presser = draw(st.sampled_from([people[0], *people, *W_USERS]))
        other = draw(st.one_of(st.sampled_from(world.datas), forged, st.text(max_size=70)))
        return Press(chat, mid, presser, draw(st.integers(0, 15)), draw(st.booleans()), other)

    return press()


def _data_now(world: World, press: Press) -> str:
    message = world.h.api.message(press.chat, press.message_id) or {}
    rows = message.get("reply_markup", {}).get("inline_keyboard", [])
    shown = [b["callback_data"] for row in rows for b in row]
    return shown[press.which % len(shown)] if press.shown and shown else press.other


def _posts(world: World) -> st.SearchStrategy[Post]:
    @st.composite
    def post(draw: st.DrawFn) -> Post:
        where = draw(st.sampled_from(["private", "group", "channel", "elsewhere"]))
        text, entities = draw(_TEXTS), draw(st.one_of(st.none(), st.lists(_ENTITY, max_size=4)))
        if where == "private":
            uid = draw(st.sampled_from(W_USERS))
            chat: JSON = {"id": uid, "type": "private", "first_name": "U"}
            extra: JSON = {"from": _user(uid)}
            kind = draw(st.sampled_from(["message", "edited_message"]))
        elif where == "group":
            chat, extra = W_GROUP_CHAT, draw(_sender())
            kind = draw(st.sampled_from(["message", "edited_message"]))
        elif where == "channel":
            chat, extra = W_CHANNEL_CHAT, {"sender_chat": W_CHANNEL_CHAT}
            kind = draw(st.sampled_from(["channel_post", "edited_channel_post"]))
        else:
            chat_type = draw(st.sampled_from(["business", "secret", "direct_messages", "x"]))
            chat = {"id": W_ELSEWHERE, "type": chat_type, "title": "?"}
            extra = {"from": _user(draw(st.sampled_from(W_USERS)))}
            kind = "message"
        if kind.startswith("edited"):
            extra["edit_date"] = 1_700_000_100
        # A reply to one of the bot's messages in this chat (a caption for its prompt?).
        mine = [mid for c, mid in world.buttons if c == chat["id"]]
        reply_to = draw(st.one_of(st.none(), st.sampled_from(mine))) if mine else None
        return Post(kind, chat, text, entities, extra, reply_to)

    return post()


def _update_now(world: World, post: Post) -> JSON:
    extra = dict(post.extra)
    if post.reply_to is not None:
        replied = world.h.api.message(post.chat["id"], post.reply_to)
        if replied is not None:
            extra["reply_to_message"] = {
                k: v for k, v in replied.items() if k != "reply_to_message"
            }
    return {post.kind: _message(post.chat, post.text, post.entities, **extra)}


def _an_alert(chat: int, params: JSON) -> bool:
    """An alert to the operator (the dead letters of the batches' links add up): the
    operator asked for those by being one."""
    return chat == W_OPERATOR and "v1:mute:" in json.dumps(params.get("reply_markup"))


async def _settings_of(h: Harness, chats: list[int]) -> dict[int, object]:
    now = h.clock()
    return {chat: (await h.services.chats.get(chat, now)).settings for chat in chats}


def _may_change(chat: int, acts: list[tuple[str, int, int | None, int | None]]) -> bool:
    """Whether one of the batch's fresh updates (kind, chat, user, sender chat) may change
    this chat's settings, as `decide` says for the roles of the world."""
    for kind, where, user, sender_chat in acts:
        if chat > 0 and user == chat:
            return True  # a private chat's own user (or an operator's language)
        if where != chat:
            continue
        if chat == W_GROUP and (user == W_ADMIN or sender_chat == W_GROUP):
            return True
        if chat == W_CHANNEL and (kind == "channel_post" or user == W_ADMIN):
            return True
    return False


@hypothesis.given(data=st.data())
@HYPOTHESIS
async def test_hostile_updates_break_no_rule(world: World, data: st.DataObject) -> None:
    h = world.h
    errors = _Errors()
    logging.getLogger().addHandler(errors)
    watched = [W_GROUP, W_CHANNEL, W_ELSEWHERE, *W_USERS]
    try:
        before = await _settings_of(h, watched)
        first_call = len(h.api.calls)
        asked: set[int] = set()
        acts: list[tuple[str, int, int | None, int | None]] = []  # fresh updates: who, where
        queries: list[str] = []
        channel_pressed = False
        # Everything is drawn before anything is sent: a draw Hypothesis cuts short must
        # not leave half a batch to be handled during the next example.
        batch = data.draw(
            st.lists(st.one_of(_presses(world), _posts(world)), min_size=1, max_size=6),
            label="batch",
        )
        for step in batch:
            if isinstance(step, Press):
                update = h.api.callback_query(
                    step.chat, step.message_id, _data_now(world, step), step.presser
                )
                queries.append(update["callback_query"]["id"])
                asked.add(step.chat)
                acts.append(("callback_query", step.chat, step.presser, None))
                channel_pressed |= step.presser in W_POSTERS
                continue
            update = _update_now(world, step)
            h.api.inject_update(json.loads(json.dumps(update)))
            ((kind, msg),) = update.items()
            asked.add(msg["chat"]["id"])
            if not kind.startswith("edited"):
                sender = msg.get("sender_chat", {}).get("id")
                user = msg["from"]["id"] if "from" in msg else None
                acts.append((kind, msg["chat"]["id"], user, sender))
        # The poller confirms a batch only once every handler of it returned.
        await h.api.wait_for(lambda: h.api.pending_updates == 0, 30)
        await h.wait_idle(30)

        assert errors.seen == [], "no error logged, no traceback"
        answers = defaultdict(int)
        for call in h.api.calls[first_call:]:
            if call.method == "answerCallbackQuery":
                answers[str(call.params.get("callback_query_id"))] += 1
        assert {q: answers[q] for q in queries} == dict.fromkeys(queries, 1), "answered once"
        allowed = asked | ({W_CHANNEL} if channel_pressed else set())
        uninvited = [
            (c.method, c.chat_id)
            for c in h.api.calls[first_call:]
            if c.chat_id is not None
            and not c.method.startswith("get")
            and c.chat_id not in allowed
            and not _an_alert(c.chat_id, c.params)
        ]
        assert uninvited == [], f"sent to chats that did not ask; the batch: {acts}"
        after = await _settings_of(h, watched)
        changed = [chat for chat in watched if before[chat] != after[chat]]
        unruly = [c for c in changed if not _may_change(c, acts)]
        assert unruly == [], f"settings changed by no one allowed; the batch: {acts}"
    finally:
        logging.getLogger().removeHandler(errors)
