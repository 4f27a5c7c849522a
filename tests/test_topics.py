"""Forum topics end to end: everything the bot sends because of a message in a
topic lands in that topic — replies or not, after a restart, after the link was
deleted — and a topic closed or deleted meanwhile gets the answer in General,
once. The real PTB client against the Bot API stand-in, which places each
message as Telegram does (`standins.botapi._topics`)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from standins import topic_of
from standins.harness import Harness, mp4_with_header
from standins.queue_sync import SyncQueue
from xbot.links import classify
from xbot.sending.destination import Destination
from xbot.storage.db import connect
from xbot.tasks.delivery import KIND
from xbot.tasks.other_sites import OtherSites
from xbot.tasks.payloads import DeliverPayload

FORUM = -1002000
CHANNEL = -1009001
ADMIN = 2002
MEMBER = 2001
Json = dict[str, Any]


@pytest.fixture
async def h(tmp_path: Path) -> AsyncIterator[Harness]:
    harness = await Harness.start(tmp_path / "data", start_bot=False)
    harness.api.add_forum(FORUM, "Big forum", admins=[ADMIN])
    harness.api.add_chat(CHANNEL, "channel", title="My Channel", creator=ADMIN)
    await harness.start_bot()
    try:
        yield harness
    finally:
        await harness.stop()


def in_topic(h: Harness, topic: int | None) -> list[Json]:
    return [m for m in h.sent(FORUM) if topic_of(m) == topic]


def thread_ids_named(h: Harness) -> set[object]:
    """Every message_thread_id the bot named in the forum."""
    return {c.params.get("message_thread_id") for c in h.api.calls if c.chat_id == FORUM}


async def link_in(h: Harness, topic: int | None, text: str, *, user: int = MEMBER) -> Json:
    before = len(h.sent(FORUM))
    update = h.api.user_message(FORUM, text, user_id=user, topic_id=topic)
    await h.api.wait_for(lambda: len(h.sent(FORUM)) > before, 10)
    await h.wait_idle()
    return dict(update["message"])


async def test_media_albums_and_sentences_land_in_the_links_topic(h: Harness) -> None:
    cats = h.api.create_topic(FORUM, "Cats")
    dogs = h.api.create_topic(FORUM, "Dogs")
    h.fx.add_post("401", text="one", photos=[h.photo("one")])
    h.fx.add_post("402", text="three", photos=[h.photo(f"t{i}") for i in range(3)])
    h.fx.add_post("403", author=("Ann", "ann"), text="only words")
    h.fx.add_post("404", deleted=True)
    await link_in(h, cats, "https://x.com/a/status/401")
    await link_in(h, dogs, "https://x.com/a/status/402")
    await link_in(h, cats, "https://x.com/a/status/403")
    await link_in(h, dogs, "https://x.com/a/status/404")
    assert ["photo" in m for m in in_topic(h, cats)] == [True, False]
    assert "only words" in in_topic(h, cats)[1]["text"]
    assert ["photo" in m for m in in_topic(h, dogs)] == [True, True, True, False]
    assert "deleted" in in_topic(h, dogs)[3]["text"]
    assert in_topic(h, None) == []
    assert thread_ids_named(h) <= {None, cats, dogs}


async def test_general_is_never_named(h: Harness) -> None:
    h.fx.add_post("405", text="general", photos=[h.photo("g")])
    h.fx.add_post("406", text="reply thread", photos=[h.photo("r")])
    await link_in(h, None, "https://x.com/a/status/405")
    # A reply in General carries a message_thread_id that is no topic: not to be named.
    root = h.api.user_message(FORUM, "talk", user_id=ADMIN)["message"]["message_id"]
    before = len(h.sent(FORUM))
    update = h.api.user_message(FORUM, "https://x.com/a/status/406", user_id=MEMBER, reply_to=root)
    assert update["message"]["message_thread_id"] == root
    await h.api.wait_for(lambda: len(h.sent(FORUM)) > before, 10)
    await h.wait_idle()
    assert len(in_topic(h, None)) == 2
    assert thread_ids_named(h) == {None}
    assert all(c.status == 200 for c in h.api.calls if c.chat_id == FORUM)


async def test_commands_and_menus_answer_in_the_topic(h: Harness) -> None:
    topic = h.api.create_topic(FORUM, "Bot corner")
    for command in ("/help", "/start", "/settings", "/channel"):
        await link_in(h, topic, command, user=ADMIN)
    answers = in_topic(h, topic)
    assert len(answers) == 4
    assert in_topic(h, None) == []


async def test_the_answer_stays_in_the_topic_when_the_link_was_deleted(h: Harness) -> None:
    topic = h.api.create_topic(FORUM, "Cats")
    # Slower than the second after which the chat action shows.
    h.fx.add_post("407", text="slow", photos=[h.photo("slow")], delay=1.3)
    before = len(h.sent(FORUM))
    update = h.api.user_message(FORUM, "https://x.com/a/status/407", user_id=MEMBER, topic_id=topic)
    await h.api.wait_for(lambda: h.fx.hits.get("/a/status/407", 0) >= 1, 10)
    h.api.delete_message(FORUM, update["message"]["message_id"])  # an anti-spam bot, say
    await h.api.wait_for(lambda: len(h.sent(FORUM)) > before, 10)
    await h.wait_idle()
    (photo,) = in_topic(h, topic)
    assert "photo" in photo
    assert in_topic(h, None) == []
    actions = [c for c in h.api.calls_for("sendChatAction", FORUM) if c.status == 200]
    assert actions, "the fetch took long enough to show a chat action"
    assert {c.params.get("message_thread_id") for c in actions} == {topic}


async def test_a_task_from_before_a_restart_answers_in_its_topic(h: Harness) -> None:
    topic = h.api.create_topic(FORUM, "Cats")
    link = h.api.user_message(FORUM, "talk", user_id=MEMBER, topic_id=topic)["message"]
    await h.stop_bot()  # the bot is down; the task below is what it had written
    h.fx.add_post("408", text="durable", photos=[h.photo("d")])
    found = classify("https://x.com/a/status/408")
    assert found is not None
    dest = Destination(FORUM, "supergroup", topic, link["message_id"])
    h.api.delete_message(FORUM, link["message_id"])  # and the link went meanwhile
    conn = connect(h.settings.db_path)
    try:
        payload = DeliverPayload.for_link(found, dest).to_json()
        SyncQueue(conn).enqueue(KIND, payload, FORUM, now=h.clock())
    finally:
        conn.close()
    await h.start_bot()
    await h.api.wait_for(lambda: in_topic(h, topic), 10)
    await h.wait_idle()
    assert ["photo" in m for m in in_topic(h, topic)] == [True]
    assert in_topic(h, None) == []


async def test_a_task_written_before_topics_were_stored_answers_by_its_quote(
    h: Harness,
) -> None:
    topic = h.api.create_topic(FORUM, "Cats")
    link = h.api.user_message(FORUM, "talk", user_id=MEMBER, topic_id=topic)["message"]
    await h.stop_bot()
    h.fx.add_post("412", text="old payload", photos=[h.photo("o")])
    old = {"v": 1, "url": "https://x.com/a/status/412", "key": "x:412", "kind": "x",
           "post_id": "412", "handle": "a", "reply_to": link["message_id"],
           "chat_type": "supergroup"}  # fmt: skip
    conn = connect(h.settings.db_path)
    try:
        SyncQueue(conn).enqueue(KIND, json.dumps(old), FORUM, now=h.clock())
    finally:
        conn.close()
    await h.start_bot()
    await h.api.wait_for(lambda: in_topic(h, topic), 10)
    await h.wait_idle()
    assert ["photo" in m for m in in_topic(h, topic)] == [True]


async def test_a_dead_letter_notice_lands_in_the_topic(h: Harness) -> None:
    topic = h.api.create_topic(FORUM, "Cats")
    # An answer over the size cap cannot succeed (a body that is not JSON would be
    # an outage of the source since the chain of sources, and be retried).
    h.fx.add_post("409", text="broken", fault="huge")
    update = h.api.user_message(FORUM, "https://x.com/a/status/409", user_id=MEMBER, topic_id=topic)
    h.api.delete_message(FORUM, update["message"]["message_id"])
    await h.api.wait_for(lambda: in_topic(h, topic), 15)
    await h.wait_idle()
    (notice,) = in_topic(h, topic)
    assert "could not deliver" in notice["text"]


async def test_the_forward_prompt_and_its_edits_stay_in_the_topic(h: Harness) -> None:
    topic = h.api.create_topic(FORUM, "Cats")
    await h.services.chats.set_settings(
        FORUM, h.clock(), channel_id=CHANNEL, channel_title="My Channel"
    )
    h.fx.add_post("410", text="to forward", photos=[h.photo("f")])
    await link_in(h, topic, "https://x.com/a/status/410")
    await h.api.wait_for(lambda: len(in_topic(h, topic)) >= 2, 10)
    photo, prompt = in_topic(h, topic)
    assert "photo" in photo
    assert "Forward" in prompt["text"]
    rows = prompt["reply_markup"]["inline_keyboard"]
    data = {b["text"]: b["callback_data"] for row in rows for b in row}
    label = next(k for k in data if "Forward" in k)
    update = h.api.callback_query(FORUM, prompt["message_id"], data[label], ADMIN)
    await h.api.wait_for(lambda: update["callback_query"]["id"] in h.api.callback_answers, 5)
    await h.api.wait_for(lambda: h.sent(CHANNEL), 10)
    await h.wait_idle()
    edited = h.api.message(FORUM, prompt["message_id"])
    assert edited is not None
    assert topic_of(edited) == topic
    assert in_topic(h, None) == []


async def test_a_caption_edit_asked_and_answered_in_the_topic(h: Harness) -> None:
    topic = h.api.create_topic(FORUM, "Cats")
    await h.services.chats.set_settings(
        FORUM, h.clock(), channel_id=CHANNEL, channel_title="My Channel"
    )
    h.fx.add_post("413", text="to edit", photos=[h.photo("e")])
    await link_in(h, topic, "https://x.com/a/status/413")
    await h.api.wait_for(lambda: len(in_topic(h, topic)) >= 2, 10)
    prompt = in_topic(h, topic)[1]

    async def press(label: str) -> None:
        def keyboard() -> dict[str, str]:
            now = h.api.message(FORUM, prompt["message_id"]) or {}
            rows = now.get("reply_markup", {}).get("inline_keyboard", [])
            return {b["text"]: b["callback_data"] for row in rows for b in row}

        await h.api.wait_for(lambda: label in keyboard(), 5)
        update = h.api.callback_query(FORUM, prompt["message_id"], keyboard()[label], ADMIN)
        await h.api.wait_for(lambda: update["callback_query"]["id"] in h.api.callback_answers, 5)

    def prompt_text() -> str:
        return str((h.api.message(FORUM, prompt["message_id"]) or {}).get("text", ""))

    await press("Edit caption")
    await h.api.wait_for(lambda: "Send me" in prompt_text(), 5)
    h.api.user_message(FORUM, "new words", user_id=ADMIN, topic_id=topic)
    await h.api.wait_for(lambda: "The caption will be" in prompt_text(), 5)
    await press("Forward")
    await h.api.wait_for(lambda: h.sent(CHANNEL), 10)
    await h.wait_idle()
    assert h.sent(CHANNEL)[0]["caption"] == "new words"
    assert len(in_topic(h, topic)) == 2, "the prompt was edited in place, in the topic"
    assert in_topic(h, None) == []


@pytest.mark.parametrize("what", ["closed", "deleted"])
async def test_a_topic_gone_meanwhile_gets_the_answer_in_general_once(
    h: Harness, what: str
) -> None:
    topic = h.api.create_topic(FORUM, "Cats")
    h.fx.add_post("411", text="late", photos=[h.photo(f"l{i}") for i in range(2)], delay=0.5)
    h.api.user_message(FORUM, "https://x.com/a/status/411", user_id=MEMBER, topic_id=topic)
    await h.api.wait_for(lambda: h.fx.hits.get("/a/status/411", 0) >= 1, 10)
    if what == "closed":
        h.api.close_topic(FORUM, topic)
    else:
        h.api.delete_topic(FORUM, topic)
    await h.api.wait_for(lambda: in_topic(h, None), 10)
    await h.wait_idle()
    assert ["photo" in m for m in in_topic(h, None)] == [True, True]
    refused = [c for c in h.api.calls if c.chat_id == FORUM and c.status == 400]
    assert len(refused) == 1, "one refusal, then General: never a retry loop"
    assert refused[0].params.get("message_thread_id") == topic


async def test_the_status_message_of_a_long_download_is_in_the_topic(tmp_path: Path) -> None:
    h = await Harness.start(tmp_path / "data", start_bot=False, ytdlp_sites="all")
    try:
        h.api.add_forum(FORUM, "Big forum", admins=[ADMIN])
        await h.start_bot()
        await h.services.chats.set_settings(FORUM, h.clock(), ytdlp=True)
        other = h.services.delivery.other_sites
        assert isinstance(other, OtherSites)
        other.progress_first, other.progress_every = 0.3, 1.0
        other.source.overrides = {"ratelimit": 400_000}  # about 2 s for 800 kB
        topic = h.api.create_topic(FORUM, "Clips")
        url = h.media.add("/media/clip.mp4", mp4_with_header(800_000), "video/mp4")
        h.api.user_message(FORUM, url, user_id=MEMBER, topic_id=topic)
        await h.api.wait_for(lambda: h.api.calls_for("sendVideo", FORUM), 20)
        await h.wait_idle(10)
        (status,) = [c for c in h.api.calls_for("sendMessage", FORUM) if c.status == 200]
        assert status.params.get("message_thread_id") == topic, "named, not only by the quote"
        assert ["video" in m for m in in_topic(h, topic)] == [True]
        assert in_topic(h, None) == []
    finally:
        await h.stop()
