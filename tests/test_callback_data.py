"""Callback data: the canonical form round-trips; anything forged decodes to None."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from xbot.tasks.callback_data import (
    MAX_ARGS,
    MAX_BYTES,
    MAX_INT,
    PATTERN,
    Action,
    CallbackData,
    decode,
    encode,
)

VALID = [
    (CallbackData(Action.FORWARD, (1234,)), "v1:fwd:1234", "forward"),
    (CallbackData(Action.EDIT, (0,)), "v1:edit:0", "edit-zero"),
    (CallbackData(Action.SKIP, ()), "v1:skip", "skip-no-args"),
    (CallbackData(Action.CONFIRM, (7, 8)), "v1:conf:7:8", "confirm-two-ints"),
    (CallbackData(Action.SETTING, ("ytdlp",)), "v1:set:ytdlp", "setting-token"),
    (CallbackData(Action.SETTING, ("caption_style", "short")), "v1:set:caption_style:short", "sv"),
    (CallbackData(Action.RETRY, (MAX_INT,)), f"v1:retry:{MAX_INT}", "retry-max-int"),
    (CallbackData(Action.MENU, ("_x1",)), "v1:menu:_x1", "underscore-token"),
    (CallbackData("fwd", (1,)), "v1:fwd:1", "action-from-string"),
    (CallbackData(Action.MENU, (1, "a", 2, "b")), "v1:menu:1:a:2:b", "max-args"),
]


@pytest.mark.parametrize(("data", "text"), [c[:2] for c in VALID], ids=[c[2] for c in VALID])
def test_valid_round_trips(data: CallbackData, text: str) -> None:
    assert encode(data) == text
    assert decode(text) == data
    assert re.match(PATTERN, text)


JUNK: list[tuple[object, str]] = [
    ("", "empty"),
    ("v1", "version-only"),
    ("v1:", "empty-action"),
    ("v2:fwd:1", "unknown-version"),
    ("V1:fwd:1", "version-case"),
    ("v1:FWD:1", "action-case"),
    ("v1:forward:1", "unknown-action"),
    ("v1:fwd:1:", "trailing-colon"),
    ("v1:fwd::1", "empty-arg"),
    (":v1:fwd:1", "leading-colon"),
    ("v1:fwd:1:2:3:4:5", "too-many-args"),
    ("v1:fwd:-1", "negative"),
    ("v1:fwd:+1", "plus-sign"),
    ("v1:fwd:007", "leading-zeros"),
    ("v1:fwd:1e3", "exponent"),
    ("v1:fwd:0x10", "hex"),
    (f"v1:fwd:{MAX_INT + 1}", "over-int64"),
    ("v1:fwd:" + "9" * 40, "huge-int"),
    ("v1:set:Ytdlp", "upper-token"),
    ("v1:set:yt-dlp", "dash-token"),
    ("v1:set:yt dlp", "space"),
    ("v1:set:" + "a" * 33, "long-token"),
    ("v1:set:ytdlp\n", "newline"),
    ("v1:set:ytdlp\x00", "nul"),
    ("v1:fwd:١٢٣", "arabic-digits"),
    ("v1:set:ÿ", "latin1"),
    ("v1:set:é", "unicode"),
    ("v1:menu:" + "a" * 57, "65-bytes"),
    ("v1 :fwd:1", "space-in-version"),
    (b"v1:fwd:1", "bytes"),
    (None, "none"),
    (1234, "int"),
    (("v1", "fwd"), "tuple"),
]


@pytest.mark.parametrize("text", [c[0] for c in JUNK], ids=[c[1] for c in JUNK])
def test_junk_decodes_to_none(text: object) -> None:
    assert decode(text) is None


def test_64_bytes_is_the_edge() -> None:
    text = "v1:menu:" + "a" * 32 + ":" + "b" * 23
    assert len(text) == MAX_BYTES
    assert decode(text) is not None
    assert decode(text + "b") is None


BAD_VALUES = [
    ((Action.FORWARD, (-1,)), ValueError, "negative"),
    ((Action.FORWARD, (MAX_INT + 1,)), ValueError, "too-big"),
    ((Action.FORWARD, (True,)), TypeError, "bool"),
    ((Action.FORWARD, (1.0,)), TypeError, "float"),
    ((Action.SETTING, ("a:b",)), ValueError, "colon-in-token"),
    ((Action.SETTING, ("1a",)), ValueError, "token-starting-with-digit"),
    ((Action.SETTING, ("",)), ValueError, "empty-token"),
    ((Action.MENU, (1, 2, 3, 4, 5)), ValueError, "too-many"),
    (("nope", ()), ValueError, "unknown-action"),
    ((Action.MENU, [1]), TypeError, "list-args"),
]


@pytest.mark.parametrize(
    ("fields", "error"), [c[:2] for c in BAD_VALUES], ids=[c[2] for c in BAD_VALUES]
)
def test_invalid_values_cannot_be_built(fields: tuple[object, object], error: type) -> None:
    with pytest.raises(error):
        CallbackData(*fields)  # type: ignore[arg-type]


def test_encode_refuses_over_64_bytes() -> None:
    data = CallbackData(Action.MENU, ("a" * 32, "b" * 32))
    with pytest.raises(ValueError, match="64 bytes"):
        encode(data)


def test_typed_argument_access() -> None:
    data = CallbackData(Action.SETTING, ("ytdlp", 3))
    assert data.str_arg(0) == "ytdlp"
    assert data.int_arg(0) is None
    assert data.int_arg(1) == 3
    assert data.str_arg(1) is None
    assert data.int_arg(2) is None
    assert data.str_arg(-1) is None


_args = st.one_of(
    st.integers(min_value=0, max_value=MAX_INT),
    st.from_regex(r"[a-z_][a-z0-9_]{0,31}", fullmatch=True),
)
_values = st.builds(
    CallbackData,
    st.sampled_from(list(Action)),
    st.lists(_args, max_size=MAX_ARGS).map(tuple),
)


@given(_values)
def test_property_round_trip(data: CallbackData) -> None:
    try:
        text = encode(data)
    except ValueError:
        return  # too long for Telegram: refused at encode time, never sent
    assert len(text.encode()) <= MAX_BYTES
    assert decode(text) == data


@given(
    st.one_of(
        st.text(max_size=80),
        st.text(st.sampled_from("v1:fwdsetmnu0123456789_-az"), max_size=70),
        st.binary(max_size=70),
        st.binary(max_size=70).map(lambda b: b.decode("latin-1")),
    )
)
def test_property_decode_never_raises_and_accepts_only_canonical(data: object) -> None:
    decoded = decode(data)
    if decoded is not None:
        assert encode(decoded) == data
