"""How long: the one owner of a span of seconds said to the operator.

Two styles, by where it is read: ``compact`` fits a column of the queue's listing
(``5m``, the largest unit only); ``words`` sits in a sentence of `/stats` or
`xbot doctor` (``2 h 5 min``, two units, the smaller one left out when zero). Users'
sentences say their spans through gettext templates instead (`xbot.i18n`).
"""

from __future__ import annotations

from typing import Final, Literal

__all__ = ["Style", "say_span"]

Style = Literal["compact", "words"]

MINUTE: Final = 60
HOUR: Final = 3600
DAY: Final = 86400


def say_span(seconds: float, style: Style = "words") -> str:
    """``seconds`` (a negative one is 0) in ``style``, cut down to whole units."""
    s = max(0, int(seconds))
    if style == "compact":
        for unit, size in (("d", DAY), ("h", HOUR), ("m", MINUTE)):
            if s >= size:
                return f"{s // size}{unit}"
        return f"{s}s"
    # Words: seconds under two minutes, minutes under two hours, then two units.
    if s < 2 * MINUTE:
        return f"{s} s"
    if s < 2 * HOUR:
        return f"{s // MINUTE} min"
    big, small, size, rest = ("h", "min", HOUR, MINUTE) if s < 2 * DAY else ("d", "h", DAY, HOUR)
    whole, part = divmod(s, size)
    tail = f" {part // rest} {small}" if part // rest else ""
    return f"{whole} {big}{tail}"
