"""Logging: one line per event with key=value fields, and the token never printed.

Under journald (``$JOURNAL_STREAM`` set) lines carry no timestamp: the
journal adds its own. The redaction filter sits on the handler, so it also
covers third-party loggers (httpx logs every request URL, and the Bot API URL
contains the token).
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Iterable, Mapping
from typing import TextIO

# A bot token: digits, a colon, 35 URL-safe characters (be generous on the length).
_TOKEN_SHAPE = re.compile(r"(?<!\d)\d{5,12}:[A-Za-z0-9_-]{30,}")


def kv(**fields: object) -> str:
    """Render fields as ``key=value`` pairs; values with spaces are quoted."""
    parts = []
    for key, value in fields.items():
        text = str(value)
        if not text or any(c in text for c in ' "='):
            text = '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
        parts.append(f"{key}={text}")
    return " ".join(parts)


class RedactFilter(logging.Filter):
    """Replaces every known secret (and anything shaped like a bot token) with ``***``."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        self._secrets = [s for s in secrets if s]

    @property
    def has_secrets(self) -> bool:
        return bool(self._secrets)

    def add(self, secret: str) -> None:
        if secret and secret not in self._secrets:
            self._secrets.append(secret)

    def redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return _TOKEN_SHAPE.sub("***", text)

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        redacted = self.redact(message)
        record.msg = redacted
        record.args = None
        if record.exc_text:
            record.exc_text = self.redact(record.exc_text)
        return True


_filter = RedactFilter()
_factory_installed = False


def _install_record_factory() -> None:
    """Redact at record creation too, so every handler (pytest's, journald's) sees it clean."""
    global _factory_installed  # noqa: PLW0603 - installed once per process
    if _factory_installed:
        return
    previous = logging.getLogRecordFactory()

    def factory(*args: object, **kwargs: object) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        if record.args or _TOKEN_SHAPE.search(str(record.msg)) or _filter.has_secrets:
            _filter.filter(record)
        return record

    logging.setLogRecordFactory(factory)
    _factory_installed = True


def redact(text: str) -> str:
    return _filter.redact(text)


def add_secret(secret: str) -> None:
    """Put `secret` on the redaction list too (the webhook's secret token): from now on no
    log line carries it, whichever handler writes it."""
    _filter.add(secret)
    _install_record_factory()


def _writes_to_journal(journal_stream: str, stream: TextIO) -> bool:
    """systemd sets ``$JOURNAL_STREAM`` to the ``device:inode`` of the journal stream it
    connected; children inherit the variable, so it counts only while `stream` is that
    very file (a stream without a file descriptor, as in tests, trusts the variable)."""
    if not journal_stream:
        return False
    try:
        st = os.fstat(stream.fileno())
    except (OSError, ValueError, AttributeError):  # io.UnsupportedOperation is a ValueError
        return True
    return journal_stream == f"{st.st_dev}:{st.st_ino}"


def setup_logging(
    level: str = "INFO",
    *,
    secrets: Iterable[str] = (),
    stream: TextIO | None = None,
    env: Mapping[str, str] | None = None,
) -> None:
    """Configure the root logger once: level, format, redaction."""
    environ = os.environ if env is None else env
    for secret in secrets:
        _filter.add(secret)
    _install_record_factory()
    under_journald = _writes_to_journal(environ.get("JOURNAL_STREAM", ""), stream or sys.stderr)
    fmt = (
        "%(levelname)s %(name)s %(message)s"
        if under_journald
        else "%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(logging.Formatter(fmt))
    handler.addFilter(_filter)
    root = logging.getLogger()
    for old in list(root.handlers):
        if getattr(old, "_xbot", False):
            root.removeHandler(old)
    handler._xbot = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level)
    # httpx logs each request at INFO with the full URL (token included, before
    # redaction); keep it at WARNING unless the operator asks for DEBUG.
    quiet = logging.DEBUG if level == "DEBUG" else logging.WARNING
    for name in ("httpx", "httpcore", "telegram.ext.Updater", "apscheduler"):
        logging.getLogger(name).setLevel(quiet)
    # PTB logs a traceback (JSONDecodeError) and the whole page for every non-JSON answer
    # (nginx's 502 page while Telegram's front end is down) before it raises NetworkError,
    # whose text says the same in one line: the caller logs that one line instead.
    logging.getLogger("telegram.request.BaseRequest").setLevel(
        logging.DEBUG if level == "DEBUG" else logging.CRITICAL
    )
    # tornado (webhook mode) logs every request, forged ones too: the webhook listener
    # logs what matters itself (xbot.receiving.webhook).
    logging.getLogger("tornado.access").setLevel(
        logging.DEBUG if level == "DEBUG" else logging.CRITICAL
    )
