"""Forwarding what the bot sent to the chat's linked channel, after an optional caption edit.

The I/O around the prompt values of `xbot.tasks.prompts`: the prompt is offered
after a delivery (`Forwarding.on_delivered`), presses and captions change it
in one locked write each, the sweep retires expired ones (`Forwarding.expire`).

The forward itself is a durable task (`KIND`) on the channel's lane: copy by
``file_id`` with the chosen caption, albums by ``sendMediaGroup``, each send
recorded in the payload so a retry never posts an album twice; its dedup key
names the prompt, so even a second enqueue is one task. A failure is retried
by the worker and, when it finally fails, reported on the prompt
(`Forwarding.report_failure`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final, cast

import attrs
from telegram import InlineKeyboardMarkup

from xbot.config import Settings
from xbot.errors import (
    ChatUnavailable,
    PayloadError,
    Permanent,
    RateLimited,
    RetryLater,
    StaleFileId,
    TelegramUnreachable,
    XbotError,
)
from xbot.i18n import N_, translate_reason, translator
from xbot.logs import kv
from xbot.sending.albums import PlanKind, plan_sends
from xbot.sending.caption import build_caption, post_from_parts
from xbot.sending.sender import Sender
from xbot.sending.sent import SentItem
from xbot.storage.queue import Task, TaskQueue
from xbot.storage.state import CAPTION_EDIT, ChatState, ChatStore, Record
from xbot.tasks.callback_data import Action, CallbackData
from xbot.tasks.outbox import send_file_ids
from xbot.tasks.payloads import FORWARD, ForwardPayload, forward_dedup_key
from xbot.tasks.prompts import (
    EXPIRED_PROMPT,
    NO_CHANNEL,
    PROMPT,
    Press,
    Prompt,
    apply_cancel,
    apply_caption,
    apply_press,
    failed_text,
    find_prompt,
    forwarded_text,
    prompt_view,
)
from xbot.tasks.worker import TaskContext

if TYPE_CHECKING:
    from xbot.tasks.outbox import Delivered

log = logging.getLogger(__name__)

__all__ = ["KIND", "ForwardPayload", "Forwarding", "dedup_key", "plan_forward"]

KIND: Final = FORWARD
# Why a forward failed, as its prompt says it (msgids: translated there).
CANNOT_POST: Final = N_("I cannot post there any more")
FILES_GONE: Final = N_("Telegram no longer has these files; send the link again")


# --- the forward task -------------------------------------------------------------------------


def dedup_key(chat_id: int, prompt_id: int) -> str:
    return forward_dedup_key(chat_id, prompt_id)


def plan_forward(kinds: Sequence[str]) -> list[tuple[int, ...]]:
    """The sends that copy items of these kinds, in order (indices into the items):
    `xbot.sending.albums.plan_sends`, the one album planner."""
    return [step.items for step in plan_sends(cast("Sequence[PlanKind]", kinds))]


# --- the service ------------------------------------------------------------------------------


@attrs.define
class Forwarding:
    """Prompts, presses and the forward task, wired once by the app.

    Attributes:
        wake: tells the workers a task was enqueued.
    """

    settings: Settings
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
        """`Outbox.on_delivered`: remove the link message if asked, offer the forward."""
        now = self.clock()
        dest = delivered.dest
        settings = (await self.chats.get(dest.chat_id, now)).settings
        delete = dest.is_group and settings.delete_original and dest.reply_to is not None
        offer = settings.channel_id not in (None, dest.chat_id) and bool(delivered.items)
        post = post_from_parts(delivered.key, delivered.url, delivered.caption_parts)
        if offer and post.rating and settings.channel_id is not None:
            # An R-18 work is offered only to a channel that allows it, as it is sent only
            # to chats that do: the channel's own /settings say, as a group's would.
            channel = (await self.chats.get(settings.channel_id, now)).settings
            offer = channel.allows_rating("channel", post.rating)
        if delete or offer:
            # The last album's record is written before anything else is sent:
            # a crash from here on repeats the prompt at worst, never an album.
            await ctx.flush()
        if delete:
            assert dest.reply_to is not None
            await self._delete(dest.chat_id, dest.reply_to)
        if not offer:
            return  # nothing linked (or this is the channel itself): nothing to offer
        parts = delivered.caption_parts
        caption = build_caption(
            post, style=settings.caption_style, template=settings.caption_template, lang=dest.lang
        )
        sensitive = parts.get("sensitive") == "1"
        prompt = Prompt(
            id=ctx.task.id,
            owner=delivered.user_id,
            url=delivered.url,
            items=delivered.items,
            caption=caption,
            spoiler=settings.spoiler_for(sensitive=sensitive, rating=post.rating),
            lang=dest.lang,
        )
        text, markup = prompt_view(prompt, settings.channel_title, prompt.lang)
        try:
            message = await self.sender.send_text(dest, text, reply_markup=markup)
        except (RateLimited, RetryLater, ChatUnavailable):
            raise  # the worker holds or retries the deliver task; its media is not resent
        except XbotError as exc:
            log.warning("forward prompt not sent %s", kv(chat=dest.chat_id, error=exc))
            return
        prompt = attrs.evolve(prompt, message_id=message.message_id)
        await self.chats.put_record(dest.chat_id, prompt.record(now + self.ttl), now)

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
                lang=prompt.lang,
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
        text, markup = prompt_view(prompt, settings.channel_title, prompt.lang)
        await self.edit(chat_id, prompt.message_id, text, markup)

    # -- the forward task --------------------------------------------------------------------

    async def run(self, ctx: TaskContext) -> None:
        """The ``forward`` task: copy the items to the channel, then say so on the prompt."""
        payload = ForwardPayload.from_json(ctx.task.payload)
        box = [payload]

        async def record(index: int, _sent: list[SentItem], _message_id: int | None) -> None:
            box[0] = attrs.evolve(box[0], sent=(*box[0].sent, index))
            await ctx.save_payload(box[0].to_json())

        try:
            await send_file_ids(
                self.sender,
                ctx,
                payload.dest,  # a channel: paced like a group (20/min)
                payload.items,
                caption=payload.caption,
                spoiler=payload.spoiler,
                done=payload.sent,
                record=record,
            )
        except ChatUnavailable as exc:
            # The worker would drop this quietly (it reads as "the chat is gone"), but
            # the channel is gone, not the chat that asked: tell them. The reason is a
            # msgid (translated on the prompt); Telegram's own words go to the log.
            log.warning("channel unavailable %s", kv(channel=payload.channel_id, error=exc))
            raise Permanent(CANNOT_POST) from exc
        except StaleFileId as exc:
            raise Permanent(FILES_GONE) from exc
        payload = box[0]
        await self._settle(payload, forwarded_text(payload.channel_title, payload.lang))
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
        reason = translate_reason(reason, payload.lang)
        await self._settle(payload, failed_text(payload.channel_title, reason, payload.lang))

    async def _settle(self, payload: ForwardPayload, text: str) -> None:
        """The prompt says how the forward ended. Inside a task: while Telegram is
        unreachable the task waits for it (put back), rather than losing the word."""
        await self.edit(payload.chat_id, payload.prompt_message_id, text, None, wait=True)
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
        text = translator(prompt.lang).gettext(EXPIRED_PROMPT)
        return await self.edit(chat_id, prompt.message_id, text, None)

    # -- Bot API edits (translated once, here) -----------------------------------------------

    async def edit(
        self,
        chat_id: int,
        message_id: int,
        text: str,
        markup: InlineKeyboardMarkup | None,
        *,
        wait: bool = False,
    ) -> bool:
        """Best effort: a prompt that cannot be edited (deleted, too old) is not an error.

        `wait`: Telegram unreachable is raised (a task then waits for it), not dropped."""
        try:
            await self.sender.edit_text(chat_id, message_id, text, reply_markup=markup)
        except TelegramUnreachable:
            if wait:
                raise
            log.info("prompt edit held %s", kv(chat=chat_id, error="Telegram unreachable"))
            return False
        except XbotError as exc:
            log.info("prompt edit failed %s", kv(chat=chat_id, error=exc))
            return False
        return True

    async def _delete(self, chat_id: int, message_id: int) -> None:
        if not await self.sender.delete(chat_id, message_id):
            log.info("link message not deleted %s", kv(chat=chat_id, message=message_id))
