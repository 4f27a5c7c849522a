"""The status message's pure core: what it says, and when it may appear or change."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from xbot.sending.progress import EVERY, FIRST_AFTER, Snapshot, Throttle, human_size, render

MB = 1024 * 1024


@pytest.mark.parametrize(
    ("size", "text"),
    [(0, "0 KB"), (812 * 1024, "812 KB"), (int(1.4 * MB), "1.4 MB"), (31 * MB, "31 MB"),
     (int(1.4 * 1024 * MB), "1.4 GB"), (-5, "0 KB")],
    ids=["zero", "kb", "small-mb", "mb", "gb", "negative"],
)  # fmt: skip
def test_human_size(size: int, text: str) -> None:
    assert human_size(size) == text


@pytest.mark.parametrize(
    ("snapshot", "text"),
    [
        (Snapshot(), "Looking at the link…"),
        (Snapshot("download"), "Downloading…"),
        (Snapshot("download", 13 * MB, 31 * MB), "Downloading… 41% of 31 MB"),
        (Snapshot("download", 5 * MB), "Downloading… 5.0 MB"),
        (Snapshot("download", 40 * MB, 31 * MB), "Downloading… 100% of 31 MB"),
        (Snapshot("merge", 30 * MB, 31 * MB), "Merging picture and sound…"),
        (Snapshot("upload", 31 * MB), "Uploading 31 MB to Telegram…"),
        (Snapshot("upload"), "Uploading to Telegram…"),
    ],
    ids=["fetch", "download-nothing-yet", "percent", "no-total", "estimate-exceeded", "merge",
         "upload", "upload-unknown"],
)  # fmt: skip
def test_render(snapshot: Snapshot, text: str) -> None:
    assert render(snapshot) == text


@pytest.mark.parametrize(
    ("lang", "text"),
    [("ru", "Скачиваю… 41% из 31 MB"), ("tr", "İndiriliyor… 31 MB içinden %41"),
     ("ja", "ダウンロード中… 31 MB 中 41%"), ("de", "Lade herunter… 41 % von 31 MB")],
    ids=["ru", "tr", "ja", "de"],
)  # fmt: skip
def test_render_in_the_chats_language(lang: str, text: str) -> None:
    assert render(Snapshot("download", 13 * MB, 31 * MB), lang) == text


def test_the_defaults_are_the_promised_ones() -> None:
    # "after ~5 s", "at most every 3-5 s": Telegram limits edits like messages.
    assert FIRST_AFTER == 5.0
    assert 3.0 <= EVERY <= 5.0


def test_throttle_first_after_then_every() -> None:
    throttle = Throttle(started=100.0)
    assert not throttle.due(104.9)
    assert throttle.due(105.0)
    throttle.mark(105.2)
    assert not throttle.due(109.1)
    assert throttle.due(105.2 + EVERY)
    assert throttle.next_due() == 105.2 + EVERY


@given(
    first_after=st.floats(0.0, 10.0),
    every=st.floats(0.1, 10.0),
    ticks=st.lists(st.floats(0.0, 0.5), min_size=1, max_size=200),
)
def test_a_loop_that_obeys_the_throttle_never_posts_too_often(
    first_after: float, every: float, ticks: list[float]
) -> None:
    """However irregularly the loop wakes, posts keep their distance."""
    throttle = Throttle(0.0, first_after, every)
    now, posts = 0.0, []
    for tick in ticks:
        now += tick
        if throttle.due(now):
            posts.append(now)
            throttle.mark(now)
    if posts:
        assert posts[0] >= first_after
    assert all(b - a >= every - 1e-9 for a, b in itertools.pairwise(posts))  # float sums
