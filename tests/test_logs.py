"""Log lines: key=value fields, and the token never printed."""

from __future__ import annotations

import io
import logging

import pytest

from xbot.logs import kv, setup_logging

TOKEN = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw_"


@pytest.mark.parametrize(
    ("fields", "line"),
    [
        ({"chat": 5, "outcome": "done"}, "chat=5 outcome=done"),
        ({"error": "a b"}, 'error="a b"'),
        ({"error": 'say "hi"'}, 'error="say \\"hi\\""'),
        ({"empty": ""}, 'empty=""'),
    ],
    ids=["plain", "space", "quote", "empty"],
)
def test_kv(fields: dict[str, object], line: str) -> None:
    assert kv(**fields) == line


def test_token_is_redacted_everywhere() -> None:
    stream = io.StringIO()
    setup_logging("DEBUG", secrets=[TOKEN], stream=stream, env={})
    log = logging.getLogger("test.redact")
    log.info("POST https://api.telegram.org/bot%s/getMe", TOKEN)
    try:
        raise RuntimeError(f"boom {TOKEN}")
    except RuntimeError:
        log.exception("failed")
    other = "987654321:BBHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw_"
    logging.getLogger("httpx").warning("url /bot%s/x", other)
    out = stream.getvalue()
    assert TOKEN not in out
    assert other not in out
    assert "***" in out


def test_no_timestamps_under_journald() -> None:
    stream = io.StringIO()
    setup_logging("INFO", stream=stream, env={"JOURNAL_STREAM": "8:1234"})
    logging.getLogger("test.j").info("hello")
    assert stream.getvalue().startswith("INFO test.j hello")
