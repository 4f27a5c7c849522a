"""How long a failed task waits before its next try: pure, clamped arithmetic.

The delay grows as ``base ** attempt`` up to ``cap``, then jitter takes it
down into ``[capped / 2, capped)`` so tasks that failed together (a flaky
media host, a Telegram outage) do not come back together. Jitter is passed
in, not drawn here, so the function is a table of cases in the tests.

A ``retry_after`` (Telegram's 429 answer) is a floor that wins over the cap:
asking again sooner only earns another 429.
"""

from __future__ import annotations

import math
import random

from xbot.errors import PollConflict, RateLimited, TokenRefused, XbotError


def compute_backoff(
    attempt: int,
    *,
    base: float = 2.0,
    cap: float = 600.0,
    jitter: float,
    retry_after: float | None = None,
) -> float:
    """Seconds to wait before try number ``attempt + 1``.

    Args:
        attempt: tries made so far (1 after the first failure); values below 1 count as 1.
        base: growth factor per attempt (> 1); the first delay is about ``base`` seconds.
        cap: the longest delay jitter starts from (≥ 0).
        jitter: a number in [0, 1), e.g. ``random.random()``; 0 gives the shortest delay.
        retry_after: a delay the server asked for; the result is never shorter.
    """
    if not 0.0 <= jitter < 1.0:
        raise ValueError(f"jitter must be in [0, 1), got {jitter!r}")
    if base <= 1.0 or not math.isfinite(base):
        raise ValueError(f"base must be a finite number above 1, got {base!r}")
    if cap < 0.0 or not math.isfinite(cap):
        raise ValueError(f"cap must be a finite number ≥ 0, got {cap!r}")
    attempt = max(1, attempt)
    # Compare exponents, not powers: base ** attempt overflows a float long
    # before attempt stops being a plausible int.
    at_cap = cap == 0.0 or attempt * math.log(base) >= math.log(cap)
    capped = cap if at_cap else base**attempt
    delay = capped * (0.5 + jitter / 2.0)
    if retry_after is not None and math.isfinite(retry_after):
        delay = max(delay, retry_after)
    return delay


def compute_outage_delay(
    age: float,
    *,
    jitter: float,
    at_least: float | None = None,
    floor: float = 5.0,
    cap: float = 120.0,
) -> float:
    """Seconds before a task waiting out an outage of every source looks again.

    Counted from the task's `age`, not its attempts (an outage retry counts
    none): about a quarter of the time it has waited so far, between `floor`
    and `cap`, jittered down into ``[d / 2, d)`` like `compute_backoff`. An
    hour's outage costs a task about 50 looks, each one free while every
    breaker is open (no request goes out); the cap is what a link waits at
    most once a source is back. `at_least` (the time until a breaker's next probe) is a
    floor, itself capped: looking before the probe may go only finds every
    source still skipped.
    """
    if not 0.0 <= jitter < 1.0:
        raise ValueError(f"jitter must be in [0, 1), got {jitter!r}")
    if not 0.0 < floor <= cap or not math.isfinite(cap):
        raise ValueError(f"need 0 < floor <= cap, got floor={floor!r} cap={cap!r}")
    base = min(cap, max(floor, age / 4 if math.isfinite(age) else cap))
    delay = base * (0.5 + jitter / 2.0)
    if at_least is not None and math.isfinite(at_least):
        delay = max(delay, min(cap, at_least))
    return delay


# Telegram unreachable at start-up or while polling: how long before the next try.
# 30 s: once Telegram answers again the bot is polling within 30 s (plus one request's
# timeout), and at the cap an outage costs two cheap getMe/getUpdates calls a minute
# and two log lines, so an outage of hours is neither hammered nor noisy.
RECONNECT_FIRST = 1.0
RECONNECT_CAP = 30.0


def compute_reconnect_delay(
    failures: int,
    *,
    jitter: float,
    first: float = RECONNECT_FIRST,
    cap: float = RECONNECT_CAP,
    retry_after: float | None = None,
) -> float:
    """Seconds before the next try to reach the Bot API after `failures` failed ones in a row.

    ``first * 2 ** (failures - 1)`` up to `cap`, jittered down into ``[d / 2, d)`` like
    `compute_backoff` (a VPS full of bots coming back from one outage does not knock all
    at once). A ``retry_after`` (a 429) is a floor. Scaling `first` and `cap` together
    (the test-only ``XBOT_TEST_TIME_SCALE``) keeps the shape.
    """
    if not 0.0 <= jitter < 1.0:
        raise ValueError(f"jitter must be in [0, 1), got {jitter!r}")
    if not 0.0 < first <= cap or not math.isfinite(cap):
        raise ValueError(f"need 0 < first <= cap, got first={first!r} cap={cap!r}")
    steps = max(1, failures) - 1
    # Compare exponents, not powers (as compute_backoff does).
    at_cap = steps * math.log(2.0) >= math.log(cap / first)
    capped = cap if at_cap else first * 2.0**steps
    delay = capped * (0.5 + jitter / 2.0)
    if retry_after is not None and math.isfinite(retry_after):
        delay = max(delay, retry_after)
    return delay


def reconnect_delay(
    exc: XbotError, failures: int, *, scale: float = 1.0, jitter: float | None = None
) -> float:
    """How long to wait after the `failures`-th failed call in a row to the Bot API,
    from what the failure was (`xbot.sending.bot_errors.classify`'s answer)."""
    if isinstance(exc, RateLimited):
        return exc.retry_after  # Telegram's own number; never scaled down
    if isinstance(exc, PollConflict | TokenRefused):
        failures = 64  # at the cap at once: nothing a quick retry can fix
    return reconnect_backoff(failures, scale=scale, jitter=jitter)


def reconnect_backoff(failures: int, *, scale: float = 1.0, jitter: float | None = None) -> float:
    """The pause after `failures` tries in a row that came to nothing: the reconnect
    backoff, scaled (the test-only time scale), jittered unless told."""
    drawn = random.random() if jitter is None else jitter
    return compute_reconnect_delay(
        failures, jitter=drawn, first=RECONNECT_FIRST * scale, cap=RECONNECT_CAP * scale
    )
