"""Progress people can see: one status message for a long download, edited now and then.

A download that takes more than `FIRST_AFTER` seconds gets one status
message in reply to the user ("Downloading… 42% of 31 MB"), edited at most
every `EVERY` seconds and only when its text changed (Telegram refuses an
edit that changes nothing, and limits edits like messages). When the media
is sent the status message is deleted; when the job fails it becomes the
error sentence. The chat action (``upload_video``) keeps going meanwhile
(`keep_chat_action`, the one chat-action loop: X deliveries use it too).

The decisions are pure (`Throttle`, `render`) over an injected clock, so
their tests do not wait; `StatusReporter` is the thin shell that talks to
Telegram. Everything it does is best effort: a failed status edit must
never fail the download it decorates.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from types import TracebackType
from typing import Literal

import attrs
from telegram import Message

from xbot.errors import RateLimited, XbotError
from xbot.i18n import DEFAULT, translator
from xbot.logs import kv
from xbot.sending.destination import Destination
from xbot.sending.sender import Sender

log = logging.getLogger(__name__)

FIRST_AFTER = 5.0  # a quick download needs no status message
EVERY = 4.0  # Telegram limits edits too; 3-5 s reads as live without flooding
CHAT_ACTION_EVERY = 4.0  # an action shows for ~5 s; refresh before it fades
DELETE_TIMEOUT = 1.0  # at shutdown the status message gets this long to go away

Phase = Literal["fetch", "download", "merge", "upload"]


@attrs.define
class ChatAction:
    """The chat action being refreshed; the work may switch it (photo → video)."""

    value: str


@contextlib.asynccontextmanager
async def keep_chat_action(
    sender: Sender, dest: Destination, initial: str, *, after: float = 0.0
) -> AsyncIterator[ChatAction]:
    """Keep Telegram's "sending a video…" status up while the block runs.

    The first one goes after ``after`` seconds (a quick answer needs none),
    then one every `CHAT_ACTION_EVERY` seconds, until the block ends.
    """
    action = ChatAction(initial)

    async def refresh() -> None:
        await asyncio.sleep(after)
        while True:
            await sender.chat_action(dest, action.value)
            await asyncio.sleep(CHAT_ACTION_EVERY)

    task = asyncio.create_task(refresh(), name=f"xbot-action-{dest.chat_id}")
    try:
        yield action
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@attrs.frozen
class Snapshot:
    """Where a job is.

    Attributes:
        phase: ``fetch`` (reading the page), ``download``, ``merge`` (ffmpeg joins
            picture and sound), ``upload`` (to Telegram).
        done: bytes downloaded so far.
        total: the expected size in bytes, None when the site does not say.
    """

    phase: Phase = "fetch"
    done: int = 0
    total: int | None = None


def human_size(size: int) -> str:
    """``812 KB``, ``31 MB``, ``1.4 GB``: two significant digits are plenty on a phone."""
    if size < 1024 * 1024:
        return f"{max(size, 0) // 1024} KB"
    mb = size / (1024 * 1024)
    if mb < 1000:
        return f"{mb:.1f} MB" if mb < 10 else f"{mb:.0f} MB"
    return f"{mb / 1024:.1f} GB"


def render(snapshot: Snapshot, lang: str = DEFAULT) -> str:
    """The status line for `snapshot`, in `lang` (`xbot.i18n`)."""
    _ = translator(lang).gettext
    if snapshot.phase == "fetch":
        return _("Looking at the link…")
    if snapshot.phase == "merge":
        return _("Merging picture and sound…")
    if snapshot.phase == "upload":
        if snapshot.done:
            return _("Uploading {size} to Telegram…").format(size=human_size(snapshot.done))
        return _("Uploading to Telegram…")
    if snapshot.total:
        percent = min(100, max(0, snapshot.done * 100 // snapshot.total))
        # Translators: a percentage; put the sign where your language does (%41, 41 %, 41٪).
        share = _("{n}%").format(n=percent)
        # (Not "{percent}% of": Babel would read "% o" as a printf conversion.)
        return _("Downloading… {percent} of {total}").format(
            percent=share, total=human_size(snapshot.total)
        )
    if snapshot.done:
        return _("Downloading… {done}").format(done=human_size(snapshot.done))
    return _("Downloading…")


@attrs.define
class Throttle:
    """When the status message may appear and be edited next. Pure over ``now``.

    Attributes:
        started: when the job started (the clock's seconds).
        first_after: the first post waits this long (quick jobs show nothing).
        every: at least this long between two posts or edits.
    """

    started: float
    first_after: float = FIRST_AFTER
    every: float = EVERY
    _last: float | None = attrs.field(default=None, init=False)

    def next_due(self) -> float:
        if self._last is None:
            return self.started + self.first_after
        return self._last + self.every

    def due(self, now: float) -> bool:
        return now >= self.next_due()

    def mark(self, now: float) -> None:
        """A post or an edit went out at `now`."""
        self._last = now


@attrs.define
class StatusReporter:
    """The chat action and the status message of one job.

    Use as ``async with StatusReporter(...) as status``; feed it with
    `update` (from the event loop; the yt-dlp thread hands updates over with
    ``loop.call_soon_threadsafe``), then end with `done` (delete the status
    message) or `fail` (turn it into the error sentence). Leaving the block
    without either (cancellation, a retry) deletes the status message.

    Attributes:
        sender: the bot's sender (sends through its pacer).
        dest: where the status goes (the answer's destination).
        first_after, every: the `Throttle`'s timings.
        clock: monotonic seconds (injected by tests).
    """

    sender: Sender
    dest: Destination
    first_after: float = FIRST_AFTER
    every: float = EVERY
    action: str = "upload_video"
    clock: Callable[[], float] = time.monotonic
    _snapshot: Snapshot = attrs.field(factory=Snapshot, init=False)
    _changed: asyncio.Event = attrs.field(factory=asyncio.Event, init=False)
    _throttle: Throttle | None = attrs.field(default=None, init=False)
    _message_id: int | None = attrs.field(default=None, init=False)
    _shown: str | None = attrs.field(default=None, init=False)
    _muted: bool = attrs.field(default=False, init=False)
    _loop: asyncio.Task[None] | None = attrs.field(default=None, init=False)
    _action: contextlib.AbstractAsyncContextManager[ChatAction] | None = attrs.field(
        default=None, init=False
    )
    _posting: asyncio.Future[Message] | None = attrs.field(default=None, init=False)

    @property
    def message_id(self) -> int | None:
        """The status message, once one was posted."""
        return self._message_id

    def update(self, snapshot: Snapshot) -> None:
        """A new snapshot; shown at the next due time if its text differs."""
        self._snapshot = snapshot
        self._changed.set()

    async def __aenter__(self) -> StatusReporter:
        self._throttle = Throttle(self.clock(), self.first_after, self.every)
        self._action = keep_chat_action(self.sender, self.dest, self.action)
        await self._action.__aenter__()
        self._loop = asyncio.create_task(self._run(), name=f"xbot-status-{self.dest.chat_id}")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._stop()
        if self._message_id is not None:
            # Cancelled (shutdown) or retried: the message would say "42%" forever.
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(self._delete(), DELETE_TIMEOUT)

    async def done(self) -> None:
        """The media went out: the status message has served its purpose."""
        await self._stop()
        await self._delete()

    async def fail(self, sentence: str) -> None:
        """The job ended with `sentence`: the status message becomes it, or it is sent."""
        await self._stop()
        if self._message_id is not None and await self._edit(sentence):
            self._message_id = None  # it is the answer now; __aexit__ must not delete it
            return
        await self._delete()
        await self.sender.send_text(self.dest, sentence, html=False)

    async def _stop(self) -> None:
        action, self._action = self._action, None
        if action is not None:
            await action.__aexit__(None, None, None)
        if self._loop is not None:
            self._loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop
            self._loop = None
        posting, self._posting = self._posting, None
        if posting is not None:
            # Stopped while the status message was on its way: learn its id, so it
            # is deleted rather than left behind saying "Downloading…".
            with contextlib.suppress(XbotError, asyncio.CancelledError):
                self._message_id = (await posting).message_id

    async def _run(self) -> None:
        assert self._throttle is not None
        while True:
            now = self.clock()
            if not self._muted and self._throttle.due(now):
                await self._show(now)
            self._changed.clear()
            if not self._muted and self._shown != render(self._snapshot, self.dest.lang):
                # Something new to show: sleep until it may be shown.
                await asyncio.sleep(max(0.0, self._throttle.next_due() - self.clock()))
            else:
                await self._changed.wait()  # nothing new: sleep until a change

    async def _show(self, now: float) -> None:
        assert self._throttle is not None
        text = render(self._snapshot, self.dest.lang)
        if text == self._shown:
            return
        self._throttle.mark(now)
        pacer = self.sender.pacer
        if pacer.delay(self.dest.chat_id, group=self.dest.paced_as_group, now=pacer.clock()):
            # The chat's budget belongs to the media; try again next time. Edits
            # are not recorded in the pacer: they must not delay the media.
            return
        try:
            await self._post_or_edit(text)
        finally:
            # Counted from when Telegram answered: a slow request must not let the
            # next one arrive sooner than `every` after it.
            self._throttle.mark(self.clock())

    async def _post_or_edit(self, text: str) -> None:
        if self._message_id is None:
            self._posting = asyncio.ensure_future(
                self.sender.send_text(self.dest, text, html=False)
            )
            try:
                message = await asyncio.shield(self._posting)
            except XbotError as exc:
                self._posting = None
                self._mute("send", exc)
                return
            self._posting = None
            self._message_id = message.message_id
            self._shown = text
            return
        if await self._edit(text):
            self._shown = text

    def _mute(self, what: str, exc: BaseException) -> None:
        """A status message is a courtesy: after a refusal, stop trying for this job."""
        self._muted = True
        log.debug("status %s failed %s", what, kv(chat=self.dest.chat_id, error=type(exc).__name__))

    async def _edit(self, text: str) -> bool:
        assert self._message_id is not None
        try:
            await self.sender.edit_text(self.dest.chat_id, self._message_id, text, html=False)
        except RateLimited as exc:
            self._mute("edit", exc)
            return False
        except XbotError as exc:
            log.debug("status edit failed %s", kv(chat=self.dest.chat_id, error=exc))
            return False
        return True

    async def _delete(self) -> None:
        if self._message_id is None:
            return
        message_id, self._message_id = self._message_id, None
        await self.sender.delete(self.dest.chat_id, message_id)
