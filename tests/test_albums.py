"""Album planning: Telegram's 2-10 group rule, GIFs alone, post order kept."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from xbot.sending.albums import PlanKind, SendStep, plan_albums, plan_sends

CHUNKS = [
    (0, [], "none"),
    (1, [1], "one"),
    (2, [2], "two"),
    (10, [10], "ten"),
    (11, [6, 5], "eleven-not-10-1"),
    (12, [6, 6], "twelve"),
    (19, [10, 9], "nineteen"),
    (20, [10, 10], "twenty"),
    (21, [7, 7, 7], "twenty-one-not-10-10-1"),
    (31, [8, 8, 8, 7], "thirty-one"),
]


@pytest.mark.parametrize(("count", "sizes"), [c[:2] for c in CHUNKS], ids=[c[2] for c in CHUNKS])
def test_plan_albums_balances(count: int, sizes: list[int]) -> None:
    items = list(range(count))
    chunks = plan_albums(items)
    assert [len(c) for c in chunks] == sizes
    assert [x for c in chunks for x in c] == items


def test_plan_albums_other_size_and_bad_size() -> None:
    assert plan_albums("abcdefg", size=3) == [["a", "b", "c"], ["d", "e"], ["f", "g"]]
    with pytest.raises(ValueError, match="at least 3"):
        plan_albums([1, 2], size=2)


P, V, G, D = "photo", "video", "gif", "document"

SENDS: list[tuple[list[PlanKind], list[SendStep], str]] = [
    ([], [], "empty"),
    ([P], [SendStep("photo", (0,))], "one-photo"),
    ([V], [SendStep("video", (0,))], "one-video"),
    ([G], [SendStep("animation", (0,))], "one-gif"),
    ([P, V], [SendStep("media_group", (0, 1))], "photo-video-mix"),
    ([P] * 4, [SendStep("media_group", (0, 1, 2, 3))], "four-photos"),
    (
        [P] * 11,
        [SendStep("media_group", tuple(range(6))), SendStep("media_group", tuple(range(6, 11)))],
        "eleven",
    ),
    ([G, G], [SendStep("animation", (0,)), SendStep("animation", (1,))], "two-gifs"),
    (
        [P, G, P],
        [SendStep("photo", (0,)), SendStep("animation", (1,)), SendStep("photo", (2,))],
        "gif-between-singles",
    ),
    (
        [P, P, G, V, P, P],
        [
            SendStep("media_group", (0, 1)),
            SendStep("animation", (2,)),
            SendStep("media_group", (3, 4, 5)),
        ],
        "gif-splits-albums",
    ),
    (
        [G, V, V],
        [SendStep("animation", (0,)), SendStep("media_group", (1, 2))],
        "gif-first",
    ),
    (
        [V, P, G],
        [SendStep("media_group", (0, 1)), SendStep("animation", (2,))],
        "gif-last",
    ),
    ([D], [SendStep("document", (0,))], "one-document"),
    ([D] * 3, [SendStep("media_group", (0, 1, 2))], "documents-group-together"),
    (
        [D, D, V, V],
        [SendStep("media_group", (0, 1)), SendStep("media_group", (2, 3))],
        "documents-never-mix-with-videos",
    ),
    (
        [D, V, D],
        [SendStep("document", (0,)), SendStep("video", (1,)), SendStep("document", (2,))],
        "a-video-between-documents",
    ),
    (["audio"], [SendStep("audio", (0,))], "one-audio"),
    (
        ["audio", "audio", "video"],
        [SendStep("media_group", (0, 1)), SendStep("video", (2,))],
        "audio-never-mixes-with-videos",
    ),
]


@pytest.mark.parametrize(("kinds", "steps"), [c[:2] for c in SENDS], ids=[c[2] for c in SENDS])
def test_plan_sends(kinds: list[PlanKind], steps: list[SendStep]) -> None:
    assert plan_sends(kinds) == steps


@given(st.lists(st.sampled_from(["photo", "video", "gif", "document"]), max_size=60))
def test_property_plan_sends_keeps_telegrams_rules(kinds: list[PlanKind]) -> None:
    steps = plan_sends(kinds)
    assert [i for s in steps for i in s.items] == list(range(len(kinds)))
    for step in steps:
        if step.method == "media_group":
            assert 2 <= len(step.items) <= 10
            assert all(kinds[i] != "gif" for i in step.items)
            group = {kinds[i] == "document" for i in step.items}
            assert len(group) == 1, "documents group only with documents"
        else:
            assert len(step.items) == 1
            expected = {
                "photo": "photo",
                "video": "video",
                "gif": "animation",
                "document": "document",
            }[kinds[step.items[0]]]
            assert step.method == expected
    # A lone item only stands between things it cannot share an album with
    # (GIFs, or the other class): next to its own class it would have joined.
    album_class = {"photo": "visual", "video": "visual", "document": "file", "gif": "gif"}
    for a, b in itertools.pairwise(steps):
        ca = {album_class[kinds[i]] for i in a.items}
        cb = {album_class[kinds[i]] for i in b.items}
        if ca == cb != {"gif"}:
            assert a.method == b.method == "media_group"


@given(st.integers(min_value=0, max_value=200), st.integers(min_value=3, max_value=12))
def test_property_plan_albums(count: int, size: int) -> None:
    chunks = plan_albums(list(range(count)), size)
    assert [x for c in chunks for x in c] == list(range(count))
    assert all(len(c) <= size for c in chunks)
    assert len(chunks) == -(-count // size)
    if count >= 2:
        assert all(len(c) >= 2 for c in chunks)
