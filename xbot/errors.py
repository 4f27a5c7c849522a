"""The one exception tree of xbot.

Errors of the libraries we call (apsw, httpx, telegram.error, yt_dlp) are
translated into these exactly once, in the module that calls each library.
Everything above those modules speaks only this tree.

    XbotError
    ├── ConfigError              a setting is missing or malformed (one line for the operator)
    ├── StoreError               the database cannot be used
    │   ├── StoreBusy            locked by another process, or the disk is full: may pass
    │   ├── SchemaTooNew         the file was written by a newer xbot; nothing is written to it
    │   └── StoreDamaged         the file is torn or corrupt; refused, the backup named
    ├── LeaseLost                a write-back found its lease gone (expired and re-leased)
    ├── PayloadError             a task's payload does not parse (older shape, corruption)
    ├── FetchError               getting a post or its media failed
    │   ├── PostUnavailable      private, deleted, suspended, not found: a user-facing reason
    │   │   └── NoSound          the sound alone was asked of a post that has none
    │   ├── UnsupportedLink      nothing we can fetch from this link
    │   ├── TooLarge             the file is over the upload limit
    │   ├── TooSlow              the transfer fell under the speed floor, or ran out of time
    │   ├── BlockedAddress       the target is loopback/private/link-local (SSRF guard)
    │   └── TransientFetch       timeouts, 5xx, resets: worth retrying
    │       └── AllSourcesDown   every X source failed or is skipped (xbot.sources.x)
    ├── SendError                Telegram refused something we sent (telegram.error translated)
    │   ├── UrlNotFetched        Telegram could not fetch a media URL: upload it instead
    │   ├── StaleFileId          a cached file_id was refused: invalidate and fetch afresh
    │   └── ChatUnavailable      bot blocked/kicked, chat gone: drop the work, tell no one
    └── Outcome                  raised by a task to tell the worker what to do next
        ├── RetryLater(delay)    transient failure; count an attempt, back off
        │   ├── ChatMoved(new_id) the group became a supergroup: move its work, run again
        │   ├── OutageRetry      every source is down: retry counted in time, not attempts
        │   ├── TokenRefused     the Bot API refused the token (401/404): the operator's to fix;
        │   │                    a task waits, the start-up stops (exit 2)
        │   ├── PollConflict     another process polls with the same token (409)
        │   └── TelegramUnreachable  a 5xx, a refused/reset connection, a timeout: the whole
        │                        bot holds (xbot.sending.telegram_health), no attempt counted,
        │                        given up only after hours (`ambiguous`: it may have arrived)
        ├── RateLimited(after)   Telegram said retry_after; hold the chat, no attempt counted
        └── Permanent(reason)    will never succeed; dead-letter with a plain sentence

A task raises an `Outcome`; the worker alone maps outcomes to queue
write-backs, log lines and the dead-letter notice.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

# What reading a payload that does not parse may raise; OverflowError: a number like
# 1e400 where an int belongs; RecursionError: nesting deeper than the parser goes.
_UNREADABLE = (ValueError, TypeError, KeyError, AttributeError, OverflowError, RecursionError)


class XbotError(Exception):
    """Base of every error xbot raises on purpose."""


class ConfigError(XbotError):
    """A setting is missing or malformed. The message is one line for the operator."""


class StoreError(XbotError):
    """The database cannot be opened or used."""


class StoreBusy(StoreError):
    """The database is locked past the busy timeout, or its disk is full: worth waiting out."""


class SchemaTooNew(StoreError):
    """The database was migrated by a newer xbot than this one."""


class StoreDamaged(StoreError):
    """The database file is torn or corrupt: refused whole, never half-used."""


class LeaseLost(XbotError):
    """A fenced write-back matched no row: the lease expired and someone else holds it."""

    def __init__(self, task_id: int, op: str) -> None:
        super().__init__(f"lease lost on task {task_id} during {op}")
        self.task_id = task_id
        self.op = op


class PayloadError(XbotError):
    """A task payload does not parse."""


@contextlib.contextmanager
def reading_payload(what: str) -> Iterator[None]:
    """What goes wrong reading a ``what`` payload (its JSON, its fields) becomes a
    `PayloadError` naming it: the worker dead-letters such a task, never crashes on it."""
    try:
        yield
    except PayloadError:
        raise
    except _UNREADABLE as exc:
        raise PayloadError(f"{what} payload does not parse: {exc!r}"[:300]) from exc


class FetchError(XbotError):
    """Fetching a post or its media failed. `reason` is a sentence fit for a user."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class PostUnavailable(FetchError):
    """The post is private, deleted, suspended or was never there."""


class NoSound(PostUnavailable):
    """The sound alone was asked of a post with no sound (a silent video, an image)."""


class UnsupportedLink(FetchError):
    """The link points to nothing we know how to fetch."""


class TooLarge(FetchError):
    """The media is over the upload limit."""


class TooSlow(FetchError):
    """The transfer fell under the speed floor (`xbot.media.speed_floor`), or a run
    (yt-dlp, gallery-dl, a whole task) used up its time: given up, not retried."""


class BlockedAddress(FetchError):
    """The target resolves to an address the SSRF guard refuses."""


class TransientFetch(FetchError):
    """A failure that may pass: timeout, connection reset, 5xx."""


class AllSourcesDown(TransientFetch):
    """Every source of a post failed transiently or is skipped by its breaker.

    `retry_in` is when the soonest skipped source may be probed again (None:
    none is skipped, they all just failed); `all_open` says every source's
    breaker is open: an outage, not a blip.
    """

    def __init__(
        self, reason: str, *, retry_in: float | None = None, all_open: bool = False
    ) -> None:
        super().__init__(reason)
        self.retry_in = retry_in
        self.all_open = all_open


class SendError(XbotError):
    """Telegram refused a send; the subclasses say what to do instead."""


class UrlNotFetched(SendError):
    """Telegram could not fetch (or did not like) a media URL; upload the file instead."""


class StaleFileId(SendError):
    """A cached file_id was refused."""


class ChatUnavailable(SendError):
    """The bot cannot write to the chat any more (blocked, kicked, chat deleted)."""


class Outcome(XbotError):
    """Raised by a task to tell the worker how it ended, when it did not succeed."""


class RetryLater(Outcome):
    """Try again after `delay` seconds (at least); counts an attempt."""

    def __init__(self, reason: str, delay: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.delay = delay


class TokenRefused(RetryLater):
    """The Bot API refused the token (401/404): ours, not the chat's.

    A task waits for the operator to fix it; the start-up stops at once (`xbot run`
    exits 2, a restart cannot help); polling tries again slowly."""


class PollConflict(RetryLater):
    """Another process polls with the same token (Telegram's 409): a task waits; polling
    tries again slowly, at the cap of its backoff."""


class ChatMoved(RetryLater):
    """The group became a supergroup (Telegram's ``migrate_to_chat_id``).

    The worker moves the chat's tasks, hold and state to `new_chat_id` and runs
    the task again there, without counting an attempt. A RetryLater, so code
    that does not know it still retries rather than losing the work.
    """

    def __init__(self, new_chat_id: int) -> None:
        super().__init__(f"the group moved to {new_chat_id}", delay=0)
        self.new_chat_id = new_chat_id


class OutageRetry(RetryLater):
    """Every source is down: try again later without counting an attempt.

    An outage of an hour must not dead-letter a link after five quick tries, so
    the budget is time: the task is retried (with backoff, at least `delay`)
    until it is `budget` seconds old, then dead-lettered. `notice`, when given,
    is the one sentence telling the chat to wait, queued in the retry's own
    transaction.
    """

    def __init__(
        self,
        reason: str,
        *,
        delay: float | None = None,
        budget: float = 3600.0,
        notice: str | None = None,
    ) -> None:
        super().__init__(reason, delay)
        self.budget = budget
        # A notice payload (`NoticePayload` JSON) queued in the retry's own transaction:
        # the sentence then waits out a chat's hold and survives a kill, like a dead letter's.
        self.notice = notice


class TelegramUnreachable(RetryLater):
    """Telegram did not answer (a 5xx page, a refused or reset connection, a timeout).

    Not the task's fault and not the message's: the sender holds every send of
    the bot (`xbot.sending.telegram_health`) and the worker puts the task back in
    its place without counting an attempt, until the task is older than the
    Telegram budget. `ambiguous`: the request went out and no answer came (a read
    timeout, a connection lost after sending, a 504), so the message may be in the
    chat; a retry may repeat it, and the task counts such sends. `held`: refused
    by the hold itself, no request went out.
    """

    def __init__(
        self, reason: str, *, ambiguous: bool = False, held: bool = False, delay: float = 0.0
    ) -> None:
        super().__init__(reason, delay)
        self.ambiguous = ambiguous
        self.held = held


class RateLimited(Outcome):
    """Telegram asked us to wait `retry_after` seconds for this chat; not an attempt."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"rate limited for {retry_after:g}s")
        self.retry_after = retry_after


class Permanent(Outcome):
    """Will never succeed. `reason` is the plain sentence the chat is told."""

    def __init__(self, reason: str, *, notify: bool = True) -> None:
        super().__init__(reason)
        self.reason = reason
        self.notify = notify
