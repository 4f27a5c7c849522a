"""Backoff: exponential, jittered down, capped, never shorter than retry_after."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from xbot.tasks.backoff import RECONNECT_CAP, compute_backoff, compute_reconnect_delay


@pytest.mark.parametrize(
    ("attempt", "kwargs", "expected"),
    [
        (1, {"jitter": 0.0}, 1.0),
        (1, {"jitter": 0.5}, 1.5),
        (2, {"jitter": 0.0}, 2.0),
        (3, {"jitter": 0.0}, 4.0),
        (5, {"jitter": 0.0}, 16.0),
        (0, {"jitter": 0.0}, 1.0),
        (-3, {"jitter": 0.0}, 1.0),
        (10, {"jitter": 0.0}, 300.0),
        (10, {"jitter": 0.999}, 599.7),
        (10_000, {"jitter": 0.0}, 300.0),
        (3, {"jitter": 0.0, "base": 3.0}, 13.5),
        (3, {"jitter": 0.0, "cap": 10.0}, 4.0),
        (4, {"jitter": 0.0, "cap": 10.0}, 5.0),
        (1, {"jitter": 0.0, "retry_after": 30.0}, 30.0),
        (10, {"jitter": 0.0, "retry_after": 900.0}, 900.0),
        (5, {"jitter": 0.0, "retry_after": 3.0}, 16.0),
        (2, {"jitter": 0.0, "retry_after": float("nan")}, 2.0),
        (2, {"jitter": 0.0, "cap": 0.0}, 0.0),
    ],
    ids=[
        "first-failure",
        "first-with-jitter",
        "second",
        "third",
        "fifth",
        "zero-counts-as-one",
        "negative-counts-as-one",
        "capped-half",
        "capped-top",
        "huge-attempt-no-overflow",
        "other-base",
        "below-small-cap",
        "small-cap",
        "retry-after-floor",
        "retry-after-beats-cap",
        "short-retry-after-ignored",
        "nan-retry-after-ignored",
        "zero-cap",
    ],
)
def test_backoff_table(attempt: int, kwargs: dict[str, float], expected: float) -> None:
    assert compute_backoff(attempt, **kwargs) == pytest.approx(expected)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"jitter": 1.0},
        {"jitter": -0.1},
        {"jitter": 0.0, "base": 1.0},
        {"jitter": 0.0, "base": float("inf")},
        {"jitter": 0.0, "cap": -1.0},
        {"jitter": 0.0, "cap": float("inf")},
    ],
    ids=["jitter-one", "jitter-negative", "base-one", "base-inf", "cap-negative", "cap-inf"],
)
def test_backoff_refuses_bad_arguments(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        compute_backoff(3, **kwargs)


@given(
    attempt=st.integers(min_value=-10, max_value=10**6),
    jitter=st.floats(min_value=0.0, max_value=1.0, exclude_max=True),
    base=st.floats(min_value=1.01, max_value=10.0),
    cap=st.floats(min_value=0.0, max_value=86400.0),
    retry_after=st.none() | st.floats(min_value=0.0, max_value=10**6, allow_nan=False),
)
def test_backoff_bounds(
    attempt: int, jitter: float, base: float, cap: float, retry_after: float | None
) -> None:
    delay = compute_backoff(attempt, base=base, cap=cap, jitter=jitter, retry_after=retry_after)
    assert math.isfinite(delay)
    assert delay >= 0.0
    if retry_after is not None:
        assert delay >= retry_after
    assert delay <= max(cap, retry_after or 0.0)
    # The jitter takes off at most half of the capped exponential.
    exponent = max(attempt, 1) * math.log(base)
    capped = cap if cap == 0.0 or exponent >= math.log(cap) else math.exp(exponent)
    assert delay >= capped / 2.0 * (1 - 1e-9)


@given(
    attempt=st.integers(min_value=1, max_value=60),
    jitter=st.floats(min_value=0.0, max_value=1.0, exclude_max=True),
)
def test_backoff_never_shrinks_with_attempts(attempt: int, jitter: float) -> None:
    assert compute_backoff(attempt + 1, jitter=jitter) >= compute_backoff(attempt, jitter=jitter)


@pytest.mark.parametrize(
    ("failures", "kwargs", "expected"),
    [
        (1, {"jitter": 0.0}, 0.5),
        (1, {"jitter": 0.999}, 0.9995),
        (2, {"jitter": 0.0}, 1.0),
        (5, {"jitter": 0.0}, 8.0),
        (6, {"jitter": 0.0}, 15.0),
        (7, {"jitter": 0.0}, 15.0),
        (7, {"jitter": 0.999}, 29.985),
        (0, {"jitter": 0.0}, 0.5),
        (10_000, {"jitter": 0.0}, 15.0),
        (3, {"jitter": 0.0, "first": 0.01, "cap": 0.3}, 0.02),
        (9, {"jitter": 0.0, "first": 0.01, "cap": 0.3}, 0.15),
        (1, {"jitter": 0.0, "retry_after": 12.0}, 12.0),
        (10, {"jitter": 0.0, "retry_after": 120.0}, 120.0),
    ],
    ids=[
        "first",
        "first-top",
        "second",
        "fifth",
        "sixth-at-cap",
        "past-cap",
        "cap-top",
        "zero-counts-as-one",
        "huge-no-overflow",
        "scaled",
        "scaled-cap",
        "retry-after-floor",
        "retry-after-beats-cap",
    ],
)
def test_reconnect_table(failures: int, kwargs: dict[str, float], expected: float) -> None:
    assert compute_reconnect_delay(failures, **kwargs) == pytest.approx(expected)


@given(st.integers(min_value=-5, max_value=10_000), st.floats(min_value=0.0, max_value=0.999))
def test_reconnect_never_past_the_cap(failures: int, jitter: float) -> None:
    """However long Telegram stays away, the next try is at most the cap away (so the bot
    notices within RECONNECT_CAP that it is back), and never sooner than half a second."""
    delay = compute_reconnect_delay(failures, jitter=jitter)
    assert 0.5 <= delay < RECONNECT_CAP


@pytest.mark.parametrize(
    "kwargs",
    [{"jitter": 1.0}, {"jitter": -0.1}, {"jitter": 0.0, "first": 0.0}, {"jitter": 0.0, "cap": 0.1}],
    ids=["jitter-1", "jitter-negative", "first-zero", "cap-below-first"],
)
def test_reconnect_refuses_bad_arguments(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match=r"must|need"):
        compute_reconnect_delay(1, **kwargs)
