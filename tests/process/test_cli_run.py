"""`xbot run` failing at start: one line, the right exit status, never the token."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from xbot.standins.botapi import BotApiServer

WRONG = "987654321:ZZHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw_"


def _xbot() -> list[str]:
    script = Path(sys.executable).with_name("xbot")
    return [str(script)] if script.exists() else [sys.executable, "-m", "xbot.ops.cli"]


def _run(tmp_path: Path, api_url: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "XBOT_TOKEN": WRONG,
        "XBOT_BOT_API_URL": f"{api_url}/bot",
        "XBOT_BOT_API_FILE_URL": f"{api_url}/file/bot",
        "XBOT_DATA_DIR": str(tmp_path / "data"),
    }
    return subprocess.run(
        [*_xbot(), "run"], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_a_refused_token_is_one_line_and_exit_2(tmp_path: Path) -> None:
    with BotApiServer() as api:  # it accepts only its own token
        proc = _run(tmp_path, api.url)
    assert proc.returncode == 2
    assert proc.stderr.startswith("xbot: XBOT_TOKEN: Telegram refused the token")
    assert "Traceback" not in proc.stderr
    assert WRONG.split(":")[1] not in proc.stdout + proc.stderr


def test_an_unreachable_bot_api_is_one_line_and_exit_1(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = _run(tmp_path, f"http://127.0.0.1:{port}")
    assert proc.returncode == 1
    assert proc.stderr.startswith("xbot: could not reach the Bot API at http://127.0.0.1:")
    assert "Traceback" not in proc.stderr
    assert WRONG.split(":")[1] not in proc.stdout + proc.stderr
