"""The fault-injection soak: the real `xbot run` against the local stand-ins, abused.

    python bench/soak.py                       # every scenario, a few hundred links
    python bench/soak.py --only kill9,storm    # some scenarios
    python bench/soak.py --without diskfull    # all but some
    python bench/soak.py --small --fast        # what tests/process/test_soak_small.py runs

The bot runs as a subprocess (``python -m xbot.cli run``, configured by the
``XBOT_*`` environment exactly as an operator would), its stderr captured to
one file per run. The stand-ins (Bot API, fxtwitter API, media host) run in
this process on their own threads. Users send one link per message from
dozens of chats while the scenarios misbehave on a timeline drawn from
``--seed``:

- ``kill9``: SIGKILL at random moments (and a few aimed right after Telegram
  confirmed an album, before the bot can record it), restart on the same data dir;
- ``sigterm``: SIGTERM mid-work, the exit timed (≤ 10 s), restart;
- ``storm``: 30 % of sends answered 429 with ``retry_after`` 1-3 s;
- ``botapi``: 5xx from the Bot API's front end, and (not with ``--fast``) requests
  that get no answer for longer than the bot's read timeout;
- ``media``: a media host that resets connections, sends more bytes than it
  announced and (not with ``--fast``) stalls mid-download;
- ``fxapi``: the fxtwitter API answering garbage, HTML, a huge body, 503 and (not
  with ``--fast``) hanging, once per post. With fxtwitter the only X source, all
  but the huge body are the source being down (xbot.sources.x): the link
  waits the outage out and gets its media, after at most one sentence saying X
  is not answering. A huge body is junk for this post: one sentence (the
  dead-letter notice);
- ``dblock``: another process holds the database's write lock for longer than
  the bot's busy timeout (5 s);
- ``diskfull``: the data dir is a size-limited tmpfs (needs root) that is filled
  up for a while and then freed;
- ``crashloop``: a crash loop: six SIGKILLs about 2 s apart, each soon after
  the restart, faster than the slowest task (posts of 12 photos from a slow
  media host, sent just before): a lost lease must not dead-letter them.
- ``tgdown``: a Telegram outage (issue 20): every send answered with nginx's HTML
  502 while getUpdates works (100 s; 10 s with ``--fast``), then every method,
  getUpdates included (60 s; 5 s with ``--fast``), links arriving all along: each
  is delivered once after, no notice, and the table says how long the backlog took
  to start and to finish draining after Telegram came back.

Everything is counted from the Bot API stand-in's records (and the bot's logs),
never from what the bot says about itself: links delivered, links lost, albums
sent more than once, requests that reached a chat before its ``retry_after``,
tracebacks. The run is bounded (``--deadline``); the table goes to stdout and
the exit status is 1 when a target is missed.

"Lost" is a link whose user never got its media, or, for a link designed to
fail (private, deleted, too big an answer from the API), never got a sentence
saying so; a link caught in an outage of its source is lost when it never got
its media, or got a sentence other than the one saying X is not answering.
Sends are at least once: a kill between Telegram's confirmation of an album and
the bot's record of it can resend that album (one per task in flight). The
aimed kills land in that window on purpose. Every resend is attributed (a kill
or stop right after the confirmation, the database refusing the record, a Bot
API timeout); the target is 0 resends that nothing explains. docs/reliability.md
has the figures and what each row means.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import apsw
import attrs

from standins.botapi import BotApiServer, Call
from standins.fxapi import FxApiServer
from standins.media_server import MediaServer, fake_mp4, tiny_jpeg
from xbot.media.models import MediaKind
from xbot.sending.albums import plan_sends

SCENARIOS = (
    "kill9", "sigterm", "storm", "botapi", "media", "fxapi", "dblock", "diskfull", "crashloop",
    "tgdown",
)  # fmt: skip
# The dead-letter notice's words (xbot.tasks.notices.SORRY): a Telegram outage sends none.
NOTICE = "Sorry, I could not deliver"
# The handler's answer when the database stays locked or full (xbot.handlers.messages).
STORE_REFUSAL = "my storage is busy or full"
# The one sentence of the outage path: every X source down (xbot.sources.x.DOWN).
SOURCE_DOWN = "X is not answering"
MEDIA_METHODS = frozenset(
    {"sendPhoto", "sendVideo", "sendAnimation", "sendDocument", "sendMediaGroup"}
)
SIGTERM_LIMIT = 10.0  # seconds from SIGTERM to exit (issue 7; systemd's stop timeout is longer)
BUSY_TIMEOUT = 5.0  # xbot.storage.db.BUSY_TIMEOUT_MS
BOT_READ_TIMEOUT = 30.0  # xbot.app.build_application's read timeout
READY_TIMEOUT = 30.0
MIN_UP = 1.5  # a restarted bot runs at least this long before the next blow
STALL_AFTER = 30.0  # drain: an empty queue and no new answer for this long ends the wait
RESTART_SEC = 5.0  # systemd/xbot.service: Restart=on-failure, RestartSec=5
# A confirmed send this close before a kill may not have been recorded: the album can go
# out again (at-least-once). The real window is milliseconds; a second is generous.
RECORD_WINDOW = 1.0
IN_FLIGHT = 0.5  # a request sent before the kill may be taken in by the stand-in just after
STOP_GRACE = 6.0  # xbot.runtime: running tasks are cancelled this long after SIGTERM
BLOWS = frozenset({"kill9", "aim", "sigterm", "crashloop"})
LATE_SLACK = 1.0  # a blow this much behind its time shifts the rest of the timeline


# --- the plan -----------------------------------------------------------------------------------


@attrs.frozen
class Config:
    """What one soak does.

    Attributes:
        links: links sent, one per message.
        chats: distinct chats.
        groups: how many of them are supergroups (Telegram allows 20 messages a minute there).
        kills: SIGKILLs, of which `aimed_kills` right after an album was confirmed.
        sigterms: SIGTERMs mid-work (each followed by a restart).
        send_seconds: links are spread over this long.
        deadline: the whole soak stops after this long, settled or not.
        fast: leave out the faults that cost 15-35 s of waiting each (timeouts,
            stalls, hangs), for the small soak in the test suite.
    """

    scenarios: frozenset[str] = frozenset(SCENARIOS)
    links: int = 300
    chats: int = 30
    groups: int = 10
    kills: int = 12
    aimed_kills: int = 3
    sigterms: int = 3
    send_seconds: float = 100.0
    deadline: float = 900.0
    seed: int = 1
    workers: int = 4
    fast: bool = False
    storm_probability: float = 0.3
    p5xx: float = 0.05
    dblock_seconds: float = 8.0
    diskfull_seconds: float = 10.0
    log_level: str = "INFO"
    without_kinds: frozenset[str] = frozenset()
    crashloop_kills: int = 6
    crashloop_gap: float = 2.0
    crashloop_slow_links: int = 3
    tgdown_sends_seconds: float = 100.0  # the stretches; --fast: 10 s and 5 s
    tgdown_all_seconds: float = 60.0

    def has(self, scenario: str) -> bool:
        return scenario in self.scenarios


SMALL = {
    "links": 40,
    "chats": 8,
    "groups": 1,
    "kills": 3,
    "aimed_kills": 1,
    "sigterms": 1,
    "send_seconds": 12.0,
    "deadline": 150.0,
}


# --- what users send, and what each link should get ---------------------------------------------


@attrs.frozen
class LinkKind:
    """A kind of link users send.

    Attributes:
        expect: ``media`` (the post's media), ``sentence`` (a reply saying why
            not), ``outage`` (the source is down for a while: the media, after at
            most the one sentence saying X is not answering, and no other), or
            ``either`` (a faulty host: media or a clear sentence).
        weight: relative frequency in the mix.
        scenario: only sent when that scenario is on ("" for always).
        slow: left out with `Config.fast`.
    """

    name: str
    expect: str
    weight: int
    scenario: str = ""
    slow: bool = False
    private_only: bool = False


KINDS = (
    LinkKind("photo", "media", 30),
    LinkKind("video", "media", 10),
    LinkKind("gif", "media", 5),
    LinkKind("album3", "media", 12),
    # Two albums: a kill between them must not resend the first. Private chats only:
    # 12 photos are 12 of a group's 20 messages a minute, and the soak would wait on pacing.
    LinkKind("album12", "media", 4, private_only=True),
    LinkKind("repeat", "media", 15),  # a post already sent elsewhere: from the link cache
    LinkKind("private", "sentence", 3),
    LinkKind("deleted", "sentence", 3),
    LinkKind("textonly", "sentence", 3),
    # fxtwitter misbehaves once per post, and it is the only X source configured. An
    # answer that is not JSON (garbage, an HTML page), a 503 or a hang is the source
    # being down since the chain of sources (issue 14): the outage path, then the media.
    # A huge body is junk for this one post: one sentence (its dead-letter notice).
    LinkKind("fx_garbage", "outage", 2, "fxapi"),
    LinkKind("fx_html", "outage", 2, "fxapi"),
    LinkKind("fx_huge", "sentence", 2, "fxapi"),
    LinkKind("fx_503", "outage", 2, "fxapi"),
    LinkKind("fx_hang", "outage", 2, "fxapi", slow=True),
    LinkKind("m_reset", "media", 3, "media"),
    LinkKind("m_lie", "either", 3, "media"),
    LinkKind("m_stall", "media", 2, "media", slow=True),
    # Twelve photos from a slow host: slower than the crash loop's kills (sent by it).
    LinkKind("slow12", "media", 0, "crashloop", private_only=True),
)
SLOW_PHOTO_DELAY = 0.4  # seconds the slow host takes per photo


@attrs.frozen
class SentLink:
    """One link a user sent.

    Attributes:
        chat, message_id: the user's message (the bot's answer replies to it).
        items, steps: media items and Telegram sends a full delivery takes.
    """

    index: int
    kind: str
    expect: str
    post_id: str
    chat: int
    message_id: int
    items: int
    steps: int
    sent_at: float


@attrs.frozen
class Post:
    post_id: str
    kinds: tuple[MediaKind, ...]


def _steps(kinds: tuple[MediaKind, ...]) -> int:
    return len(plan_sends(kinds)) if kinds else 0


# --- the stand-ins ------------------------------------------------------------------------------


class RecordingBotApi(BotApiServer):
    """The Bot API stand-in, telling the soak about each successful media send as it is
    recorded: before its answer is written, so a kill then lands in the at-least-once window."""

    on_media_sent: Callable[[int | None, dict[str, Any]], None] | None = None

    def recorded(self, call: Call) -> None:
        hook = self.on_media_sent
        if hook is not None and call.method in MEDIA_METHODS and call.status == 200:
            hook(call.chat_id, call.params)


class Standins:
    """Bot API, fxtwitter API and media host on 127.0.0.1, each on its own thread."""

    def __init__(self) -> None:
        # Like the real Telegram, the stand-in cannot fetch URLs on our loopback:
        # every media file goes through the bot's own (faulty) downloads.
        self.api = RecordingBotApi(allow_url_fetch_from_loopback=False, seed=7)
        self.fx = FxApiServer()
        self.media = MediaServer()

    def __enter__(self) -> Standins:
        self.api.start_sync()
        self.fx.start_sync()
        self.media.start_sync()
        return self

    def __exit__(self, *exc: object) -> None:
        for server in (self.api, self.fx, self.media):
            with contextlib.suppress(Exception):
                server.stop_sync()


class Catalog:
    """Posts on the fxtwitter stand-in and files on the media host, one per link kind."""

    def __init__(self, standins: Standins, rng: random.Random) -> None:
        self.s = standins
        self.rng = rng
        self.next_id = 1_800_000_000_000_000_000
        self.plain: list[Post] = []  # delivered-able posts a "repeat" may reuse
        self.healing: dict[str, Any] = {}  # media path -> good bytes, served after a first fault

    def _id(self) -> str:
        self.next_id += self.rng.randint(1, 10_000)
        return str(self.next_id)

    def _photo(self, pid: str, n: int) -> str:
        return self.s.media.add(f"/media/{pid}-{n}.jpg", tiny_jpeg(64 + n, 48), "image/jpeg")

    def _video(self, pid: str, size: int = 48 * 1024, **route: Any) -> str:
        return self.s.media.add(f"/media/{pid}.mp4", fake_mp4(size), "video/mp4", **route)

    def post_for(self, kind: str) -> Post:
        fx = self.s.fx
        if kind == "repeat" and self.plain:
            return self.rng.choice(self.plain)
        pid = self._id()
        text = f"soak {kind} {pid}"
        post: Post
        if kind in ("photo", "repeat"):
            fx.add_post(pid, text=text, photos=[self._photo(pid, 0)])
            post = Post(pid, ("photo",))
        elif kind == "video":
            fx.add_post(pid, text=text, videos=[self._video(pid)])
            post = Post(pid, ("video",))
        elif kind == "gif":
            fx.add_post(pid, text=text, gifs=[self._video(pid, 16 * 1024)])
            post = Post(pid, ("gif",))
        elif kind == "slow12":
            photos = [
                self.s.media.add(
                    f"/media/{pid}-{i}.jpg", tiny_jpeg(64 + i, 48), "image/jpeg",
                    delay=SLOW_PHOTO_DELAY,
                )
                for i in range(12)
            ]  # fmt: skip
            fx.add_post(pid, text=text, photos=photos)
            post = Post(pid, ("photo",) * 12)
        elif kind in ("album3", "album12"):
            n = 3 if kind == "album3" else 12
            fx.add_post(pid, text=text, photos=[self._photo(pid, i) for i in range(n)])
            photo: MediaKind = "photo"
            post = Post(pid, (photo,) * n)
        elif kind in ("private", "deleted"):
            fx.add_post(pid, private=kind == "private", deleted=kind == "deleted")
            return Post(pid, ())
        elif kind == "textonly":
            fx.add_post(pid, text=text)
            return Post(pid, ())
        elif kind.startswith("fx_"):
            mode = kind[3:]
            # One misbehaviour, then the post is served: the source being down (garbage,
            # HTML, 503, a hang) heals on the retry; junk (too big) is answered at once.
            fx.add_post(pid, text=text, photos=[self._photo(pid, 0)], fault=mode, fault_count=1)
            return Post(pid, () if kind == "fx_huge" else ("photo",))
        elif kind.startswith("m_"):
            size = 192 * 1024
            route: dict[str, Any] = {
                "m_reset": {"reset_after": 40 * 1024},
                "m_stall": {"stall_after": 40 * 1024},
                # Announces 100 KiB and sends 192: h11 stops at the announced length.
                "m_lie": {"lie_length": 100 * 1024},
            }[kind]
            url = self._video(pid, size, **route)
            if kind != "m_lie":
                self.healing[f"/media/{pid}.mp4"] = fake_mp4(size)
            fx.add_post(pid, text=text, videos=[url])
            return Post(pid, ("video",))
        else:
            raise ValueError(kind)
        if kind != "repeat":
            self.plain.append(post)
        return post

    def heal(self) -> int:
        """Serve well the faulty media files that were hit once (the retry then works)."""
        healed = 0
        for path, data in list(self.healing.items()):
            if self.s.media.hits[path] >= 1:
                self.s.media.add(path, data, "video/mp4")
                del self.healing[path]
                healed += 1
        return healed


# --- the bot process ----------------------------------------------------------------------------


@attrs.frozen
class Exit:
    """A bot process that ended without being told to.

    Attributes:
        run: its run number (the log is ``run-NNN.log``).
        after: seconds it ran.
        last_line: the last line it wrote.
    """

    run: int
    code: int
    after: float
    last_line: str

    @property
    def at_startup(self) -> bool:
        """Refused to start, in one line (``xbot: ...``), rather than crashing mid-run."""
        return self.last_line.startswith("xbot: ")

    def __str__(self) -> str:
        return f"run {self.run} exit {self.code} after {self.after:.1f} s: {self.last_line}"


@attrs.define
class BotProcess:
    """`xbot run` as a subprocess; one log file per run."""

    env: dict[str, str]
    log_dir: Path
    api: BotApiServer
    runs: int = 0
    proc: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    unexpected_exits: list[Exit] = attrs.Factory(list)
    sigterm_exits: list[float] = attrs.Factory(list)
    sigterm_codes: list[int] = attrs.Factory(list)
    _log: Any = None
    _exited_at: float | None = None
    _webhooks_before: int = 0

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None and self.proc.poll() is None else None

    def start(self) -> None:
        self.runs += 1
        self._close_log()
        self._log = (self.log_dir / f"run-{self.runs:03d}.log").open("wb")
        self._webhooks_before = len(self.api.calls_for("deleteWebhook"))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "xbot.cli", "run"],
            env=self.env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self.started_at = time.monotonic()

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> bool:
        """Polling started: this run's deleteWebhook came (each start sends one before its
        first getUpdates). Not a held poll: a killed run's poll stays held until it times
        out, and a crash loop would then kill the next run before it even started."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(self.api.calls_for("deleteWebhook")) > self._webhooks_before:
                return True
            if self.proc is not None and self.proc.poll() is not None:
                return False
            time.sleep(0.01)
        return False

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def sigterm(self) -> float:
        """SIGTERM, wait for the exit (killing it at 30 s); returns the seconds it took."""
        assert self.proc is not None
        start = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        took = time.monotonic() - start
        self.sigterm_exits.append(took)
        self.sigterm_codes.append(code)
        return took

    def check_alive(self) -> None:
        """A bot that exited on its own is noted (with its last line) and started again
        `RESTART_SEC` later, as the systemd unit's Restart=on-failure would."""
        if self.proc is None or self.proc.poll() is None:
            return
        if self._exited_at is None:
            self._exited_at = time.monotonic()
            lines = (self.log_dir / f"run-{self.runs:03d}.log").read_text(errors="replace")
            lines_ = lines.strip().splitlines() or ["(no output)"]
            # `xbot run`'s own one-line refusal, if it gave one (asyncio may log after it).
            said = [line for line in lines_ if line.startswith("xbot: ")]
            last = (said or lines_)[-1][:200]
            self.unexpected_exits.append(
                Exit(self.runs, self.proc.returncode, time.monotonic() - self.started_at, last)
            )
        if time.monotonic() - self._exited_at >= RESTART_SEC:
            self._exited_at = None
            self.start()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._close_log()


# --- scenario helpers ---------------------------------------------------------------------------

LOCK_SCRIPT = """
import sys, time, apsw
conn = apsw.Connection(sys.argv[1])
conn.set_busy_timeout(30000)
conn.execute("BEGIN EXCLUSIVE")
conn.execute("CREATE TABLE IF NOT EXISTS soak_lock (x)")  # a real write: the lock is taken
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("ROLLBACK")
"""


def hold_write_lock(db: Path, seconds: float) -> subprocess.Popen[str]:
    """Another process takes the database's write lock for `seconds`; returns once it holds
    it (wait for the process to know it let go)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", LOCK_SCRIPT, str(db), str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    proc.stdout.readline()  # "locked"
    return proc


@contextlib.contextmanager
def write_lock_held(db: Path, seconds: float) -> Iterator[subprocess.Popen[str]]:
    """`hold_write_lock` for a block of sync code; leaving it waits for the release."""
    proc = hold_write_lock(db, seconds)
    assert proc.stdout is not None
    try:
        yield proc
    finally:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=seconds + 30)
        proc.stdout.close()


def mount_tmpfs(path: Path, size_mb: int) -> str | None:
    """A size-limited tmpfs at `path` (root only); returns why not, or None when mounted."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return "not root"
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m,mode=0700", "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    return None if result.returncode == 0 else (result.stderr.strip() or "mount failed")


def unmount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


def fill_disk(folder: Path) -> Path:
    """Write a filler file until the file system says ENOSPC; returns it (delete to free).

    Unbuffered writes: a buffered file would keep the bytes that did not fit and fail
    again on close.
    """
    filler = folder / "soak-filler"
    chunk = b"\0" * (1024 * 1024)
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        while len(chunk) >= 512:
            try:
                os.write(fd, chunk)
            except OSError:
                chunk = chunk[: len(chunk) // 2]
    finally:
        os.close(fd)
    return filler


def db_counts(db: Path) -> dict[str, int]:
    """Tasks by state, read as any operator would (a short read transaction)."""
    if not db.exists():
        return {}
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        conn.set_busy_timeout(2000)
        rows = conn.execute("SELECT state, count(*) FROM tasks GROUP BY state").fetchall()
        return {str(state): int(str(n)) for state, n in rows}
    except apsw.Error:
        return {"unreadable": 1}
    finally:
        conn.close()


def dead_letters(db: Path) -> list[str]:
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        conn.set_busy_timeout(2000)
        rows = conn.execute(
            "SELECT id, chat_id, last_error FROM tasks WHERE state = 'dead' ORDER BY id"
        ).fetchall()
        return [f"task {i} chat {c}: {e}" for i, c, e in rows]
    finally:
        conn.close()


def ambiguous_sends(db: Path) -> int:
    """Sends the bot counted as ambiguous (timed out: may have reached the chat)."""
    if not db.exists():
        return 0
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        conn.set_busy_timeout(2000)
        rows = conn.execute("SELECT coalesce(sum(ambiguous_sends), 0) FROM tasks").fetchall()
        return int(str(rows[0][0]))
    except apsw.SQLError:
        return 0  # a database from before migration 0006
    finally:
        conn.close()


def silent_dead_letters(db: Path, outs: list[LinkOutcome]) -> list[str]:
    """Dead tasks whose chat heard nothing about them: no media, no sentence (no notice)."""
    if not db.exists():
        return []
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        conn.set_busy_timeout(2000)
        rows = conn.execute(
            "SELECT id, chat_id, payload, last_error FROM tasks"
            " WHERE state = 'dead' AND kind <> 'notice' ORDER BY id"
        ).fetchall()
    finally:
        conn.close()
    by_key = {(o.link.chat, o.link.message_id): o for o in outs}
    silent = []
    for task_id, chat, payload, error in rows:
        try:
            reply_to = json.loads(str(payload)).get("reply_to")
        except (ValueError, AttributeError):
            reply_to = None
        o = by_key.get((int(str(chat)), reply_to))
        if o is None or (o.sentences == 0 and o.media_items < o.link.items):
            silent.append(f"task {task_id} chat {chat}: {error}")
    return silent


# --- the timeline -------------------------------------------------------------------------------


@attrs.frozen
class Event:
    at: float
    what: str
    arg: Any = None


def build_timeline(cfg: Config, rng: random.Random) -> list[Event]:
    """Every send, kill, SIGTERM and fault episode, at seconds from the start."""
    events: list[Event] = []
    span = cfg.send_seconds
    for i in range(cfg.links):
        events.append(Event(span * i / max(cfg.links, 1), "send", i))
    control: list[str] = []
    if cfg.has("kill9"):
        control += ["kill9"] * (cfg.kills - cfg.aimed_kills) + ["aim"] * cfg.aimed_kills
    if cfg.has("sigterm"):
        control += ["sigterm"] * cfg.sigterms
    rng.shuffle(control)
    # Spread over the send phase and a little after it (the backlog is still being worked),
    # with a gap so each restarted bot gets some work done before the next blow.
    window = span + min(15.0, span / 4)
    gap = window / (len(control) + 1) if control else 0.0
    for n, what in enumerate(control):
        jitter = rng.uniform(-0.3, 0.3) * gap
        events.append(Event(max(1.0, gap * (n + 1) + jitter), what))
    if cfg.has("storm"):
        events.append(Event(0.0, "storm", cfg.storm_probability))
        events.append(Event(span, "storm", 0.0))
    if cfg.has("botapi"):
        events.append(Event(0.0, "5xx", cfg.p5xx))
        events.append(Event(span, "5xx", 0.0))
        if not cfg.fast:
            for frac in (0.3, 0.7):
                events.append(Event(span * frac, "timeout", None))
    if cfg.has("dblock"):
        events.append(Event(span * rng.uniform(0.2, 0.4), "dblock", cfg.dblock_seconds))
    if cfg.has("diskfull"):
        events.append(Event(span * rng.uniform(0.55, 0.75), "diskfull", cfg.diskfull_seconds))
    if cfg.has("crashloop"):
        events.append(Event(span * rng.uniform(0.3, 0.5), "crashloop", cfg.crashloop_kills))
    if cfg.has("tgdown"):
        events.append(Event(span * 0.3, "tgdown", None))
    events.sort(key=lambda e: e.at)
    return events


# --- counting -----------------------------------------------------------------------------------


def _reply_to(params: dict[str, Any]) -> int | None:
    reply = params.get("reply_parameters")
    if isinstance(reply, dict) and isinstance(reply.get("message_id"), int):
        return int(reply["message_id"])
    return None


def _items(method: str, params: dict[str, Any]) -> int:
    media = params.get("media")
    return len(media) if method == "sendMediaGroup" and isinstance(media, list) else 1


@attrs.define
class LinkOutcome:
    link: SentLink
    media_calls: int = 0
    media_items: int = 0
    sentences: int = 0
    down_sentences: int = 0  # of them, the outage path's "X is not answering"
    notices: int = 0  # of them, dead-letter notices ("Sorry, I could not deliver")
    refused: bool = False  # told the database could not take it, and to send it again
    ok_at: list[float] = attrs.Factory(list)  # when each confirmed media send arrived

    @property
    def answered(self) -> bool:
        if self.refused:
            return True  # not delivered, but the sender knows: nothing lost in silence
        if self.link.expect == "media":
            return self.media_items >= self.link.items
        if self.link.expect == "sentence":
            return self.sentences >= 1 and self.media_items == 0
        if self.link.expect == "outage":
            return self.media_items >= self.link.items and self.sentences == self.down_sentences
        return self.media_items >= self.link.items or self.sentences >= 1

    @property
    def extra_sends(self) -> int:
        return max(0, self.media_calls - self.link.steps) if self.link.items else 0


def outcomes(api: BotApiServer, links: list[SentLink]) -> list[LinkOutcome]:
    by_key = {(link.chat, link.message_id): LinkOutcome(link) for link in links}
    for call in api.calls:
        if call.status != 200 or call.chat_id is None:
            continue
        reply_to = _reply_to(call.params)
        out = by_key.get((call.chat_id, reply_to)) if reply_to is not None else None
        if out is None:
            continue
        if call.method in MEDIA_METHODS:
            out.media_calls += 1
            out.media_items += _items(call.method, call.params)
            out.ok_at.append(call.at)
        elif call.method == "sendMessage":
            out.sentences += 1
            text = str(call.params.get("text", ""))
            if STORE_REFUSAL in text:
                out.refused = True
            if SOURCE_DOWN in text:
                out.down_sentences += 1
            if NOTICE in text:
                out.notices += 1
    return list(by_key.values())


TRACEBACK = "Traceback (most recent call last)"
# Tracebacks a library logs for an error the bot then handles: PTB logs the body of a
# non-JSON answer (a proxy's HTML 502) at ERROR with the JSON error attached, then
# raises NetworkError, which the bot retries. Counted on their own row, not hidden.
# The same for PTB's start-up calls (getMe, deleteWebhook): it logs the failed "bootstrap"
# with a traceback, then raises NetworkError, which `xbot run` turns into one line, exit 1.
HANDLED_BY_THE_BOT = (
    "telegram.request.BaseRequest Can not load invalid JSON data",
    "telegram.ext Network Retry Loop (Bootstrap",
)


@attrs.frozen
class Traceback:
    log: str
    logged_by: str  # the log line the traceback belongs to
    last_line: str

    @property
    def handled(self) -> bool:
        return any(k in self.logged_by for k in HANDLED_BY_THE_BOT)

    def __str__(self) -> str:
        return f"{self.log}: {self.last_line} (logged with: {self.logged_by[:120]})"


def tracebacks(log_dir: Path) -> list[Traceback]:
    """Each traceback in the bot's logs, with the log line it hangs from and its last line."""
    found: list[Traceback] = []
    for path in sorted(log_dir.glob("run-*.log")):
        lines = path.read_text(errors="replace").splitlines()
        header = ""
        for i, line in enumerate(lines):
            if line[:4].isdigit():  # a log record starts with its date
                header = line
            if TRACEBACK in line:
                tail = next(
                    (
                        lines[j]
                        for j in range(i + 1, len(lines))
                        if lines[j] and not lines[j].startswith((" ", "\t", TRACEBACK))
                    ),
                    "?",
                )
                found.append(Traceback(path.name, header, tail.strip()[:200]))
    return found


def log_lines(log_dir: Path, needle: str) -> list[str]:
    out = []
    for path in sorted(log_dir.glob("run-*.log")):
        out += [
            f"{path.name}: {line[:240]}"
            for line in path.read_text(errors="replace").splitlines()
            if needle in line
        ]
    return out


# --- the soak -----------------------------------------------------------------------------------


@attrs.define
class Soak:
    cfg: Config
    workdir: Path
    s: Standins
    rng: random.Random
    catalog: Catalog
    bot: BotProcess
    data_dir: Path
    links: list[SentLink] = attrs.Factory(list)
    chats: list[tuple[int, str]] = attrs.Factory(list)
    kills_random: int = 0
    kills_crashloop: int = 0
    kills_aimed: list[tuple[int, int | None]] = attrs.Factory(list)  # (chat, reply_to)
    timeout_windows: list[tuple[float, float]] = attrs.Factory(list)
    store_windows: list[tuple[float, float]] = attrs.Factory(list)  # lock held, disk full
    tg_windows: list[tuple[float, float]] = attrs.Factory(list)  # Telegram down: from, back
    blows: list[float] = attrs.Factory(list)  # moments a kill or a stop's cancel landed
    notes: list[str] = attrs.Factory(list)
    disk: str = "off"
    t0: float = 0.0
    _aim_armed: bool = False
    _lock: threading.Lock = attrs.Factory(threading.Lock)

    # -- setup --

    @classmethod
    def create(cls, cfg: Config, workdir: Path, standins: Standins) -> Soak:
        rng = random.Random(cfg.seed)
        data_dir = workdir / "data"
        disk = "off"
        if cfg.has("diskfull"):
            why = mount_tmpfs(data_dir, 64)
            disk = "tmpfs 64 MB" if why is None else f"skipped ({why})"
        data_dir.mkdir(parents=True, exist_ok=True)
        log_dir = workdir / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        api = standins.api
        env = {k: v for k, v in os.environ.items() if not k.startswith("XBOT_")}
        env.update(
            {
                "XBOT_TOKEN": api.token,
                "XBOT_BOT_API_URL": f"{api.url}/bot",
                "XBOT_BOT_API_FILE_URL": f"{api.url}/file/bot",
                "XBOT_X_API_URL": standins.fx.url,
                "XBOT_VX_API_URL": "",  # fxtwitter alone: its faults are the scenario
                "XBOT_X_SYNDICATION_URL": "",
                "XBOT_DATA_DIR": str(data_dir),
                "XBOT_ALLOW_PRIVATE_NETWORKS": "1",
                "XBOT_WORKERS": str(cfg.workers),
                "XBOT_LOG_LEVEL": cfg.log_level,
                "PYTHONUNBUFFERED": "1",
            }
        )
        env.pop("JOURNAL_STREAM", None)
        env.pop("NOTIFY_SOCKET", None)
        bot = BotProcess(env, log_dir, api)
        soak = cls(cfg, workdir, standins, rng, Catalog(standins, rng), bot, data_dir, disk=disk)
        soak._make_chats()
        api.on_media_sent = soak._on_media_sent
        return soak

    def _make_chats(self) -> None:
        every = self.cfg.chats / self.cfg.groups if self.cfg.groups else 0
        group_slots = {int(every * g) for g in range(self.cfg.groups)} if every else set()
        for n in range(self.cfg.chats):
            if n in group_slots:
                chat_id = -1_001_000_000_000 - n
                self.s.api.add_chat(chat_id, "supergroup", f"Soak group {n}")
                self.chats.append((chat_id, "supergroup"))
            else:
                self.chats.append((5_000_000 + n, "private"))

    # -- aimed kills: right after Telegram confirmed an album, before the bot hears of it --

    def _on_media_sent(self, chat_id: int | None, params: dict[str, Any]) -> None:
        with self._lock:
            if not self._aim_armed:
                return
            self._aim_armed = False
        pid = self.bot.pid
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
            self.blows.append(time.monotonic())
            self.kills_aimed.append((chat_id or 0, _reply_to(params)))

    # -- the run --

    def send(self, index: int, kind_name: str | None = None) -> None:
        kinds = [
            k
            for k in KINDS
            if (not k.scenario or self.cfg.has(k.scenario))
            and not (k.slow and self.cfg.fast)
            and k.name not in self.cfg.without_kinds
            and (k.weight or k.name == kind_name)
        ]
        if kind_name is None:
            kind = self.rng.choices(kinds, weights=[k.weight for k in kinds])[0]
        else:
            (kind,) = [k for k in kinds if k.name == kind_name]
        chats = [c for c in self.chats if c[1] == "private"] if kind.private_only else self.chats
        chat, chat_type = chats[self.rng.randrange(len(chats))]
        post = self.catalog.post_for(kind.name)
        spelling = self.rng.choice(
            [
                "https://x.com/someone/status/{}",
                "https://twitter.com/someone/status/{}?s=20",
                "https://fxtwitter.com/someone/status/{}",
                "https://mobile.twitter.com/i/status/{}",
                "https://vxtwitter.com/someone/status/{}/photo/1",
            ]
        )
        user = chat if chat > 0 else 7_000_000 + self.rng.randrange(50)
        update = self.s.api.user_message(
            chat, f"look {spelling.format(post.post_id)}", user_id=user, chat_type=chat_type
        )
        message = update.get("message") or update.get("channel_post") or {}
        self.links.append(
            SentLink(
                index=index,
                kind=kind.name,
                expect=kind.expect,
                post_id=post.post_id,
                chat=chat,
                message_id=int(message["message_id"]),
                items=len(post.kinds),
                steps=_steps(post.kinds),
                sent_at=time.monotonic(),
            )
        )

    def restart(self) -> None:
        self.bot.start()
        if not self.bot.wait_ready():
            self.notes.append(f"run {self.bot.runs}: not polling within {READY_TIMEOUT:.0f} s")

    def _settle_before_blow(self) -> None:
        """Before a kill or a stop: the bot is up and has run `MIN_UP` seconds, so a late
        timeline does not fire its blows back to back at a bot still starting."""
        deadline = time.monotonic() + READY_TIMEOUT + RESTART_SEC
        while time.monotonic() < deadline:
            self._tick()
            up = self.bot.pid is not None and time.monotonic() - self.bot.started_at >= MIN_UP
            if up:
                return
            time.sleep(0.01)

    def do(self, event: Event) -> None:
        api = self.s.api
        if event.what in ("kill9", "aim", "sigterm"):
            self._settle_before_blow()
        if event.what == "send":
            self.send(int(event.arg))
        elif event.what == "kill9":
            self.blows.append(time.monotonic())
            self.bot.kill9()
            self.kills_random += 1
            self.restart()
        elif event.what == "aim":
            with self._lock:
                self._aim_armed = True
            # Wait (bounded) for the next album to be confirmed; the hook kills.
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and self._aim_armed and self.bot.pid is not None:
                time.sleep(0.005)
            with self._lock:
                missed, self._aim_armed = self._aim_armed, False
            if missed:
                self.blows.append(time.monotonic())
                self.bot.kill9()
                self.kills_random += 1
            elif self.bot.proc is not None:
                self.bot.proc.wait()
            self.restart()
        elif event.what == "sigterm" and self.bot.pid is None:
            self.notes.append(f"SIGTERM at {event.at:.0f} s: skipped, the bot was down")
        elif event.what == "sigterm":
            now = time.monotonic()
            self.blows += [now, now + STOP_GRACE]  # tasks still running are cancelled then
            took = self.bot.sigterm()
            self.notes.append(f"SIGTERM at {event.at:.0f} s: exited in {took:.2f} s")
            self.restart()
        elif event.what == "crashloop":
            self._crashloop(int(event.arg))
        elif event.what == "storm":
            api.set_rate_limit_storm(float(event.arg), retry_after_range=(1, 3))
        elif event.what == "5xx":
            api.set_5xx(float(event.arg))
        elif event.what == "timeout":
            # Requests arriving in this short window get their answer only after the
            # bot's read timeout: Telegram may act on a request whose answer never came.
            start = time.monotonic()
            api.set_latency(BOT_READ_TIMEOUT + 5)
            time.sleep(0.4)
            api.set_latency(0)
            self.timeout_windows.append((start, time.monotonic()))
        elif event.what == "dblock":
            threading.Thread(target=self._dblock, args=(float(event.arg),), daemon=True).start()
        elif event.what == "tgdown":
            threading.Thread(target=self._tgdown, daemon=True).start()
        elif event.what == "diskfull" and self.disk.startswith("tmpfs"):
            threading.Thread(target=self._diskfull, args=(float(event.arg),), daemon=True).start()

    def _crashloop(self, kills: int) -> None:
        """Slow posts, then ``kills`` SIGKILLs about `crashloop_gap` s apart, each soon
        after the restart: faster than the slowest task runs."""
        self._settle_before_blow()
        for _ in range(self.cfg.crashloop_slow_links):
            self.send(len(self.links), "slow12")
        for _ in range(kills):
            pause_until = time.monotonic() + self.rng.uniform(0.6, 1.4) * self.cfg.crashloop_gap
            while time.monotonic() < pause_until:
                self._tick()
                time.sleep(0.01)
            self.blows.append(time.monotonic())
            self.bot.kill9()
            self.kills_crashloop += 1
            self.restart()

    def _tgdown(self) -> None:
        """Sends fail with nginx's 502 page (getUpdates works), then every method fails."""
        api, cfg = self.s.api, self.cfg
        sends = 10.0 if cfg.fast else cfg.tgdown_sends_seconds
        every = 5.0 if cfg.fast else cfg.tgdown_all_seconds
        start = time.monotonic()
        api.set_outage("502")
        time.sleep(sends)
        api.set_outage("502", methods="all")
        time.sleep(every)
        api.set_outage(None)
        back = time.monotonic()
        self.tg_windows.append((start, back))
        self.notes.append(f"Telegram down {sends:.0f} s for sends, then {every:.0f} s for all")

    def _drain_after_outage(self, outs: list[LinkOutcome]) -> tuple[float | None, float | None]:
        """Seconds from Telegram's recovery to the first confirmed media send, and to the
        last one of the links that arrived before it came back (None: no outage)."""
        if not self.tg_windows:
            return None, None
        start, back = self.tg_windows[-1]
        after = [t for o in outs for t in o.ok_at if t >= back]
        waiting = [o for o in outs if o.link.sent_at < back and o.ok_at]
        last = [max(o.ok_at) for o in waiting if max(o.ok_at) >= start]
        first = min(after) - back if after else None
        return first, (max(last) - back if last else None)

    def _dblock(self, seconds: float) -> None:
        db = self.data_dir / "xbot.sqlite3"
        start = time.monotonic()
        with write_lock_held(db, seconds):
            self.notes.append(f"another process held the write lock for {seconds:.0f} s")
        self.store_windows.append((start, time.monotonic()))

    def _diskfull(self, seconds: float) -> None:
        start = time.monotonic()
        filler = fill_disk(self.data_dir)
        self.notes.append(f"data dir full for {seconds:.0f} s")
        time.sleep(seconds)
        filler.unlink()
        self.store_windows.append((start, time.monotonic()))

    def settled(self) -> bool:
        if not all(o.answered for o in outcomes(self.s.api, self.links)):
            return False
        counts = db_counts(self.data_dir / "xbot.sqlite3")
        return counts.get("pending", 0) + counts.get("running", 0) == 0

    def run(self) -> Report:
        start = self.t0 = time.monotonic()
        hard_stop = start + self.cfg.deadline
        self.restart()
        timeline = build_timeline(self.cfg, self.rng)
        # A blow that comes late (the crash loop, a start waiting out a full disk, a
        # refused start's 5 s pause ran over its time) shifts the rest of the timeline
        # by its lateness. Left on schedule, the blows due meanwhile would fire back to
        # back, MIN_UP apart: a second crash loop of a dozen kills that no scenario
        # asked for, longer than the lost-lease budget (10 deaths of a link without
        # progress), which then rightly buries a slow post as poison.
        lag = 0.0
        for event in timeline:
            while time.monotonic() - start < event.at + lag:
                self._tick()
                time.sleep(0.01)
            if time.monotonic() > hard_stop:
                self.notes.append("deadline reached during the timeline")
                break
            late = time.monotonic() - start - (event.at + lag)
            if event.what in BLOWS and late > LATE_SLACK:
                lag += late
            self.do(event)
            self._tick()
        if lag:
            self.notes.append(f"timeline shifted {lag:.0f} s by late blows (kept their spacing)")
        # Drain: wait until every link is answered and the queue is empty, then a quiet
        # spell in which a late duplicate would still show.
        drained_at = None
        progress, progress_at = -1, time.monotonic()
        while time.monotonic() < hard_stop:
            self._tick()
            if self.settled():
                drained_at = time.monotonic()
                break
            # Stalled: nothing queued and nothing new answered for a while, so what is
            # still unanswered never will be (it is counted lost, not waited for).
            answered = sum(o.answered for o in outcomes(self.s.api, self.links))
            if answered != progress:
                progress, progress_at = answered, time.monotonic()
            counts = db_counts(self.data_dir / "xbot.sqlite3")
            idle = counts.get("pending", 0) + counts.get("running", 0) == 0
            if idle and time.monotonic() - progress_at > STALL_AFTER:
                self.notes.append(f"stalled: queue empty, no answer for {STALL_AFTER:.0f} s")
                break
            time.sleep(0.2)
        if drained_at is not None:
            quiet_until = time.monotonic() + 3.0
            while time.monotonic() < quiet_until:
                self._tick()
                time.sleep(0.1)
        elif time.monotonic() >= hard_stop:
            self.notes.append(f"not settled within the {self.cfg.deadline:.0f} s deadline")
        final = self.bot.sigterm() if self.bot.pid is not None else None
        wall = time.monotonic() - start
        return self.report(wall, drained_at is not None, final)

    def _tick(self) -> None:
        self.catalog.heal()
        self.bot.check_alive()

    # -- the figures --

    def report(self, wall: float, settled: bool, final_exit: float | None) -> Report:
        outs = outcomes(self.s.api, self.links)
        lost = [o for o in outs if not o.answered]
        causes: Counter[str] = Counter()
        unexplained: list[LinkOutcome] = []
        for o in outs:
            if not o.extra_sends:
                continue
            cause = self._cause_of_resend(o)
            if cause is None:
                unexplained.append(o)
            else:
                causes[cause] += o.extra_sends
        calls = self.s.api.calls
        statuses = Counter(c.status for c in calls)
        db = self.data_dir / "xbot.sqlite3"
        drain_first, drain_last = self._drain_after_outage(outs)
        return Report(
            cfg=self.cfg,
            wall=wall,
            settled=settled,
            links=len(self.links),
            chats=len({link.chat for link in self.links}),
            delivered=sum(1 for o in outs if o.answered and o.media_items and not o.refused),
            sentences=sum(1 for o in outs if o.answered and not o.media_items and not o.refused),
            refused=sum(1 for o in outs if o.refused),
            lost=[self._why_lost(o) for o in lost],
            resent_unexplained=[self._explain(o) for o in unexplained],
            resent_kill=causes["kill"],
            resent_store=causes["store"],
            resent_timeout=causes["timeout"],
            sentences_repeated=sum(max(0, o.sentences - 1) for o in outs),
            outage_links=sum(1 for o in outs if o.link.expect == "outage"),
            told_down=sum(1 for o in outs if o.down_sentences),
            early=[self._describe(e) for e in self.s.api.early_requests if not self._unseen(e)],
            early_unseen=[self._describe(e) for e in self.s.api.early_requests if self._unseen(e)],
            tracebacks=tracebacks(self.bot.log_dir),
            errors=log_lines(self.bot.log_dir, " ERROR "),
            kills_random=self.kills_random,
            kills_crashloop=self.kills_crashloop,
            silent_dead=silent_dead_letters(db, outs),
            kills_aimed=len(self.kills_aimed),
            sigterm_exits=list(self.bot.sigterm_exits),
            sigterm_codes=list(self.bot.sigterm_codes),
            final_exit=final_exit,
            runs=self.bot.runs,
            unexpected_exits=list(self.bot.unexpected_exits),
            answered_429=statuses.get(429, 0),
            answered_5xx=sum(n for s, n in statuses.items() if s >= 500),
            timeouts=len(self.timeout_windows),
            media_faults=sum(1 for link in self.links if link.kind.startswith("m_")),
            fx_faults=sum(1 for link in self.links if link.kind.startswith("fx_")),
            db_counts=db_counts(db),
            dead=dead_letters(db) if db.exists() else [],
            disk=self.disk,
            notes=list(self.notes),
            log_dir=self.bot.log_dir,
            tg_down=[b - a for a, b in self.tg_windows],
            drain_first=drain_first,
            drain_last=drain_last,
            notices=sum(o.notices for o in outs if o.link.expect == "media"),
            ambiguous_sends=ambiguous_sends(db),
        )

    @staticmethod
    def _describe(e: Any) -> str:
        return f"{e.method} chat {e.chat_id}: {e.not_before - e.at:.2f} s early"

    def _unseen(self, early: Any) -> bool:
        """The "not before" came from a 429 the bot never read: the stand-in answered a
        request after it had timed out (a timeout window), or just before the process
        was killed, so only the referee knew."""
        for call in self.s.api.calls:
            if call.status != 429 or call.chat_id != early.chat_id or call.at > early.at:
                continue
            if any(a - 0.1 <= call.at <= b + 0.1 for a, b in self.timeout_windows):
                return True
            if any(-IN_FLIGHT <= blow - call.at <= RECORD_WINDOW for blow in self.blows):
                return True  # answered to a process killed before it could read it
        return False

    def _why_lost(self, o: LinkOutcome) -> str:
        link = o.link
        needle = f"chat={link.chat} message={link.message_id} "
        handled = log_lines(self.bot.log_dir, needle)
        if link.expect == "outage" and o.sentences > o.down_sentences:
            why = "its source was down, yet it got a sentence other than the outage's"
        elif not handled:
            why = "never queued: no handler ran for its update (taken by a process that died?)"
        elif any("queued=1" in line for line in handled):
            why = "queued, never answered"
        else:
            why = "seen by the handler, not queued: " + handled[-1].split(" ", 1)[-1][:120]
        return f"{link.kind} post {link.post_id} chat {link.chat} message {link.message_id}: {why}"

    def _explain(self, o: LinkOutcome) -> str:
        """A resend nothing explains, with the times needed to chase it in the logs."""
        sends = ", ".join(f"{t - self.t0:.2f}" for t in sorted(o.ok_at))
        blows = ", ".join(f"{t - self.t0:.2f}" for t in sorted(self.blows))
        return (
            f"{o.link.kind} post {o.link.post_id} chat {o.link.chat} message "
            f"{o.link.message_id}: {o.media_calls} sends for {o.link.steps} at {sends} s "
            f"(kills and stops at {blows} s)"
        )

    def _cause_of_resend(self, o: LinkOutcome) -> str | None:
        """Why a link's media went out more than once, from what happened right after an
        earlier confirmed send; None when nothing explains it (a bug)."""
        for at in sorted(o.ok_at)[:-1]:
            # A request the stand-in took in just after the kill was already on its way.
            if any(-IN_FLIGHT <= blow - at <= RECORD_WINDOW for blow in self.blows):
                return "kill"
            if any(a - 0.1 <= at <= b + 0.1 for a, b in self.timeout_windows):
                return "timeout"
            if any(a <= at <= b + RECORD_WINDOW for a, b in self.store_windows):
                return "store"
        return None


@attrs.frozen
class Report:
    cfg: Config
    wall: float
    settled: bool
    links: int
    chats: int
    delivered: int
    sentences: int
    refused: int
    lost: list[str]
    resent_unexplained: list[str]
    resent_kill: int
    resent_store: int
    resent_timeout: int
    sentences_repeated: int
    outage_links: int
    told_down: int
    early: list[str]
    early_unseen: list[str]
    tracebacks: list[Traceback]
    errors: list[str]
    kills_random: int
    kills_crashloop: int
    silent_dead: list[str]
    kills_aimed: int
    sigterm_exits: list[float]
    sigterm_codes: list[int]
    final_exit: float | None
    runs: int
    unexpected_exits: list[Exit]
    answered_429: int
    answered_5xx: int
    timeouts: int
    media_faults: int
    fx_faults: int
    db_counts: dict[str, int]
    dead: list[str]
    disk: str
    notes: list[str]
    log_dir: Path
    tg_down: list[float] = attrs.Factory(list)
    drain_first: float | None = None
    drain_last: float | None = None
    notices: int = 0
    ambiguous_sends: int = 0

    @property
    def unhandled(self) -> list[Traceback]:
        return [t for t in self.tracebacks if not t.handled]

    @property
    def slowest_exit(self) -> float:
        return max(self.sigterm_exits, default=0.0)

    def misses(self) -> list[str]:
        """Every target missed, one line each; empty when the soak passed."""
        out = []
        if not self.settled:
            out.append("the bot did not settle before the deadline")
        if self.lost:
            out.append(f"{len(self.lost)} links lost")
        if self.resent_unexplained:
            out.append(f"{len(self.resent_unexplained)} links had albums resent without cause")
        if self.early:
            out.append(f"{len(self.early)} requests before a chat's retry_after")
        if self.unhandled:
            out.append(f"{len(self.unhandled)} unhandled tracebacks in the bot's log")
        if self.slowest_exit > SIGTERM_LIMIT:
            out.append(f"a SIGTERM exit took {self.slowest_exit:.1f} s")
        if any(code != 0 for code in self.sigterm_codes):
            out.append(f"exit statuses after SIGTERM: {self.sigterm_codes}")
        crashes = [e for e in self.unexpected_exits if not e.at_startup]
        if crashes:
            out.append(f"the bot crashed {len(crashes)} times")
        busy = self.db_counts.get("pending", 0) + self.db_counts.get("running", 0)
        if busy:
            out.append(f"{busy} tasks still queued at the end")
        if self.cfg.has("kill9") and self.kills_random + self.kills_aimed < self.cfg.kills:
            out.append(f"only {self.kills_random + self.kills_aimed} kills")
        if self.silent_dead:
            out.append(f"{len(self.silent_dead)} dead letters without a word to their chat")
        if self.cfg.has("crashloop") and self.kills_crashloop < self.cfg.crashloop_kills:
            out.append(f"only {self.kills_crashloop} crash-loop kills")
        if self.cfg.has("tgdown") and self.notices:
            out.append(f"{self.notices} links that should get their media got a notice")
        if self.cfg.has("tgdown") and self.drain_first is not None and self.drain_first > 60:
            out.append(f"the backlog started draining {self.drain_first:.0f} s after recovery")
        return out

    def table(self) -> str:
        cfg = self.cfg
        exits = ", ".join(f"{t:.2f}" for t in self.sigterm_exits)
        rows = [
            ("scenarios", " ".join(s for s in SCENARIOS if cfg.has(s)) + " (fast)" * cfg.fast,
             ""),
            ("links sent / chats", f"{self.links} / {self.chats}", ""),
            ("links answered with their media", str(self.delivered), ""),
            ("links answered with a sentence (designed to fail)", str(self.sentences), ""),
            ("links refused with a sentence: the database could not take them",
             str(self.refused), ""),
            ("**links lost**", str(len(self.lost)), "0"),
            ("**albums resent, no kill or timeout to explain it**",
             str(len(self.resent_unexplained)), "0"),
            ("albums resent: a kill or stop fell between Telegram's confirmation and the "
             "bot's record of it (at-least-once)", str(self.resent_kill),
             f"≤ {cfg.workers} per kill"),
            ("albums resent: the database refused the record (write lock, full disk)",
             str(self.resent_store), ""),
            ("albums resent: Telegram sent it but its answer came after the bot's timeout",
             str(self.resent_timeout), "≤ 1 per timed-out send"),
            ("links whose X source was down (garbage, HTML, 503, hang): media after the "
             "outage path", str(self.outage_links), ""),
            ("links told \"X is not answering\" before their media (any kind: a breaker "
             "was open)",
             str(self.told_down), ""),
            ("sentences repeated (a kill between saying and recording)",
             str(self.sentences_repeated), ""),
            ("**requests before a chat's retry_after**", str(len(self.early)), "0"),
            ("requests before a retry_after the bot never received (its request timed "
             "out, or the process was killed first)", str(len(self.early_unseen)), ""),
            ("**unhandled tracebacks in the bot's log**", str(len(self.unhandled)), "0"),
            ("tracebacks PTB logs for a non-JSON 5xx (then handled: retried, or one line "
             "and exit 1 at start-up)",
             str(len(self.tracebacks) - len(self.unhandled)), ""),
            ("ERROR lines in the bot's log", str(len(self.errors)), ""),
            ("kill -9 (random + aimed)", f"{self.kills_random} + {self.kills_aimed}",
             f"≥ {cfg.kills}" if cfg.has("kill9") else ""),
            ("SIGTERM exits (s)", exits or "-", f"≤ {SIGTERM_LIMIT:.0f}"),
            ("bot runs (restarts + 1)", str(self.runs), ""),
            ("**bot exits on its own: crashes / refusals to start**",
             f"{sum(not e.at_startup for e in self.unexpected_exits)} / "
             f"{sum(e.at_startup for e in self.unexpected_exits)}", "0 / -"),
            ("429s answered", str(self.answered_429), ""),
            ("5xx answered", str(self.answered_5xx), ""),
            ("Bot API timeout windows", str(self.timeouts), ""),
            ("links on a faulty media host / faulty X API", f"{self.media_faults} / "
             f"{self.fx_faults}", ""),
            ("write lock held by another process",
             f"{cfg.dblock_seconds:.0f} s" if cfg.has("dblock") else "off", "> 5 s busy timeout"),
            ("disk full", f"{self.disk}, {cfg.diskfull_seconds:.0f} s"
             if self.disk.startswith("tmpfs") else self.disk, ""),
            ("dead letters", str(len(self.dead)), ""),
            ("**silent dead letters (dead, and not a word to the chat)**",
             str(len(self.silent_dead)), "0"),
            ("crash-loop kills (about 2 s apart, slow 12-photo posts in flight)",
             str(self.kills_crashloop), f"{cfg.crashloop_kills}" if cfg.has("crashloop") else ""),
            ("Telegram outage: sends, then every method, down for (s)",
             " + ".join(f"{d:.0f}" for d in self.tg_down) or "off", ""),
            ("**Telegram outage: from recovery to the first delivery (s)**",
             "-" if self.drain_first is None else f"{self.drain_first:.1f}", "≤ 60"),
            ("Telegram outage: from recovery to the backlog drained (s)",
             "-" if self.drain_last is None else f"{self.drain_last:.1f}", ""),
            ("**dead-letter notices to links that should get their media**",
             str(self.notices), "0"),
            ("sends that timed out and may have reached the chat (tasks.ambiguous_sends)",
             str(self.ambiguous_sends), ""),
            ("tasks by state at the end", " ".join(f"{k}={v}" for k, v in
                                                   sorted(self.db_counts.items())), ""),
            ("wall time (s)", f"{self.wall:.0f}", f"≤ {cfg.deadline:.0f}"),
        ]  # fmt: skip
        width = max(len(r[0]) for r in rows)
        lines = [f"| {'figure':<{width}} | value | target |", f"|{'-' * (width + 2)}|---|---|"]
        lines += [f"| {a:<{width}} | {b} | {c} |" for a, b, c in rows]
        return "\n".join(lines)

    def details(self) -> str:
        parts = []
        for title, items in (
            ("lost", self.lost),
            ("resent without cause", self.resent_unexplained),
            ("early requests", self.early),
            ("early after a 429 the bot never received", self.early_unseen),
            ("unhandled tracebacks", [str(t) for t in self.unhandled]),
            ("exits on its own", [str(e) for e in self.unexpected_exits]),
            ("ERROR lines", self.errors[:20]),
            ("dead letters", self.dead[:20]),
            ("silent dead letters", self.silent_dead),
            ("notes", self.notes),
        ):
            if items:
                parts.append(f"{title}:\n" + "\n".join(f"  {i}" for i in items))
        parts.append(f"logs: {self.log_dir}")
        return "\n".join(parts)


def run_soak(cfg: Config, workdir: Path) -> Report:
    workdir.mkdir(parents=True, exist_ok=True)
    with Standins() as standins:
        soak = Soak.create(cfg, workdir, standins)
        try:
            return soak.run()
        finally:
            soak.bot.close()
            if soak.disk.startswith("tmpfs"):
                unmount(soak.data_dir)


def parse_args(argv: list[str] | None = None) -> tuple[Config, Path]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--only", help=f"comma-separated scenarios (default all: {','.join(SCENARIOS)})")
    p.add_argument("--without", help="comma-separated scenarios to leave out")
    p.add_argument("--small", action="store_true", help="a small soak (as in the test suite)")
    p.add_argument("--fast", action="store_true", help="leave out the 15-35 s faults")
    p.add_argument("--links", type=int)
    p.add_argument("--chats", type=int)
    p.add_argument("--groups", type=int, help="how many of the chats are groups")
    p.add_argument("--kills", type=int)
    p.add_argument("--aimed-kills", type=int)
    p.add_argument("--sigterms", type=int)
    p.add_argument("--send-seconds", type=float)
    p.add_argument("--deadline", type=float, help="seconds the whole soak may take")
    p.add_argument(
        "--without-kinds",
        help="comma-separated link kinds not to send (" + ",".join(k.name for k in KINDS) + ")",
    )
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--workdir", type=Path, help="where data and logs go (default: a new temp dir)")
    args = p.parse_args(argv)
    scenarios = set(SCENARIOS)
    if args.only:
        scenarios = {s.strip() for s in args.only.split(",") if s.strip()}
    if args.without:
        scenarios -= {s.strip() for s in args.without.split(",")}
    unknown = scenarios - set(SCENARIOS)
    if unknown:
        p.error(f"unknown scenarios: {', '.join(sorted(unknown))}")
    values: dict[str, Any] = dict(SMALL) if args.small else {}
    for name in (
        "links",
        "chats",
        "groups",
        "kills",
        "aimed_kills",
        "sigterms",
        "send_seconds",
        "deadline",
    ):
        if getattr(args, name) is not None:
            values[name] = getattr(args, name)
    without = frozenset(k.strip() for k in (args.without_kinds or "").split(",") if k.strip())
    unknown_kinds = without - {k.name for k in KINDS}
    if unknown_kinds:
        p.error(f"unknown link kinds: {', '.join(sorted(unknown_kinds))}")
    cfg = Config(
        scenarios=frozenset(scenarios),
        seed=args.seed,
        fast=args.fast,
        without_kinds=without,
        **values,
    )
    if cfg.aimed_kills > cfg.kills:
        cfg = attrs.evolve(cfg, aimed_kills=cfg.kills)
    workdir = args.workdir or Path(
        __import__("tempfile").mkdtemp(prefix="xbot-soak-", dir=os.environ.get("TMPDIR"))
    )
    return cfg, workdir


def _interrupt(signum: int, frame: object) -> None:
    # SIGTERM (from `timeout`, CI) unwinds like Ctrl-C: the bot is killed, tmpfs unmounted.
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    cfg, workdir = parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)
    print(f"soak: {cfg.links} links, {cfg.chats} chats, seed {cfg.seed}, workdir {workdir}")
    report = run_soak(cfg, workdir)
    print(report.table())
    print(report.details())
    misses = report.misses()
    for miss in misses:
        print(f"MISSED: {miss}")
    print("soak: PASS" if not misses else "soak: FAIL")
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
