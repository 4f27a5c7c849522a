"""The systemd units: systemd-analyze accepts them silently and scores them <= 2.0; every
directive is explained; the template (xbot@.service) is the single unit with per-instance
names; xbotctl (with and without -i NAME) and the example environment file agree with them."""

from __future__ import annotations

import inspect
import logging
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from xbot.config import SETTINGS_DOC
from xbot.logs import setup_logging
from xbot.storage.queue import NOTICE_MAX_ATTEMPTS, TaskQueue, lost_lease_budget

ROOT = Path(__file__).resolve().parent.parent.parent
UNIT = ROOT / "systemd" / "xbot.service"
TEMPLATE = ROOT / "systemd" / "xbot@.service"
INSTANCE = "community"
CTL = ROOT / "systemd" / "xbotctl"
ENV_EXAMPLE = ROOT / "systemd" / "xbot.env.example"
INSTALLED_EXEC = "/opt/xbot/venv/bin/xbot"
MAX_EXPOSURE = 2.0

ANALYZE = shutil.which("systemd-analyze")
needs_analyze = pytest.mark.skipif(
    ANALYZE is None,
    reason="systemd-analyze is not installed (apt-get install systemd; .ci/run does it in CI)",
)


def _directives(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line and not line.startswith(("#", "[")) and "=" in line:
            key, value = line.split("=", 1)
            out.setdefault(key.strip(), []).append(value.strip())
    return out


UNIT_TEXT = UNIT.read_text()
DIRECTIVES = _directives(UNIT_TEXT)
TEMPLATE_TEXT = TEMPLATE.read_text()
TEMPLATE_DIRECTIVES = _directives(TEMPLATE_TEXT)
# name of the copy to check -> its text: the single unit, and one instance of the template.
UNITS = {"xbot.service": UNIT_TEXT, f"xbot@{INSTANCE}.service": TEMPLATE_TEXT}
both_units = pytest.mark.parametrize("name", list(UNITS), ids=["single", "template"])


def _testable_copy(tmp_path: Path, extra: str = "", name: str = "xbot.service") -> Path:
    """The unit with ExecStart pointing at an executable that exists here (verify checks it)."""
    xbot = Path(sys.executable).with_name("xbot")
    exe = xbot if xbot.exists() else Path(sys.executable)
    assert INSTALLED_EXEC in UNITS[name]
    text = UNITS[name].replace(INSTALLED_EXEC, str(exe))
    if extra:
        text = text.replace("[Service]\n", f"[Service]\n{extra}\n", 1)
    copy = tmp_path / name
    copy.write_text(text)
    return copy


def _analyze(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    assert ANALYZE is not None
    return subprocess.run(
        [ANALYZE, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


# Directives newer than some systemd still in use, with the version that knows them. An
# older systemd warns "Unknown key" for them and goes on (the unit's comment says what it
# gets instead); that warning, and only that one, is allowed there.
NEWER_KEYS = {"RestartSteps": 254, "RestartMaxDelaySec": 254}


def _systemd_version() -> int:
    assert ANALYZE is not None
    out = subprocess.run(
        [ANALYZE, "--version"], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    match = re.match(r"systemd (\d+)", out)
    assert match, out
    return int(match.group(1))


def _unexpected_warnings(output: str, version: int) -> list[str]:
    too_new = {key for key, since in NEWER_KEYS.items() if version < since}
    return [
        line
        for line in output.splitlines()
        if not any(
            f"Unknown key '{key}' in section [Service], ignoring." in line for key in too_new
        )
    ]


@needs_analyze
@both_units
def test_verify_prints_nothing(tmp_path: Path, name: str) -> None:
    unit = _testable_copy(tmp_path, name=name)
    proc = _analyze("verify", "--man=no", str(unit), cwd=tmp_path)
    # verify only warns (exit 0) on unknown keys and bad values: any output is a failure.
    assert _unexpected_warnings(proc.stdout + proc.stderr, _systemd_version()) == []
    assert proc.returncode == 0


def test_only_the_newer_keys_warning_is_forgiven() -> None:
    warned = (
        "/x/xbot.service:60: Unknown key 'RestartSteps' in section [Service], ignoring.\n"
        "/x/xbot.service:61: Unknown key 'Resart' in section [Service], ignoring."
    )
    assert _unexpected_warnings(warned, 252) == [warned.splitlines()[1]]
    assert _unexpected_warnings(warned, 254) == warned.splitlines()


@needs_analyze
@pytest.mark.parametrize(
    "bad",
    ["Resart=on-failure", "MemoryMax=lots", "ProtectSystem=sometimes"],
    ids=["typo", "bad-value", "bad-enum"],
)
def test_verify_check_can_fail(tmp_path: Path, bad: str) -> None:
    """The check above would catch a typo: verify does print for it (and exits 0)."""
    unit = _testable_copy(tmp_path, bad)
    proc = _analyze("verify", "--man=no", str(unit), cwd=tmp_path)
    assert proc.stdout + proc.stderr != ""


@needs_analyze
@both_units
def test_security_exposure_at_most_2(tmp_path: Path, name: str) -> None:
    unit = _testable_copy(tmp_path, name=name)
    proc = _analyze("security", "--offline=true", "--no-pager", str(unit), cwd=tmp_path)
    match = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", proc.stdout)
    assert match, proc.stdout + proc.stderr
    assert float(match.group(1)) <= MAX_EXPOSURE, proc.stdout


@both_units
def test_every_directive_is_explained(name: str) -> None:
    """Every directive sits under a comment saying why: a comment covers the directives
    right after it, at most four, until a blank line."""
    unexplained, covered = [], 0
    for line in UNITS[name].splitlines():
        if not line.strip() or line.startswith("["):
            covered = 0
        elif line.startswith("#"):
            covered = 4
        elif covered:
            covered -= 1
        else:
            unexplained.append(line)
    assert unexplained == []


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("Type", "notify"),
        ("DynamicUser", "yes"),
        ("StateDirectory", "xbot"),
        ("CacheDirectory", "xbot"),
        ("ProtectSystem", "strict"),
        ("ProtectHome", "yes"),
        ("PrivateTmp", "yes"),
        ("PrivateDevices", "yes"),
        ("NoNewPrivileges", "yes"),
        ("CapabilityBoundingSet", ""),
        ("SystemCallFilter", "@system-service"),
        ("RestrictAddressFamilies", "AF_INET AF_INET6 AF_UNIX"),
        ("Restart", "on-failure"),
        ("EnvironmentFile", "/etc/xbot/xbot.env"),
        ("ExecStart", f"{INSTALLED_EXEC} run"),
    ],
    ids=lambda v: v or "empty",
)
def test_the_issue_asks_for(key: str, value: str) -> None:
    assert value in DIRECTIVES.get(key, [])


def test_addresses_private_ranges_denied_dns_stub_allowed() -> None:
    deny = " ".join(DIRECTIVES["IPAddressDeny"]).split()
    for needed in ("localhost", "link-local", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"):
        assert needed in deny
    allow = " ".join(DIRECTIVES["IPAddressAllow"]).split()
    assert "127.0.0.53" in allow
    # Loopback (the metrics and webhook listeners, a local Bot API server) is opened
    # by a drop-in only where one of them needs it (docs/deployment.md).
    assert allow == ["127.0.0.53"]


def test_limits_and_timeouts() -> None:
    # The bot stops within 10 s (DESIGN.md); systemd must wait longer before SIGKILL.
    assert int(DIRECTIVES["TimeoutStopSec"][0]) > 10
    assert int(DIRECTIVES["WatchdogSec"][0]) >= 30
    assert int(DIRECTIVES["StartLimitBurst"][0]) >= 1
    assert int(DIRECTIVES["StartLimitIntervalSec"][0]) > 0
    assert DIRECTIVES["MemoryMax"]
    assert DIRECTIVES["TasksMax"]
    assert "MemoryDenyWriteExecute" not in DIRECTIVES  # breaks yt-dlp's JS runtime


def test_the_start_limit_outlasts_the_poison_rule() -> None:
    """systemd must not give up before the bot buries a task that kills it every time: that
    takes 2 x max_attempts deaths without progress (xbot.storage.queue.lost_lease_budget), and one
    more start, the one whose reclaim buries it; two such tasks in turn, twice that."""
    defaults = inspect.signature(TaskQueue.enqueue).parameters["max_attempts"].default
    worst = lost_lease_budget(max(defaults, NOTICE_MAX_ATTEMPTS)) + 1
    for directives in (DIRECTIVES, TEMPLATE_DIRECTIVES):
        assert int(directives["StartLimitBurst"][0]) >= 2 * worst


def test_a_start_that_can_never_succeed_is_not_restarted() -> None:
    """A refused token or a bad setting exits 2 (xbot.cli), and the unit does not
    restart on 2: it fails at once instead of restarting forever at the longest delay
    (under RestartSteps= the start limit would never catch it)."""
    from xbot.cli import EXIT_USAGE

    for directives in (DIRECTIVES, TEMPLATE_DIRECTIVES):
        assert directives["RestartPreventExitStatus"] == [str(EXIT_USAGE)]


def restart_delay(n: int, directives: dict[str, list[str]]) -> float:
    """The delay before the n-th automatic restart (n >= 1), as systemd >= 254 computes it
    (src/core/service.c, service_restart_usec_next): RestartSec for the first; then
    r_0 * (r_max / r_0) ** ((n - 1) / steps) up to step `steps`; r_max after that."""
    r0 = float(directives["RestartSec"][0])
    steps = int(directives.get("RestartSteps", ["0"])[0])
    r_max = float(directives.get("RestartMaxDelaySec", ["inf"])[0])
    if n <= 1 or steps == 0 or r0 == 0 or r_max == float("inf") or r0 >= r_max:
        return r0
    if n > steps:
        return r_max
    return float(r0 * (r_max / r0) ** ((n - 1) / steps))


def crash_loop_starts(directives: dict[str, list[str]], within: float) -> list[float]:
    """When the starts of a crash loop `within` seconds long fall, counting the worst
    case: each start fails at once (a real one takes seconds, which only spreads them)."""
    starts, at, n = [0.0], 0.0, 1
    while (at := at + restart_delay(n, directives)) <= within:
        starts.append(at)
        n += 1
    return starts


def refused_start(starts: list[float], burst: int, interval: float) -> int | None:
    """The index of the first start systemd's start limit refuses (src/basic/ratelimit.c,
    ratelimit_below: a window opens at a start and allows `burst` starts within
    `interval`), or None."""
    begin, num = None, 0
    for i, at in enumerate(starts):
        if begin is None or at - begin > interval:
            begin, num = at, 1
        elif num < burst:
            num += 1
        else:
            return i
    return None


@both_units
def test_an_hours_crash_loop_stays_under_the_start_limit(name: str) -> None:
    """Even if every start during a one-hour network outage failed at once (the bot waits
    instead, but this is the second line of defence), the restart policy never makes
    StartLimitBurst starts within StartLimitIntervalSec, in any window."""
    directives = _directives(UNITS[name])
    burst = int(directives["StartLimitBurst"][0])
    interval = float(directives["StartLimitIntervalSec"][0])
    starts = crash_loop_starts(directives, within=3600.0)
    busiest = max(sum(1 for t in starts if s <= t <= s + interval) for s in starts)
    assert busiest < burst, f"{busiest} starts in {interval:.0f}s"
    assert refused_start(starts, burst, interval) is None
    # The figures the unit's comment gives.
    assert [round(restart_delay(n, directives), 1) for n in range(1, 8)] == [
        5.0, 7.2, 10.2, 14.7, 21.0, 30.0, 30.0,
    ]  # fmt: skip
    assert (busiest, len(starts)) == (24, 124)
    poison = crash_loop_starts(directives, within=10_000.0)
    assert round(poison[16] / 60, 1) == 6.5  # the 17th start buries one poison task
    assert round(poison[33] / 60) == 15  # the 34th, two of them


def test_the_start_limit_arithmetic_can_fail() -> None:
    """The same arithmetic for the old policy (every 5 s, no steps): the 41st start,
    200 s in, is refused: a crash loop of 3.5 minutes failed the unit for good."""
    old = {"RestartSec": ["5"], "StartLimitBurst": ["40"], "StartLimitIntervalSec": ["600"]}
    starts = crash_loop_starts(old, within=3600.0)
    assert refused_start(starts, 40, 600.0) == 40
    assert starts[40] == 200.0


# The per-instance names of the template, and what they are in the single unit.
PER_INSTANCE = [
    ("Description", "xbot Telegram media bot (%i)", "xbot Telegram media bot"),
    ("EnvironmentFile", "/etc/xbot/%i.env", "/etc/xbot/xbot.env"),
    ("User", "xbot-%i", "xbot"),
    ("StateDirectory", "xbot-%i", "xbot"),
    ("CacheDirectory", "xbot-%i", "xbot"),
    ("Environment", "XDG_CACHE_HOME=%C/xbot-%i", "XDG_CACHE_HOME=%C/xbot"),
]


def test_template_is_the_single_unit_with_per_instance_names() -> None:
    """Hardened exactly like xbot.service: only the names that must differ per bot do."""
    as_single = {key: list(values) for key, values in TEMPLATE_DIRECTIVES.items()}
    for key, templated, single in PER_INSTANCE:
        assert as_single[key] == [templated], key
        as_single[key] = [single]
    assert as_single == DIRECTIVES


def _xbotctl(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """xbotctl with a systemd-run on PATH that prints the command line it was given."""
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    run = fake / "systemd-run"
    run.write_text('#!/bin/sh\nfor a in "$@"; do echo "$a"; done\n')
    run.chmod(0o755)
    env = {"PATH": f"{fake}:/usr/bin:/bin"}
    return subprocess.run(
        ["sh", str(CTL), *argv], env=env, capture_output=True, text=True, timeout=30, check=False
    )


@pytest.mark.parametrize(
    ("argv", "directives", "instance"),
    [
        (["queue", "stats"], DIRECTIVES, None),
        (["-i", INSTANCE, "queue", "stats"], TEMPLATE_DIRECTIVES, INSTANCE),
    ],
    ids=["single", "instance"],
)
def test_xbotctl_matches_the_unit(
    tmp_path: Path, argv: list[str], directives: dict[str, list[str]], instance: str | None
) -> None:
    assert CTL.stat().st_mode & 0o111
    subprocess.run(["sh", "-n", str(CTL)], check=True, timeout=30)
    proc = _xbotctl(tmp_path, *argv)
    assert proc.returncode == 0, proc.stderr
    args = proc.stdout.splitlines()
    props = dict(a.removeprefix("--property=").split("=", 1) for a in args if "=" in a)

    def unit(key: str) -> str:
        return directives[key][0].replace("%i", instance or "")

    for key in ("User", "DynamicUser", "StateDirectory", "StateDirectoryMode", "CacheDirectory"):
        assert props[key] == unit(key), key
    assert props["EnvironmentFile"] == unit("EnvironmentFile")
    assert args[-3:] == [unit("ExecStart").split()[0], "queue", "stats"]


@pytest.mark.parametrize("name", ["", "../etc", "a b", "-x", "x;rm"])
def test_xbotctl_refuses_a_bad_instance_name(tmp_path: Path, name: str) -> None:
    proc = _xbotctl(tmp_path, "-i", name, "doctor")
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith("xbotctl: ")


def test_env_example_has_every_setting() -> None:
    text = ENV_EXAMPLE.read_text()
    named = set(re.findall(r"^(?:# )?(XBOT_[A-Z_]+)=", text, re.MULTILINE))
    assert named == set(SETTINGS_DOC)
    # Only the token is set by default: the rest are shown commented, at their defaults.
    assert re.findall(r"^(XBOT_[A-Z_]+)=", text, re.MULTILINE) == ["XBOT_TOKEN"]


@pytest.mark.parametrize("same_file", [True, False], ids=["journal", "inherited-variable"])
def test_journald_is_detected_by_the_streams_inode(tmp_path: Path, same_file: bool) -> None:
    """No timestamps only while stderr really is the journal stream systemd named."""
    log_file = tmp_path / "stream.log"
    other = tmp_path / "other.log"
    other.touch()
    root = logging.getLogger()
    with log_file.open("w") as stream:
        st = (log_file if same_file else other).stat()
        try:
            setup_logging("INFO", stream=stream, env={"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"})
            logging.getLogger("test.journal").info("hello")
        finally:
            for handler in [h for h in root.handlers if getattr(h, "_xbot", False)]:
                root.removeHandler(handler)
    line = log_file.read_text().splitlines()[0]
    assert line.startswith("INFO test.journal hello") == same_file
