"""Telegram's errors, translated once: a table of what each means for us."""

from __future__ import annotations

import datetime as dt

import pytest
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Conflict,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
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
)
from xbot.sending.sender import classify, retry_after_seconds, write_timeout_for

CASES = [
    (RetryAfter(dt.timedelta(seconds=9)), "", RateLimited),
    (BadRequest("Wrong file identifier/HTTP URL specified"), "file_id", StaleFileId),
    (BadRequest("Wrong file identifier/HTTP URL specified"), "url", UrlNotFetched),
    (BadRequest("Failed to get HTTP URL content"), "url", UrlNotFetched),
    (BadRequest("Wrong type of the web page content"), "url", UrlNotFetched),
    (BadRequest("Webpage_curl_failed"), "url", UrlNotFetched),
    (BadRequest("Webpage_media_empty"), "url", UrlNotFetched),
    (BadRequest("Failed to get HTTP URL content"), "upload", Permanent),
    (BadRequest("Chat not found"), "", ChatUnavailable),
    (BadRequest("Message is too long"), "", Permanent),
    (BadRequest("Message caption is too long"), "url", Permanent),
    (Forbidden("Forbidden: bot was blocked by the user"), "", ChatUnavailable),
    (ChatMigrated(-1001234), "", ChatMoved),
    (TimedOut(), "", RetryLater),
    (NetworkError("Bad Gateway"), "", RetryLater),
    (InvalidToken(), "", RetryLater),
    (Conflict("terminated by other getUpdates request"), "", RetryLater),
]


@pytest.mark.parametrize(
    ("exc", "by", "expected"),
    CASES,
    ids=[f"{type(e).__name__}-{by or 'text'}-{i}" for i, (e, by, _) in enumerate(CASES)],
)
def test_classify(exc: Exception, by: str, expected: type) -> None:
    assert type(classify(exc, by=by)) is expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("raw", "seconds"),
    [(dt.timedelta(seconds=9), 9.0), (dt.timedelta(milliseconds=1500), 1.5)],
    ids=["whole", "fraction"],
)
def test_retry_after_is_normalised_without_a_warning(raw: dt.timedelta, seconds: float) -> None:
    err = classify(RetryAfter(raw))
    assert isinstance(err, RateLimited)
    assert err.retry_after == seconds
    assert retry_after_seconds(RetryAfter(raw)) == seconds


def test_write_timeout_grows_with_size() -> None:
    assert write_timeout_for(0) == 20.0
    assert write_timeout_for(1900 * 1024 * 1024) > 1900
