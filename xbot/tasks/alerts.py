"""Alerts to the bot's admins (`XBOT_ADMIN_IDS`), in their language, through the queue.

`AlertWatch` looks at the bot every few seconds — the X sources' breakers,
Telegram's reachability, the dead letters of the last minutes, the disk the
database is on, yt-dlp's age, the canary's verdicts — and hands each
condition to the pure rules of `xbot.tasks.alert_rules`, which say when to
raise it (once per quiet period) and when to clear it (once). What they say
is worded at once in each admin's language, with the numbers (from–to, the
links it delayed and lost), and queued as an ``alert`` task in the admin's
private chat: the same queue, sender, holds and retries as every other
message, so an alert survives a restart and waits out a 429 like the rest.

Each alert carries a button that mutes its condition for that admin
(`Action.MUTE`, handled in `xbot.handlers.callbacks`); the mute is a chat
setting of the admin's private chat (`ChatSettings.muted_alerts`).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime

import attrs
from telegram import InlineKeyboardButton, InlineKeyboardMarkup

from xbot.i18n import N_, translator
from xbot.logs import kv
from xbot.periodic import Periodic
from xbot.sending.destination import Destination
from xbot.sending.sender import Sender
from xbot.storage.queue import Task, TaskQueue
from xbot.storage.state import ChatStore
from xbot.tasks.alert_rules import RULES, Condition, Phase, Watch, step
from xbot.tasks.callback_data import Action, CallbackData, encode
from xbot.tasks.payloads import ALERT, AlertPayload
from xbot.tasks.vitals import Vitals
from xbot.tasks.worker import TaskContext
from xbot.versions import YTDLP_MAX_AGE_DAYS, staleness, update_command

log = logging.getLogger(__name__)

KIND = ALERT
DEAD_OUTCOMES = frozenset({"dead", "chat_unavailable"})
# Dead letters: this many within the window is more than the odd deleted post.
DEAD_RATE = 5
DEAD_WINDOW = 900.0
# The disk: under this share free, or under this many bytes, it is nearly full.
DISK_FREE_SHARE = 0.05
DISK_FREE_BYTES = 200 * 1024 * 1024

MUTE = N_("Mute these alerts")
UNMUTE = N_("Unmute these alerts")
MUTED = N_("Muted: you will not get these alerts any more.")
UNMUTED = N_("Unmuted: you will get these alerts again.")

# What each condition says when raised and when cleared: {placeholders} are the facts.
WORDS: dict[tuple[Condition, Phase], str] = {
    (Condition.X_DOWN, Phase.RAISED): N_(
        "No X source has answered since {start} UTC ({minutes} min). X links wait and go "
        "out when a source is back; {delayed} are waiting so far."
    ),
    (Condition.X_DOWN, Phase.CLEARED): N_(
        "X is answering again. No source answered {start}–{end} UTC; "
        "{delayed} links delayed, {lost} lost."
    ),
    (Condition.TELEGRAM, Phase.CLEARED): N_(
        "Telegram's Bot API was not answering {start}–{end} UTC ({minutes} min); "
        "{waiting} tasks were waiting in the queue when it came back."
    ),
    (Condition.DEAD, Phase.RAISED): N_(
        "{count} tasks failed for good in the last {minutes} minutes; /dead lists them."
    ),
    (Condition.DEAD, Phase.CLEARED): N_(
        "Dead letters are back to normal: {count} in the last {minutes} minutes."
    ),
    (Condition.DISK, Phase.RAISED): N_(
        "The database's disk is nearly full: {free} MB free of {total} MB ({percent}%). "
        "When it is full, new links wait until there is room."
    ),
    (Condition.DISK, Phase.CLEARED): N_("The database's disk has room again: {free} MB free."),
    (Condition.YTDLP, Phase.RAISED): N_(
        "yt-dlp {version} is {days} days old (over {limit}): links to other sites may "
        "break. Update it with {command} and restart xbot."
    ),
    (Condition.YTDLP, Phase.CLEARED): N_("yt-dlp is recent again ({version})."),
    (Condition.BROKEN, Phase.RAISED): N_(
        "The canary finds {sources} answering in a shape xbot does not know: links it "
        "serves may fail until xbot is updated."
    ),
    (Condition.BROKEN, Phase.CLEARED): N_("{sources} answers in the shape xbot knows again."),
}


def _hhmm(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%H:%M")


def muted(setting: str | None) -> frozenset[str]:
    """The conditions a `ChatSettings.muted_alerts` value names."""
    return frozenset(p for p in (setting or "").split(",") if p)


def mute_markup(condition: str, lang: str, *, is_muted: bool = False) -> InlineKeyboardMarkup:
    """The button under an alert: mute its condition (or, once muted, unmute it)."""
    _ = translator(lang).gettext
    data = encode(CallbackData(Action.MUTE, (condition, 0 if is_muted else 1)))
    label = _(UNMUTE) if is_muted else _(MUTE)
    return InlineKeyboardMarkup([[InlineKeyboardButton(label, callback_data=data)]])


@attrs.define
class Alerts:
    """Sends queued alerts (the ``alert`` task kind) with their mute button."""

    sender: Sender

    async def run(self, ctx: TaskContext) -> None:
        payload = AlertPayload.from_task(ctx.task)
        dest = Destination(ctx.task.chat_id, "private", lang=payload.lang)
        await self.sender.send_text(
            dest, payload.text, html=False, reply_markup=mute_markup(payload.condition, dest.lang)
        )


@attrs.define
class _Stretch:
    """What happened while X was down: the links that waited, and those given up."""

    delayed: set[int] = attrs.field(factory=set)
    lost: set[int] = attrs.field(factory=set)


@attrs.define
class AlertWatch:
    """Watches the bot's conditions and queues the alerts the rules call for.

    Attributes:
        admins: who is told (`XBOT_ADMIN_IDS`).
        after: seconds a lasting condition must last (`XBOT_ALERT_AFTER_S`).
        vitals: what is watched (the X sources, Telegram, the disk, yt-dlp, the canary).
        every: seconds between looks.
        wake: told after alerts were queued (the workers).
        on_alert: told (condition, phase) for each alert queued (the metrics).
        clock: wall-clock seconds (the times in the alerts).
    """

    admins: frozenset[int]
    after: float
    queue: TaskQueue
    chats: ChatStore
    vitals: Vitals
    every: float = 10.0
    wake: Callable[[], None] = lambda: None
    on_alert: Callable[[str, str], None] | None = None
    clock: Callable[[], float] = time.time
    watches: dict[Condition, Watch] = attrs.field(factory=dict, init=False)
    checks: int = attrs.field(default=0, init=False)  # looks taken (tests wait on it)
    _x: _Stretch = attrs.field(factory=_Stretch, init=False)
    _dead: collections.deque[float] = attrs.field(
        factory=lambda: collections.deque(maxlen=10_000), init=False
    )
    _telegram_down: float | None = attrs.field(default=None, init=False)

    # -- what the worker says ----------------------------------------------------------

    def on_finished(self, task: Task, outcome: str) -> None:
        """The worker's ending hook: which links waited for X, and which were given up."""
        if outcome == "outage_retry":
            self._x.delayed.add(task.id)
        elif outcome in DEAD_OUTCOMES:
            self._dead.append(self.clock())
            if task.id in self._x.delayed:
                self._x.lost.add(task.id)

    # -- the loop ----------------------------------------------------------------------

    def periodic(self) -> Periodic:
        """A look every `every` seconds (the first after one wait); one that fails is
        logged and the next one comes all the same."""
        return Periodic("alert check", self.check, self.every, logger=log)

    async def check(self) -> int:
        """Look once; queue what the rules say. Returns how many alerts were queued."""
        now = self.clock()
        queued = 0
        for condition, (bad, read) in (await self._read(now)).items():
            rule = RULES[condition]
            after = self.after if rule.after is None else rule.after
            before = self.watches.get(condition, Watch())
            watch, phase = step(before, bad, now, after=after, quiet=rule.quiet)
            self.watches[condition] = watch
            if condition is Condition.X_DOWN and watch.bad_since is None and not before.raised:
                self._x = _Stretch()  # fine, nothing owed: count the next stretch afresh
            if phase is None or (phase is Phase.RAISED and not rule.tell_raise):
                continue
            # A stretch's own start when its owner knows it (Telegram's down_since).
            since = read.pop("since", None)
            start = before.bad_since if phase is Phase.CLEARED else watch.bad_since
            if isinstance(since, float):
                start = since
            facts = {
                "start": _hhmm(start if start is not None else now),
                "end": _hhmm(now),
                "minutes": round((now - (start if start is not None else now)) / 60),
                **read,
            }
            queued += await self._tell(condition, phase, facts, now)
            if condition is Condition.X_DOWN and phase is Phase.CLEARED:
                self._x = _Stretch()
        self.checks += 1
        if queued:
            self.wake()
        return queued

    async def _read(self, now: float) -> dict[Condition, tuple[bool, dict[str, object]]]:
        """Each condition: is it bad now, and the numbers its sentence needs."""
        out: dict[Condition, tuple[bool, dict[str, object]]] = {}
        vitals = self.vitals
        healths = vitals.sources().values()
        x_down = bool(healths) and all(h.state.is_open for h in healths)
        out[Condition.X_DOWN] = (
            x_down,
            {"delayed": len(self._x.delayed), "lost": len(self._x.lost)},
        )
        # Telegram: the stretch is Telegram's own (down_since), said once it is back.
        reachable = vitals.telegram.reachable
        if not reachable and self._telegram_down is None:
            self._telegram_down = vitals.telegram.down_since or now
        waiting = 0
        if reachable and self.watches.get(Condition.TELEGRAM, Watch()).raised:
            waiting = (await self.queue.stats(now)).counts_by_state.get("pending", 0)
        out[Condition.TELEGRAM] = (
            not reachable,
            {"waiting": waiting, "since": self._telegram_down},
        )
        if reachable:
            self._telegram_down = None
        while self._dead and now - self._dead[0] > DEAD_WINDOW:
            self._dead.popleft()
        out[Condition.DEAD] = (
            len(self._dead) >= DEAD_RATE,
            {"count": len(self._dead), "minutes": round(DEAD_WINDOW / 60)},
        )
        total, _used, free = await asyncio.to_thread(vitals.disk)
        mb = 1024 * 1024
        out[Condition.DISK] = (
            free < DISK_FREE_BYTES or free < DISK_FREE_SHARE * total,
            {
                "free": free // mb,
                "total": total // mb,
                "percent": round(100 * free / total) if total else 0,
            },
        )
        old, _ = staleness(vitals.ytdlp_version, vitals.today())
        days = vitals.ytdlp_age_days()
        out[Condition.YTDLP] = (
            old,
            {
                "version": vitals.ytdlp_version,
                "days": "?" if days is None else days,
                "limit": YTDLP_MAX_AGE_DAYS,
                "command": update_command(),
            },
        )
        broken = sorted(name for name, is_broken in vitals.broken().items() if is_broken)
        out[Condition.BROKEN] = (bool(broken), {"sources": ", ".join(broken)})
        return out

    async def _tell(
        self, condition: Condition, phase: Phase, facts: Mapping[str, object], now: float
    ) -> int:
        """One alert task per admin who has not muted `condition`."""
        template = WORDS.get((condition, phase))
        if template is None:
            return 0
        told = 0
        for admin in sorted(self.admins):
            settings = (await self.chats.get(admin, now)).settings
            if condition.value in muted(settings.muted_alerts):
                continue
            lang = settings.operator_language or "en"
            text = translator(lang).gettext(template).format(**facts)
            payload = AlertPayload(text, condition.value, lang)
            await self.queue.enqueue(
                KIND, payload.to_json(), admin, now=now,
                dedup_key=f"alert:{condition.value}:{phase.value}:{now:.3f}:{admin}",
            )  # fmt: skip
            told += 1
        if self.on_alert is not None:
            self.on_alert(condition.value, phase.value)
        log.warning(
            "alert %s", kv(condition=condition.value, phase=phase.value, admins=told, **facts)
        )
        return told
