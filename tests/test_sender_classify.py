"""Telegram's errors, translated once: a table of what each means for us."""

from __future__ import annotations

import ast
import datetime as dt
from pathlib import Path

import httpx
import pytest
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

import xbot
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
    (TimedOut(), "", TelegramUnreachable),
    (NetworkError("Bad Gateway"), "", TelegramUnreachable),
    (InvalidToken(), "", TokenRefused),  # a RetryLater: a task waits for the operator
    (Conflict("terminated by other getUpdates request"), "", PollConflict),  # a RetryLater too
]


@pytest.mark.parametrize(
    ("exc", "by", "expected"),
    CASES,
    ids=[f"{type(e).__name__}-{by or 'text'}-{i}" for i, (e, by, _) in enumerate(CASES)],
)
def test_classify(exc: Exception, by: str, expected: type) -> None:
    assert type(classify(exc, by=by)) is expected  # type: ignore[arg-type]


def _from(exc: TelegramError, cause: BaseException) -> TelegramError:
    """As PTB raises it: `raise NetworkError(...) from err` (`__cause__` kept)."""
    exc.__cause__ = cause
    return exc


_NGINX = (
    "Bad Gateway (502). Parsing the server response b'<html>\\r\\n<head><title>502 Bad "
    "Gateway</title></head>...' failed"
)
# What PTB 22 raises when Telegram is unreachable, and whether the call may have been
# carried out all the same (then a retry may repeat it, and it is counted).
UNREACHABLE = [
    ("502-nginx-html", NetworkError(_NGINX), False),
    ("502-json", NetworkError("Bad Gateway"), False),
    ("500-json", NetworkError("Internal Server Error"), False),
    ("503", NetworkError("Service Unavailable (503)"), False),
    ("504", NetworkError("Gateway Timeout (504)"), True),
    (
        "refused",
        _from(
            NetworkError("httpx.ConnectError: [Errno 111] Connection refused"),
            httpx.ConnectError("[Errno 111] Connection refused"),
        ),
        False,
    ),
    (
        "dns",
        _from(
            NetworkError("httpx.ConnectError: [Errno -3] Temporary failure in name resolution"),
            httpx.ConnectError("[Errno -3] Temporary failure in name resolution"),
        ),
        False,
    ),
    (
        "reset-after-send",
        _from(
            NetworkError("httpx.ReadError: [Errno 104] Connection reset by peer"),
            httpx.ReadError("[Errno 104] Connection reset by peer"),
        ),
        True,
    ),
    (
        "disconnected",
        _from(
            NetworkError("httpx.RemoteProtocolError: Server disconnected"),
            httpx.RemoteProtocolError("Server disconnected without sending a response."),
        ),
        True,
    ),
    ("write-error", _from(NetworkError("httpx.WriteError"), httpx.WriteError("")), False),
    ("read-timeout", _from(TimedOut(), httpx.ReadTimeout("")), True),
    ("connect-timeout", _from(TimedOut(), httpx.ConnectTimeout("")), False),
    ("write-timeout", _from(TimedOut(), httpx.WriteTimeout("")), False),
    (
        "pool-timeout",
        _from(
            TimedOut("Pool timeout: All connections in the pool are occupied."),
            httpx.PoolTimeout(""),
        ),
        False,
    ),
    ("bare-timeout", TimedOut(), True),
    ("unknown-transport", NetworkError("Unknown error in HTTP implementation: x"), False),
    ("2xx-not-json", TelegramError("Invalid server response"), True),
]


@pytest.mark.parametrize(
    ("exc", "ambiguous"),
    [(exc, ambiguous) for _, exc, ambiguous in UNREACHABLE],
    ids=[name for name, _, _ in UNREACHABLE],
)
def test_unreachable_is_nobodys_fault(exc: TelegramError, ambiguous: bool) -> None:
    err = classify(exc)
    assert type(err) is TelegramUnreachable
    assert isinstance(err, RetryLater)  # code that does not know it still retries
    assert err.ambiguous is ambiguous
    assert not err.held


@pytest.mark.parametrize(
    "exc",
    [
        BadRequest("Message is too long"),
        Forbidden("Forbidden: bot was kicked"),
        RetryAfter(dt.timedelta(seconds=3)),
        InvalidToken(),
        Conflict("terminated by other getUpdates request"),
        TelegramError("something new"),
    ],
    ids=["400", "403", "429", "401", "409", "other"],
)
def test_telegram_answered_is_not_unreachable(exc: TelegramError) -> None:
    assert not isinstance(classify(exc), TelegramUnreachable)


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


def telegram_error_imports(package: Path) -> list[str]:
    """Each import of `telegram.error` outside `xbot/sending/` (the stand-ins aside: they
    play the Bot API, not call it)."""
    found = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        if rel.startswith(("sending/", "standins/")):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            if any(n == "telegram.error" or n.startswith("telegram.error.") for n in names):
                found.append(f"xbot/{rel}:{node.lineno}")
            if (
                isinstance(node, ast.ImportFrom)
                and node.module == "telegram"
                and any(a.name == "error" for a in node.names)
            ):
                found.append(f"xbot/{rel}:{node.lineno}")
    return found


@pytest.mark.parametrize("kind", [TokenRefused, PollConflict], ids=["401", "409"])
def test_ours_not_the_chats_is_still_a_retry_for_a_task(kind: type) -> None:
    """Told apart for the start-up and the poller; a task waits for the operator as before."""
    assert issubclass(kind, RetryLater)
    err = classify(InvalidToken() if kind is TokenRefused else Conflict("x"))
    assert isinstance(err, RetryLater)
    assert err.delay == 60


def test_telegram_errors_are_translated_in_sending_alone() -> None:
    """`xbot.errors`' promise: PTB's errors become ours where PTB is called (the sender,
    and `bot_errors.translated` for the calls around it); nothing else sees them."""
    assert telegram_error_imports(Path(xbot.__file__).parent) == []
