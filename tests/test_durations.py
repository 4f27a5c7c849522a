"""A span of seconds in the operator's words: one function, two styles."""

from __future__ import annotations

import pytest

from xbot.durations import Style, say_span


@pytest.mark.parametrize(
    ("seconds", "style", "text"),
    [
        pytest.param(0, "compact", "0s", id="compact-zero"),
        pytest.param(59, "compact", "59s", id="compact-s"),
        pytest.param(60, "compact", "1m", id="compact-m"),
        pytest.param(3599, "compact", "59m", id="compact-m-edge"),
        pytest.param(7200, "compact", "2h", id="compact-h"),
        pytest.param(259200, "compact", "3d", id="compact-d"),
        pytest.param(-5, "compact", "0s", id="compact-negative"),
        pytest.param(0, "words", "0 s", id="words-zero"),
        pytest.param(119.9, "words", "119 s", id="words-s-edge"),
        pytest.param(120, "words", "2 min", id="words-min"),
        pytest.param(600, "words", "10 min", id="words-10-min"),
        pytest.param(7199, "words", "119 min", id="words-min-edge"),
        pytest.param(7200, "words", "2 h", id="words-h-whole"),
        pytest.param(2 * 3600 + 5 * 60 + 59, "words", "2 h 5 min", id="words-h-min"),
        pytest.param(172799, "words", "47 h 59 min", id="words-h-edge"),
        pytest.param(172800, "words", "2 d", id="words-d-whole"),
        pytest.param(3 * 86400 + 5 * 3600, "words", "3 d 5 h", id="words-d-h"),
        pytest.param(-5, "words", "0 s", id="words-negative"),
    ],
)
def test_say_span(seconds: float, style: Style, text: str) -> None:
    assert say_span(seconds, style) == text
