"""`xbot run` at start: a refused token is one line and exit 2, never the token; a Bot API
that does not answer is no exit: the start waits, one line per try, until SIGTERM."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import apsw

from standins.botapi import BotApiServer

WRONG = "987654321:ZZHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw_"


def _xbot() -> list[str]:
    script = Path(sys.executable).with_name("xbot")
    return [str(script)] if script.exists() else [sys.executable, "-m", "xbot.cli"]


def _env(tmp_path: Path, api_url: str) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", ""),
        "XBOT_TOKEN": WRONG,
        "XBOT_BOT_API_URL": f"{api_url}/bot",
        "XBOT_BOT_API_FILE_URL": f"{api_url}/file/bot",
        "XBOT_DATA_DIR": str(tmp_path / "data"),
        "XBOT_TEST_TIME_SCALE": "0.01",  # tries 10 ms apart at first, at most 0.3 s
    }


def _run(tmp_path: Path, api_url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*_xbot(), "run"],
        env=_env(tmp_path, api_url),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_refused_token_is_one_line_and_exit_2(tmp_path: Path) -> None:
    with BotApiServer() as api:  # it accepts only its own token
        proc = _run(tmp_path, api.url)
    assert proc.returncode == 2
    assert proc.stderr.startswith("xbot: XBOT_TOKEN: Telegram refused the token")
    assert "Traceback" not in proc.stderr
    assert WRONG.split(":")[1] not in proc.stdout + proc.stderr


def test_an_unreachable_bot_api_is_waited_for_until_sigterm(tmp_path: Path) -> None:
    """Nothing listens where the Bot API should be (connections refused): the start does
    not exit; it says so once per try, without a traceback, and SIGTERM ends it at once
    with exit status 0 (systemd asked for the stop)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path / "bot.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [*_xbot(), "run"],
            env=_env(tmp_path, f"http://127.0.0.1:{port}"),
            stdout=out,
            stderr=out,
        )
    try:
        deadline = time.monotonic() + 30
        while log.read_text().count("start waits for Telegram") < 8:
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
        assert time.monotonic() - started < 5
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = log.read_text()
    tries = [line for line in text.splitlines() if "start waits for Telegram" in line]
    assert all("call=getMe error=NetworkError" in line for line in tries)
    others = [line for line in text.splitlines() if line not in tries and " INFO " not in line]
    assert others == []  # one line per try, and nothing else above INFO
    assert "Traceback" not in text
    assert WRONG.split(":")[1] not in text


def test_a_torn_database_after_a_power_cut_is_one_line_naming_the_backup(tmp_path: Path) -> None:
    """Refused whole, never half-used: exit 2 (a restart cannot mend it) and where to turn."""
    data = tmp_path / "data"
    db = data / "xbot.sqlite3"
    data.mkdir(mode=0o700)
    conn = apsw.Connection(str(db))
    conn.execute("CREATE TABLE t (x)")
    conn.executemany("INSERT INTO t VALUES (?)", [(bytes(3000),)] * 50)
    conn.close()
    with db.open("r+b") as f:  # pages a disk that lied about its syncs left half written
        f.seek(4096 * 3)
        f.write(bytes(range(256)) * 64)
    Path(f"{db}-wal").touch()  # what an unclean stop leaves behind
    with BotApiServer() as api:
        env = {**_env(tmp_path, api.url), "XBOT_TOKEN": api.token}
        proc = subprocess.run(
            [*_xbot(), "run"], env=env, capture_output=True, text=True, timeout=60, check=False
        )
    assert proc.returncode == 2
    (line,) = [line for line in proc.stderr.splitlines() if " INFO " not in line]
    assert line.startswith(f"xbot: the database {db} is damaged")
    assert "Backups and restore" in line
    assert "Traceback" not in proc.stderr
