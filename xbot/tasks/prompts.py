"""The forward prompt as values: its record, its message and its stages. Pure, no I/O.

After a post was delivered in a chat with a linked channel, a small prompt
message follows it (albums cannot carry buttons): "Forward to channel",
"Edit caption", "Skip". The prompt is a record in the chat's state
(`ChatStore`, kind `PROMPT`, keyed by the deliver task's id) holding what a
forward needs: the sent items by ``file_id`` and the caption. It expires
after ``Settings.caption_edit_ttl``.

A press moves the prompt through its stages in one locked write
(`apply_press`): ``open`` → ``editing`` (waiting for the new caption) →
``confirm`` (the caption shown back) → ``queued`` (a forward task exists).
Every button names the stage it belongs to, so a second press, a late press
or a press on a stale message finds the stage moved on and changes nothing:
at most one forward task is ever enqueued per prompt. The I/O around these
values is `xbot.tasks.forwarding`.

Its sentences come from the message catalogue (`xbot.i18n`): the views take
the chat's language (``lang``, English by default); the constants are
English msgids, marked with ``N_``, that the code showing them translates.
The caption, being the post's words, is never translated.
"""

from __future__ import annotations

import contextlib
import html
import logging
from collections.abc import Mapping
from typing import Final, Literal, cast

import attrs
from telegram import InlineKeyboardButton, InlineKeyboardMarkup

from xbot.i18n import DEFAULT, N_, normalize, translator
from xbot.logs import kv
from xbot.sending.sent import SentItem
from xbot.storage.state import CAPTION_EDIT, ChatState, Record, caption_edit_record, record_key
from xbot.tasks.callback_data import Action, CallbackData, encode
from xbot.tasks.payloads import items_data, items_from

log = logging.getLogger(__name__)

__all__ = [
    "ALREADY",
    "CHECK",
    "EXPIRED",
    "EXPIRED_PROMPT",
    "KEEP",
    "NO_CHANNEL",
    "PROMPT",
    "SKIPPED",
    "Press",
    "Prompt",
    "apply_cancel",
    "apply_caption",
    "apply_press",
    "failed_text",
    "find_prompt",
    "forwarded_text",
    "items_data",
    "items_from",
    "prompt_by_message",
    "prompt_view",
]

PROMPT: Final = "fwd_prompt"
KEEP: Final = "keep"  # the "Keep caption" button: CONFIRM with this token

Stage = Literal["open", "editing", "confirm", "queued"]
STAGES: Final = ("open", "editing", "confirm", "queued")

EXPIRED: Final = N_("This button has expired.")
EXPIRED_PROMPT: Final = N_("This prompt expired; nothing was forwarded.")
SKIPPED: Final = N_("Not forwarded.")
ALREADY: Final = N_("Already sent to the channel (or on its way).")
ASK: Final = N_("Send me the new caption.")
QUEUED: Final = N_("Forwarding…")
CHECK: Final = N_("Check the caption, then forward.")
NO_CHANNEL: Final = N_("This chat has no linked channel any more: /channel @name links one.")


def _title(title: str | None, lang: str = DEFAULT) -> str:
    # Translators: stands in for a linked channel whose name is unknown.
    shown = title or translator(lang).gettext("the channel")
    return f"<b>{html.escape(shown)}</b>"


def forwarded_text(title: str | None, lang: str = DEFAULT) -> str:
    return translator(lang).gettext("Forwarded to {channel}.").format(channel=_title(title, lang))


def failed_text(title: str | None, reason: str, lang: str = DEFAULT) -> str:
    return (
        translator(lang)
        .gettext("Could not forward to {channel}: {reason}.")
        .format(channel=_title(title, lang), reason=html.escape(reason.rstrip(".")))
    )


# --- the prompt -------------------------------------------------------------------------------


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
        lang: the language the prompt speaks: its chat's when it was offered (the
            delivery's `Destination.lang`); English for records older than languages.
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
    lang: str = DEFAULT

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
            "items": items_data(self.items),
            "caption": self.caption,
            "new_caption": self.new_caption,
            "stage": self.stage,
            "message_id": self.message_id,
            "spoiler": self.spoiler,
            "editor": self.editor,
            "lang": self.lang,
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
                items=items_from(data["items"]),
                caption=str(data["caption"]),
                new_caption=None if new_caption is None else str(new_caption),
                stage=stage,
                message_id=int(cast("int", data.get("message_id", 0))),
                spoiler=bool(data.get("spoiler", False)),
                editor=_opt_int(data.get("editor")),
                lang=normalize(str(data.get("lang") or DEFAULT)),
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
    prompt: Prompt, channel_title: str | None, lang: str = DEFAULT
) -> tuple[str, InlineKeyboardMarkup | None]:
    """The prompt message (HTML) and its buttons, for its stage, in `lang`. Each button
    names its stage: `apply_press` refuses a press whose stage has passed."""
    _ = translator(lang).gettext
    pid = prompt.id
    title = _title(channel_title, lang)
    if prompt.stage == "open":
        return _("Forward this post to {channel}?").format(channel=title), InlineKeyboardMarkup(
            [
                [_button(_("Forward to channel"), Action.FORWARD, pid)],
                [
                    _button(_("Edit caption"), Action.EDIT, pid),
                    _button(_("Skip"), Action.SKIP, pid),
                ],
            ]
        )
    if prompt.stage == "editing":
        text = _(
            "Send me the new caption as your next message here, or reply to this message. "
            "/cancel keeps things as they are.\n\n"
            "Current caption:\n{caption}"
        ).format(caption=prompt.final_caption)
        return text, InlineKeyboardMarkup(
            [
                [
                    _button(_("Keep caption"), Action.CONFIRM, pid, KEEP),
                    _button(_("Skip"), Action.SKIP, pid),
                ]
            ]
        )
    if prompt.stage == "confirm":
        text = _("The caption will be:\n\n{caption}\n\nForward it to {channel}?").format(
            caption=prompt.final_caption, channel=title
        )
        return text, InlineKeyboardMarkup(
            [
                [_button(_("Forward"), Action.CONFIRM, pid)],
                [
                    _button(_("Edit again"), Action.EDIT, pid),
                    _button(_("Skip"), Action.SKIP, pid),
                ],
            ]
        )
    return _("Forwarding to {channel}…").format(channel=title), None


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
        return new, Press("confirm", confirm, CHECK)
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
