"""Task payloads: every kind carries a Destination, and what the previous version wrote
still decodes (tasks queued before an upgrade survive it)."""

from __future__ import annotations

import json

import attrs
import pytest

from xbot.errors import PayloadError
from xbot.sending.destination import Destination
from xbot.sending.sent import SentItem
from xbot.storage.queue import Task
from xbot.tasks.payloads import (
    BuriedNotice,
    DeliverPayload,
    ForwardPayload,
    NoticePayload,
    SentStep,
    notice_from_task,
)

# Written by the version before destinations: the chat only on the task row.
OLD_DELIVER = json.dumps({
    "v": 1, "url": "https://x.com/a/status/1", "key": "x:1", "kind": "x", "post_id": "1",
    "handle": "a", "reply_to": 55, "chat_type": "supergroup",
    "sent": [{"step": 0, "items": [["photo", "F1"]]}], "skipped": 0, "announced": False,
    "user_id": 9,
})  # fmt: skip
OLD_NOTICE = json.dumps({"text": "Sorry, I could not deliver it.", "reply_to": 55, "for_task": 3})


def test_an_old_deliver_payload_reads_with_the_rows_chat() -> None:
    payload = DeliverPayload.from_json(OLD_DELIVER, chat_id=-1001)
    assert payload.dest == Destination(-1001, "supergroup", None, 55)
    assert payload.reply_to == 55
    assert payload.chat_type == "supergroup"
    assert payload.sent == (SentStep(0, (SentItem("photo", "F1"),)),)
    assert payload.user_id == 9


def test_the_sound_alone_round_trips_and_an_old_payload_is_the_video() -> None:
    dest = Destination(-1001, "supergroup", 7, 55)
    sound = DeliverPayload(url="u", key="k", kind="other", dest=dest, audio=True)
    assert DeliverPayload.from_json(sound.to_json()) == sound
    assert not DeliverPayload.from_json(OLD_DELIVER, chat_id=-1001).audio


def test_a_new_payload_keeps_what_the_old_version_reads() -> None:
    dest = Destination(-1001, "supergroup", 7, 55)
    raw = DeliverPayload(url="u", key="k", kind="x", dest=dest).to_json()
    data = json.loads(raw)
    assert (data["reply_to"], data["chat_type"]) == (55, "supergroup")
    assert DeliverPayload.from_json(raw).dest == dest


def test_the_rows_chat_wins_after_a_migration() -> None:
    raw = DeliverPayload(url="u", key="k", kind="x", dest=Destination(-5, "group", None, 3))
    moved = DeliverPayload.from_json(raw.to_json(), chat_id=-1005)
    assert moved.dest == Destination(-1005, "supergroup", None, 3)


@pytest.mark.parametrize(
    ("chat_id", "kind"), [(-100, "group"), (42, "private")], ids=["group", "private"]
)
def test_an_old_notice_reads_and_gets_a_destination(chat_id: int, kind: str) -> None:
    notice = NoticePayload.from_json(OLD_NOTICE, chat_id=chat_id)
    assert notice.text == "Sorry, I could not deliver it."
    assert notice.dest == Destination(chat_id, kind, None, 55)
    assert notice.for_task == 3


def test_a_notice_round_trips() -> None:
    notice = NoticePayload("text", Destination(-100, "supergroup", 7, 5), 12)
    assert NoticePayload.from_json(notice.to_json()) == notice


@pytest.mark.parametrize(
    "raw",
    ["", "[]", '{"v": 2, "text": "t"}', '{"reply_to": 1}', '{"text": "t", "dest": {"x": 1}}'],
    ids=["empty", "list", "future-version", "no-text", "bad-dest"],
)
def test_an_unreadable_notice_is_a_payload_error(raw: str) -> None:
    with pytest.raises(PayloadError):
        NoticePayload.from_json(raw, chat_id=1)


def _notice_task(payload: str) -> Task:
    return Task(1, "notice", -100, payload, "running", None, 1, 8, 0.0, "t", 90.0, None, 0.0, 0.0)


_BURIED = BuriedNotice(7, "the host kept failing", "deliver", '{"url": "u"}')
_READY = NoticePayload("Wait.", Destination(-100, "supergroup", 3, 5), for_task=7, html=True)


@pytest.mark.parametrize(
    ("raw", "read"),
    [
        (json.dumps(_BURIED.to_dict()), _BURIED),
        (_READY.to_json(), _READY),
        (OLD_NOTICE, NoticePayload(
            "Sorry, I could not deliver it.", Destination(-100, "group", None, 55), 3)),
        # A dead letter's mark whose reason says "text" is still a mark.
        (json.dumps(attrs.evolve(_BURIED, reason="text").to_dict()), attrs.evolve(
            _BURIED, reason="text")),
    ],
    ids=["buried", "ready", "ready-before-v1", "buried-reason-text"],
)  # fmt: skip
def test_a_notice_task_is_read_as_the_shape_it_holds(
    raw: str, read: NoticePayload | BuriedNotice
) -> None:
    assert notice_from_task(_notice_task(raw)) == read


@pytest.mark.parametrize(
    "raw",
    ["", "not json", "[]", "null", '{"for_task": 1}', '{"v": 2, "text": "t"}',
     '{"for_task": "x", "reason": "r", "of_kind": "k", "of_payload": "p"}'],
    ids=["empty", "junk", "list", "null", "buried-half", "ready-future", "buried-bad-id"],
)  # fmt: skip
def test_a_notice_task_that_holds_neither_shape_is_a_payload_error(raw: str) -> None:
    with pytest.raises(PayloadError):
        notice_from_task(_notice_task(raw))


def test_an_old_payload_is_english_and_a_new_one_keeps_its_language() -> None:
    assert DeliverPayload.from_json(OLD_DELIVER, chat_id=-1001).dest.lang == "en"
    dest = Destination(-1001, "supergroup", None, 55, lang="de")
    raw = DeliverPayload(url="u", key="k", kind="x", dest=dest).to_json()
    assert DeliverPayload.from_json(raw, chat_id=-1001).dest.lang == "de"
    # A migration moves the chat, not the language it was decided in.
    assert DeliverPayload.from_json(raw, chat_id=-1002).dest.lang == "de"


def test_a_forward_payload_carries_the_prompts_language() -> None:
    forward = ForwardPayload(1, 2, 3, -100, "Chan", (SentItem("photo", "F"),), "cap", lang="ja")
    assert ForwardPayload.from_json(forward.to_json()) == forward
    old = json.loads(forward.to_json())
    del old["lang"]  # written before languages
    assert ForwardPayload.from_json(json.dumps(old)).lang == "en"
