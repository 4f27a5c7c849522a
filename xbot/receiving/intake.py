"""How an update came in, for the handlers that must know: can Telegram send it again?

Long polling confirms a batch with the next ``getUpdates`` whatever the handlers did,
so a handler that could not store the work says so to the user ("send it again").
A webhook request is different: its HTTP answer is the confirmation, and a 5xx makes
Telegram send the update again by itself. Inside `redeliverable()` (the webhook
listener, `xbot.receiving.webhook`) a handler that could not store its work raises
`StoreError` instead of apologising; the one error handler notes it with
`note_failure`, and the listener answers 500.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

import attrs

from xbot.errors import StoreError


@attrs.define
class Intake:
    """One webhook request's view of its update's handling.

    Attributes:
        failure: the `StoreError` a handler raised, if any: the work is not stored.
    """

    failure: StoreError | None = None


_CURRENT: ContextVar[Intake | None] = ContextVar("xbot_intake", default=None)


@contextlib.contextmanager
def redeliverable() -> Iterator[Intake]:
    """Handle an update that Telegram sends again unless it is confirmed (a webhook POST)."""
    intake = Intake()
    token = _CURRENT.set(intake)
    try:
        yield intake
    finally:
        _CURRENT.reset(token)


def telegram_resends() -> bool:
    """True while handling an update that a failure sends back to Telegram for another try."""
    return _CURRENT.get() is not None


def note_failure(error: BaseException | None) -> bool:
    """The error handler's part: a `StoreError` in a redeliverable update fails its request.

    Returns True when it did: the update comes again, so this is no bug to trace.
    """
    intake = _CURRENT.get()
    if intake is None or not isinstance(error, StoreError):
        return False
    if intake.failure is None:
        intake.failure = error
    return True
