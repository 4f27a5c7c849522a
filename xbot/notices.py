"""Dead-letter notices, as durable tasks of their own.

When a task finally fails, the chat gets one message naming the post and the
reason. Sending it inline, once, lost it to the next 429, 5xx or kill (the
soak saw 2 of 19 go missing); queued as a ``notice`` task in the same chat it
waits out the chat's hold like any send, is retried, and survives restarts.
The dedup key makes it one notice per failed task.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import attrs

from xbot.delivery import KIND as DELIVER
from xbot.delivery import DeliverPayload
from xbot.errors import PayloadError, Permanent
from xbot.queue import Task, TaskQueue, payload_identity
from xbot.sender import Sender
from xbot.worker import TaskContext

KIND = "notice"
MAX_ATTEMPTS = 8


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


async def queue_notice(queue: TaskQueue, task: Task, reason: str, now: float) -> None:
    """Queue the one notice for `task` (a second call for the same task is a no-op)."""
    text, reply_to = notice_text(task, reason)
    await queue.enqueue(
        KIND,
        {"text": text, "reply_to": reply_to, "for_task": task.id},
        task.chat_id,
        now=now,
        dedup_key=f"notice:{task.id}",
        max_attempts=MAX_ATTEMPTS,
    )


@attrs.define
class Notices:
    """Sends queued notices (the ``notice`` task kind)."""

    sender: Sender

    async def run(self, ctx: TaskContext) -> None:
        try:
            data: Any = json.loads(ctx.task.payload)
            text = str(data["text"])
            reply_to = data.get("reply_to")
            reply_to = int(reply_to) if reply_to is not None else None
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise Permanent("unreadable notice", notify=False) from exc
        group = ctx.task.chat_id < 0
        await self.sender.send_text(
            ctx.task.chat_id, text, reply_to=reply_to, group=group, html=False
        )
