"""The outbox: planned steps go out in order, each recorded before the next leaves,
steps already recorded are skipped, and the follow-up runs once per task."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import attrs

from xbot.sending.destination import Destination
from xbot.sending.sender import OutMedia, Sender
from xbot.sending.sent import SentItem
from xbot.storage.link_cache import LinkCache
from xbot.storage.queue import Task, TaskQueue
from xbot.tasks.outbox import Delivered, Outbox
from xbot.tasks.payloads import DeliverPayload
from xbot.tasks.worker import TaskContext

DEST = Destination(-100, "supergroup", 7, 3)


@attrs.define
class Journal:
    """A sender and a queue in one: what went out and what was written, in order."""

    events: list[tuple[str, Any]] = attrs.field(factory=list)

    async def send_media(
        self, dest: Destination, items: Sequence[OutMedia], *, caption: str | None, spoiler: bool
    ) -> list[tuple[SentItem, int]]:
        self.events.append(("send", (dest, [i.source for i in items], caption)))
        return [(SentItem(i.kind, f"id-{i.source}"), n) for n, i in enumerate(items)]

    async def save_progress(self, lease: Any, now: float, *, payload: Any, effects: Any) -> None:
        self.events.append(("write", DeliverPayload.from_json(payload).steps_sent()))


def context(journal: Journal, payload: DeliverPayload) -> TaskContext:
    task = Task(1, "deliver", DEST.chat_id, payload.to_json(), "running", None, 1, 5, 0.0,
                "t", 9.0, None, 0.0, 0.0)  # fmt: skip
    return TaskContext(task, cast("TaskQueue", journal), lambda: 1.0)


def outbox(journal: Journal, **kw: Any) -> Outbox:
    return Outbox(cast("Sender", journal), cast("LinkCache", None), **kw)


async def test_steps_go_out_in_order_each_written_before_the_next() -> None:
    journal = Journal()
    payload = DeliverPayload(url="u", key="k", kind="x", dest=DEST)
    ctx = context(journal, payload)
    box = outbox(journal)
    items = [SentItem("photo", f"p{i}") for i in range(3)] + [SentItem("gif", "g")]
    state = [payload]

    async def record(index: int, sent: list[SentItem], message_id: int | None) -> None:
        state[0] = box.record(ctx, state[0], index, sent)

    await box.send_file_ids(ctx, DEST, items, caption="cap", spoiler=False, done=(), record=record)
    assert journal.events == [
        ("send", (DEST, ["p0", "p1", "p2"], "cap")),
        ("write", frozenset({0})),
        ("send", (DEST, ["g"], None)),
    ]
    assert state[0].steps_sent() == {0, 1}  # the last rides on the done mark


async def test_recorded_steps_are_not_sent_again() -> None:
    journal = Journal()
    payload = DeliverPayload(url="u", key="k", kind="x", dest=DEST)
    ctx = context(journal, payload)

    async def record(index: int, sent: list[SentItem], message_id: int | None) -> None:
        pass

    items = [SentItem("gif", "a"), SentItem("gif", "b")]
    await outbox(journal).send_file_ids(
        ctx,
        DEST,
        items,
        caption="cap",
        spoiler=False,
        done={0},
        record=record,
    )
    assert [e for e in journal.events if e[0] == "send"] == [("send", (DEST, ["b"], None))]


async def test_the_follow_up_runs_once_and_only_after_something_was_sent() -> None:
    journal = Journal()
    seen: list[Delivered] = []

    async def on_delivered(ctx: TaskContext, delivered: Delivered) -> None:
        seen.append(delivered)

    box = outbox(journal, on_delivered=on_delivered)
    payload = DeliverPayload(url="u", key="k", kind="x", dest=DEST, user_id=4)
    ctx = context(journal, payload)
    await box.announce(ctx, payload, "https://x.com/a/status/1", {"text": "t"})
    assert seen == [], "nothing was sent"
    sent = box.record(ctx, payload, 0, [SentItem("photo", "f")])
    await box.announce(ctx, sent, "https://x.com/a/status/1", {"text": "t"})
    again = DeliverPayload.from_json(ctx.task.payload)
    await box.announce(ctx, again, "https://x.com/a/status/1", {"text": "t"})
    assert len(seen) == 1
    assert seen[0].dest == DEST
    assert seen[0].items == (SentItem("photo", "f"),)
    assert seen[0].user_id == 4
