"""Dead-letter notices: the one message a chat gets when a task finally fails.

The queue queues the notice with the dead mark, in the same transaction
(`xbot.storage.queue`, "every way into dead goes through bury"); a notice is a
task, so it waits out the chat's hold, is retried and survives a restart
(docs/reliability.md, why one sent inline got lost). This module words it in
the language its destination carries and sends it where the failed task's
answer would have gone (the same topic, replying to the same message).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping

import attrs
from telegram import InlineKeyboardMarkup

from xbot.errors import PayloadError, Permanent
from xbot.i18n import N_, translate_reason, translator
from xbot.sending.destination import Destination
from xbot.sending.sender import Sender
from xbot.storage.queue import NOTICE_KIND, NOTICE_MAX_ATTEMPTS, Task
from xbot.tasks.payloads import (
    DELIVER,
    BuriedNotice,
    DeliverPayload,
    NoticePayload,
    notice_from_task,
    payload_identity,
)
from xbot.tasks.worker import TaskContext

KIND = NOTICE_KIND
SORRY = N_("Sorry, I could not deliver {what}: {reason}.")
MAX_ATTEMPTS = NOTICE_MAX_ATTEMPTS

# Said otherwise than by a message: task kind → how (a forward's prompt is edited).
TellOtherwise = Callable[[Task, str], Awaitable[None]]


def notice_text(task: Task, reason: str) -> tuple[str, Destination]:
    """The sentence for a failed task and where it goes, in the language its destination
    carries (English for a payload that does not say). Pure; never raises.

    The reason is translated when it is a msgid (the reasons sources raise are);
    one with a detail filled in (an HTTP status) stays as it was written."""
    what: str | None = None
    dest = Destination.legacy(task.chat_id, chat_type=None, reply_to=None)
    if task.kind == DELIVER:
        with contextlib.suppress(PayloadError):
            payload = DeliverPayload.from_task(task)
            what, dest = payload.url, payload.dest
    if what is None:
        # An older or corrupt payload: name the post from whatever of it reads.
        what = payload_identity(task.payload).get("url")
    _ = translator(dest.lang).gettext
    if what is None:
        # Translators: stands in for a link the notice cannot name.
        what = _("your link")
    said = translate_reason(reason, dest.lang).rstrip(".。")
    return _(SORRY).format(what=what, reason=said), dest


def _read(notice: Task) -> NoticePayload | BuriedNotice:
    try:
        return notice_from_task(notice)
    except PayloadError as exc:
        raise Permanent("unreadable notice", notify=False) from exc


def _dead_task(notice: Task, buried: BuriedNotice) -> Task:
    """The task a dead letter's notice is about, as it was when it died."""
    return attrs.evolve(
        notice, id=buried.for_task, kind=buried.of_kind, payload=buried.of_payload, state="dead"
    )


def read_notice(notice: Task) -> tuple[Task | None, str, str, Destination]:
    """What a notice task says: (the dead task it is about, if named; the reason; the
    text; where it goes). Raises `Permanent` for a payload that is no notice."""
    said = _read(notice)
    if isinstance(said, NoticePayload):
        return None, "", said.text, said.dest
    dead = _dead_task(notice, said)
    text, dest = notice_text(dead, said.reason)
    return dead, said.reason, text, dest


@attrs.define
class Notices:
    """Sends queued notices (the ``notice`` task kind).

    Attributes:
        sender: the bot's sender.
        otherwise: task kinds whose failure is told another way (the forward
            prompt edited), given the dead task and the reason.
    """

    sender: Sender
    otherwise: Mapping[str, TellOtherwise] = attrs.field(factory=dict)

    async def run(self, ctx: TaskContext) -> None:
        said = _read(ctx.task)
        if isinstance(said, NoticePayload):  # worded when queued: a held reply's HTML, buttons
            markup = InlineKeyboardMarkup.de_json(dict(said.markup), None) if said.markup else None
            await self.sender.send_text(said.dest, said.text, html=said.html, reply_markup=markup)
            return
        dead = _dead_task(ctx.task, said)
        if dead.kind in self.otherwise:
            await self.otherwise[dead.kind](dead, said.reason)
            return
        text, dest = notice_text(dead, said.reason)
        await self.sender.send_text(dest, text, html=False, reply_markup=None)
