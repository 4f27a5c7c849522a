"""`xbot doctor`: what is wrong with this installation, one line per finding.

Checks, in order: the versions a bug report needs (and whether yt-dlp is
more than 90 days old, `xbot.versions`), the configuration (every problem,
naming the setting), gallery-dl (its version and age, whether its process
starts, whether ``XBOT_GALLERYDL_CONFIG`` parses), yt-dlp's cookies file (whether it
loads, and for which sites: never a value), the data directory (there,
writable, free space), the database (opens, schema version, integrity, queue,
times stored far ahead of now), the clock (synchronised, where the host can
tell), what the running bot last found of Telegram (the record
`xbot.sending.telegram_health` writes at each change: unreachable since when, and
why), the token's shape, and, unless told to stay offline, the Bot API itself
(``getMe`` with a timeout: the token works, the bot's name, whether privacy mode
hides group messages from it).

Exit status: 2 when the configuration is wrong (nothing else is checked
then: every later check depends on it), 1 when any other check failed, 0
otherwise (warnings included). The token never appears in a finding.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import json
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Mapping
from datetime import date
from pathlib import Path
from typing import Literal

import apsw
import attrs
import httpx

from xbot import versions
from xbot.clock import STEP_TOLERANCE, SystemClocks
from xbot.config import Settings, check_settings, token_problem, unknown_names
from xbot.durations import say_span
from xbot.errors import ConfigError, StoreError, XbotError
from xbot.links import classify
from xbot.logs import redact
from xbot.media.addresses import parse_ip
from xbot.media.ffmpeg import Ffmpeg, find_ffmpeg
from xbot.ops.opscli import check_owner
from xbot.sending.telegram_health import read_record
from xbot.sources.ytdlp import load_cookies
from xbot.storage import migrations
from xbot.storage.db import read_only
from xbot.storage.time_line import LONGEST_DELAY, line_now, stored_offset

Level = Literal["ok", "warn", "fail"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_CONFIG = 2

MB = 1024 * 1024
GB = 1024 * MB
# Below this the bot cannot even write its database journal reliably.
MIN_FREE = 100 * MB


@attrs.frozen
class Finding:
    """One line of the report.

    Attributes:
        level: ok, warn or fail.
        subject: the setting or the part checked (``XBOT_WORKERS``, ``database``).
        text: what was found, for a person.
        config: a configuration problem (exit status 2).
    """

    level: Level
    subject: str
    text: str
    config: bool = False

    def line(self) -> str:
        label = {"ok": "ok  ", "warn": "warn", "fail": "FAIL"}[self.level]
        return f"{label}  {self.subject}: {self.text}"


@attrs.frozen
class Report:
    findings: tuple[Finding, ...]

    @property
    def exit_code(self) -> int:
        if any(f.config and f.level == "fail" for f in self.findings):
            return EXIT_CONFIG
        if any(f.level == "fail" for f in self.findings):
            return EXIT_FAILED
        return EXIT_OK

    def lines(self, secrets: tuple[str, ...] = ()) -> list[str]:
        out = []
        for finding in self.findings:
            line = finding.line()
            for secret in secrets:
                if secret:
                    line = line.replace(secret, "***")
            out.append(redact(line))
        return out


def diagnose(
    env: Mapping[str, str],
    *,
    online: bool = True,
    timeout: float = 10.0,
    transport: httpx.BaseTransport | None = None,
) -> Report:
    """Run every check against the environment `env` and return the findings."""
    found = version_findings(versions.installed(), date.today())
    settings, problems = check_settings(env)
    found += [
        Finding("warn", name.split(":")[0], name.split(": ", 1)[1]) for name in unknown_names(env)
    ]
    if settings is None:
        found += [_config_finding(p) for p in problems]
        found.append(
            Finding("warn", "doctor", "the other checks need a valid configuration; fix the above")
        )
        return Report(tuple(found))
    found.append(Finding("ok", "configuration", "every setting is valid"))
    if settings.ytdlp_cookies is not None:
        found.append(ytdlp_cookies_finding(settings.ytdlp_cookies))
    found += check_gallerydl(settings, date.today())
    found.append(ffmpeg_finding(find_ffmpeg()))
    found += check_data_dir(settings)
    found += check_database(settings.db_path)
    found += check_clock()
    # The record's written_at is the wall clock's, so is this now.
    found += telegram_findings(settings.data_dir, time.time())
    problem = token_problem(settings.token)
    if problem is not None:
        found.append(Finding("fail", "XBOT_TOKEN", problem.split(": ", 1)[1], config=True))
    else:
        found.append(Finding("ok", "XBOT_TOKEN", "shaped like a bot token"))
        if online:
            found += check_bot_api(settings, timeout=timeout, transport=transport)
    if online and transport is None:
        found += check_x_sources(settings, timeout=timeout)
    if online and transport is None and settings.pixiv_session:
        found += check_pixiv_session(settings, timeout=timeout)
    return Report(tuple(found))


def pixiv_session_findings(signed_in: bool, x_restrict: int) -> list[Finding]:
    """What pixiv said of the operator's session, in words (never the session). Pure."""
    subject = "XBOT_PIXIV_SESSION"
    if not signed_in:
        text = (
            "pixiv answers it as signed out: the session expired or was signed out; copy "
            "PHPSESSID again from a signed-in browser (R-18 works stay one sentence)"
        )
        return [Finding("warn", subject, text)]
    if x_restrict < 1:
        text = (
            "signed in, but the account hides R-18 works: turn them on in pixiv's "
            "settings (Viewing restrictions) or R-18 works stay one sentence"
        )
        return [Finding("warn", subject, text)]
    seen = "R-18 and R-18G works" if x_restrict >= 2 else "R-18 works (not R-18G)"
    return [Finding("ok", subject, f"signed in; the account sees {seen}")]


def check_pixiv_session(settings: Settings, *, timeout: float = 10.0) -> list[Finding]:
    """Ask pixiv (``XBOT_PIXIV_API_URL``) whether the operator's session is signed in and
    what its account may see; the session goes there only, and no line shows it."""
    # Here: the sources load PTB, which an offline doctor never needs.
    from xbot.sources.pixiv import session_status

    async def run() -> list[Finding]:
        async with httpx.AsyncClient(timeout=timeout, trust_env=False) as client:
            status = await session_status(client, settings.pixiv_api_url, settings.pixiv_session)
        return pixiv_session_findings(status.signed_in, status.x_restrict)

    try:
        return asyncio.run(run())
    except XbotError as exc:
        return [Finding("warn", "XBOT_PIXIV_SESSION", f"pixiv did not say: {exc}")]


def telegram_findings(data_dir: Path, now: float) -> list[Finding]:
    """What the bot running on `data_dir` last found of Telegram (none: no record)."""
    record = read_record(data_dir)
    if record is None:
        return []
    if record.reachable:
        return [Finding("ok", "telegram", "the bot last found Telegram reachable")]
    since = record.down_since if record.down_since is not None else record.written_at
    stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(since))
    return [
        Finding(
            "warn",
            "telegram",
            f"the bot has found Telegram unreachable since {stamp} ({say_span(now - since)}; "
            f"{record.error or 'no answer'}): every send is held, no link is lost",
        )
    ]


def check_x_sources(settings: Settings, *, timeout: float = 10.0) -> list[Finding]:
    """Ask each configured X source for one known public post, once.

    A source that fails is a warning, not a failure: links go to the next one.
    """
    # Here: the sources load PTB, which an offline doctor never needs.
    from xbot.sources.canary import CanaryTarget, check
    from xbot.sources.x import PROBE_POST, probe, x_sources

    async def run() -> list[Finding]:
        async with httpx.AsyncClient(timeout=timeout, trust_env=False) as client:
            sources = x_sources(settings, client)
            results = await probe(sources, PROBE_POST, within=timeout)
        found = []
        for result in results:
            level: Level = "ok" if result.ok else "warn"
            text = f"{result.detail} in {result.seconds:.2f}s"
            if not result.ok:
                text += "; while it fails, links go to the next source"
            found.append(Finding(level, f"X source {result.name}", text))
        if not any(r.ok for r in results):
            # An outage, or a firewall: a warning still, the bot itself is fine and waits.
            text = "none answered: X links wait (up to an hour) until one does"
            found.append(Finding("warn", "X sources", text))
            return found
        if settings.canary_interval <= 0:
            return found
        # With the canary on, its post (one with media): a source that answers it in a
        # shape xbot does not read is "broken", which no breaker sees (links fail as junk).
        async with httpx.AsyncClient(timeout=timeout, trust_env=False) as client:
            for link in (classify(u) for u in settings.canary_posts):
                if link is None or link.kind != "x":
                    continue
                for source in x_sources(settings, client):
                    said, detail = await check(CanaryTarget(source, link), within=timeout)
                    if said == "broken":
                        subject = f"X source {source.name}"
                        found.append(Finding("warn", subject, f"broken: {detail}"))
                    elif said == "gone":
                        found.append(Finding("warn", "XBOT_CANARY_POSTS", detail))
        return found

    return asyncio.run(run())


def version_findings(installed: versions.Versions, today: date) -> list[Finding]:
    """What a bug report needs first, and a warning when yt-dlp has gone stale."""
    stale, text = versions.staleness(installed.ytdlp, today)
    return [
        Finding("ok", "versions", installed.one_line()),
        Finding("warn" if stale else "ok", "yt-dlp", text),
    ]


def ytdlp_cookies_finding(path: Path) -> Finding:
    """Whether yt-dlp's cookies file loads as the bot loads it, and for which sites
    (the domains alone: a value is never shown)."""
    try:
        cookies = load_cookies(path)
    except ConfigError as exc:
        subject, _, text = str(exc).partition(": ")
        return Finding("fail", subject, text)
    if not cookies.jar:
        return Finding("warn", "XBOT_YTDLP_COOKIES", f"{path} holds no cookies (expired?)")
    sites = ", ".join(cookies.domains)
    return Finding(
        "ok", "XBOT_YTDLP_COOKIES", f"{path} parses; {len(cookies.jar)} cookies for: {sites}"
    )


FFMPEG_LOST = (
    "not found: video from other sites comes as the best single file only (360p at most "
    "on YouTube; sites that serve only DASH or HLS give no sound or no video) and pixiv "
    "animations stay one sentence; install it (Debian: apt install ffmpeg)"
)


def ffmpeg_finding(found: Ffmpeg | None) -> Finding:
    """Whether ffmpeg is there to merge picture and sound, which version, and what is
    lost without it (the bot still runs). Pure."""
    if found is None:
        return Finding("warn", "ffmpeg", FFMPEG_LOST)
    version = found.version or "of an unknown version"
    return Finding(
        "ok", "ffmpeg", f"{version} at {found.path}: merges the picture and sound of videos"
    )


def gallerydl_config_finding(path: Path) -> Finding:
    """Whether the operator's gallery-dl config parses (gallery-dl would refuse it too)."""
    subject = "XBOT_GALLERYDL_CONFIG"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        return Finding("fail", subject, f"cannot read {path}: {exc.strerror or exc}")
    except ValueError as exc:
        return Finding("fail", subject, f"{path} is not valid JSON: {exc}")
    if not isinstance(data, dict):
        return Finding("fail", subject, f"{path} must hold a JSON object, like gallery-dl's own")
    extractor = data.get("extractor", {})
    if not isinstance(extractor, dict):
        return Finding("fail", subject, f'{path}: "extractor" must be an object')
    sites = ", ".join(sorted(extractor)) or "none"
    return Finding("ok", subject, f"{path} parses; sections for: {sites}")


def check_gallerydl(
    settings: Settings, today: date, *, python: str = sys.executable, timeout: float = 20.0
) -> list[Finding]:
    """gallery-dl's version and age, that its process starts, and its config file."""
    version = versions.installed().gallerydl
    stale, text = versions.gallerydl_staleness(version, versions.installed_on("gallery-dl"), today)
    found = [Finding("warn" if stale else "ok", "gallery-dl", text)]
    if version != "not installed":
        # Its own process, as the bot runs it: never imported (GPL-2.0).
        try:
            ran = subprocess.run(  # noqa: S603 - our own interpreter, fixed arguments
                [python, "-m", "gallery_dl", "--version"],
                capture_output=True, timeout=timeout, check=False, stdin=subprocess.DEVNULL,
            )  # fmt: skip
            if ran.returncode != 0:
                tail = ran.stderr.decode("utf-8", "replace").strip().splitlines()[-1:]
                found.append(Finding("fail", "gallery-dl", f"does not start: {' '.join(tail)}"))
        except (OSError, subprocess.TimeoutExpired) as exc:
            found.append(Finding("fail", "gallery-dl", f"does not start: {exc}"))
    if settings.gallerydl_config is not None:
        found.append(gallerydl_config_finding(settings.gallerydl_config))
    return found


def _config_finding(problem: str) -> Finding:
    subject, _, text = problem.partition(": ")
    return Finding("fail", subject, text, config=True)


def check_data_dir(settings: Settings) -> list[Finding]:
    folder = settings.data_dir
    if not folder.exists():
        parent = next((p for p in folder.parents if p.exists()), Path("/"))
        return [
            Finding(
                "ok",
                "data dir",
                f"{folder} does not exist yet; `xbot run` creates it (under {parent})",
            )
        ]
    if not folder.is_dir():
        return [Finding("fail", "data dir", f"{folder} is not a directory")]
    found: list[Finding] = []
    try:
        # A real file, not os.access(): a read-only mount passes os.access for root.
        with tempfile.TemporaryFile(prefix="xbot-doctor-", dir=folder):
            pass
    except OSError as exc:
        found.append(Finding("fail", "data dir", f"{folder} is not writable: {exc.strerror}"))
    else:
        found.append(Finding("ok", "data dir", f"{folder} is writable"))
    free = shutil.disk_usage(folder).free
    want = max(GB, 2 * settings.upload_limit)
    text = f"{free / GB:.1f} GB free on the disk holding {folder}"
    if free < MIN_FREE:
        found.append(Finding("fail", "disk", f"{text}: the database needs room to write"))
    elif free < want:
        found.append(
            Finding(
                "warn", "disk", f"{text}: a download needs up to {2 * settings.upload_limit_mb} MB"
            )
        )
    else:
        found.append(Finding("ok", "disk", text))
    return found


def check_database(path: Path, euid: int | None = None) -> list[Finding]:
    if not path.exists():
        return [Finding("ok", "database", f"none yet at {path}; `xbot run` creates it")]
    try:
        check_owner(path, euid)
    except StoreError as exc:
        return [Finding("warn", "database", f"not opened: {exc}")]
    try:
        with read_only(path) as conn:
            return _database_findings(path, conn)
    except StoreError as exc:
        return [Finding("fail", "database", str(exc))]


def _database_findings(path: Path, conn: apsw.Connection) -> list[Finding]:
    version = migrations.current_version(conn)
    latest = migrations.latest_version()
    if version > latest:
        return [Finding("fail", "database", str(migrations.too_new(version, latest, path)))]
    verdict = [str(r[0]) for r in conn.execute("PRAGMA integrity_check").fetchall()]
    if verdict != ["ok"]:
        detail = "; ".join(verdict[:3])
        return [
            Finding(
                "fail",
                "database",
                f"{path} failed its integrity check ({detail}); restore the latest backup",
            )
        ]
    found = [Finding("ok", "database", f"{path}: schema version {version}, integrity ok")]
    if version < latest:
        found.append(
            Finding(
                "warn",
                "database",
                f"{latest - version} migration(s) pending; `xbot run` (or `xbot migrate`) "
                "applies them",
            )
        )
    if version > 0:
        found.append(_queue_finding(conn))
    if version == latest:  # an older schema may lack a table the look needs
        found += _future_findings(conn, line_now(conn, SystemClocks()))
        found += _offset_findings(stored_offset(conn))
    return found


def _offset_findings(offset: float) -> list[Finding]:
    """The bot saw its wall clock step since it started (marked at the step)."""
    if abs(offset) <= STEP_TOLERANCE:
        return []
    way = "back" if offset > 0 else "forward"
    return [
        Finding(
            "warn",
            "database",
            f"the wall clock stepped {say_span(abs(offset))} {way} while the bot ran: waits are "
            "unaffected, stored times follow the bot's own time line until its next start "
            'rebases them (docs/reliability.md, "The wall clock")',
        )
    ]


# Stored times further ahead than this are not the bot's own (it never writes a due
# time or a hold more than LONGEST_DELAY out): the clock went back, or ran ahead once.
FAR_AHEAD = LONGEST_DELAY + 60.0

_FUTURE_SQL = """
SELECT max(
    coalesce((SELECT max(run_after) FROM tasks WHERE state = 'pending') - :far, -1e300),
    coalesce((SELECT max(not_before) FROM chat_holds) - :far, -1e300),
    coalesce((SELECT max(created_at) FROM tasks) - :now, -1e300),
    coalesce((SELECT max(updated_at) FROM tasks) - :now, -1e300))
"""


def _future_findings(conn: apsw.Connection, now: float) -> list[Finding]:
    """Times stored far ahead of the bot's now (on its time line, `xbot.clock`)."""
    row = conn.execute(_FUTURE_SQL, {"now": now + 60.0, "far": now + FAR_AHEAD}).fetchall()
    ahead = float(row[0][0]) if row and row[0][0] is not None else -1.0
    if ahead <= 0:
        return []
    return [
        Finding(
            "warn",
            "database",
            f"holds times up to {say_span(ahead)} further ahead than the bot ever writes: the "
            "clock went back (or ran ahead once); the next start clamps them "
            '(docs/reliability.md, "The wall clock")',
        )
    ]


# --- the clock: synchronised? ------------------------------------------------------------

TIME_ERROR = 5  # adjtimex(2): the clock is not synchronised (STA_UNSYNC)


def timedatectl_synchronized(timeout: float = 3.0) -> bool | None:
    """systemd's answer (``NTPSynchronized``); None when it cannot be asked."""
    program = shutil.which("timedatectl")
    if program is None:
        return None
    try:
        done = subprocess.run(  # noqa: S603 - a fixed command, found on PATH above
            [program, "show", "-p", "NTPSynchronized", "--value"],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    answer = done.stdout.strip()
    if done.returncode != 0 or answer not in ("yes", "no"):
        return None  # no systemd as init, no D-Bus: not an answer
    return answer == "yes"


def adjtimex_synchronized() -> bool | None:
    """The kernel's answer: adjtimex(2) with no modes reads the clock's state (no root needed);
    None where there is no adjtimex."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name, use_errno=True)
        adjtimex = libc.adjtimex
    except (OSError, AttributeError, TypeError):
        return None
    # struct timex is about 208 bytes on 64-bit Linux; zeroed, `modes` is 0: read only.
    buffer = ctypes.create_string_buffer(512)
    state = int(adjtimex(buffer))
    if state < 0:
        return None
    return state != TIME_ERROR


def clock_finding(synchronized: bool | None, how: str) -> list[Finding]:
    """One line, or none when the host cannot tell (a container without either answer)."""
    if synchronized is None:
        return []
    if synchronized:
        return [Finding("ok", "clock", f"synchronised ({how})")]
    return [
        Finding(
            "warn",
            "clock",
            f"not synchronised ({how}): NTP may step it later; the bot copes, but what it "
            'stores is off until its next start (docs/reliability.md, "The wall clock")',
        )
    ]


Probe = Callable[[], bool | None]


def check_clock(
    timedatectl: Probe = timedatectl_synchronized, adjtimex: Probe = adjtimex_synchronized
) -> list[Finding]:
    """systemd's NTPSynchronized where systemd answers, else the kernel's adjtimex state."""
    answer = timedatectl()
    if answer is not None:
        return clock_finding(answer, "timedatectl NTPSynchronized")
    return clock_finding(adjtimex(), "the kernel's adjtimex state")


def _queue_finding(conn: apsw.Connection) -> Finding:
    counts = dict.fromkeys(("pending", "running", "done", "dead"), 0)
    for state, n in conn.execute("SELECT state, count(*) FROM tasks GROUP BY state"):
        counts[str(state)] = int(n)
    text = " ".join(f"{k}={v}" for k, v in counts.items())
    if counts["dead"]:
        return Finding("warn", "queue", f"{text}; see `xbot queue list --state dead`")
    return Finding("ok", "queue", text)


def method_url(base_url: str, token: str, method: str) -> str:
    """A Bot API method URL the way PTB builds it (the token appended or filled in)."""
    if "{token}" in base_url:
        return f"{base_url.replace('{token}', token)}/{method}"
    return f"{base_url}{token}/{method}"


def on_loopback(url: str) -> bool:
    """Whether `url` names a loopback host (a local Bot API server). Pure."""
    host = (urllib.parse.urlsplit(url).hostname or "").rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    ip = parse_ip(host)
    return ip is not None and ip.is_loopback


def check_bot_api(
    settings: Settings, *, timeout: float = 10.0, transport: httpx.BaseTransport | None = None
) -> list[Finding]:
    where = settings.bot_api_url.replace("{token}", "<token>")
    url = method_url(settings.bot_api_url, settings.token, "getMe")
    try:
        with httpx.Client(timeout=timeout, transport=transport, trust_env=transport is None) as c:
            response = c.get(url)
    except httpx.HTTPError as exc:
        reason = str(exc).replace(settings.token, "***") or type(exc).__name__
        hint = "check the network, DNS and any firewall, or run `xbot doctor --offline`"
        if on_loopback(settings.bot_api_url):
            hint += (
                "; the shipped systemd unit closes loopback unless a drop-in opens it "
                "(IPAddressAllow=127.0.0.1, docs/deployment.md)"
            )
        return [
            Finding(
                "fail",
                "Bot API",
                f"could not reach the Bot API at {where} ({type(exc).__name__}: {reason}); {hint}",
            )
        ]
    try:
        body = response.json()
    except ValueError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    if response.status_code in (401, 404) and not body.get("ok"):
        return [
            Finding(
                "fail",
                "Bot API",
                f"{where} refused the token (HTTP {response.status_code}): it was revoked or "
                "mistyped; copy the current one from @BotFather (/mybots, API Token)",
            )
        ]
    result = body.get("result")
    if response.status_code != 200 or not body.get("ok") or not isinstance(result, dict):
        description = str(body.get("description") or response.reason_phrase)
        return [
            Finding(
                "fail",
                "Bot API",
                f"getMe at {where} answered HTTP {response.status_code}: {description}",
            )
        ]
    found = [
        Finding(
            "ok",
            "Bot API",
            f"getMe: @{result.get('username')} (id {result.get('id')}) at {where}",
        )
    ]
    if result.get("can_read_all_group_messages") is False:
        found.append(
            Finding(
                "warn",
                "privacy mode",
                "on: in groups the bot sees only commands and replies to it, not links. "
                "Turn it off in @BotFather (/setprivacy, Disable), then remove and re-add "
                "the bot to each group, or make the bot a group admin",
            )
        )
    found.append(inline_finding(result))
    return found


def inline_finding(me: Mapping[str, object]) -> Finding:
    """Inline mode (``@bot <link>`` in any chat) is optional: "off" is said, not failed."""
    if me.get("supports_inline_queries"):
        return Finding("ok", "inline mode", "on: `@bot <link>` works in any chat")
    return Finding(
        "warn",
        "inline mode",
        "off: `@bot <link>` in other chats gets nothing. Turn it on in @BotFather "
        "(/setinline, then a placeholder such as `paste a link to an X post`)",
    )
