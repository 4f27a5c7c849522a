"""`telegram.error` translated into xbot's tree: the one table, used by the sender
(every Bot API call of the bot's work) and, through `translated`, by the calls that go
around it (getUpdates, the start-up's getMe, deleteWebhook, setWebhook and
setMyCommands): nothing above `xbot.sending` sees a `telegram.error`. Pure: a table of
cases in the tests (`tests/test_sender_classify.py`).

What PTB 22 raises, and what it means here (PTB's `telegram/request/_baserequest.py`,
`BaseRequest._request_wrapper`, and `_httpxrequest.py`, `HTTPXRequest.do_request`):

    Telegram answered: the message's or the chat's business
      429 with parameters.retry_after   RetryAfter      -> RateLimited (hold the chat)
      400 with migrate_to_chat_id       ChatMigrated    -> ChatMoved
      400                               BadRequest      -> the message's fault (Permanent,
                                                           StaleFileId, UrlNotFetched, ...)
      403                               Forbidden       -> ChatUnavailable
      401, 404                          InvalidToken    -> TokenRefused (ours: the operator's)
      409                               Conflict        -> PollConflict (ours: another poller)
    Telegram unreachable: nobody's fault, the whole bot holds (TelegramUnreachable)
      502, and any other status         NetworkError("Bad Gateway (502)"; with a body that
        (500, 503, 504)                   is not JSON, nginx's HTML page, "... Parsing the
                                          server response b'<html>...' failed")
      refused connection, DNS failure   NetworkError("httpx.ConnectError: ...") from the
                                          httpx error
      connection reset / closed         NetworkError("httpx.ReadError: ..." or
        before the answer                 "httpx.RemoteProtocolError: ...")
      httpx timeouts                    TimedOut, from httpx.ConnectTimeout, ReadTimeout,
                                          WriteTimeout or PoolTimeout ("Pool timeout: ...")
      anything else in the transport    NetworkError("Unknown error in HTTP implementation")
      a 2xx whose body is not JSON      TelegramError("Invalid server response")

Ambiguous (`TelegramUnreachable.ambiguous`): the request went out whole and no answer
came, so the message may be in the chat and a retry may repeat it: a read timeout
(and a bare `TimedOut`), a connection lost after the request was sent (ReadError,
RemoteProtocolError), a 504 (the gateway gave up waiting for Telegram, which may have
done it), a 2xx we could not read. Not ambiguous, never a duplicate: a refused
connection or a connect/pool timeout (nothing left), a write timeout or WriteError
(Telegram acts on no half-sent request), a 502/500/503 answer (the front end says
the call failed).
"""

from __future__ import annotations

import datetime as dt
import warnings
from collections.abc import Awaitable
from typing import Any, TypeVar

import httpx
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Conflict,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
    TimedOut,
)

from xbot.errors import (
    ChatMoved,
    ChatUnavailable,
    Permanent,
    PollConflict,
    RateLimited,
    RetryLater,
    StaleFileId,
    TelegramUnreachable,
    TokenRefused,
    UrlNotFetched,
    XbotError,
)
from xbot.i18n import N_, reason_template

__all__ = [
    "classify",
    "error_detail",
    "is_ambiguous",
    "library_name",
    "retry_after_seconds",
    "translated",
]

T = TypeVar("T")

# Telegram's 400 texts (lower-cased substrings), by what they mean for us.
# Telegram's own words in the parentheses stay as Telegram wrote them.
REFUSED = reason_template(N_("Telegram refused the message ({error})."))
UNREACHABLE = reason_template(N_("the bot cannot reach Telegram: {error}"))
NO_ANSWER = reason_template(N_("Telegram did not answer ({error})"))
TELEGRAM_ERROR = reason_template(N_("Telegram error {error}"))
_URL_FETCH_FAILED = (
    "failed to get http url content",
    "wrong type of the web page content",
    "webpage_curl_failed",
    "webpage_media_empty",
    "wrong file identifier/http url specified",  # also a stale file_id: see classify
    "failed to send message",
    "group send failed",
    "image_process_failed",
    "photo_invalid_dimensions",
    "photo_save_file_invalid",
)
_FILE_ID_REFUSED = (
    "wrong file identifier/http url specified",
    "wrong remote file identifier specified",
    "file reference expired",
    "media_empty",
)
_CHAT_GONE = (
    "chat not found",
    "bot was blocked by the user",
    "bot was kicked",
    "user is deactivated",
    "bot is not a member",
    "have no rights to send",
    "not enough rights",
    "chat_write_forbidden",
    "need administrator rights",
    "topic_closed",
)


def retry_after_seconds(exc: RetryAfter) -> float:
    """PTB 22 keeps a timedelta; its int property warns. Normalise once, here."""
    raw: Any = getattr(exc, "_retry_after", None)
    if raw is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            raw = exc.retry_after
    if isinstance(raw, dt.timedelta):
        return max(raw.total_seconds(), 0.0)
    return max(float(raw), 0.0)


# The httpx errors (the `__cause__` PTB keeps) after which the request may have
# reached Telegram whole: the answer, not the request, was lost.
_AMBIGUOUS_CAUSES: tuple[type[BaseException], ...] = (
    httpx.ReadTimeout,
    httpx.ReadError,
    httpx.RemoteProtocolError,
)
_CLEAN_CAUSES: tuple[type[BaseException], ...] = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.PoolTimeout,
    httpx.WriteTimeout,
    httpx.WriteError,
)


def is_ambiguous(exc: TelegramError) -> bool:
    """Whether a failed call may have been carried out all the same (see the docstring)."""
    cause = exc.__cause__
    if isinstance(cause, _AMBIGUOUS_CAUSES):
        return True
    if isinstance(cause, _CLEAN_CAUSES):
        return False
    if isinstance(exc, TimedOut):
        return not exc.message.startswith("Pool timeout")  # a bare TimedOut: assume it went
    if isinstance(exc, NetworkError):
        return "(504)" in exc.message
    # Telegram answered (a 400, a 429...): it did not do it. A 2xx we could not read: it may have.
    return exc.message == "Invalid server response"


def classify(exc: TelegramError, *, by: str = "") -> XbotError:
    """Translate a `telegram.error` into xbot's tree. Pure: a table of cases in the tests.

    `by` says how the media went (``file_id``, ``url``, ``upload`` or ``""`` for text),
    because Telegram uses one text for a bad URL and a bad file_id.
    """
    if isinstance(exc, RetryAfter):
        return RateLimited(retry_after_seconds(exc))
    if isinstance(exc, ChatMigrated):
        return ChatMoved(exc.new_chat_id)
    if isinstance(exc, Forbidden):
        return ChatUnavailable(exc.message)
    # Ours, not the chat's: keep the task and let the operator fix the bot.
    if isinstance(exc, InvalidToken):
        return TokenRefused(UNREACHABLE.format(error=type(exc).__name__), delay=60)
    if isinstance(exc, Conflict):
        return PollConflict(UNREACHABLE.format(error=type(exc).__name__), delay=60)
    if isinstance(exc, BadRequest):
        text = exc.message.lower()
        if by == "file_id" and any(s in text for s in _FILE_ID_REFUSED):
            return StaleFileId(exc.message)
        if by == "url" and any(s in text for s in _URL_FETCH_FAILED):
            return UrlNotFetched(exc.message)
        if any(s in text for s in _CHAT_GONE):
            return ChatUnavailable(exc.message)
        if "too many requests" in text:
            return RetryLater(exc.message)
        if "file is too big" in text or "request entity too large" in text:
            return Permanent(N_("The file is too large for Telegram."))
        return Permanent(REFUSED.format(error=exc.message))
    if isinstance(exc, TimedOut | NetworkError):
        return TelegramUnreachable(
            NO_ANSWER.format(error=type(exc).__name__), ambiguous=is_ambiguous(exc)
        )
    if exc.message == "Invalid server response":
        # A 2xx we could not read (a proxy's page): Telegram may have done it.
        return TelegramUnreachable(NO_ANSWER.format(error="invalid response"), ambiguous=True)
    return RetryLater(TELEGRAM_ERROR.format(error=type(exc).__name__))


async def translated(call: Awaitable[T]) -> T:
    """Await a Bot API call made around the sender, its `telegram.error` raised as xbot's
    (`classify`), with PTB's error kept as the cause (`error_detail` reads it)."""
    try:
        return await call
    except TelegramError as exc:
        raise classify(exc) from exc


_PARSE_FAILED = ". Parsing the server response"
_DETAIL_MAX = 120


def error_detail(exc: BaseException) -> str:
    """One short line for a log, from PTB's error (the cause of a translated one): PTB's
    text for a non-JSON answer quotes the whole page ("Bad Gateway (502). Parsing the
    server response b'<html>...' failed"): keep the status part."""
    text = " ".join(str(exc).split(_PARSE_FAILED, 1)[0].split())
    return text[:_DETAIL_MAX] or type(exc).__name__


def library_name(exc: BaseException) -> str:
    """The name of PTB's error behind a translated one (``NetworkError``, ``TimedOut``):
    what a log line says happened."""
    return type(exc.__cause__ if isinstance(exc.__cause__, TelegramError) else exc).__name__
