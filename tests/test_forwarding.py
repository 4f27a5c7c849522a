"""Forward prompts as pure values: stages, presses, payloads and the send plan."""

from __future__ import annotations

import json

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from xbot.errors import PayloadError
from xbot.sending.sent import SentItem
from xbot.storage.state import CAPTION_EDIT, ChatState, Record, caption_edit_record
from xbot.tasks.callback_data import Action, CallbackData, decode, encode
from xbot.tasks.forwarding import plan_forward
from xbot.tasks.payloads import ForwardPayload
from xbot.tasks.prompts import (
    ALREADY,
    EXPIRED,
    KEEP,
    PROMPT,
    Prompt,
    apply_cancel,
    apply_caption,
    apply_press,
    find_prompt,
    prompt_by_message,
    prompt_view,
)

CHAT = -700
NOW = 1_000.0
TTL = 100.0
PID = 42
MSG = 9
EDITOR = 5

ITEMS = (SentItem("photo", "AgP1"), SentItem("video", "BAV2"))
BASE = Prompt(id=PID, owner=7, url="https://x.com/a/status/1", items=ITEMS, caption="<b>A</b>",
              message_id=MSG)  # fmt: skip


def state_with(prompt: Prompt | None, *extra: Record) -> ChatState:
    state = ChatState(CHAT)
    if prompt is not None:
        state = state.with_record(prompt.record(NOW + 10))
    for record in extra:
        state = state.with_record(record)
    return state


def press(
    state: ChatState,
    action: Action,
    *args: int | str,
    message_id: int = MSG,
    edit_first: bool = False,
    now: float = NOW,
) -> tuple[ChatState, str, Prompt | None]:
    new, result = apply_press(
        state,
        CallbackData(action, args),
        message_id=message_id,
        presser=EDITOR,
        edit_first=edit_first,
        now=now,
        ttl=TTL,
    )
    return new, result.outcome, find_prompt(new, PID, now)


def at(stage: str, **changes: object) -> Prompt:
    return attrs.evolve(BASE, stage=stage, **changes)


EDITING = at("editing", editor=EDITOR)
EDIT_RECORD = caption_edit_record(
    EDITOR, prompt_message_id=MSG, source=str(PID), expires_at=NOW + 10
)

# (start stage, action, args, edit_first) -> (outcome, stage after; None = prompt removed)
TRANSITIONS = [
    ("open", Action.FORWARD, (PID,), False, "queued", "queued"),
    ("open", Action.FORWARD, (PID,), True, "ask", "editing"),
    ("open", Action.EDIT, (PID,), False, "ask", "editing"),
    ("open", Action.SKIP, (PID,), False, "skipped", None),
    ("open", Action.CONFIRM, (PID,), False, "expired", "open"),
    ("open", Action.CONFIRM, (PID, KEEP), False, "expired", "open"),
    ("editing", Action.CONFIRM, (PID, KEEP), False, "confirm", "confirm"),
    ("editing", Action.FORWARD, (PID,), False, "expired", "editing"),
    ("editing", Action.EDIT, (PID,), False, "ask", "editing"),
    ("editing", Action.SKIP, (PID,), False, "skipped", None),
    ("confirm", Action.CONFIRM, (PID,), False, "queued", "queued"),
    ("confirm", Action.CONFIRM, (PID,), True, "queued", "queued"),
    ("confirm", Action.CONFIRM, (PID, KEEP), False, "expired", "confirm"),
    ("confirm", Action.FORWARD, (PID,), False, "expired", "confirm"),
    ("confirm", Action.EDIT, (PID,), False, "ask", "editing"),
    ("confirm", Action.SKIP, (PID,), False, "skipped", None),
    ("queued", Action.FORWARD, (PID,), False, "already", "queued"),
    ("queued", Action.CONFIRM, (PID,), False, "already", "queued"),
    ("queued", Action.SKIP, (PID,), False, "already", "queued"),
    ("queued", Action.EDIT, (PID,), False, "already", "queued"),
    ("open", Action.FORWARD, (PID, 3), False, "expired", "open"),
    ("open", Action.FORWARD, (PID + 1,), False, "expired", "open"),
    ("open", Action.FORWARD, ("x",), False, "expired", "open"),
    ("open", Action.FORWARD, (), False, "expired", "open"),
]


@pytest.mark.parametrize(
    ("stage", "action", "args", "edit_first", "outcome", "after"),
    TRANSITIONS,
    ids=[f"{t[0]}-{t[1].value}-{'-'.join(map(str, t[2])) or 'none'}-{'ef' if t[3] else 'direct'}"
         for t in TRANSITIONS],
)  # fmt: skip
def test_press_transitions(
    stage: str,
    action: Action,
    args: tuple[int | str, ...],
    edit_first: bool,
    outcome: str,
    after: str | None,
) -> None:
    start = at(stage, editor=EDITOR if stage == "editing" else None)
    state = state_with(start, EDIT_RECORD) if stage == "editing" else state_with(start)
    new, got, prompt = press(state, action, *args, edit_first=edit_first)
    assert got == outcome
    assert (prompt.stage if prompt else None) == after
    if outcome in ("expired", "already"):
        assert new == state, "a refused press changes nothing"
    edit = new.record(CAPTION_EDIT, str(EDITOR), NOW)
    assert (edit is not None) == (after == "editing"), "a caption edit waits only while editing"


def test_press_on_another_message_is_expired() -> None:
    state = state_with(BASE)
    new, outcome, _ = press(state, Action.FORWARD, PID, message_id=MSG + 1)
    assert (outcome, new) == ("expired", state)


def test_press_after_expiry_is_expired() -> None:
    state = state_with(BASE)
    new, outcome, _ = press(state, Action.FORWARD, PID, now=NOW + 10)
    assert (outcome, new) == ("expired", state)


def test_pressing_forward_twice_queues_once() -> None:
    state, first, _ = press(state_with(BASE), Action.FORWARD, PID)
    again, second, prompt = press(state, Action.FORWARD, PID)
    assert (first, second) == ("queued", "already")
    assert again == state
    assert prompt is not None
    assert prompt.stage == "queued"


def test_edit_refreshes_expiry_and_records_the_editor() -> None:
    state, _, prompt = press(state_with(BASE), Action.EDIT, PID, now=NOW + 5)
    assert prompt is not None
    assert prompt.editor == EDITOR
    record = state.records[f"{PROMPT}:{PID}"]
    assert record.expires_at == NOW + 5 + TTL
    edit = state.record(CAPTION_EDIT, str(EDITOR), NOW + 5)
    assert edit is not None
    assert edit.data["source"] == str(PID)
    assert edit.expires_at == record.expires_at


def test_caption_then_confirm_forwards_the_new_caption() -> None:
    state, _, editing = press(state_with(BASE), Action.EDIT, PID)
    assert editing is not None
    state, confirm = apply_caption(state, editing, "<i>new</i>", now=NOW, ttl=TTL)
    assert confirm.stage == "confirm"
    assert confirm.final_caption == "<i>new</i>"
    assert state.record(CAPTION_EDIT, str(EDITOR), NOW) is None
    _, outcome, queued = press(state, Action.CONFIRM, PID)
    assert outcome == "queued"
    assert queued is not None
    assert queued.final_caption == "<i>new</i>"


def test_keep_caption_forgets_an_earlier_edit() -> None:
    state = state_with(at("editing", editor=EDITOR, new_caption="old edit"), EDIT_RECORD)
    _, outcome, prompt = press(state, Action.CONFIRM, PID, KEEP)
    assert outcome == "confirm"
    assert prompt is not None
    assert prompt.final_caption == BASE.caption


def test_skip_drops_prompt_and_the_pending_edit() -> None:
    state = state_with(EDITING, EDIT_RECORD)
    new, outcome, prompt = press(state, Action.SKIP, PID)
    assert outcome == "skipped"
    assert prompt is None
    assert new.records == {}


def test_skip_keeps_someone_elses_edit_of_another_prompt() -> None:
    other = caption_edit_record(EDITOR, prompt_message_id=1, source="77", expires_at=NOW + 10)
    new, _, _ = press(state_with(EDITING, other), Action.SKIP, PID)
    assert new.record(CAPTION_EDIT, str(EDITOR), NOW) == other


@pytest.mark.parametrize(
    ("prompt", "has_edit", "reopened_stage", "records_left"),
    [
        (EDITING, True, "open", 1),
        (at("confirm"), True, None, 1),
        (None, True, None, 0),
        (BASE, False, None, 1),
    ],
    ids=["editing-reopens", "moved-on", "prompt-gone", "nothing-pending"],
)
def test_cancel(
    prompt: Prompt | None, has_edit: bool, reopened_stage: str | None, records_left: int
) -> None:
    state = state_with(prompt, *([EDIT_RECORD] if has_edit else []))
    new, reopened = apply_cancel(state, EDITOR, NOW)
    assert (reopened.stage if reopened else None) == reopened_stage
    assert new.record(CAPTION_EDIT, str(EDITOR), NOW) is None
    assert len(new.records) == records_left


def test_prompt_by_message_finds_live_prompts_only() -> None:
    state = state_with(BASE)
    assert prompt_by_message(state, MSG, NOW) == BASE
    assert prompt_by_message(state, MSG + 1, NOW) is None
    assert prompt_by_message(state, MSG, NOW + 10) is None


@pytest.mark.parametrize(
    "data",
    [
        {"url": "u", "items": "nope", "caption": "c"},
        {"url": "u", "items": [["sticker", "x"]], "caption": "c"},
        {"url": "u", "items": [], "caption": "c", "stage": "done"},
        {"items": [], "caption": "c"},
        {"url": "u", "items": [], "caption": "c", "owner": "7"},
    ],
    ids=["items-not-list", "unknown-kind", "unknown-stage", "no-url", "owner-not-int"],
)
def test_unreadable_prompt_records_count_as_absent(data: dict[str, object]) -> None:
    state = ChatState(CHAT).with_record(Record(PROMPT, str(PID), data, NOW + 10))
    assert find_prompt(state, PID, NOW) is None
    _, outcome, _ = press(state, Action.FORWARD, PID)
    assert outcome == "expired"


def test_prompt_record_round_trips() -> None:
    prompt = at("confirm", new_caption="x", spoiler=True, owner=None)
    assert Prompt.from_record(prompt.record(NOW)) == prompt
    # Through JSON, as the chat_state row stores it.
    raw = json.loads(json.dumps(prompt.record(NOW).to_dict()))
    assert Prompt.from_record(Record.from_dict(raw)) == prompt


def test_a_prompt_keeps_its_language_and_an_old_record_is_english() -> None:
    prompt = at("open", lang="tr")
    assert Prompt.from_record(prompt.record(NOW)).lang == "tr"
    old = prompt.record(NOW)
    data = {k: v for k, v in old.data.items() if k != "lang"}  # written before languages
    assert Prompt.from_record(attrs.evolve(old, data=data)).lang == "en"


@pytest.mark.parametrize(
    ("stage", "buttons"),
    [
        ("open", [("Forward to channel", "fwd", ()), ("Edit caption", "edit", ()),
                  ("Skip", "skip", ())]),
        ("editing", [("Keep caption", "conf", (KEEP,)), ("Skip", "skip", ())]),
        ("confirm", [("Forward", "conf", ()), ("Edit again", "edit", ()), ("Skip", "skip", ())]),
        ("queued", []),
    ],
    ids=["open", "editing", "confirm", "queued"],
)  # fmt: skip
def test_prompt_view_buttons_name_their_prompt(
    stage: str, buttons: list[tuple[str, str, tuple[str, ...]]]
) -> None:
    text, markup = prompt_view(at(stage), "Chan <&>")
    got = []
    if markup is not None:
        for row in markup.inline_keyboard:
            for button in row:
                data = decode(button.callback_data)
                assert data is not None
                assert data.int_arg(0) == PID
                got.append((button.text, data.action.value, data.args[1:]))
    assert got == buttons
    if stage in ("open", "confirm", "queued"):
        assert "Chan &lt;&amp;&gt;" in text


@pytest.mark.parametrize(
    ("kinds", "plan"),
    [
        ([], []),
        (["photo"], [(0,)]),
        (["photo", "video"], [(0, 1)]),
        (["photo"] * 11, [tuple(range(6)), tuple(range(6, 11))]),
        (["photo", "gif", "photo"], [(0,), (1,), (2,)]),
        (["photo", "photo", "document", "document"], [(0, 1), (2, 3)]),
        (["document", "photo", "video"], [(0,), (1, 2)]),
        (["gif", "gif"], [(0,), (1,)]),
    ],
    ids=["none", "one", "mixed-album", "eleven-balanced", "gif-splits", "documents-apart",
         "document-then-album", "gifs-alone"],
)  # fmt: skip
def test_plan_forward(kinds: list[str], plan: list[tuple[int, ...]]) -> None:
    assert plan_forward(kinds) == plan


@given(st.lists(st.sampled_from(["photo", "video", "gif", "document"]), max_size=40))
def test_plan_forward_keeps_order_and_telegrams_rules(kinds: list[str]) -> None:
    plan = plan_forward(kinds)
    assert [i for step in plan for i in step] == list(range(len(kinds)))
    for step in plan:
        assert 1 <= len(step) <= 10
        families = {"document" if kinds[i] == "document" else kinds[i] for i in step}
        if len(step) > 1:
            assert "gif" not in families
            assert families <= {"photo", "video"} or families == {"document"}


_items = st.lists(
    st.builds(SentItem, st.sampled_from(["photo", "video", "gif", "document"]), st.text()),
    max_size=12,
).map(tuple)


@given(
    st.builds(
        ForwardPayload,
        chat_id=st.integers(-(10**15), 10**15),
        prompt_id=st.integers(0, 2**62),
        prompt_message_id=st.integers(1, 2**31),
        channel_id=st.integers(-(10**15), -1),
        channel_title=st.text(),
        items=_items,
        caption=st.text(),
        spoiler=st.booleans(),
        sent=st.lists(st.integers(0, 20), max_size=5).map(tuple),
        lang=st.sampled_from(["en", "ru", "pt_BR", "fa"]),
    )
)
def test_forward_payload_round_trips(payload: ForwardPayload) -> None:
    assert ForwardPayload.from_json(payload.to_json()) == payload


@pytest.mark.parametrize(
    "raw",
    ["", "[]", '{"v": 2}', '{"v": 1}', '{"v": 1, "chat_id": "x"}', "{nope"],
    ids=["empty", "list", "future-version", "missing-fields", "bad-int", "not-json"],
)
def test_forward_payload_refuses_what_it_cannot_read(raw: str) -> None:
    with pytest.raises(PayloadError):
        ForwardPayload.from_json(raw)


def test_dedup_key_names_chat_and_prompt() -> None:
    payload = ForwardPayload(CHAT, PID, MSG, -1001, "c", ITEMS, "cap")
    assert payload.dedup_key == f"fwd:{CHAT}:{PID}"


def test_every_prompt_button_fits_telegrams_limit() -> None:
    big = attrs.evolve(BASE, id=2**63 - 1)
    for stage in ("open", "editing", "confirm"):
        _, markup = prompt_view(attrs.evolve(big, stage=stage), "c")
        assert markup is not None
        for row in markup.inline_keyboard:
            for button in row:
                assert isinstance(button.callback_data, str)
                assert len(button.callback_data.encode()) <= 64
                assert encode(decode(button.callback_data)) == button.callback_data  # type: ignore[arg-type]


def test_already_and_expired_texts_differ() -> None:
    assert ALREADY != EXPIRED
