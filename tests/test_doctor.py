"""`xbot doctor` against real files and the local Bot API stand-in."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import apsw
import httpx
import pytest

from standins.botapi import BotApiServer
from standins.queue_sync import SyncQueue
from xbot.media.ffmpeg import Ffmpeg, find_ffmpeg
from xbot.ops.doctor import (
    EXIT_CONFIG,
    EXIT_FAILED,
    EXIT_OK,
    Report,
    adjtimex_synchronized,
    check_clock,
    check_database,
    clock_finding,
    diagnose,
    ffmpeg_finding,
    on_loopback,
    telegram_findings,
    timedatectl_synchronized,
)
from xbot.sending.telegram_health import RECORD_NAME, TelegramHealth
from xbot.storage import migrations
from xbot.storage.db import connect, prepare_store

WRONG = "987654321:ZZHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw_"


@pytest.fixture(scope="module")
def api() -> Iterator[BotApiServer]:
    # Privacy mode on, like a fresh bot from @BotFather.
    with BotApiServer(privacy_mode=True) as server:
        yield server


def _env(tmp_path: Path, api: BotApiServer | None = None, **extra: str) -> dict[str, str]:
    # The X sources are probed too: fxtwitter at a closed port (a warning), the others off.
    env = {
        "XBOT_DATA_DIR": str(tmp_path / "data"),
        "XBOT_X_API_URL": f"http://127.0.0.1:{_closed_port()}",
        "XBOT_VX_API_URL": "",
        "XBOT_X_SYNDICATION_URL": "",
    }
    if api is not None:
        env |= {
            "XBOT_TOKEN": api.token,
            "XBOT_BOT_API_URL": f"{api.url}/bot",
            "XBOT_BOT_API_FILE_URL": f"{api.url}/file/bot",
        }
    return env | extra


def _text(report: Report, *secrets: str) -> str:
    return "\n".join(report.lines(secrets=secrets))


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_all_good_against_the_stand_in(tmp_path: Path, api: BotApiServer) -> None:
    prepare_store(tmp_path / "data" / "xbot.sqlite3")
    report = diagnose(_env(tmp_path, api), timeout=5)
    text = _text(report)
    assert report.exit_code == EXIT_OK, text
    assert "ok    Bot API: getMe: @xbot_standin_bot" in text
    assert "integrity ok" in text
    assert "is writable" in text
    assert "warn  privacy mode: on" in text
    assert api.token not in text
    assert api.calls_for("getMe")


def test_a_revoked_token_is_named_but_never_shown(tmp_path: Path, api: BotApiServer) -> None:
    report = diagnose(_env(tmp_path, api, XBOT_TOKEN=WRONG), timeout=5)
    text = _text(report, WRONG)
    assert report.exit_code == EXIT_FAILED
    assert "refused the token (HTTP 401)" in text
    assert "@BotFather" in text
    assert WRONG not in "\n".join(f.line() for f in report.findings)
    assert WRONG.split(":")[1] not in text


def test_unreachable_bot_api_is_a_line_not_a_traceback(tmp_path: Path) -> None:
    env = _env(
        tmp_path,
        XBOT_TOKEN=WRONG,
        XBOT_BOT_API_URL=f"http://127.0.0.1:{_closed_port()}/bot",
    )
    report = diagnose(env, timeout=2)
    text = _text(report)
    assert report.exit_code == EXIT_FAILED
    (line,) = [line for line in text.splitlines() if "Bot API" in line]
    assert line.startswith("FAIL  Bot API: could not reach the Bot API at http://127.0.0.1:")
    assert "ConnectError" in line
    assert "IPAddressAllow=127.0.0.1" in line, "a local Bot API needs the unit's drop-in"
    assert WRONG not in text


@pytest.mark.parametrize(
    ("url", "loopback"),
    [
        ("http://127.0.0.1:8081/bot", True),
        ("http://127.5.6.7:8081/bot", True),
        ("http://[::1]:8081/bot", True),
        ("http://localhost:8081/bot", True),
        ("https://api.telegram.org/bot", False),
        ("http://10.0.0.2:8081/bot", False),
    ],
    ids=["v4", "v4-anywhere-in-8", "v6", "localhost", "cloud", "private-not-loopback"],
)
def test_on_loopback(url: str, loopback: bool) -> None:
    assert on_loopback(url) is loopback


def test_timeout_through_a_mock_transport(tmp_path: Path) -> None:
    def hang(request: httpx.Request) -> httpx.Response:
        assert WRONG in str(request.url)  # the real URL carries the token...
        raise httpx.ReadTimeout(f"timed out reading {request.url}", request=request)

    report = diagnose(
        _env(tmp_path, XBOT_TOKEN=WRONG), timeout=1, transport=httpx.MockTransport(hang)
    )
    text = _text(report, WRONG)
    assert "could not reach the Bot API at https://api.telegram.org/bot (ReadTimeout" in text
    assert WRONG not in text  # ...the finding does not
    assert WRONG.split(":")[1] not in "\n".join(f.line() for f in report.findings)


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (404, {"ok": False, "error_code": 404, "description": "Not Found"}, "refused the token"),
        (502, None, "answered HTTP 502: Bad Gateway"),
        (200, {"ok": True, "result": "odd"}, "answered HTTP 200"),
    ],
    ids=["404-token", "bad-gateway", "odd-result"],
)
def test_bot_api_answers(tmp_path: Path, status: int, body: object, expected: str) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        if body is None:
            return httpx.Response(status, text="<html>bad gateway</html>")
        return httpx.Response(status, json=body)

    report = diagnose(_env(tmp_path, XBOT_TOKEN=WRONG), transport=httpx.MockTransport(answer))
    assert expected in _text(report)
    assert report.exit_code == EXIT_FAILED


def test_offline_skips_get_me(tmp_path: Path) -> None:
    def never(request: httpx.Request) -> httpx.Response:
        raise AssertionError("no request when offline")

    report = diagnose(
        _env(tmp_path, XBOT_TOKEN=WRONG), online=False, transport=httpx.MockTransport(never)
    )
    assert report.exit_code == EXIT_OK
    assert "Bot API" not in _text(report)


def test_config_problems_one_line_each_and_exit_2(tmp_path: Path) -> None:
    env = _env(
        tmp_path,
        XBOT_TOKEN=WRONG,
        XBOT_WORKERS="lots",
        XBOT_LOG_LEVEL="LOUD",
        XBOT_WORKER="3",
    )
    report = diagnose(env)
    lines = _text(report).splitlines()
    assert report.exit_code == EXIT_CONFIG
    assert "FAIL  XBOT_WORKERS: 'lots' is not a whole number" in lines
    assert any(line.startswith("FAIL  XBOT_LOG_LEVEL: ") for line in lines)
    assert "warn  XBOT_WORKER: not a setting xbot reads (did you mean XBOT_WORKERS?)" in lines


@pytest.mark.parametrize(
    "token",
    ["", "123456789:short", f'"{WRONG}"', WRONG.replace(":", "")],
    ids=["unset", "short", "quoted", "no-colon"],
)
def test_token_shape_is_a_config_problem(tmp_path: Path, token: str) -> None:
    report = diagnose(_env(tmp_path, XBOT_TOKEN=token))
    text = _text(report)
    assert report.exit_code == EXIT_CONFIG
    assert "FAIL  XBOT_TOKEN: " in text
    if token:
        assert token not in text


def _db(tmp_path: Path) -> Path:
    path = tmp_path / "data" / "xbot.sqlite3"
    prepare_store(path)
    return path


def test_database_findings(tmp_path: Path) -> None:
    path = _db(tmp_path)
    conn = connect(path)
    queue = SyncQueue(conn)
    queue.enqueue("deliver", {"url": "https://x.com/a/status/1"}, 5, now=0.0, max_attempts=1)
    task = queue.lease_next(1.0)
    assert task is not None
    queue.reschedule(task.lease, 2.0, 1.0, "boom")  # the last attempt: dead
    conn.close()
    findings = check_database(path)
    assert [f.level for f in findings] == ["ok", "warn"]
    assert "dead=1" in findings[1].text


def test_pending_migrations_warn(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    conn = apsw.Connection(str(path))
    migrations.migrate(conn, migrations.load_migrations()[:1])
    conn.close()
    findings = check_database(path)
    assert [f.level for f in findings] == ["ok", "warn", "ok"]
    assert "migration(s) pending" in findings[1].text


def test_a_newer_or_broken_database_fails(tmp_path: Path) -> None:
    path = _db(tmp_path)
    conn = apsw.Connection(str(path))
    conn.pragma("user_version", 99)
    conn.close()
    (finding,) = check_database(path)
    assert finding.level == "fail"
    assert "newer xbot" in finding.text
    junk = tmp_path / "junk.sqlite3"
    junk.write_bytes(b"this is not a database file at all" * 200)
    (finding,) = check_database(junk)
    assert finding.level == "fail"
    assert "not an SQLite database" in finding.text


def test_root_does_not_open_the_services_database(tmp_path: Path) -> None:
    path = _db(tmp_path)
    if os.geteuid() == 0:
        os.chown(path.parent, 4242, 4242)
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    (finding,) = check_database(path, euid=0)
    assert finding.level == "warn"
    assert "xbotctl" in finding.text
    assert not Path(f"{path}-shm").exists()  # nothing was created as root


def test_data_dir_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "data").write_text("oops")
    report = diagnose(_env(tmp_path, XBOT_TOKEN=WRONG), online=False)
    assert "FAIL  data dir: " in _text(report)
    assert report.exit_code == EXIT_FAILED


def test_doctor_probes_each_x_source_once(tmp_path: Path, api: BotApiServer) -> None:
    from standins.fxapi import FxApiServer
    from standins.syndication import SyndicationServer
    from standins.vxapi import VxApiServer

    with FxApiServer() as fx, VxApiServer() as vx, SyndicationServer() as syn:
        for source in (fx, vx):
            source.add_post("20", author=("jack", "jack"), text="just setting up my twttr")
        syn.set_outage("503")
        env = _env(
            tmp_path, api, XBOT_X_API_URL=fx.url, XBOT_VX_API_URL=vx.url,
            XBOT_X_SYNDICATION_URL=syn.url,
        )  # fmt: skip
        report = diagnose(env, timeout=5)
    lines = _text(report).splitlines()
    assert report.exit_code == EXIT_OK
    assert any(line.startswith("ok    X source fxtwitter: answered (@jack") for line in lines)
    assert any(line.startswith("ok    X source vxtwitter: answered (@jack") for line in lines)
    (syndication,) = [line for line in lines if "X source syndication" in line]
    assert syndication.startswith("warn  X source syndication: ")
    assert "links go to the next source" in syndication
    assert sum(fx.hits.values()) == 1


def test_doctor_says_since_when_the_running_bot_finds_telegram_unreachable(
    tmp_path: Path,
) -> None:
    assert telegram_findings(tmp_path, 0.0) == []  # no record: nothing to say
    health = TelegramHealth(wall=lambda: 1_800_000_000.0, record_path=tmp_path / RECORD_NAME)
    health.write_record()  # what a start writes
    (found,) = telegram_findings(tmp_path, 1_800_000_600.0)
    assert (found.level, found.subject) == ("ok", "telegram")
    health.failed("NetworkError: Bad Gateway (502)")
    (found,) = telegram_findings(tmp_path, 1_800_000_600.0)
    assert found.level == "warn"
    assert "unreachable since 2027-01-15 08:00:00 UTC (10 min; NetworkError: Bad Gateway" in (
        found.text
    )


# --- the clock ------------------------------------------------------------------------------

CLOCK_ANSWERS = [
    pytest.param(True, "ok", id="synchronised"),
    pytest.param(False, "warn", id="not-synchronised"),
    pytest.param(None, None, id="cannot-tell-is-quiet"),
]


@pytest.mark.parametrize(("answer", "level"), CLOCK_ANSWERS)
def test_clock_finding(answer: bool | None, level: str | None) -> None:
    found = clock_finding(answer, "test")
    assert [f.level for f in found] == ([] if level is None else [level])


def test_the_clock_check_asks_systemd_first_then_the_kernel() -> None:
    asked: list[str] = []

    def probe(name: str, answer: bool | None) -> Callable[[], bool | None]:
        def run() -> bool | None:
            asked.append(name)
            return answer

        return run

    found = check_clock(probe("timedatectl", False), probe("adjtimex", True))
    assert (asked, [f.level for f in found]) == (["timedatectl"], ["warn"])
    assert "timedatectl NTPSynchronized" in found[0].text
    asked.clear()
    found = check_clock(probe("timedatectl", None), probe("adjtimex", True))
    assert (asked, [f.level for f in found]) == (["timedatectl", "adjtimex"], ["ok"])
    assert check_clock(probe("timedatectl", None), probe("adjtimex", None)) == []


def _fake_timedatectl(tmp_path: Path, script: str, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    program = bin_dir / "timedatectl"
    program.write_text(f"#!/bin/sh\n{script}\n")
    program.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))


@pytest.mark.parametrize(
    ("script", "answer"),
    [
        pytest.param('[ "$3" = NTPSynchronized ] && echo yes', True, id="yes"),
        pytest.param("echo no", False, id="no"),
        pytest.param("echo 'Failed to connect to bus' >&2; exit 1", None, id="no-systemd"),
        pytest.param("echo maybe", None, id="not-an-answer"),
    ],
)
def test_timedatectl_is_asked_for_ntp_synchronized(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str, answer: bool | None
) -> None:
    _fake_timedatectl(tmp_path, script, monkeypatch)
    assert timedatectl_synchronized() is answer


def test_no_timedatectl_is_no_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert timedatectl_synchronized() is None


def test_the_kernels_answer_needs_no_root() -> None:
    assert adjtimex_synchronized() in (True, False, None)


@pytest.mark.parametrize(
    ("due_in", "warned"),
    [
        pytest.param(600.0, False, id="a-retry-ten-minutes-out"),
        pytest.param(3600.0, False, id="the-longest-hold"),
        pytest.param(5 * 3600.0, True, id="five-hours-ahead"),
    ],
)
def test_times_far_in_the_future_are_a_warning(tmp_path: Path, due_in: float, warned: bool) -> None:
    path = _db(tmp_path)
    conn = connect(path)
    now = time.time()
    SyncQueue(conn).enqueue("deliver", "{}", 5, now=now, run_after=now + due_in)
    conn.execute("UPDATE tasks SET run_after = ?", (now + due_in,))  # past the queue's own cap
    conn.close()
    found = [f for f in check_database(path) if "further ahead" in f.text]
    assert [f.level for f in found] == (["warn"] if warned else [])


@pytest.mark.parametrize(
    ("content", "level", "words"),
    [
        ('{"extractor": {"mastodon": {"my.town": {"root": "https://my.town"}}}}', "ok",
         "sections for: mastodon"),
        ('{"extractor": {"mastodon": ', "fail", "not valid JSON"),
        ("[1, 2]", "fail", "JSON object"),
        ('{"extractor": 5}', "fail", '"extractor" must be an object'),
    ],
    ids=["parses", "broken", "not-an-object", "bad-extractor"],
)  # fmt: skip
def test_doctor_says_whether_the_gallerydl_config_parses(
    tmp_path: Path, content: str, level: str, words: str
) -> None:
    config = tmp_path / "gallery-dl.json"
    config.write_text(content)
    report = diagnose(_env(tmp_path, XBOT_GALLERYDL_CONFIG=str(config)), online=False)
    (finding,) = [f for f in report.findings if f.subject == "XBOT_GALLERYDL_CONFIG"]
    assert finding.level == level
    assert words in finding.text
    (version,) = [f for f in report.findings if f.subject == "gallery-dl"]
    assert version.level == "ok", "installed with the bot, and its process starts"
    assert "installed" in version.text


COOKIE_VALUE = "v4lue-never-shown"


@pytest.mark.parametrize(
    ("lines", "level", "words"),
    [
        ([".youtube.com\tTRUE\t/\tTRUE\t0\tSID\t" + COOKIE_VALUE,
          "www.example.org\tFALSE\t/\tFALSE\t0\tid\t" + COOKIE_VALUE],
         "ok", "parses; 2 cookies for: www.example.org, youtube.com"),
        ([".com\tTRUE\t/\tFALSE\t0\tSID\t" + COOKIE_VALUE], "fail",
         "has a cookie for .com, which is not one site"),
        ([".example.org\tTRUE\t/\tFALSE\t1\tSID\t" + COOKIE_VALUE], "warn",
         "holds no cookies"),
        (["not a cookie line " + COOKIE_VALUE], "fail", "is not a Netscape cookies file"),
    ],
    ids=["parses", "over-broad", "all-expired", "malformed"],
)  # fmt: skip
def test_doctor_says_for_which_sites_the_ytdlp_cookies_are_never_their_values(
    tmp_path: Path, lines: list[str], level: str, words: str
) -> None:
    cookies = tmp_path / "cookies.txt"
    cookies.write_text("# Netscape HTTP Cookie File\n" + "\n".join(lines) + "\n")
    report = diagnose(_env(tmp_path, XBOT_YTDLP_COOKIES=str(cookies)), online=False)
    (finding,) = [f for f in report.findings if f.subject == "XBOT_YTDLP_COOKIES"]
    assert (finding.level, words in finding.text) == (level, True), finding
    assert all(COOKIE_VALUE not in f.text for f in report.findings)


def test_doctor_names_a_missing_gallerydl_config(tmp_path: Path) -> None:
    report = diagnose(_env(tmp_path, XBOT_GALLERYDL_CONFIG=str(tmp_path / "no.json")))
    assert report.exit_code == EXIT_CONFIG
    assert any(f.subject == "XBOT_GALLERYDL_CONFIG" and "no such file" in f.text
               for f in report.findings)  # fmt: skip


@pytest.mark.parametrize(
    ("offset", "said"),
    [
        pytest.param(0.0, None, id="no-step"),
        pytest.param(0.5, None, id="noise"),
        pytest.param(3 * 3600.0, "3 h back", id="stepped-back"),
        pytest.param(-600.0, "10 min forward", id="stepped-forward"),
    ],
)
def test_a_step_the_running_bot_saw_is_said(
    tmp_path: Path, offset: float, said: str | None
) -> None:
    path = _db(tmp_path)
    conn = connect(path)
    conn.execute(
        "INSERT INTO time_line (id, boot_id, mono, line, seen, offset) VALUES (1, 'b', 1, 1, 1, ?)",
        (offset,),
    )
    conn.close()
    found = [f for f in check_database(path) if "stepped" in f.text]
    assert [f.text.split(" while")[0] for f in found] == (
        [] if said is None else [f"the wall clock stepped {said}"]
    )


def test_with_the_canary_on_doctor_names_a_source_whose_answers_changed_shape(
    tmp_path: Path, api: BotApiServer
) -> None:
    from standins.fxapi import FxApiServer
    from standins.vxapi import VxApiServer

    with FxApiServer() as fx, VxApiServer() as vx:
        for source in (fx, vx):
            source.add_post("20", author=("jack", "jack"), text="just setting up my twttr")
        status = vx.add_post("77", author=("Ellen", "ellen"), photos=["https://example.com/a.jpg"])
        del status
        fx.add_raw("77", {"code": 200, "message": "OK", "post": {"id": "77"}})  # renamed fields
        env = _env(
            tmp_path, api, XBOT_X_API_URL=fx.url, XBOT_VX_API_URL=vx.url,
            XBOT_X_SYNDICATION_URL="", XBOT_CANARY_INTERVAL_S="600",
            XBOT_CANARY_POSTS="https://x.com/ellen/status/77",
        )  # fmt: skip
        report = diagnose(env, timeout=5)
    lines = _text(report).splitlines()
    (broken,) = [line for line in lines if "broken" in line]
    assert broken.startswith("warn  X source fxtwitter: broken: answered in a shape")
    assert not any("vxtwitter: broken" in line for line in lines)


PIXIV_SESSION = "31415926_dOcToRsEsSiOn0123"


@pytest.mark.parametrize(
    ("account", "level", "said"),
    [
        (2, "ok", "signed in; the account sees R-18 and R-18G works"),
        (1, "ok", "signed in; the account sees R-18 works (not R-18G)"),
        (0, "warn", "signed in, but the account hides R-18 works"),
        (None, "warn", "pixiv answers it as signed out"),
    ],
    ids=["r18g", "r18", "all-ages-account", "expired"],
)
def test_doctor_says_whether_the_pixiv_session_works_never_showing_it(
    tmp_path: Path, api: BotApiServer, account: int | None, level: str, said: str
) -> None:
    from standins.pixivapi import PixivServer

    with PixivServer() as pixiv:
        if account is not None:
            pixiv.add_session(PIXIV_SESSION, x_restrict=account)
        env = _env(tmp_path, api, XBOT_PIXIV_API_URL=pixiv.url, XBOT_PIXIV_SESSION=PIXIV_SESSION)
        report = diagnose(env, timeout=5)
        asked = pixiv.hits["/touch/ajax/user/self/status"]
    (line,) = [x for x in report.lines() if "XBOT_PIXIV_SESSION" in x]
    assert line.startswith(f"{level:<4}  XBOT_PIXIV_SESSION: {said}")
    assert asked == 1
    assert PIXIV_SESSION not in "\n".join(report.lines()), "never shown, even unredacted"


def test_doctor_asks_pixiv_nothing_without_a_session(tmp_path: Path, api: BotApiServer) -> None:
    from standins.pixivapi import PixivServer

    with PixivServer() as pixiv:
        report = diagnose(_env(tmp_path, api, XBOT_PIXIV_API_URL=pixiv.url), timeout=5)
        assert not pixiv.hits
    assert not [x for x in report.lines() if "XBOT_PIXIV_SESSION" in x]


@pytest.mark.parametrize(
    ("found", "level", "says"),
    [
        (Ffmpeg("/usr/bin/ffmpeg", "5.1.6-0+deb12u1"), "ok", "5.1.6-0+deb12u1 at /usr/bin/ffmpeg"),
        (Ffmpeg("/opt/ffmpeg"), "ok", "of an unknown version at /opt/ffmpeg"),
        (None, "warn", "best single file only"),
    ],
    ids=["found", "version-unknown", "missing-says-what-is-lost"],
)
def test_ffmpeg_finding(found: Ffmpeg | None, level: str, says: str) -> None:
    finding = ffmpeg_finding(found)
    assert (finding.subject, finding.level) == ("ffmpeg", level)
    assert says in finding.text


def test_doctor_reports_the_ffmpeg_on_the_path(tmp_path: Path) -> None:
    report = diagnose(_env(tmp_path, XBOT_TOKEN=WRONG), online=False)
    (line,) = [line for line in report.lines() if "  ffmpeg: " in line]
    found = find_ffmpeg()
    if found is None:
        assert line.startswith("warn")
    else:
        assert line.startswith("ok")
        assert found.version
        assert found.version in line
