"""Dead-letter notices: one short message to the chat when a task finally fails.

When a task finally fails, the chat gets one message naming the post and the
reason. Sending it inline, once, lost it to the next 429, 5xx or kill (the
soak saw 2 of 19 go missing); queued as a ``notice`` task in the same chat it
waits out the chat's hold like any send, is retried, and survives restarts.
The dedup key makes it one notice per failed task. The queue itself queues
the notice, in the transaction that makes the task dead (every path: a failed
attempt, the repairs, the startup reclaim, an unreadable payload), so no
crash can fall between the two; this module words and sends it. It goes where
the failed task's answer would have gone (its `Destination`: the same topic,
replying to the same message).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Awaitable, Callable, Mapping

import attrs
from telegram import InlineKeyboardMarkup

from xbot.errors import PayloadError, Permanent
from xbot.i18n import N_, translate_reason, translator
from xbot.sending.destination import Destination
from xbot.sending.sender import Sender
from xbot.storage.queue import NOTICE_KIND, NOTICE_MAX_ATTEMPTS, BuriedNotice, Task
from xbot.tasks.payloads import (
    DELIVER,
    DeliverPayload,
    NoticePayload,
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


def read_notice(notice: Task) -> tuple[Task | None, str, str, Destination]:
    """What a notice task says: (the dead task it is about, if named; the reason; the
    text; where it goes).

    The queue writes a `BuriedNotice` with the dead mark (`bury`, in `xbot.storage.queue`);
    notices queued before that carry their text and destination ready-made
    (`NoticePayload`). Raises `Permanent` for neither.
    """
    try:
        data = json.loads(notice.payload)
        if isinstance(data, dict) and "text" in data:
            old = NoticePayload.from_task(notice)
            return None, "", old.text, old.dest
        buried = BuriedNotice.from_json(notice.payload)
    except (ValueError, RecursionError, PayloadError) as exc:
        raise Permanent("unreadable notice", notify=False) from exc
    dead = attrs.evolve(
        notice, id=buried.for_task, kind=buried.of_kind, payload=buried.of_payload, state="dead"
    )
    text, dest = notice_text(dead, buried.reason)
    return dead, buried.reason, text, dest


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
        dead, reason, text, dest = read_notice(ctx.task)
        if dead is not None and dead.kind in self.otherwise:
            await self.otherwise[dead.kind](dead, reason)
            return
        html, markup = False, None
        if dead is None:  # a sentence queued ready-made: a held reply may have HTML, buttons
            ready = NoticePayload.from_task(ctx.task)
            html = ready.html
            markup = (
                InlineKeyboardMarkup.de_json(dict(ready.markup), None) if ready.markup else None
            )
        await self.sender.send_text(dest, text, html=html, reply_markup=markup)
