"""`telegram.error` translated into xbot's tree: the one table, used by the sender
(every Bot API call the bot makes) and the poller alone. Pure: a table of cases in
the tests (`tests/test_sender_classify.py`).
"""

from __future__ import annotations

import datetime as dt
import warnings
from typing import Any

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
    RateLimited,
    RetryLater,
    StaleFileId,
    UrlNotFetched,
    XbotError,
)
from xbot.i18n import N_, reason_template

__all__ = ["classify", "retry_after_seconds"]

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
    if isinstance(exc, InvalidToken | Conflict):
        # Ours, not the chat's: keep the task and let the operator fix the bot.
        return RetryLater(UNREACHABLE.format(error=type(exc).__name__), delay=60)
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
        return RetryLater(NO_ANSWER.format(error=type(exc).__name__))
    return RetryLater(TELEGRAM_ERROR.format(error=type(exc).__name__))
