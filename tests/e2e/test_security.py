"""Security checks across the whole bot: where a fetch may go, where the token may not,
who may do what, and the files the bot leaves on disk.

- SSRF: one table of targets (loopback in every spelling, private ranges,
  link-local and the cloud metadata address, CGNAT, IPv6 ULA, mapped and
  embedded IPv4, multicast) refused by every fetch path: the guarded httpx
  client (media downloads), t.co expansion, and yt-dlp's pre-check; then
  redirects into them and host names that resolve to them. No network: a
  recording backend stands where the socket would open and proves that no
  connection to a refused address is even attempted.
- The token: a whole `xbot run` session at DEBUG (httpx logs every request
  URL, which holds the token), its start-up failures, everything it sent,
  /debug and /stats, and the database file — the token appears in none.
- Authorization: every command and button, by an allowed user, a stranger, a
  group member and a group admin (and the operator), a channel's subscriber and
  admin, with the answer each gets and whether anything changed: a member may not
  forward his own link's answer to the group's channel nor choose its caption, a
  subscriber may not change a channel's settings (issue 30).
- Files: temp names never come from user input; the data dir, its temp
  folder, the database and its WAL are private to the bot's user.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterable, Iterator
from pathlib import Path
from typing import Any

import httpcore
import httpx
import pytest
from conftest import load_soak, wait_until

from standins.botapi import BotApiServer
from standins.fxapi import FxApiServer
from standins.harness import Harness
from standins.media_server import MediaServer, fake_mp4, tiny_jpeg
from xbot.errors import BlockedAddress, FetchError, TransientFetch, UnsupportedLink
from xbot.handlers.messages import GET_USAGE, NOT_ALLOWED
from xbot.handlers.settings_menu import MenuContext, closed_text
from xbot.i18n import translator
from xbot.links import classify
from xbot.media import netguard
from xbot.media.download import download
from xbot.sending.destination import Destination
from xbot.sending.sender import OutMedia
from xbot.services.auth import ONLY_ADMINS, ONLY_OPERATORS
from xbot.sources import ytdlp
from xbot.sources.x import expand_tco
from xbot.sources.ytdlp import _api as ytdlp_api  # its resolver is replaced below
from xbot.tasks.callback_data import Action
from xbot.tasks.other_sites import SOUND_DATA, sound_markup
from xbot.tasks.payloads import AlertPayload

# --- SSRF -------------------------------------------------------------------------------------

# host as written in a URL -> why it must be refused
TARGETS = [
    ("127.0.0.1", "loopback"),
    ("127.0.0.2", "loopback, not .1"),
    ("127.1", "loopback, short form"),
    ("2130706433", "loopback, decimal"),
    ("0x7f000001", "loopback, hex"),
    ("0x7f.1", "loopback, hex octet short form"),
    ("localhost", "loopback by name"),
    ("LOCALHOST.", "loopback by name, upper case, root dot"),
    ("app.localhost", "under localhost (RFC 6761)"),
    ("[::1]", "IPv6 loopback"),
    ("[0:0:0:0:0:0:0:1]", "IPv6 loopback, long form"),
    ("[::ffff:127.0.0.1]", "IPv4-mapped loopback"),
    ("[::ffff:7f00:1]", "IPv4-mapped loopback, hex"),
    ("0.0.0.0", "unspecified (reaches the local host)"),
    ("[::]", "IPv6 unspecified"),
    ("10.0.0.1", "RFC 1918 10/8"),
    ("172.16.0.1", "RFC 1918 172.16/12"),
    ("192.168.1.1", "RFC 1918 192.168/16"),
    ("169.254.169.254", "link-local: the cloud metadata service"),
    ("[fe80::1]", "IPv6 link-local"),
    ("100.64.0.1", "CGNAT 100.64/10"),
    ("[fd00::1]", "IPv6 ULA fd00::/8"),
    ("[fc00::1]", "IPv6 ULA fc00::/8"),
    ("[::ffff:169.254.169.254]", "IPv4-mapped metadata"),
    ("[::ffff:10.0.0.1]", "IPv4-mapped private"),
    ("[64:ff9b::a9fe:a9fe]", "NAT64 of the metadata address"),
    ("[2002:7f00:1::]", "6to4 of loopback"),
    ("224.0.0.1", "multicast"),
    ("[ff02::1]", "IPv6 multicast"),
    ("198.18.0.1", "benchmarking range"),
    ("255.255.255.255", "broadcast"),
]
TARGET_IDS = [why for _, why in TARGETS]
# Addresses a host name may resolve to (DNS rebinding, internal names).
RESOLVED = [
    ("127.0.0.1", "loopback"),
    ("10.1.2.3", "private"),
    ("169.254.169.254", "metadata"),
    ("100.64.0.1", "CGNAT"),
    ("fd00::1", "ULA"),
    ("::ffff:127.0.0.1", "mapped loopback"),
    ("fe80::1", "v6 link-local"),
    ("0.0.0.0", "unspecified"),
]
PUBLIC_IP = "93.184.216.34"  # what "cdn.example" resolves to in these tests


class NoNetwork(httpcore.AsyncNetworkBackend):
    """Stands where the socket would open: records each attempt and refuses it, except the
    addresses in `dial`, which go to a local server (a "public" host played on loopback)."""

    def __init__(self, dial: dict[str, tuple[str, int]] | None = None) -> None:
        self.attempts: list[tuple[str, int]] = []
        self.dial = dial or {}
        self._real = httpcore.AnyIOBackend()

    async def connect_tcp(
        self, host: str, port: int, timeout: float | None = None, **kw: Any
    ) -> httpcore.AsyncNetworkStream:
        self.attempts.append((host, port))
        if host in self.dial:
            return await self._real.connect_tcp(*self.dial[host], timeout=timeout, **kw)
        raise httpcore.ConnectError(f"test: no network to {host}")

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, **kw: Any
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("test: no unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self._real.sleep(seconds)


def resolver_for(names: dict[str, list[str]]) -> netguard.Resolver:
    """Names from the table; numeric spellings (2130706433, 0x7f.1) as the system parses
    them, which needs no DNS; anything else does not exist (no network in tests)."""

    async def resolve(host: str, port: int) -> list[str]:
        if host in names:
            return names[host]
        if host[:1].isdigit() and all(c in "0123456789abcdefxABCDEFX." for c in host):
            return await netguard.system_resolver(host, port)
        raise OSError(f"test: {host} does not resolve")

    return resolve


@contextlib.asynccontextmanager
async def guarded(
    names: dict[str, list[str]] | None = None, dial: dict[str, tuple[str, int]] | None = None
) -> AsyncIterator[tuple[httpx.AsyncClient, NoNetwork]]:
    backend = NoNetwork(dial)
    client = netguard.make_client(
        allow_private=False,
        timeout=httpx.Timeout(5.0),
        user_agent="xbot-test",
        resolver=resolver_for(names or {}),
        inner=backend,
    )
    async with client:
        yield client, backend


def _refused(exc: BaseException) -> bool:
    """Refused for good: never retried as if the network had a bad moment."""
    return isinstance(exc, BlockedAddress | UnsupportedLink) and not isinstance(exc, TransientFetch)


@pytest.mark.parametrize(("host", "why"), TARGETS, ids=TARGET_IDS)
async def test_media_download_refuses(tmp_path: Path, host: str, why: str) -> None:
    async with guarded() as (client, backend):
        with pytest.raises(FetchError) as caught:
            await download(client, f"http://{host}:8080/media/a.jpg", tmp_path / "f", max_bytes=999)
    assert _refused(caught.value), f"{why}: {caught.value!r}"
    assert backend.attempts == [], f"{why}: a connection was attempted"
    assert not (tmp_path / "f").exists()


@pytest.mark.parametrize(("address", "why"), RESOLVED, ids=[w for _, w in RESOLVED])
async def test_media_download_refuses_a_name_that_resolves_there(
    tmp_path: Path, address: str, why: str
) -> None:
    names = {"cdn.example": [address], "mixed.example": [PUBLIC_IP, address]}
    async with guarded(names) as (client, backend):
        for host in ("cdn.example", "mixed.example"):
            with pytest.raises(BlockedAddress):
                await download(client, f"https://{host}/a.jpg", tmp_path / "f", max_bytes=999)
    assert backend.attempts == [], why


@pytest.fixture
def media() -> Iterator[MediaServer]:
    with MediaServer() as server:
        yield server


@pytest.mark.parametrize(("host", "why"), TARGETS, ids=TARGET_IDS)
async def test_media_download_refuses_a_redirect_into(
    tmp_path: Path, media: MediaServer, host: str, why: str
) -> None:
    # cdn.example is "public" (93.184.216.34); the recording backend plays it on loopback.
    media.add("/hop.jpg", b"", redirect_to=f"http://{host}:{media.port}/secret.jpg")
    dial = {PUBLIC_IP: ("127.0.0.1", media.port)}
    async with guarded({"cdn.example": [PUBLIC_IP]}, dial) as (client, backend):
        with pytest.raises(FetchError) as caught:
            await download(
                client, f"http://cdn.example:{media.port}/hop.jpg", tmp_path / "f", max_bytes=999
            )
    assert _refused(caught.value), f"{why}: {caught.value!r}"
    assert backend.attempts == [(PUBLIC_IP, media.port)], "only the public first hop"
    assert media.hits["/hop.jpg"] == 1
    assert media.hits["/secret.jpg"] == 0


@pytest.mark.parametrize(("address", "why"), RESOLVED, ids=[w for _, w in RESOLVED])
async def test_tco_expansion_refuses_when_tco_resolves_there(address: str, why: str) -> None:
    async with guarded({"t.co": [address]}) as (client, backend):
        with pytest.raises(BlockedAddress):
            await expand_tco(client, "https://t.co/AbCdEf123")
    assert backend.attempts == [], why


@pytest.mark.parametrize(("host", "why"), TARGETS, ids=TARGET_IDS)
async def test_tco_expansion_into_a_target_leads_nowhere(host: str, why: str) -> None:
    """t.co answers a redirect into the target: expansion reads the Location without
    following it, and what it names is no link the bot would fetch."""
    asked: list[str] = []

    def tco(request: httpx.Request) -> httpx.Response:
        asked.append(str(request.url))
        return httpx.Response(301, headers={"location": f"http://{host}/status/1"})

    async with httpx.AsyncClient(transport=httpx.MockTransport(tco)) as client:
        target = await expand_tco(client, "https://t.co/AbCdEf123")
    assert asked == ["https://t.co/AbCdEf123"], "one request, to t.co only"
    assert classify(target) is None, f"{why}: {target} would be fetched"


@pytest.mark.parametrize(("host", "why"), TARGETS, ids=TARGET_IDS)
def test_ytdlp_precheck_refuses(host: str, why: str) -> None:
    guard = ytdlp.host_guard(False)
    with pytest.raises((BlockedAddress, UnsupportedLink)):
        guard(f"http://{host}/watch?v=1")


@pytest.mark.parametrize(("address", "why"), RESOLVED, ids=[w for _, w in RESOLVED])
def test_ytdlp_precheck_refuses_a_name_that_resolves_there(
    monkeypatch: pytest.MonkeyPatch, address: str, why: str
) -> None:
    monkeypatch.setattr(
        ytdlp_api, "_blocking_resolver", resolver_for({"videos.example": [address]})
    )
    with pytest.raises(BlockedAddress):
        ytdlp.host_guard(False)("https://videos.example/v/1")


def test_ytdlp_file_names_never_come_from_the_site() -> None:
    assert "title" not in ytdlp.OUTTMPL
    assert "%(id)" not in ytdlp.OUTTMPL
    assert "/" not in ytdlp.OUTTMPL


# --- the token never leaves ------------------------------------------------------------------

TOKEN = "987654321:AAEsecretPartOfTheTokenNeverToBeSeen_x9"
SECRET = TOKEN.split(":", 1)[1]
OPERATOR = 31337


def _env(api: BotApiServer, fx: FxApiServer, data: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("XBOT_")}
    env.pop("NOTIFY_SOCKET", None)
    env.update(
        {
            "XBOT_TOKEN": api.token,
            "XBOT_BOT_API_URL": f"{api.url}/bot",
            "XBOT_BOT_API_FILE_URL": f"{api.url}/file/bot",
            "XBOT_X_API_URL": fx.url,
            "XBOT_VX_API_URL": "",  # the fallback sources would leave 127.0.0.1
            "XBOT_X_SYNDICATION_URL": "",
            "XBOT_DATA_DIR": str(data),
            "XBOT_ALLOW_PRIVATE_NETWORKS": "1",
            "XBOT_LOG_LEVEL": "DEBUG",
            "XBOT_ADMIN_IDS": str(OPERATOR),
            "PYTHONUNBUFFERED": "1",
            **extra,
        }
    )
    return env


def _idle(counts: dict[str, int]) -> bool:
    return bool(counts) and counts.get("pending", 0) + counts.get("running", 0) == 0


def _files_under(folder: Path) -> Iterable[Path]:
    return (p for p in folder.rglob("*") if p.is_file())


@pytest.mark.slow
def test_the_token_is_in_no_log_answer_or_file_of_a_whole_session(tmp_path: Path) -> None:
    soak = load_soak()
    data = tmp_path / "data"
    with (
        BotApiServer(TOKEN, allow_url_fetch_from_loopback=False) as api,
        FxApiServer() as fx,
        MediaServer() as media,
    ):
        fx.add_post("101", text="ok", photos=[media.add("/a.jpg", tiny_jpeg(), "image/jpeg")])
        fx.add_post("102", text="clip", videos=[media.add("/v.mp4", fake_mp4(30_000), "video/mp4")])
        fx.add_post("103", private=True)
        fx.add_raw("104", {"code": 200, "message": "OK", "tweet": "junk"})  # no status: permanent
        bot = soak.BotProcess(_env(api, fx, data), tmp_path, api)
        bot.start()
        try:
            assert bot.wait_ready(), "the bot did not start"
            api.fail_next("sendPhoto", 500, "Internal Server Error")
            api.fail_next("sendVideo", 429, "Too Many Requests: retry after 1", retry_after=1)
            for n, text in enumerate(
                [
                    "https://x.com/a/status/101",
                    "https://x.com/a/status/102",
                    "https://x.com/a/status/103",
                    "https://x.com/a/status/104",
                    f"https://x.com/{TOKEN}/status/105",  # a user pasting the token itself
                    "/start",
                    "/stats",
                    "/debug https://x.com/a/status/101",
                    "/dead",
                    "/settings",
                ]
            ):
                api.user_message(OPERATOR, text)
                if n == 0:
                    wait_until(lambda: api.calls_for("sendPhoto"), 20)
            wait_until(lambda: len(api.sent_messages(OPERATOR)) >= 10, 40)
            wait_until(lambda: _idle(soak.db_counts(data / "xbot.sqlite3")), 40)
            took = bot.sigterm()
        finally:
            bot.close()
        sent = [repr(c.params) for c in api.calls if c.method != "getUpdates"]
    assert took < 10
    log = (tmp_path / "run-001.log").read_text()
    assert "HTTP Request: POST" in log, "httpx request logging was on (DEBUG)"
    assert "/bot***/" in log or "bot***" in log, "and the token was redacted in it"
    assert SECRET not in log
    assert TOKEN.split(":", maxsplit=1)[0] + ":" not in log
    # What users read: sentences, /stats, /debug, dead-letter notices.
    assert not [s for s in sent if SECRET in s and "x.com" not in s], "the bot never says it"
    bot_texts = [m.get("text", "") + m.get("caption", "") for m in api.sent_messages(OPERATOR)]
    assert any(t.startswith("xbot ") for t in bot_texts), "/stats answered"
    assert any("Link: https://x.com/" in t for t in bot_texts), "/debug answered"
    for path in _files_under(data):
        assert SECRET.encode() not in path.read_bytes(), f"the token is in {path.name}"


def _run_briefly(env: dict[str, str], timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "xbot.cli", "run"],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _run_while_it_waits(env: dict[str, str], tries: int = 5) -> subprocess.CompletedProcess[str]:
    """`xbot run` against a Bot API that does not answer: it waits (one line per try)
    instead of exiting; SIGTERM once it has tried a few times."""
    env = env | {"XBOT_TEST_TIME_SCALE": "0.01"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "xbot.cli", "run"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    assert proc.stderr is not None
    bound = threading.Timer(30.0, proc.kill)  # the read below ends at the latest then
    bound.start()
    try:
        for line in proc.stderr:
            lines.append(line)
            if sum("start waits for Telegram" in seen for seen in lines) >= tries:
                break
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        bound.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, "".join(lines) + err)


@pytest.mark.slow
def test_startup_failures_never_print_the_token(tmp_path: Path) -> None:
    with BotApiServer("123:" + "B" * 35) as other, FxApiServer() as fx:
        refused = _env(other, fx, tmp_path / "a", XBOT_TOKEN=TOKEN)  # the server knows another
        with socketless_port() as port:
            unreachable = _env(other, fx, tmp_path / "b", XBOT_TOKEN=TOKEN)
            unreachable["XBOT_BOT_API_URL"] = f"http://127.0.0.1:{port}/bot"
            cases = {"token refused": _run_briefly(refused)}
            waited = _run_while_it_waits(unreachable)
        (tmp_path / "file").write_text("not a folder")
        bad_dir = _env(other, fx, tmp_path / "file" / "data", XBOT_TOKEN=TOKEN)
        cases["data dir unusable"] = _run_briefly(bad_dir)
        bad_shape = _env(other, fx, tmp_path / "c", XBOT_TOKEN=TOKEN + " trailing junk")
        cases["token malformed"] = _run_briefly(bad_shape)
    for name, result in cases.items():
        output = result.stdout + result.stderr
        assert result.returncode != 0, name
        assert SECRET not in output, f"{name}: {output}"
        assert "Traceback" not in output, f"{name}: {output}"
    # An unreachable Bot API is no failure: the start waits for it, and says so.
    output = waited.stdout + waited.stderr
    assert waited.returncode == 0, output
    assert "start waits for Telegram" in output
    assert SECRET not in output, output
    assert "Traceback" not in output, output


@contextlib.contextmanager
def socketless_port() -> Iterator[int]:
    """A port nothing listens on (bound, then closed, so nobody else takes it meanwhile)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


# --- authorization ----------------------------------------------------------------------------

ALLOWED = 7001  # a private chat's id is its user's id
STRANGER = 7002  # not on the allow-list
GROUP = -1_007_000
MEMBER, ADMIN = 7003, 7004
CHANNEL = -1_007_001
SUBSCRIBER = 7006  # of CHANNEL, no admin there
ROLES = {
    # role -> (chat, sender)
    "allowed user": (ALLOWED, ALLOWED),
    "stranger": (STRANGER, STRANGER),
    "group member": (GROUP, MEMBER),
    "group admin": (GROUP, ADMIN),
    "operator": (OPERATOR, OPERATOR),
}
HELP = "Send me a link to a post on X"
MENU = "Settings for this chat"

# command -> role -> what the answer starts with (and, for changes, whether it happened)
COMMAND_TABLE: dict[str, dict[str, str]] = {
    "/start": {"allowed user": HELP, "stranger": NOT_ALLOWED, "group member": HELP,
               "group admin": HELP, "operator": HELP},
    "/help": {"allowed user": HELP, "stranger": NOT_ALLOWED, "group member": HELP,
              "group admin": HELP, "operator": HELP},
    "/settings": {"allowed user": MENU, "stranger": NOT_ALLOWED, "group member": ONLY_ADMINS,
                  "group admin": MENU, "operator": MENU},
    "/channel": {"allowed user": "No channel is linked", "stranger": NOT_ALLOWED,
                 "group member": "No channel is linked", "group admin": "No channel is linked",
                 "operator": "No channel is linked"},
    "/channel off": {"allowed user": "Unlinked", "stranger": NOT_ALLOWED,
                     "group member": ONLY_ADMINS, "group admin": "Unlinked",
                     "operator": "Unlinked"},
    "/format": {"allowed user": "Captions use the built-in format", "stranger": NOT_ALLOWED,
                "group member": "Captions use the built-in format",
                "group admin": "Captions use the built-in format",
                "operator": "Captions use the built-in format"},
    "/format {text} {url}": {"allowed user": "Saved", "stranger": NOT_ALLOWED,
                             "group member": ONLY_ADMINS, "group admin": "Saved",
                             "operator": "Saved"},
    "/cancel": {"allowed user": "There is no caption edit", "stranger": NOT_ALLOWED,
                "group member": "There is no caption edit",
                "group admin": "There is no caption edit", "operator": "There is no caption edit"},
    "/stats": {"allowed user": ONLY_OPERATORS, "stranger": ONLY_OPERATORS,
               "group member": ONLY_OPERATORS, "group admin": ONLY_OPERATORS,
               "operator": "xbot "},
    "/clear_cache": {"allowed user": ONLY_OPERATORS, "stranger": ONLY_OPERATORS,
                     "group member": ONLY_OPERATORS, "group admin": ONLY_OPERATORS,
                     "operator": "Link cache cleared"},
    "/debug https://x.com/a/status/1": {
        "allowed user": ONLY_OPERATORS, "stranger": ONLY_OPERATORS,
        "group member": ONLY_OPERATORS, "group admin": ONLY_OPERATORS, "operator": "Link: "},
    "/dead": {"allowed user": ONLY_OPERATORS, "stranger": ONLY_OPERATORS,
              "group member": ONLY_OPERATORS, "group admin": ONLY_OPERATORS,
              "operator": "No dead letters"},
    "/get": {"allowed user": GET_USAGE, "stranger": NOT_ALLOWED, "group member": GET_USAGE,
             "group admin": GET_USAGE, "operator": GET_USAGE},
    "/get https://x.com/a/status/1": {"allowed user": "queued", "stranger": NOT_ALLOWED,
                                      "group member": "queued", "group admin": "queued",
                                      "operator": "queued"},
    "https://x.com/a/status/1": {"allowed user": "queued", "stranger": NOT_ALLOWED,
                                 "group member": "queued", "group admin": "queued",
                                 "operator": "queued"},
}  # fmt: skip


@pytest.fixture
async def authz(tmp_path: Path) -> AsyncIterator[Harness]:
    h = await Harness.start(
        tmp_path / "data",
        start_bot=False,
        admin_ids=frozenset({OPERATOR}),
        allowed_chat_ids=frozenset({ALLOWED, GROUP, OPERATOR, CHANNEL}),
    )
    h.api.add_chat(GROUP, "supergroup", title="Authz group", admins=[ADMIN])
    h.api.add_chat(CHANNEL, "channel", title="Chan", creator=ADMIN, admins=[ALLOWED, OPERATOR],
                   members={SUBSCRIBER: "member"})  # fmt: skip
    await h.start_bot()
    try:
        yield h
    finally:
        await h.stop()


async def _say(h: Harness, role: str, text: str) -> str | None:
    """Send `text` as `role`; the bot's reply to it, or None once the message is queued."""
    chat, sender = ROLES[role]
    chat_type = "supergroup" if chat < 0 else "private"
    update = h.api.user_message(chat, text, user_id=sender, chat_type=chat_type)
    message_id = update["message"]["message_id"]

    def reply() -> dict[str, Any] | None:
        # In groups the bot quotes the command; in private chats it just answers next.
        for m in h.api.sent_messages(chat):
            quoted = m.get("reply_to_message", {}).get("message_id", message_id)
            if m["message_id"] > message_id and quoted == message_id and "text" in m:
                return m
        return None

    link = "https://" in text
    try:
        # A link gets no quick reply: it is queued (or refused in one sentence).
        await h.api.wait_for(
            lambda: reply() is not None or (link and _queued(h, chat, message_id)), 5
        )
    except TimeoutError:
        return None
    found = reply()
    return str(found["text"]) if found else "queued"


def _queued(h: Harness, chat: int, message_id: int) -> bool:
    return any(
        c.method in ("sendMessage", "sendPhoto") and c.chat_id == chat
        for c in h.api.calls
        if c.params.get("reply_parameters", {}).get("message_id") == message_id
    )


async def test_every_command_by_every_role(authz: Harness) -> None:
    h = authz
    h.fx.add_post("1", text="p", photos=[h.photo("one")])
    for command in ("start", "help", "get", "settings", "channel", "format", "cancel", "stats",
                    "clear_cache", "debug", "dead"):  # fmt: skip
        assert any(row.split()[0] == f"/{command}" for row in COMMAND_TABLE), command
    problems = []
    for text, expected in COMMAND_TABLE.items():
        for role, answer in expected.items():
            got = await _say(h, role, text)
            if got is None or not got.startswith(answer):
                problems.append(f"{text!r} by {role}: expected {answer!r}, got {got!r}")
        await h.wait_idle()
    assert problems == []


def _registered_commands() -> set[str]:
    from xbot.handlers.commands import COMMANDS

    return {c.name for c in COMMANDS}


def test_the_table_covers_every_command() -> None:
    """A new command must get its row here: who may use it is decided, not assumed."""
    covered = {row.split()[0].lstrip("/") for row in COMMAND_TABLE if row.startswith("/")}
    assert _registered_commands() <= covered


async def _menu(h: Harness, role: str) -> dict[str, Any]:
    chat, _ = ROLES[role]
    await _say(h, role, "/settings")
    menus = [m for m in h.api.sent_messages(chat) if MENU in m.get("text", "")]
    return menus[-1]


def _buttons(message: dict[str, Any]) -> dict[str, str]:
    rows = message.get("reply_markup", {}).get("inline_keyboard", [])
    return {b["text"]: b["callback_data"] for row in rows for b in row}


async def _press(h: Harness, chat: int, message_id: int, data: str, user: int) -> str | None:
    query_id = h.api.callback_query(chat, message_id, data, user)["callback_query"]["id"]
    await h.api.wait_for(lambda: query_id in h.api.callback_answers, 5)
    text = h.api.callback_answers[query_id].get("text")
    return None if text is None else str(text)


REFUSALS = (ONLY_ADMINS, ONLY_OPERATORS, NOT_ALLOWED, "This button has expired")


async def test_every_button_by_every_role(authz: Harness) -> None:
    h = authz
    problems: list[str] = []
    pressed: set[str] = set()

    def expect(what: str, answer: str | None, refusal: str | None, changed: bool) -> None:
        """`refusal` None: the press works (no refusal, something changed); else refused
        with that sentence and nothing changed."""
        if refusal is None:
            ok = changed and not (answer or "").startswith(REFUSALS)
        else:
            ok = not changed and (answer or "").startswith(refusal)
        if not ok:
            problems.append(f"{what}: answered {answer!r}, changed={changed}, want {refusal!r}")

    async def settings_after_press(chat: int, message_id: int, data: str, user: int) -> None:
        before = (await h.services.chats.get(chat, h.clock())).settings
        answer = await _press(h, chat, message_id, data, user)
        after = (await h.services.chats.get(chat, h.clock())).settings
        role = next(r for r, (c, u) in ROLES.items() if (c, u) == (chat, user))
        refusal = {"group member": ONLY_ADMINS, "stranger": NOT_ALLOWED}.get(role)
        expect(f"{data} by {role}", answer, refusal, before != after)

    # Settings toggles: in the group by the member (refused) and the admin; in a private
    # chat by its user; forged by a stranger in theirs.
    group_menu = await _menu(h, "group admin")
    toggles = [v for v in _buttons(group_menu).values() if ":set:" in v]
    assert toggles, "the menu has toggles"
    for data in toggles:
        for user in (MEMBER, ADMIN):
            await settings_after_press(GROUP, group_menu["message_id"], data, user)
    own_menu = await _menu(h, "allowed user")
    for data in [v for v in _buttons(own_menu).values() if ":set:" in v]:
        await settings_after_press(ALLOWED, own_menu["message_id"], data, ALLOWED)
        await settings_after_press(STRANGER, 1, data, STRANGER)
    close = next(v for v in _buttons(group_menu).values() if v.endswith(":menu:close"))
    # In the group's language, which the admin's press on the Language toggle changed.
    group_settings = (await h.services.chats.get(GROUP, h.clock())).settings
    refused = translator(group_settings.language).gettext(ONLY_ADMINS)
    answer = await _press(h, GROUP, group_menu["message_id"], close, MEMBER)
    expect("menu close by the group member", answer, refused, False)
    answer = await _press(h, GROUP, group_menu["message_id"], close, ADMIN)
    words = closed_text(group_settings, MenuContext("supergroup"))

    def menu_closed() -> bool:
        return (h.api.message(GROUP, group_menu["message_id"]) or {}).get("text") == words

    with contextlib.suppress(TimeoutError):
        await h.api.wait_for(menu_closed, 5)
    expect("menu close by the group admin", answer, None, menu_closed())

    # In a channel: /settings posted there shows the menu there; a subscriber's press is
    # refused and changes nothing in the database, an admin's press works.
    h.api.user_message(CHANNEL, "/settings", chat_type="channel")
    await h.api.wait_for(
        lambda: any(MENU in m.get("text", "") for m in h.api.sent_messages(CHANNEL)), 5
    )
    channel_menu = [m for m in h.api.sent_messages(CHANNEL) if MENU in m.get("text", "")][-1]
    channel_toggles = [v for v in _buttons(channel_menu).values() if ":set:" in v]
    assert channel_toggles, "the channel's menu has toggles"
    for data in channel_toggles:
        for who, refusal in ((SUBSCRIBER, ONLY_ADMINS), (ALLOWED, None)):
            before = (await h.services.chats.get(CHANNEL, h.clock())).settings
            answer = await _press(h, CHANNEL, channel_menu["message_id"], data, who)
            after = (await h.services.chats.get(CHANNEL, h.clock())).settings
            name = "subscriber" if who == SUBSCRIBER else "admin"
            expect(f"{data} in the channel by its {name}", answer, refusal, before != after)
    # The dead-letter retry: the operator's alone, wherever the list is shown.
    # JSON that is no status: a permanent failure, a dead letter. (Bytes that are not JSON
    # at all are an outage sign now, retried through the other sources.)
    h.fx.add_raw("9", {"code": 200, "message": "OK", "tweet": "junk"})
    await _say(h, "group admin", "https://x.com/a/status/9")
    await h.wait_idle()
    await _say(h, "operator", "/dead")
    dead = [m for m in h.api.sent_messages(OPERATOR) if "dead letter" in m.get("text", "")][-1]
    (retry,) = [v for v in _buttons(dead).values() if ":retry:" in v]
    (dead_task,) = await h.services.queue.list(state="dead")
    for role in ("allowed user", "stranger", "group member", "group admin", "operator"):
        # The row, not the dead count: a task the operator re-queued may run and be
        # dead-lettered again before the count is read; its row still tells (updated_at).
        before_row = await h.services.queue.get(dead_task.id)
        answer = await _press(h, OPERATOR, dead["message_id"], retry, ROLES[role][1])
        after_row = await h.services.queue.get(dead_task.id)
        refusal = None if role == "operator" else ONLY_OPERATORS
        expect(f"retry by {role}", answer, refusal, before_row != after_row)

    # The mute button under an alert: the operator's alone, in their own private chat.
    alert = AlertPayload("Disk nearly full (test)", "disk", "en")
    await h.services.queue.enqueue("alert", alert.to_json(), OPERATOR, now=h.clock())
    h.services.workers.wake()
    await h.api.wait_for(
        lambda: any("(test)" in m.get("text", "") for m in h.api.sent_messages(OPERATOR)), 10
    )
    shown = [m for m in h.api.sent_messages(OPERATOR) if "(test)" in m.get("text", "")][-1]
    (mute,) = [v for v in _buttons(shown).values() if ":mute:" in v]
    for role in ("allowed user", "stranger", "group member", "group admin", "operator"):
        before_mute = (await h.services.chats.get(OPERATOR, h.clock())).settings.muted_alerts
        answer = await _press(h, OPERATOR, shown["message_id"], mute, ROLES[role][1])
        after_mute = (await h.services.chats.get(OPERATOR, h.clock())).settings.muted_alerts
        refusal = None if role == "operator" else ONLY_OPERATORS
        expect(f"mute by {role}", answer, refusal, before_mute != after_mute)

    # The forward prompt under a post in the group: its sender's and the admins' only.
    # (The toggles above left "edit before forwarding" on: a forward would ask for a caption,
    # and moved the group off English: the prompt's labels matched below are English.)
    await h.services.chats.set_settings(
        GROUP, h.clock(), channel_id=CHANNEL, channel_title="Chan", edit_before_forward=False,
        language="en",
    )  # fmt: skip

    def prompts() -> list[dict[str, Any]]:
        return [m for m in h.api.sent_messages(GROUP) if "Forward this post" in m.get("text", "")]

    seen: set[int] = set()

    async def new_prompt(post: str) -> dict[str, Any]:
        h.fx.add_post(post, text="fwd", photos=[h.photo(f"fwd{post}")])
        await _say(h, "group member", f"https://x.com/a/status/{post}")
        # A pressed prompt is edited ("Not forwarded."): wait for a new one.
        await h.api.wait_for(lambda: {m["message_id"] for m in prompts()} - seen, 10)
        await h.wait_idle()
        prompt = next(m for m in prompts() if m["message_id"] not in seen)
        seen.add(prompt["message_id"])
        return prompt

    async def press_prompt(
        prompt: dict[str, Any], label: str, who: int, refusal: str | None
    ) -> None:
        shown = prompt["message_id"]
        try:
            await h.api.wait_for(lambda: label in _buttons(h.api.message(GROUP, shown) or {}), 5)
        except TimeoutError:
            problems.append(f"{label!r} is gone from the prompt: a press before it went through")
            return
        before = h.api.message(GROUP, shown) or {}
        data = _buttons(before)[label]
        pressed.add(data.split(":")[1])
        answer = await _press(h, GROUP, shown, data, who)
        # The answer comes first, the edit of the prompt right after it.
        with contextlib.suppress(TimeoutError):
            await h.api.wait_for(
                lambda: (h.api.message(GROUP, shown) or {}) != before, 1 if refusal else 5
            )
        changed = (h.api.message(GROUP, shown) or {}) != before
        names = {7005: "another member", MEMBER: "the link's sender", ADMIN: "a group admin"}
        expect(f"{label!r} on a prompt by {names[who]}", answer, refusal, changed)

    first = await new_prompt("10")
    for label in ("Forward to channel", "Edit caption", "Skip"):
        await press_prompt(first, label, 7005, ONLY_ADMINS)
    # The link's own sender may not speak for the channel either (issue 30).
    in_channel = len(h.api.sent_messages(CHANNEL))  # the settings menu so far
    for label in ("Forward to channel", "Edit caption"):
        await press_prompt(first, label, MEMBER, ONLY_ADMINS)
    await h.wait_idle()
    if len(h.api.sent_messages(CHANNEL)) != in_channel:
        problems.append("a member's press sent something to the channel")
    await press_prompt(first, "Forward to channel", ADMIN, None)
    second = await new_prompt("11")
    await press_prompt(second, "Edit caption", ADMIN, None)
    await press_prompt(second, "Keep caption", 7005, ONLY_ADMINS)
    await press_prompt(second, "Keep caption", ADMIN, None)
    await press_prompt(second, "Forward", 7005, ONLY_ADMINS)
    await press_prompt(second, "Forward", ADMIN, None)
    third = await new_prompt("12")
    await press_prompt(third, "Skip", MEMBER, None)  # his own answer: he may dismiss it
    # 🎵 under a video from another site: anyone in the group (as anyone may paste a link),
    # only the admins in the channel; an allowed press queues the sound, a refused one nothing.
    clip = h.settings.data_dir / "clip.mp4"
    clip.write_bytes(fake_mp4(20_000))
    page = "https://videos.example/watch/1"

    async def sound_tasks(chat: int) -> int:
        tasks = await h.services.queue.list(chat_id=chat)
        return sum('"audio":true' in t.payload for t in tasks)

    for chat, kind, presses in (
        (GROUP, "supergroup", ((7005, None), (ADMIN, None))),
        (CHANNEL, "channel", ((SUBSCRIBER, ONLY_ADMINS), (ALLOWED, None))),
    ):
        ((_, video_id),) = await h.services.sender.send_media(
            Destination(chat, kind),
            [OutMedia("video", clip, "upload")],
            caption=f'<a href="{page}">{page}</a>',
            reply_markup=sound_markup(),
        )
        # In the chat's language, which the presses on its Language toggle changed.
        lang = (await h.services.chats.get(chat, h.clock())).settings.language
        for who, refused in presses:
            before_tasks = await sound_tasks(chat)
            answer = await _press(h, chat, video_id, SOUND_DATA, who)
            changed = await sound_tasks(chat) != before_tasks
            said = translator(lang).gettext(refused) if refused else None
            expect(f"🎵 in the {kind} by {who}", answer, said, changed)
            await h.wait_idle()
    pressed.add(Action.AUDIO.value)
    # Every kind of button there is was pressed by someone allowed and someone not.
    assert {a.value for a in Action} <= pressed | {"set", "menu", "retry", "mute"}
    assert problems == []


# --- files --------------------------------------------------------------------------------------


async def test_temp_names_never_come_from_user_input(tmp_path: Path) -> None:
    data = tmp_path / "data"
    outside = set(tmp_path.rglob("*"))
    h = await Harness.start(data, allow_url_fetch=False)  # Telegram cannot fetch: we download
    try:
        evil = "../../../../tmp/evil"
        photo = h.media.add(
            "/media/p.jpg",
            tiny_jpeg(),
            "image/jpeg",
            headers={"content-disposition": f'attachment; filename="{evil}.jpg"'},
        )
        photo += f"?name={evil}.jpg&format=../../x"
        video = h.media.add(
            "/media/clip.mp4",
            fake_mp4(20_000),
            "video/mp4",
            headers={"content-disposition": f"attachment; filename*=UTF-8''{evil}.mp4"},
        )
        h.fx.add_post("77", author=(evil, "evil"), text=evil, photos=[photo], videos=[video])
        h.api.user_message(ALLOWED, "https://x.com/evil/status/77")
        await h.api.wait_for(
            lambda: any(c.method == "sendMediaGroup" and c.status == 200 for c in h.api.calls), 15
        )
        await h.wait_idle()
        uploads = [
            name for c in h.api.calls if c.status == 200 for (name, _size, _sha) in c.files.values()
        ]
    finally:
        await h.stop()
    assert uploads, "the media went up as files"
    for name in uploads:
        assert "/" not in name, name
        assert ".." not in name, name
        assert "evil" not in name, name
    created = set(tmp_path.rglob("*")) - outside
    assert all(data in p.parents or p == data for p in created), "nothing outside the data dir"
    assert not list((data / "tmp").iterdir()), "temp files are gone after use"
    assert not Path("/tmp/evil.jpg").exists()


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.slow
def test_data_dir_and_database_are_private(tmp_path: Path) -> None:
    """The real `xbot run` under a permissive umask: what it creates is its user's alone."""
    soak = load_soak()
    data = tmp_path / "fresh" / "data"
    with BotApiServer() as api, FxApiServer() as fx, MediaServer() as media:
        fx.add_post("5", text="p", photos=[media.add("/p.jpg", tiny_jpeg(), "image/jpeg")])
        env = _env(api, fx, data, XBOT_LOG_LEVEL="INFO")
        bot = soak.BotProcess(env, tmp_path, api)
        old = os.umask(0o002)  # a group-writable default, as some distributions have
        try:
            bot.start()
        finally:
            os.umask(old)
        try:
            assert bot.wait_ready()
            api.user_message(ALLOWED, "https://x.com/a/status/5")
            # The photo is uploaded (this Bot API cannot fetch our loopback URL), so it
            # went through <data>/tmp: wait for the upload, not the refused URL before it.
            sent = lambda: [c for c in api.calls_for("sendPhoto") if c.status == 200]  # noqa: E731
            wait_until(sent, 20, "the photo uploaded")
            modes = {p.name: _mode(p) for p in [data, *data.iterdir()]}
            bot.sigterm()
        finally:
            bot.close()
    assert modes["data"] == 0o700
    assert modes["tmp"] == 0o700
    for name, mode in modes.items():
        if name.startswith("xbot.sqlite3"):
            assert mode == 0o600, f"{name}: {oct(mode)}"
        assert mode & 0o077 == 0, f"{name} is open to others: {oct(mode)}"


@pytest.mark.slow
def test_an_existing_data_dir_open_to_others_is_made_private(tmp_path: Path) -> None:
    soak = load_soak()
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    data.chmod(0o755)
    with BotApiServer() as api, FxApiServer() as fx:
        bot = soak.BotProcess(_env(api, fx, data, XBOT_LOG_LEVEL="INFO"), tmp_path, api)
        bot.start()
        try:
            assert bot.wait_ready()
            bot.sigterm()
        finally:
            bot.close()
    assert _mode(data) == 0o700
