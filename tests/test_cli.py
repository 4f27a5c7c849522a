"""`xbot` on the command line: every command, its errors as one line, the token never shown."""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import apsw
import pytest

from standins.queue_sync import SyncQueue
from xbot import __version__
from xbot.cli import build_parser, main
from xbot.ops.opscli import parse_duration
from xbot.storage import migrations
from xbot.storage.db import DbPool, connect, prepare_store
from xbot.storage.link_cache import CachedItem, CachedPost, LinkCache

TOKEN = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw_"
SECRET_PART = TOKEN.split(":")[1]


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A clean XBOT_* environment with its own data dir; yields the database path."""
    for name in list(os.environ):
        if name.startswith("XBOT_") or name in ("STATE_DIRECTORY", "NOTIFY_SOCKET"):
            monkeypatch.delenv(name)
    data = tmp_path / "data"
    monkeypatch.setenv("XBOT_DATA_DIR", str(data))
    return data / "xbot.sqlite3"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse: --help, usage errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def _commands() -> list[list[str]]:
    """Every command and subcommand the parser knows, found by walking it."""
    found: list[list[str]] = []

    def walk(parser: argparse.ArgumentParser, prefix: list[str]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    found.append([*prefix, name])
                    walk(child, [*prefix, name])

    walk(build_parser(), [])
    return found


EXPECTED = {
    "run", "demo", "migrate", "doctor", "queue", "cache", "backup", "version",
    "queue stats", "queue list", "queue show", "queue retry", "queue purge-dead",
    "cache stats", "cache clear",
}  # fmt: skip


def test_the_commands_are_all_there() -> None:
    assert {" ".join(c) for c in _commands()} == EXPECTED


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--help")
    assert code == 0
    for name in ("run", "demo", "migrate", "doctor", "queue", "cache", "backup", "version"):
        assert f"\n    {name} " in out


@pytest.mark.parametrize("command", _commands(), ids="-".join)
def test_each_command_has_help(capsys: pytest.CaptureFixture[str], command: list[str]) -> None:
    code, out, err = run(capsys, *command, "--help")
    assert code == 0
    assert out.startswith(f"usage: xbot {' '.join(command)}")
    assert not err


def test_no_command_prints_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys)
    assert code == 2
    assert "usage: xbot" in err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "version")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == f"xbot {__version__}"
    assert [line.split()[0] for line in lines[1:]] == [
        "python-telegram-bot", "yt-dlp", "gallery-dl", "SQLite", "Python"
    ]  # fmt: skip
    assert run(capsys, "--version")[:2] == (0, out)


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["queue", "--help"], []])
def test_python_dash_m_is_the_console_script(argv: list[str]) -> None:
    """`python -m xbot ...` prints and exits exactly as `xbot ...`."""
    xbot = Path(sys.executable).with_name("xbot")
    if not xbot.exists():
        pytest.skip("the console script is not installed next to this interpreter")
    env = {"PATH": os.environ.get("PATH", ""), "COLUMNS": "100"}

    def call(*prefix: str) -> tuple[int, str, str]:
        proc = subprocess.run(
            [*prefix, *argv], check=False, env=env, capture_output=True, text=True, timeout=60
        )
        return proc.returncode, proc.stdout, proc.stderr

    assert call(sys.executable, "-m", "xbot") == call(str(xbot))


def _one_line_error(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert lines[0].startswith("xbot: ")
    return lines[0]


@pytest.mark.parametrize(
    ("setting", "value", "argv"),
    [
        ("XBOT_WORKERS", "many", ["queue", "stats"]),
        ("XBOT_LOG_LEVEL", "LOUD", ["run"]),
        ("XBOT_CONFIG", "/nonexistent/xbot.toml", ["migrate"]),
        ("XBOT_BOT_API_URL", "http://127.0.0.1:8081", ["backup", "x.sqlite3"]),
    ],
    ids=["queue", "run", "missing-toml", "backup"],
)
def test_config_error_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    env: Path,
    setting: str,
    value: str,
    argv: list[str],
) -> None:
    monkeypatch.setenv(setting, value)
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert _one_line_error(err).startswith(f"xbot: {setting}: ")
    assert not out


def test_a_misplaced_token_is_not_echoed(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, env: Path
) -> None:
    # Pasted into the wrong variable: the error quotes the value, but never a token.
    monkeypatch.setenv("XBOT_ADMIN_IDS", TOKEN)
    code, _, err = run(capsys, "queue", "stats")
    assert code == 2
    line = _one_line_error(err)
    assert line.startswith("xbot: XBOT_ADMIN_IDS: ")
    assert SECRET_PART not in err


def test_run_without_a_token(capsys: pytest.CaptureFixture[str], env: Path) -> None:
    code, _, err = run(capsys, "run")
    assert code == 2
    assert "@BotFather" in _one_line_error(err)


def test_run_with_a_malformed_token(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, env: Path
) -> None:
    bad = f"{TOKEN} extra"
    monkeypatch.setenv("XBOT_TOKEN", bad)
    code, out, err = run(capsys, "run")
    assert code == 2
    assert "XBOT_TOKEN: does not look like a bot token" in _one_line_error(err)
    assert SECRET_PART not in out + err


@pytest.mark.parametrize(
    ("argv", "secret", "expected"),
    [
        (["--webhook", "http://bot.example/hook"], "s3cret", "--webhook: "),
        (["--webhook", "https://bot.example:8080/hook"], "s3cret", "port 8080"),
        (["--webhook", "https://bot.example/hook"], None, "XBOT_WEBHOOK_SECRET: not set"),
        (["--webhook", "https://bot.example/hook"], "bad secret!", "XBOT_WEBHOOK_SECRET: must"),
        (["--listen", "0.0.0.0"], None, "--listen only makes sense with --webhook"),
        (
            ["--webhook", "https://bot.example/hook", "--max-connections", "101"],
            "s3cret",
            "--max-connections: 101 is out of range (1..100",
        ),
        (["--max-connections", "10"], None, "--max-connections only makes sense with --webhook"),
    ],
    ids=["http", "port", "no-secret", "bad-secret", "listen-alone", "too-many", "max-alone"],
)
def test_run_webhook_options(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    env: Path,
    argv: list[str],
    secret: str | None,
    expected: str,
) -> None:
    monkeypatch.setenv("XBOT_TOKEN", TOKEN)
    if secret is not None:
        monkeypatch.setenv("XBOT_WEBHOOK_SECRET", secret)
    code, _, err = run(capsys, "run", *argv)
    assert code == 2
    assert expected in _one_line_error(err)
    assert SECRET_PART not in err


def test_run_webhook_names_the_missing_extra(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, env: Path
) -> None:
    if importlib.util.find_spec("tornado") is not None:
        pytest.skip("tornado is installed: webhook mode can start")
    monkeypatch.setenv("XBOT_TOKEN", TOKEN)
    monkeypatch.setenv("HOOK", "s3cret_token-1")
    code, _, err = run(
        capsys, "run", "--webhook", "https://bot.example/hook", "--secret-token-env", "HOOK"
    )
    assert code == 2
    assert "python-telegram-bot[webhooks]" in _one_line_error(err)


# --- the operator's tools on a real database ------------------------------------------------


def _tasks(db: Path) -> dict[str, int]:
    """Three tasks: one dead (chat 5, its notice pending), one pending (chat 6), one done."""
    prepare_store(db)
    conn = connect(db)
    q = SyncQueue(conn)
    dead = q.enqueue("deliver", {"url": "https://x.com/a/status/1"}, 5, now=1000.0, max_attempts=1)
    t = q.lease_next(1001.0)
    assert t is not None
    q.reschedule(t.lease, 1002.0, 5.0, "HTTP 500 from the media host")
    pending = q.enqueue("deliver", {"url": "https://x.com/b/status/2"}, 6, now=1003.0)
    done = q.enqueue("deliver", "not json {", 5, now=1004.0, run_after=0.0)
    t = q.lease_next(1005.0)
    assert t is not None
    assert t.id == done.id
    q.mark_done(t.lease, 1006.0)
    conn.close()
    return {"dead": dead.id, "pending": pending.id, "done": done.id}


def test_queue_commands(capsys: pytest.CaptureFixture[str], env: Path) -> None:
    ids = _tasks(env)
    code, out, _ = run(capsys, "queue", "stats")
    assert code == 0
    assert "pending  2\n" in out  # the pending link, and the dead one's notice
    assert "dead     1\n" in out
    assert "done     1\n" in out

    code, out, _ = run(capsys, "queue", "list", "--state", "dead")
    assert code == 0
    assert "https://x.com/a/status/1" in out
    assert "HTTP 500 from the media host" in out
    assert "x.com/b" not in out

    code, out, _ = run(capsys, "queue", "list", "--chat", "6")
    assert "x.com/b/status/2" in out
    assert "x.com/a" not in out

    code, out, _ = run(capsys, "queue", "show", str(ids["done"]))
    assert code == 0
    assert "state:        done" in out
    assert "not json {" in out  # shown as stored

    assert run(capsys, "queue", "show", "999")[:2] == (1, "no task 999\n")

    code, out, _ = run(capsys, "queue", "retry", str(ids["pending"]))
    assert code == 1
    assert "is pending, not dead" in out

    code, out, _ = run(capsys, "queue", "retry", str(ids["dead"]))
    assert code == 0
    assert "pending again" in out
    code, out, _ = run(capsys, "queue", "stats")
    assert "pending  3\n" in out
    assert "dead     0\n" in out


def test_queue_list_and_show_count_lost_leases_apart_from_attempts(
    capsys: pytest.CaptureFixture[str], env: Path
) -> None:
    prepare_store(env)
    conn = connect(env)
    q = SyncQueue(conn)
    task = q.enqueue("deliver", {"url": "https://x.com/c/status/3"}, 7, now=1000.0)
    for death in (1001.0, 1003.0):  # leased, then the process died under it: twice
        assert q.lease_next(death) is not None
        assert q.reclaim_orphans(death + 1) == 1
    conn.close()

    code, out, _ = run(capsys, "queue", "list")
    assert code == 0
    header, row = out.splitlines()[:2]
    assert "  try  lost  " in header
    assert "  0/5     2  " in row, "a lost lease gives its attempt back and counts apart"

    code, out, _ = run(capsys, "queue", "show", str(task.id))
    assert code == 0
    assert "attempts:     0 of 5\n" in out
    assert "lost leases:  2 in a row without progress (buried at 10; not attempts)\n" in out


def test_purge_dead_older_than(capsys: pytest.CaptureFixture[str], env: Path) -> None:
    _tasks(env)
    # The dead task died at t=1002 (1970): "older than 7d" covers it, as does no filter.
    assert run(capsys, "queue", "purge-dead", "--older-than", "7d")[:2] == (
        0,
        "purged 1 dead task older than 7d\n",
    )
    assert run(capsys, "queue", "purge-dead")[1] == "purged 0 dead tasks\n"
    code, _, err = run(capsys, "queue", "purge-dead", "--older-than", "soon")
    assert code == 2
    assert "is not a duration" in err


def test_ops_refuse_an_older_or_newer_database(
    capsys: pytest.CaptureFixture[str], env: Path
) -> None:
    env.parent.mkdir(parents=True)
    conn = apsw.Connection(str(env))
    migrations.migrate(conn, migrations.load_migrations()[:1])
    conn.close()
    code, _, err = run(capsys, "queue", "stats")
    assert code == 2
    assert "xbot migrate" in _one_line_error(err)
    assert migrations.current_version(connect(env)) == 1  # nothing migrated behind the bot

    code, out, _ = run(capsys, "migrate", "--check")
    assert code == 1
    assert "pending" in out
    assert "0001_" in out
    code, out, _ = run(capsys, "migrate")
    assert code == 0
    assert f"to schema version {migrations.latest_version()}" in out
    assert run(capsys, "migrate", "--check")[0] == 0
    assert run(capsys, "queue", "stats")[0] == 0

    conn = apsw.Connection(str(env))
    conn.pragma("user_version", 99)
    conn.close()
    for argv in (["queue", "stats"], ["migrate"], ["migrate", "--check"]):
        code, _, err = run(capsys, *argv)
        assert code == 2
        assert "newer" in _one_line_error(err)


def test_migrate_check_without_a_database(capsys: pytest.CaptureFixture[str], env: Path) -> None:
    code, out, _ = run(capsys, "migrate", "--check")
    assert code == 1
    assert "no database" in out
    assert not env.exists()
    code, _, err = run(capsys, "queue", "stats")
    assert code == 2
    assert "there is no database" in _one_line_error(err)
    assert not env.exists()


def test_root_is_sent_to_xbotctl(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, env: Path
) -> None:
    _tasks(env)
    if os.geteuid() == 0:
        os.chown(env.parent, 4242, 4242)
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    for argv in (["queue", "stats"], ["backup", str(env.parent.parent / "b.sqlite3")]):
        code, _, err = run(capsys, *argv)
        assert code == 2
        assert "xbotctl" in _one_line_error(err)


async def _cache_two(db: Path) -> None:
    pool = DbPool(db, size=1)
    pool.open()
    cache = LinkCache(pool)
    for n in (1, 2):
        await cache.put(
            CachedPost(
                key=f"x:{n}",
                url=f"https://x.com/a/status/{n}",
                caption_parts={"text": "hi"},
                items=(CachedItem("photo", f"AgAD{n}"),),
                created_at=1000.0,
            )
        )
    await pool.close()


def test_cache_commands(capsys: pytest.CaptureFixture[str], env: Path) -> None:
    prepare_store(env)
    asyncio.run(_cache_two(env))
    code, out, _ = run(capsys, "cache", "stats")
    assert code == 0
    assert "entries  2\n" in out
    # Any spelling of the link finds its entry.
    code, out, _ = run(capsys, "cache", "clear", "https://fxtwitter.com/a/status/1?s=20")
    assert (code, out) == (0, "forgot x:1: the next request fetches it afresh\n")
    assert run(capsys, "cache", "clear", "x:1")[:2] == (1, "no cache entry for x:1\n")
    assert run(capsys, "cache", "clear")[:2] == (0, "cleared 1 cache entry\n")
    assert "entries  0\n" in run(capsys, "cache", "stats")[1]


async def _cache_as_files(db: Path) -> None:
    pool = DbPool(db, size=1)
    pool.open()
    cache = LinkCache(pool)
    for key in ("x:7", "x:7:doc", "x:8:doc"):
        await cache.put(
            CachedPost(
                key=key,
                url="https://x.com/a/status/7",
                caption_parts={"text": "hi"},
                items=(CachedItem("document", "BQAD7"),),
                created_at=1000.0,
            )
        )
    await pool.close()


def test_cache_clear_forgets_the_post_as_files_too(
    capsys: pytest.CaptureFixture[str], env: Path
) -> None:
    """The entry a chat that wants photos as files gets goes with the link."""
    prepare_store(env)
    asyncio.run(_cache_as_files(env))
    code, out, _ = run(capsys, "cache", "clear", "https://x.com/a/status/7")
    assert (code, out) == (0, "forgot x:7: the next request fetches it afresh\n")
    code, out, _ = run(capsys, "cache", "clear", "https://x.com/a/status/8")
    assert (code, out) == (0, "forgot x:8: the next request fetches it afresh\n")
    assert "entries  0\n" in run(capsys, "cache", "stats")[1]


def test_backup_command(capsys: pytest.CaptureFixture[str], env: Path, tmp_path: Path) -> None:
    _tasks(env)
    dest = tmp_path / "copy.sqlite3"
    code, out, _ = run(capsys, "backup", str(dest))
    assert code == 0
    assert "4 tasks, integrity ok" in out  # with the dead one's notice
    code, _, err = run(capsys, "backup", str(dest))
    assert code == 2
    assert "--force" in _one_line_error(err)
    assert run(capsys, "backup", str(dest), "--force")[0] == 0


def test_backup_to_stdout(
    capsysbinary: pytest.CaptureFixture[bytes], env: Path, tmp_path: Path
) -> None:
    _tasks(env)
    assert main(["backup", "-"]) == 0
    out, err = capsysbinary.readouterr()
    assert out.startswith(b"SQLite format 3\x00")
    assert b"4 tasks" in err
    copy = tmp_path / "from-stdout.sqlite3"
    copy.write_bytes(out)
    conn = apsw.Connection(str(copy))
    assert conn.execute("SELECT count(*) FROM tasks").fetchall() == [(4,)]
    conn.close()


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90", 90), ("90s", 90), ("30m", 1800), ("12h", 43200), ("7d", 604800), ("2W", 1209600),
     ("1.5h", 5400)],
    ids=["bare", "s", "m", "h", "d", "w-upper", "fraction"],
)  # fmt: skip
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "d", "7 days", "-1d", "1y"], ids=lambda t: t or "empty")
def test_parse_duration_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration(text)


def test_the_installed_entry_point_runs(tmp_path: Path) -> None:
    """The console script, in a fresh process: a config error is one line, exit 2."""
    xbot = Path(sys.executable).with_name("xbot")
    argv = [str(xbot)] if xbot.exists() else [sys.executable, "-m", "xbot.cli"]
    env = {"PATH": os.environ.get("PATH", ""), "XBOT_WORKERS": "0", "XBOT_TOKEN": TOKEN}
    proc = subprocess.run(
        [*argv, "queue", "stats"], check=False, env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2
    assert proc.stderr == "xbot: XBOT_WORKERS: 0 is out of range (1..64)\n"
    assert SECRET_PART not in proc.stdout + proc.stderr


def test_queue_show_counts_sends_that_may_have_reached_the_chat(
    capsys: pytest.CaptureFixture[str], env: Path
) -> None:
    prepare_store(env)
    conn = connect(env)
    q = SyncQueue(conn)
    task = q.enqueue("deliver", {"url": "https://x.com/d/status/4"}, 8, now=1000.0)
    # What the worker's put_back writes after two sends timed out (migration 0006).
    conn.execute("UPDATE tasks SET ambiguous_sends = 2 WHERE id = ?", (task.id,))
    conn.close()
    code, out, _ = run(capsys, "queue", "show", str(task.id))
    assert code == 0
    assert "ambiguous:    2 sends timed out and may have reached the chat" in out
