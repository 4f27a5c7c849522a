"""When the admins hear about a condition: pure rules over a small frozen state.

Each condition (every X source down, Telegram unreachable, dead letters
piling up, the disk nearly full, an old yt-dlp, a source whose answers
changed shape) is watched the same way:

    fine ──bad──▶ bad since t ──bad for `after`──▶ raised (one alert) ──fine──▶ cleared (one "back")

- A condition is *raised* once it has been bad for `after` seconds, and at
  most once per its own `quiet` period: a flapping source is one alert, not
  one per flap.
- A raised condition is *cleared* once, when it is fine again, with what
  happened meanwhile (from–to, the links it delayed and lost).
- Telegram's condition is said only when it clears: while Telegram is down no
  message reaches anyone (`Rule.tell_raise` is False).

`step` is the whole state machine; `xbot.tasks.alerts` reads the world, calls
it and queues what it returns. Time is passed in (wall-clock seconds).
"""

from __future__ import annotations

import enum

import attrs

__all__ = ["RULES", "Condition", "Phase", "Rule", "Watch", "step"]

MINUTE = 60.0
HOUR = 3600.0


class Condition(enum.StrEnum):
    """What the admins are told about; the value is the mute button's token."""

    X_DOWN = "x_down"  # every X source's breaker is open
    TELEGRAM = "telegram"  # the Bot API does not answer
    DEAD = "dead"  # dead letters above a rate
    DISK = "disk"  # the database's disk nearly full
    YTDLP = "ytdlp"  # yt-dlp older than doctor's bound
    BROKEN = "broken"  # the canary finds a source's answers in a changed shape


class Phase(enum.StrEnum):
    RAISED = "raised"
    CLEARED = "cleared"


@attrs.frozen
class Rule:
    """How one condition is told.

    Attributes:
        after: seconds bad before it is raised (0: at once); None: the bot's
            `XBOT_ALERT_AFTER_S`.
        quiet: seconds after a raise before the same condition may be raised again.
        tell_raise: say it when raised (False: only once it cleared).
    """

    after: float | None = None
    quiet: float = HOUR
    tell_raise: bool = True


RULES: dict[Condition, Rule] = {
    Condition.X_DOWN: Rule(after=None, quiet=HOUR),
    Condition.TELEGRAM: Rule(after=None, quiet=HOUR, tell_raise=False),
    Condition.DEAD: Rule(after=0.0, quiet=HOUR),
    Condition.DISK: Rule(after=0.0, quiet=6 * HOUR),
    Condition.YTDLP: Rule(after=0.0, quiet=24 * HOUR),
    Condition.BROKEN: Rule(after=0.0, quiet=6 * HOUR),
}


@attrs.frozen
class Watch:
    """One condition's state.

    Attributes:
        bad_since: when the current bad stretch began (None: fine now).
        raised: the current stretch was raised (a clear is owed).
        raised_at: when it was last raised (for the quiet period), None: never.
    """

    bad_since: float | None = None
    raised: bool = False
    raised_at: float | None = None


def step(
    watch: Watch, bad: bool, now: float, *, after: float, quiet: float
) -> tuple[Watch, Phase | None]:
    """The state after seeing the condition `bad` (or not) at `now`, and what to say."""
    if bad:
        since = watch.bad_since if watch.bad_since is not None else now
        if watch.raised:
            return attrs.evolve(watch, bad_since=since), None
        quiet_over = watch.raised_at is None or now - watch.raised_at >= quiet
        if now - since >= after and quiet_over:
            return Watch(bad_since=since, raised=True, raised_at=now), Phase.RAISED
        return attrs.evolve(watch, bad_since=since), None
    if watch.raised:
        return Watch(raised_at=watch.raised_at), Phase.CLEARED
    return Watch(raised_at=watch.raised_at), None
