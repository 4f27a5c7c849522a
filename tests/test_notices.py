"""Dead-letter notices: queued by the queue with the dead mark, worded and sent here."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from xbot.errors import Permanent
from xbot.sending.destination import Destination
from xbot.sources.x import DELETED
from xbot.storage.db import DbPool, open_store
from xbot.storage.queue import Task, TaskQueue
from xbot.tasks.notices import Notices, read_notice
from xbot.tasks.payloads import DeliverPayload
from xbot.tasks.worker import TaskContext

T0 = 1_000_000.0
URL = "https://x.com/alice/status/1"


@pytest.fixture
async def q(tmp_path: Path) -> AsyncIterator[TaskQueue]:
    pool: DbPool = await open_store(tmp_path / "q.sqlite3")
    yield TaskQueue(pool)
    await pool.close()


async def bury(
    q: TaskQueue, kind: str, payload: str, reason: str = "the host kept failing"
) -> Task:
    """A task of ``kind`` dead-lettered; returns its notice task, leased."""
    await q.enqueue(kind, payload, 42, now=T0)
    leased = await q.lease_next(T0)
    assert leased is not None
    await q.dead_letter(leased.lease, T0, "technical detail", tell=reason)
    notice = await q.lease_next(T0)
    assert notice is not None
    assert notice.kind == "notice"
    return notice


async def test_a_notice_names_the_post_and_answers_its_message(q: TaskQueue) -> None:
    dest = Destination(42, "supergroup", topic_id=3, reply_to=7)
    payload = DeliverPayload(url=URL, key="x:1", kind="x", dest=dest).to_json()
    notice = await bury(q, "deliver", payload)
    dead, _, text, to = read_notice(notice)
    assert dead is not None
    assert (dead.kind, dead.payload) == ("deliver", payload)
    assert text == f"Sorry, I could not deliver {URL}: the host kept failing."
    assert to == dest  # the same topic, answering the same message


@pytest.mark.parametrize(
    ("reason", "said"),
    [
        (DELETED, "Dieser Beitrag wurde gelöscht oder existiert nicht"),  # a msgid: translated
        ("HTTP 418 from the host", "HTTP 418 from the host"),  # a detail filled in: as written
    ],
    ids=["msgid", "detail"],
)
async def test_a_notice_speaks_the_language_its_task_carries(
    q: TaskQueue, reason: str, said: str
) -> None:
    dest = Destination(42, "supergroup", reply_to=7, lang="de")
    payload = DeliverPayload(url=URL, key="x:1", kind="x", dest=dest).to_json()
    _, _, text, to = read_notice(await bury(q, "deliver", payload, reason))
    assert text == f"Tut mir leid, ich konnte {URL} nicht zustellen: {said}."
    assert to.lang == "de"


async def test_an_unreadable_payload_still_names_what_it_can(q: TaskQueue) -> None:
    notice = await bury(q, "deliver", f'{{"url": "{URL}", oops', "the task could not be read")
    _, _, text, to = read_notice(notice)
    assert text == f"Sorry, I could not deliver {URL}: the task could not be read."
    assert to.reply_to is None


@pytest.mark.parametrize(
    ("payload", "text", "reply_to"),
    [
        ('{"text": "Sorry.", "reply_to": 5, "for_task": 1}', "Sorry.", 5),  # queued before 0005
        ('{"text": "Sorry.", "for_task": 1}', "Sorry.", None),
    ],
    ids=["old-with-reply", "old-without-reply"],
)
def test_notices_queued_by_an_older_version_still_send(
    payload: str, text: str, reply_to: int | None
) -> None:
    old = Task(1, "notice", 42, payload, "running", None, 1, 8, T0, "t", T0 + 90, None, T0, T0)
    dead, _, said, dest = read_notice(old)
    assert (dead, said, dest.reply_to) == (None, text, reply_to)


@pytest.mark.parametrize("payload", ["not json", "[]", '{"for_task": 1}'], ids=str)
def test_an_unreadable_notice_is_permanent_and_tells_no_one(payload: str) -> None:
    junk = Task(1, "notice", 42, payload, "running", None, 1, 8, T0, "t", T0 + 90, None, T0, T0)
    with pytest.raises(Permanent) as info:
        read_notice(junk)
    assert not info.value.notify


class Said:
    """A sender that keeps what it was asked to send."""

    def __init__(self) -> None:
        self.texts: list[tuple[int, str, int | None]] = []

    async def send_text(self, dest: Destination, text: str, **kw: Any) -> None:
        self.texts.append((dest.chat_id, text, dest.reply_to))


async def test_a_forward_is_told_on_its_prompt_a_delivery_by_a_message(q: TaskQueue) -> None:
    told: list[tuple[int, str]] = []

    async def on_prompt(task: Task, reason: str) -> None:
        told.append((task.id, reason))

    said = Said()
    notices = Notices(said, {"forward": on_prompt})  # type: ignore[arg-type]
    forward = await bury(q, "forward", json.dumps({"chat_id": 42}), "the channel is gone")
    await notices.run(TaskContext(forward, q, lambda: T0))
    await q.mark_done(forward.lease, T0)
    assert told == [(json.loads(forward.payload)["for_task"], "the channel is gone")]
    assert said.texts == []
    deliver = await bury(q, "deliver", DeliverPayload(url=URL, key="k", kind="x").to_json())
    await notices.run(TaskContext(deliver, q, lambda: T0))
    assert said.texts == [(42, f"Sorry, I could not deliver {URL}: the host kept failing.", None)]
