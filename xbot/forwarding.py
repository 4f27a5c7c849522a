"""Forwarding what the bot sent to the chat's linked channel, after an optional caption edit.

After a post was delivered in a chat with a linked channel, a small prompt
message follows it (albums cannot carry buttons): "Forward to channel",
"Edit caption", "Skip". The prompt is a record in the chat's state
(`ChatStore`, kind `PROMPT`, keyed by the deliver task's id) holding what a
forward needs: the sent items by ``file_id`` and the caption. It expires after
``Settings.caption_edit_ttl``; the sweep then edits the message to say
nothing was forwarded (`Forwarding.expire`).

A press moves the prompt through its stages in one locked write (`apply_press`,
pure): ``open`` → ``editing`` (waiting for the new caption) → ``confirm``
(the caption shown back) → ``queued`` (a forward task exists). Every button
names the stage it belongs to, so a second press, a late press or a press
on a stale message finds the stage moved on and changes nothing: at most one
forward task is ever enqueued per prompt (and its dedup key says so again).

The forward itself is a durable task (`KIND`) on the channel's lane: copy by
``file_id`` with the chosen caption, albums by ``sendMediaGroup``, each send
recorded in the payload so a retry never posts an album twice. A failure is
retried by the worker and, when it finally fails, reported on the prompt
(`Forwarding.report_failure`).
"""

from __future__ import annotations

import contextlib
import html
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Final, Literal, cast

import attrs
import telegram
from telegram import InlineKeyboardButton, InlineKeyboardMarkup, LinkPreviewOptions
from telegram.constants import ParseMode
from telegram.error import TelegramError

from xbot.albums import plan_albums
from xbot.callback_data import Action, CallbackData, encode
from xbot.caption import build_caption
from xbot.config import Settings
from xbot.errors import (
    ChatUnavailable,
    PayloadError,
    Permanent,
    RateLimited,
    RetryLater,
    StaleFileId,
    XbotError,
)
from xbot.logs import kv
from xbot.media.models import Post
from xbot.queue import Task, TaskQueue
from xbot.sender import OutKind, OutMedia, Sender, SentItem, classify
from xbot.state import (
    CAPTION_EDIT,
    ChatState,
    ChatStore,
    Record,
    caption_edit_record,
    record_key,
)
from xbot.worker import TaskContext

if TYPE_CHECKING:
    from xbot.delivery import Delivered

log = logging.getLogger(__name__)

__all__ = [
    "KIND",
    "PROMPT",
    "ForwardPayload",
    "Forwarding",
    "Press",
    "Prompt",
    "apply_caption",
    "apply_press",
    "plan_forward",
    "prompt_view",
]

KIND: Final = "forward"
PROMPT: Final = "fwd_prompt"
KEEP: Final = "keep"  # the "Keep caption" button: CONFIRM with this token

Stage = Literal["open", "editing", "confirm", "queued"]
STAGES: Final = ("open", "editing", "confirm", "queued")

EXPIRED: Final = "This button has expired."
EXPIRED_PROMPT: Final = "This prompt expired; nothing was forwarded."
SKIPPED: Final = "Not forwarded."
ALREADY: Final = "Already sent to the channel (or on its way)."
ASK: Final = "Send me the new caption."
QUEUED: Final = "Forwarding…"
NO_CHANNEL: Final = "This chat has no linked channel any more: /channel @name links one."


def _title(title: str | None) -> str:
    return f"<b>{html.escape(title or 'the channel')}</b>"


def forwarded_text(title: str | None) -> str:
    return f"Forwarded to {_title(title)}."


def failed_text(title: str | None, reason: str) -> str:
    return f"Could not forward to {_title(title)}: {html.escape(reason.rstrip('.'))}."


# --- the prompt -------------------------------------------------------------------------------


def _items_data(items: Sequence[SentItem]) -> list[list[str]]:
    return [[i.kind, i.file_id] for i in items]


def _items_from(raw: object) -> tuple[SentItem, ...]:
    if not isinstance(raw, list):
        raise TypeError("items must be a list")
    out = []
    for entry in raw:
        kind, file_id = entry
        if kind not in ("photo", "video", "gif", "document") or not isinstance(file_id, str):
            raise ValueError(f"not a sent item: {entry!r}")
        out.append(SentItem(cast("OutKind", kind), file_id))
    return tuple(out)


def _opt_int(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"not an int: {value!r}")
    return value


@attrs.frozen
class Prompt:
    """A forward prompt, as its record keeps it.

    Attributes:
        id: the deliver task's id (known before the prompt is sent; unique).
        owner: who sent the link (None: unknown or an anonymous admin).
        items: what was sent, by file_id, in post order.
        caption: the caption (HTML) the chat saw, the default for the channel.
        new_caption: the edited caption (HTML), once one was given.
        stage: ``open``, ``editing``, ``confirm`` or ``queued``.
        message_id: the prompt message.
        spoiler: the media went out under a spoiler (kept in the channel).
        editor: who is editing the caption (the pending caption edit's key).
    """

    id: int
    owner: int | None
    url: str
    items: tuple[SentItem, ...]
    caption: str
    new_caption: str | None = None
    stage: Stage = "open"
    message_id: int = 0
    spoiler: bool = False
    editor: int | None = None

    @property
    def key(self) -> str:
        return str(self.id)

    @property
    def final_caption(self) -> str:
        return self.caption if self.new_caption is None else self.new_caption

    def to_data(self) -> dict[str, object]:
        return {
            "owner": self.owner,
            "url": self.url,
            "items": _items_data(self.items),
            "caption": self.caption,
            "new_caption": self.new_caption,
            "stage": self.stage,
            "message_id": self.message_id,
            "spoiler": self.spoiler,
            "editor": self.editor,
        }

    def record(self, expires_at: float) -> Record:
        return Record(PROMPT, self.key, self.to_data(), expires_at)

    @classmethod
    def from_record(cls, record: Record) -> Prompt:
        """Raises ValueError when the record is not a prompt (an older shape, a hand edit)."""
        data: Mapping[str, object] = record.data
        try:
            stage = data.get("stage", "open")
            if record.kind != PROMPT or stage not in STAGES:
                raise ValueError(f"not a prompt record: {record.kind} {stage!r}")
            new_caption = data.get("new_caption")
            return cls(
                id=int(record.key),
                owner=_opt_int(data.get("owner")),
                url=str(data["url"]),
                items=_items_from(data["items"]),
                caption=str(data["caption"]),
                new_caption=None if new_caption is None else str(new_caption),
                stage=stage,
                message_id=int(cast("int", data.get("message_id", 0))),
                spoiler=bool(data.get("spoiler", False)),
                editor=_opt_int(data.get("editor")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"prompt record {record.key!r} does not parse: {exc}") from exc


def find_prompt(state: ChatState, prompt_id: int, now: float) -> Prompt | None:
    record = state.record(PROMPT, str(prompt_id), now)
    if record is None:
        return None
    try:
        return Prompt.from_record(record)
    except ValueError as exc:
        log.warning("prompt dropped %s", kv(chat=state.chat_id, error=exc))
        return None


def prompt_by_message(state: ChatState, message_id: int, now: float) -> Prompt | None:
    """The live prompt shown in message `message_id` (a reply to the prompt)."""
    for record in state.records.values():
        if record.kind != PROMPT or record.expired(now):
            continue
        with contextlib.suppress(ValueError):
            prompt = Prompt.from_record(record)
            if prompt.message_id == message_id:
                return prompt
    return None


def _button(label: str, action: Action, *args: int | str) -> InlineKeyboardButton:
    return InlineKeyboardButton(label, callback_data=encode(CallbackData(action, args)))


def prompt_view(
    prompt: Prompt, channel_title: str | None
) -> tuple[str, InlineKeyboardMarkup | None]:
    """The prompt message (HTML) and its buttons, for its stage. Each button names its stage:
    `apply_press` refuses a press whose stage has passed."""
    pid = prompt.id
    title = _title(channel_title)
    if prompt.stage == "open":
        return f"Forward this post to {title}?", InlineKeyboardMarkup(
            [
                [_button("Forward to channel", Action.FORWARD, pid)],
                [
                    _button("Edit caption", Action.EDIT, pid),
                    _button("Skip", Action.SKIP, pid),
                ],
            ]
        )
    if prompt.stage == "editing":
        text = (
            "Send me the new caption as your next message here, or reply to this message. "
            "/cancel keeps things as they are.\n\n"
            f"Current caption:\n{prompt.final_caption}"
        )
        return text, InlineKeyboardMarkup(
            [
                [
                    _button("Keep caption", Action.CONFIRM, pid, KEEP),
                    _button("Skip", Action.SKIP, pid),
                ]
            ]
        )
    if prompt.stage == "confirm":
        text = f"The caption will be:\n\n{prompt.final_caption}\n\nForward it to {title}?"
        return text, InlineKeyboardMarkup(
            [
                [_button("Forward", Action.CONFIRM, pid)],
                [_button("Edit again", Action.EDIT, pid), _button("Skip", Action.SKIP, pid)],
            ]
        )
    return f"Forwarding to {title}…", None


# --- transitions (pure) -------------------------------------------------------------------------

PressOutcome = Literal["expired", "already", "queued", "ask", "confirm", "skipped"]


@attrs.frozen
class Press:
    """What a button press did.

    Attributes:
        outcome: ``expired`` and ``already`` change nothing; ``queued`` means the
            caller enqueues the forward now; the others re-render the prompt.
        prompt: the prompt after the press (for ``skipped``: as it was).
        answer: the short text for ``answerCallbackQuery``.
    """

    outcome: PressOutcome
    prompt: Prompt | None
    answer: str


def _without_edit_of(state: ChatState, prompt: Prompt) -> ChatState:
    """Drop the pending caption edit that points at this prompt, if any."""
    if prompt.editor is None:
        return state
    edit = state.records.get(record_key(CAPTION_EDIT, str(prompt.editor)))
    if edit is not None and edit.data.get("source") == prompt.key:
        return state.without_record(CAPTION_EDIT, str(prompt.editor))
    return state


def apply_press(
    state: ChatState,
    data: CallbackData,
    *,
    message_id: int,
    presser: int,
    edit_first: bool,
    now: float,
    ttl: float,
) -> tuple[ChatState, Press]:
    """A press on a prompt button; returns the chat's new state and what happened.

    The caller has already checked that `presser` may press (owner or admin).
    """
    prompt_id = data.int_arg(0)
    keep = data.str_arg(1) == KEEP
    prompt = find_prompt(state, prompt_id, now) if prompt_id is not None else None
    shape_ok = len(data.args) == (2 if keep else 1)
    if prompt is None or prompt.message_id != message_id or not shape_ok:
        return state, Press("expired", prompt, EXPIRED)
    if prompt.stage == "queued":
        return state, Press("already", prompt, ALREADY)
    expires = now + ttl
    action = data.action
    if action == Action.SKIP:
        gone = _without_edit_of(state.without_record(PROMPT, prompt.key), prompt)
        return gone, Press("skipped", prompt, SKIPPED)
    wants_edit = action == Action.EDIT or (
        action == Action.FORWARD and edit_first and prompt.stage == "open"
    )
    if wants_edit:
        # The edit gets a fresh time limit: a prompt pressed late still has a day to answer.
        editing = attrs.evolve(prompt, stage="editing", editor=presser)
        new = _without_edit_of(state, prompt).with_record(editing.record(expires))
        edit = caption_edit_record(
            presser, prompt_message_id=prompt.message_id, source=prompt.key, expires_at=expires
        )
        return new.with_record(edit), Press("ask", editing, ASK)
    if action == Action.CONFIRM and keep and prompt.stage == "editing":
        confirm = attrs.evolve(prompt, stage="confirm", new_caption=None, editor=None)
        new = _without_edit_of(state, prompt).with_record(confirm.record(expires))
        return new, Press("confirm", confirm, "Check the caption, then forward.")
    forward_now = (action == Action.FORWARD and prompt.stage == "open") or (
        action == Action.CONFIRM and not keep and prompt.stage == "confirm"
    )
    if forward_now:
        queued = attrs.evolve(prompt, stage="queued", editor=None)
        # Kept (not dropped) while queued so a second press answers "already";
        # the forward task removes it when it is done.
        new = _without_edit_of(state, prompt).with_record(queued.record(expires))
        return new, Press("queued", queued, QUEUED)
    return state, Press("expired", prompt, EXPIRED)


def apply_caption(
    state: ChatState, prompt: Prompt, caption: str, *, now: float, ttl: float
) -> tuple[ChatState, Prompt]:
    """The new caption arrived: show it back for a final Forward / Skip."""
    confirm = attrs.evolve(prompt, stage="confirm", new_caption=caption, editor=None)
    new = _without_edit_of(state, prompt).with_record(confirm.record(now + ttl))
    return new, confirm


def apply_cancel(state: ChatState, user_id: int, now: float) -> tuple[ChatState, Prompt | None]:
    """``/cancel``: the user's pending caption edit is dropped; its prompt reopens."""
    edit = state.record(CAPTION_EDIT, str(user_id), now)
    if edit is None:
        return state, None
    new = state.without_record(CAPTION_EDIT, str(user_id))
    source = edit.data.get("source")
    prompt = (
        find_prompt(state, int(source), now)
        if isinstance(source, str) and source.isdigit()
        else None
    )
    if prompt is None or prompt.stage != "editing":
        return new, None
    reopened = attrs.evolve(prompt, stage="open", editor=None)
    record = state.records[record_key(PROMPT, prompt.key)]
    return new.with_record(reopened.record(record.expires_at)), reopened


# --- the forward task -------------------------------------------------------------------------


@attrs.frozen
class ForwardPayload:
    """What a forward task carries.

    Attributes:
        chat_id: the chat of the prompt (the task itself runs on the channel's lane).
        channel_id, channel_title: where it goes, as linked when the button was pressed.
        sent: the send steps Telegram confirmed, so a retry never posts one twice.
    """

    chat_id: int
    prompt_id: int
    prompt_message_id: int
    channel_id: int
    channel_title: str
    items: tuple[SentItem, ...]
    caption: str
    spoiler: bool = False
    sent: tuple[int, ...] = ()

    @property
    def dedup_key(self) -> str:
        return dedup_key(self.chat_id, self.prompt_id)

    def to_json(self) -> str:
        return json.dumps(
            {
                "v": 1,
                "chat_id": self.chat_id,
                "prompt_id": self.prompt_id,
                "prompt_message_id": self.prompt_message_id,
                "channel_id": self.channel_id,
                "channel_title": self.channel_title,
                "items": _items_data(self.items),
                "caption": self.caption,
                "spoiler": self.spoiler,
                "sent": list(self.sent),
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, raw: str) -> ForwardPayload:
        try:
            data = json.loads(raw)
            if not isinstance(data, dict) or data.get("v") != 1:
                raise PayloadError("unknown forward payload version")
            return cls(
                chat_id=int(data["chat_id"]),
                prompt_id=int(data["prompt_id"]),
                prompt_message_id=int(data["prompt_message_id"]),
                channel_id=int(data["channel_id"]),
                channel_title=str(data["channel_title"]),
                items=_items_from(data["items"]),
                caption=str(data["caption"]),
                spoiler=bool(data.get("spoiler", False)),
                sent=tuple(int(s) for s in data.get("sent", [])),
            )
        except PayloadError:
            raise
        except (ValueError, TypeError, KeyError) as exc:
            raise PayloadError(f"forward payload does not parse: {exc}") from exc


def dedup_key(chat_id: int, prompt_id: int) -> str:
    return f"fwd:{chat_id}:{prompt_id}"


def plan_forward(kinds: Sequence[str]) -> list[tuple[int, ...]]:
    """The sends that copy items of these kinds, in order (indices into the items).

    Like `xbot.albums.plan_sends`, plus documents (a photo the delivery had to
    send as a file): they group only with documents, so a run is cut where the
    family changes; GIFs always go alone.
    """
    steps: list[tuple[int, ...]] = []
    run: list[int] = []
    family = ""

    def flush() -> None:
        if run:
            steps.extend(tuple(chunk) for chunk in plan_albums(list(run)))
            run.clear()

    for index, kind in enumerate(kinds):
        if kind == "gif":
            flush()
            steps.append((index,))
            continue
        this = "document" if kind == "document" else "media"
        if this != family:
            flush()
            family = this
        run.append(index)
    flush()
    return steps


# --- the service ------------------------------------------------------------------------------


@attrs.define
class Forwarding:
    """Prompts, presses and the forward task, wired once by the app.

    Attributes:
        bot: for editing and deleting messages (sending goes through `sender`).
        wake: tells the workers a task was enqueued.
    """

    settings: Settings
    bot: telegram.Bot
    sender: Sender
    chats: ChatStore
    queue: TaskQueue
    clock: Callable[[], float]
    wake: Callable[[], None] = lambda: None

    @property
    def ttl(self) -> float:
        return self.settings.caption_edit_ttl

    # -- after a delivery --------------------------------------------------------------------

    async def on_delivered(self, ctx: TaskContext, delivered: Delivered) -> None:
        """`Delivery.on_delivered`: remove the link message if asked, offer the forward."""
        now = self.clock()
        settings = (await self.chats.get(delivered.chat_id, now)).settings
        group = delivered.chat_type in ("group", "supergroup")
        if group and settings.delete_original and delivered.reply_to is not None:
            await self._delete(delivered.chat_id, delivered.reply_to)
        if settings.channel_id is None or not delivered.items:
            return
        parts = delivered.caption_parts
        post = Post(
            key=delivered.key,
            url=delivered.url,
            author_name=parts.get("author_name", ""),
            author_handle=parts.get("author_handle", ""),
            text=parts.get("text", ""),
        )
        caption = build_caption(
            post, style=settings.caption_style, template=settings.caption_template
        )
        sensitive = parts.get("sensitive") == "1"
        prompt = Prompt(
            id=ctx.task.id,
            owner=delivered.user_id,
            url=delivered.url,
            items=delivered.items,
            caption=caption,
            spoiler=sensitive and settings.spoiler_sensitive,
        )
        text, markup = prompt_view(prompt, settings.channel_title)
        try:
            message = await self.sender.send_text(
                delivered.chat_id,
                text,
                reply_to=delivered.reply_to,
                group=group,
                reply_markup=markup,
            )
        except (RateLimited, RetryLater, ChatUnavailable):
            raise  # the worker holds or retries the deliver task; its media is not resent
        except XbotError as exc:
            log.warning("forward prompt not sent %s", kv(chat=delivered.chat_id, error=exc))
            return
        prompt = attrs.evolve(prompt, message_id=message.message_id)
        await self.chats.put_record(delivered.chat_id, prompt.record(now + self.ttl), now)

    # -- presses -----------------------------------------------------------------------------

    async def press(
        self, chat_id: int, data: CallbackData, *, message_id: int, presser: int
    ) -> Press:
        """Apply a press (authority already checked) in one locked write.

        On ``queued`` the caller shows the prompt's new stage, then calls `start`.
        """
        now = self.clock()
        state = await self.chats.get(chat_id, now)
        if state.settings.channel_id is None and data.action in (Action.FORWARD, Action.CONFIRM):
            return Press("expired", None, NO_CHANNEL)
        box: list[Press] = []

        def change(current: ChatState) -> ChatState:
            new, result = apply_press(
                current,
                data,
                message_id=message_id,
                presser=presser,
                edit_first=current.settings.edit_before_forward,
                now=now,
                ttl=self.ttl,
            )
            box.append(result)
            return new

        await self.chats.update(chat_id, change, now)
        return box[-1]

    async def start(self, chat_id: int, prompt: Prompt) -> None:
        """Enqueue the forward of a prompt that just became ``queued``."""
        now = self.clock()
        settings = (await self.chats.get(chat_id, now)).settings
        try:
            if settings.channel_id is None:
                raise Permanent(NO_CHANNEL)
            payload = ForwardPayload(
                chat_id=chat_id,
                prompt_id=prompt.id,
                prompt_message_id=prompt.message_id,
                channel_id=settings.channel_id,
                channel_title=settings.channel_title or str(settings.channel_id),
                items=prompt.items,
                caption=prompt.final_caption,
                spoiler=prompt.spoiler,
            )
            await self.queue.enqueue(
                KIND, payload.to_json(), settings.channel_id, now=now, dedup_key=payload.dedup_key
            )
        except XbotError as exc:
            # Nothing was queued: reopen the prompt so the press can be repeated.
            log.warning("forward not queued %s", kv(chat=chat_id, prompt=prompt.id, error=exc))
            reopened = attrs.evolve(prompt, stage="open")

            def reopen(current: ChatState) -> ChatState:
                live = find_prompt(current, prompt.id, now)
                if live is None or live.stage != "queued":
                    return current
                return current.with_record(reopened.record(now + self.ttl))

            await self.chats.update(chat_id, reopen, now)
            await self.show(chat_id, reopened)
            return
        self.wake()

    async def take_caption(self, chat_id: int, prompt: Prompt, caption: str) -> Prompt | None:
        """Store the new caption if the prompt still waits for one; returns it in ``confirm``."""
        now = self.clock()
        box: list[Prompt] = []

        def change(current: ChatState) -> ChatState:
            live = find_prompt(current, prompt.id, now)
            if live is None or live.stage not in ("open", "editing", "confirm"):
                return current
            new, confirm = apply_caption(current, live, caption, now=now, ttl=self.ttl)
            box.append(confirm)
            return new

        await self.chats.update(chat_id, change, now)
        return box[0] if box else None

    async def cancel(self, chat_id: int, user_id: int) -> tuple[bool, Prompt | None]:
        """``/cancel``: (whether an edit was pending, the prompt it reopened)."""
        now = self.clock()
        box: list[tuple[bool, Prompt | None]] = []

        def change(current: ChatState) -> ChatState:
            had = current.record(CAPTION_EDIT, str(user_id), now) is not None
            new, reopened = apply_cancel(current, user_id, now)
            box.append((had, reopened))
            return new

        await self.chats.update(chat_id, change, now)
        return box[0]

    async def show(self, chat_id: int, prompt: Prompt) -> None:
        """Re-render the prompt message for its stage."""
        settings = (await self.chats.get(chat_id, self.clock())).settings
        text, markup = prompt_view(prompt, settings.channel_title)
        await self.edit(chat_id, prompt.message_id, text, markup)

    # -- the forward task --------------------------------------------------------------------

    async def run(self, ctx: TaskContext) -> None:
        """The ``forward`` task: copy the items to the channel, then say so on the prompt."""
        payload = ForwardPayload.from_json(ctx.task.payload)
        steps = plan_forward([i.kind for i in payload.items])
        for index, step in enumerate(steps):
            if index in payload.sent:
                continue
            out = [
                OutMedia(payload.items[i].kind, payload.items[i].file_id, "file_id") for i in step
            ]
            try:
                await self.sender.send_media(
                    payload.channel_id,
                    out,
                    caption=payload.caption if index == 0 else None,
                    spoiler=payload.spoiler,
                    # Channels share the group limit (20/min): the cautious pace.
                    group=True,
                )
            except ChatUnavailable as exc:
                # The worker would drop this quietly (it reads as "the chat is gone"), but
                # the channel is gone, not the chat that asked: tell them.
                raise Permanent(f"I cannot post there any more ({exc})") from exc
            except StaleFileId as exc:
                raise Permanent("Telegram no longer has these files; send the link again") from exc
            payload = attrs.evolve(payload, sent=(*payload.sent, index))
            await ctx.save_payload(payload.to_json())
        await self._settle(payload, forwarded_text(payload.channel_title))
        log.info(
            "forwarded %s",
            kv(chat=payload.chat_id, channel=payload.channel_id, prompt=payload.prompt_id),
        )

    async def report_failure(self, task: Task, reason: str) -> None:
        """The dead-letter notice of a forward task: said on the prompt itself."""
        try:
            payload = ForwardPayload.from_json(task.payload)
        except PayloadError:
            log.warning("forward failed, payload unreadable %s", kv(task=task.id))
            return
        await self._settle(payload, failed_text(payload.channel_title, reason))

    async def _settle(self, payload: ForwardPayload, text: str) -> None:
        await self.edit(payload.chat_id, payload.prompt_message_id, text, None)
        now = self.clock()
        with contextlib.suppress(XbotError):
            await self.chats.pop_record(payload.chat_id, PROMPT, str(payload.prompt_id), now)

    # -- the sweep ---------------------------------------------------------------------------

    async def expire(self, chat_id: int, record: Record) -> bool:
        """An expired prompt (from `ChatStore.prune_expired`): say nothing was forwarded.

        Returns whether a prompt message was edited. An expired caption edit has a
        prompt of its own. A prompt still ``queued`` a whole TTL after the press is
        one whose task was never written (a crash between the press and the
        enqueue); should its task still run, it has the last word on the message.
        """
        if record.kind != PROMPT:
            return False
        try:
            prompt = Prompt.from_record(record)
        except ValueError:
            return False
        if not prompt.message_id:
            return False
        return await self.edit(chat_id, prompt.message_id, EXPIRED_PROMPT, None)

    # -- Bot API edits (translated once, here) -----------------------------------------------

    async def edit(
        self, chat_id: int, message_id: int, text: str, markup: InlineKeyboardMarkup | None
    ) -> bool:
        """Best effort: a prompt that cannot be edited (deleted, too old) is not an error."""
        try:
            await self.bot.edit_message_text(
                text,
                chat_id=chat_id,
                message_id=message_id,
                parse_mode=ParseMode.HTML,
                reply_markup=markup,
                link_preview_options=LinkPreviewOptions(is_disabled=True),
            )
        except TelegramError as exc:
            if "not modified" not in exc.message.lower():
                log.info("prompt edit failed %s", kv(chat=chat_id, error=classify(exc)))
                return False
        return True

    async def _delete(self, chat_id: int, message_id: int) -> None:
        try:
            await self.bot.delete_message(chat_id, message_id)
        except TelegramError as exc:
            log.info("link message not deleted %s", kv(chat=chat_id, error=classify(exc)))
