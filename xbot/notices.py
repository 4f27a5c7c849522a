"""Dead-letter notices, as durable tasks of their own.

When a task finally fails, the chat gets one message naming the post and the
reason. Sending it inline, once, lost it to the next 429, 5xx or kill (the
soak saw 2 of 19 go missing); queued as a ``notice`` task in the same chat it
waits out the chat's hold like any send, is retried, and survives restarts.
The dedup key makes it one notice per failed task. It goes where the failed
task's answer would have gone (its `Destination`: the same topic, replying to
the same message).
"""

from __future__ import annotations

import contextlib

import attrs

from xbot.destination import Destination
from xbot.errors import PayloadError, Permanent
from xbot.payloads import DELIVER, NOTICE, DeliverPayload, NoticePayload, payload_identity
from xbot.queue import Task, TaskQueue
from xbot.sender import Sender
from xbot.worker import TaskContext

KIND = NOTICE
MAX_ATTEMPTS = 8


def notice_text(task: Task, reason: str) -> tuple[str, Destination]:
    """The sentence for a failed task and where it goes. Pure; never raises."""
    what = "your link"
    dest = Destination.legacy(task.chat_id, chat_type=None, reply_to=None)
    if task.kind == DELIVER:
        with contextlib.suppress(PayloadError):
            payload = DeliverPayload.from_task(task)
            what, dest = payload.url, payload.dest
    if what == "your link":
        # An older or corrupt payload: name the post from whatever of it reads.
        what = payload_identity(task.payload).get("url", what)
    return f"Sorry, I could not deliver {what}: {reason.rstrip('.')}.", dest


async def queue_notice(queue: TaskQueue, task: Task, reason: str, now: float) -> None:
    """Queue the one notice for `task` (a second call for the same task is a no-op)."""
    text, dest = notice_text(task, reason)
    await queue.enqueue(
        KIND,
        NoticePayload(text, dest, task.id).to_json(),
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
            notice = NoticePayload.from_task(ctx.task)
        except PayloadError as exc:
            raise Permanent("unreadable notice", notify=False) from exc
        await self.sender.send_text(notice.dest, notice.text, html=False)
