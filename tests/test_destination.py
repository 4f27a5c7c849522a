"""Destination: a frozen value with a JSON round trip, and the topic rules of the Bot API."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from xbot.i18n import LANGUAGES
from xbot.sending.destination import CHAT_KINDS, Destination

_dests = st.builds(
    Destination,
    chat_id=st.integers(-(10**15), 10**15),
    chat_kind=st.sampled_from(CHAT_KINDS),
    topic_id=st.none() | st.integers(2, 2**31),
    reply_to=st.none() | st.integers(1, 2**31),
    lang=st.sampled_from(list(LANGUAGES)),
)


@given(_dests)
def test_round_trips_through_json(dest: Destination) -> None:
    assert Destination.from_dict(json.loads(json.dumps(dest.to_dict()))) == dest


@pytest.mark.parametrize(
    ("dest", "kwargs"),
    [
        (Destination(-100, "supergroup", 7, 9), {"message_thread_id": 7}),
        (Destination(-100, "supergroup", None, 9), {}),
        (Destination(5, "private"), {}),
    ],
    ids=["topic", "general", "private"],
)
def test_only_a_topic_sends_a_thread_id(dest: Destination, kwargs: dict[str, int]) -> None:
    assert dest.thread_kwargs() == kwargs


@pytest.mark.parametrize(
    ("kind", "group"),
    [("private", False), ("group", True), ("supergroup", True), ("channel", False)],
    ids=CHAT_KINDS,
)
def test_which_kinds_are_groups(kind: str, group: bool) -> None:
    assert Destination(1, kind).is_group is group
    assert Destination(1, kind).paced_as_group is (kind != "private")


def test_an_unknown_kind_is_paced_cautiously() -> None:
    assert Destination(-1, "forum-of-the-future").chat_kind == "group"


def test_helpers_keep_what_they_do_not_change() -> None:
    dest = Destination(-100, "group", 7, 9)
    assert dest.without_reply() == Destination(-100, "group", 7, None)
    assert dest.in_general() == Destination(-100, "group", None, 9)
    assert dest.replying_to(3).reply_to == 3
    assert dest.moved_to(-1002) == Destination(-1002, "supergroup", 7, 9)
    assert dest.moved_to(-100) is dest


@pytest.mark.parametrize(
    ("chat_id", "chat_type", "kind"),
    [(5, None, "private"), (-5, None, "group"), (-5, "supergroup", "supergroup")],
    ids=["positive-guess", "negative-guess", "stored-kind"],
)
def test_legacy_payloads_get_a_destination(chat_id: int, chat_type: str | None, kind: str) -> None:
    assert Destination.legacy(chat_id, chat_type=chat_type, reply_to=4) == Destination(
        chat_id, kind, None, 4
    )


@pytest.mark.parametrize(
    "data",
    [{}, {"chat_id": "x"}, {"chat_id": True}, {"chat_id": 1, "topic": [1]}, []],
    ids=["empty", "bad-id", "bool-id", "bad-topic", "not-an-object"],
)
def test_junk_raises_what_payload_readers_catch(data: object) -> None:
    with pytest.raises((ValueError, TypeError, KeyError)):
        Destination.from_dict(data)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("data", "lang"),
    [
        ({"chat_id": 5, "kind": "private"}, "en"),  # written before languages
        ({"chat_id": 5, "kind": "private", "lang": "ru"}, "ru"),
        ({"chat_id": 5, "kind": "private", "lang": "pt-br"}, "pt_BR"),
        ({"chat_id": 5, "kind": "private", "lang": "xx"}, "en"),  # one we do not ship
        ({"chat_id": 5, "kind": "private", "lang": 7}, "en"),  # junk is English, not an error
    ],
    ids=["absent", "ru", "spelled-otherwise", "unknown", "junk"],
)
def test_the_language_is_carried_and_old_payloads_are_english(
    data: dict[str, object], lang: str
) -> None:
    assert Destination.from_dict(data).lang == lang


def test_english_is_left_out_of_the_dict_and_every_helper_keeps_the_language() -> None:
    assert "lang" not in Destination(5, "private").to_dict()
    de = Destination(-5, "group", 3, 9, lang="de")
    assert de.to_dict()["lang"] == "de"
    kept = [de.without_reply(), de.replying_to(1), de.in_general(), de.moved_to(-1005)]
    assert [d.lang for d in kept] == ["de"] * 4
