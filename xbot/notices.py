"""Dead-letter notices, as durable tasks of their own.

When a task finally fails, the chat gets one message naming the post and the
reason. Sending it inline, once, lost it to the next 429, 5xx or kill (the
soak saw 2 of 19 go missing); queued as a ``notice`` task in the same chat it
waits out the chat's hold like any send, is retried, and survives restarts.
The dedup key makes it one notice per failed task. The queue itself queues
the notice, in the transaction that makes the task dead (every path: a failed
attempt, the repairs, the startup reclaim, an unreadable payload), so no
crash can fall between the two; this module words and sends it.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import attrs

from xbot.delivery import KIND as DELIVER
from xbot.delivery import DeliverPayload
from xbot.errors import PayloadError, Permanent
from xbot.queue import NOTICE_KIND, NOTICE_MAX_ATTEMPTS, Task, payload_identity
from xbot.sender import Sender
from xbot.worker import TaskContext

KIND = NOTICE_KIND
MAX_ATTEMPTS = NOTICE_MAX_ATTEMPTS

# Said otherwise than by a message: task kind → how (a forward's prompt is edited).
TellOtherwise = Callable[[Task, str], Awaitable[None]]


def notice_text(task: Task, reason: str) -> tuple[str, int | None]:
    """The sentence for a failed task and the message it answers. Pure; never raises."""
    what, reply_to = "your link", None
    if task.kind == DELIVER:
        with contextlib.suppress(PayloadError):
            payload = DeliverPayload.from_json(task.payload)
            what, reply_to = payload.url, payload.reply_to
    if what == "your link":
        # An older or corrupt payload: name the post from whatever of it reads.
        what = payload_identity(task.payload).get("url", what)
    return f"Sorry, I could not deliver {what}: {reason.rstrip('.')}.", reply_to


def read_notice(notice: Task) -> tuple[Task | None, str, int | None]:
    """What a notice task says: (the dead task it is about, if named; text; reply_to).

    The queue writes ``{for_task, reason, of_kind, of_payload}`` with the dead
    mark (`xbot.queue._bury`); notices queued before that carry their
    ``text`` and ``reply_to`` ready-made. Raises `Permanent` for neither.
    """
    try:
        data: Any = json.loads(notice.payload)
        if "text" in data:
            reply_to = data.get("reply_to")
            return None, str(data["text"]), int(reply_to) if reply_to is not None else None
        dead = attrs.evolve(
            notice,
            id=int(data["for_task"]),
            kind=str(data["of_kind"]),
            payload=str(data["of_payload"]),
            state="dead",
        )
        reason = str(data["reason"])
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise Permanent("unreadable notice", notify=False) from exc
    text, reply_to = notice_text(dead, reason)
    return dead, text, reply_to


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
        dead, text, reply_to = read_notice(ctx.task)
        if dead is not None and dead.kind in self.otherwise:
            data = json.loads(ctx.task.payload)
            await self.otherwise[dead.kind](dead, str(data["reason"]))
            return
        group = ctx.task.chat_id < 0
        await self.sender.send_text(
            ctx.task.chat_id, text, reply_to=reply_to, group=group, html=False
        )
