"""Every button, end to end: the real PTB client against the Bot API stand-in.

Forward, edit then forward, skip, expired, pressed twice, pressed by someone
else, forged data; the settings menu; the dead-letter retry. Time is an
injected clock (the prompt TTL passes by moving it), never a sleep.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from conftest import WallClock
from telegram import MessageEntity

from standins.harness import Harness
from xbot.handlers.callbacks import sound_link
from xbot.runtime import sweep_once
from xbot.tasks.callback_data import Action, CallbackData, encode
from xbot.tasks.prompts import PROMPT

USER = 1001  # a private chat's id is its user's id
GROUP = -600
MEMBER, ADMIN, STRANGER = 2001, 2002, 2003
CHANNEL = -1009001
OPERATOR = 4242
TTL = 60.0
Json = dict[str, Any]


@pytest.fixture
async def h(start_harness: Callable[..., Awaitable[Harness]]) -> Harness:
    harness = await start_harness(
        start_bot=False, admin_ids=frozenset({OPERATOR}), caption_edit_ttl=TTL
    )
    harness.clock = WallClock()
    harness.api.add_chat(CHANNEL, "channel", title="My Channel", username="mychan",
                         creator=USER, admins=[ADMIN])  # fmt: skip
    harness.api.add_chat(GROUP, "supergroup", title="The Group", admins=[ADMIN])
    await harness.start_bot()
    return harness


def clock(h: Harness) -> WallClock:
    assert isinstance(h.clock, WallClock)
    return h.clock


async def link_channel(h: Harness, chat: int, **settings: Any) -> None:
    await h.services.chats.set_settings(
        chat, h.clock(), channel_id=CHANNEL, channel_title="My Channel", **settings
    )


def buttons(message: Json | None) -> dict[str, str]:
    """label -> callback data of a message's inline keyboard."""
    if message is None:
        return {}
    rows = message.get("reply_markup", {}).get("inline_keyboard", [])
    return {b["text"]: b["callback_data"] for row in rows for b in row}


def prompts(h: Harness, chat: int) -> list[Json]:
    return [m for m in h.sent(chat) if "Forward this post" in m.get("text", "")]


def current(h: Harness, chat: int, message: Json) -> Json:
    found = h.api.message(chat, message["message_id"])
    assert found is not None
    return found


def channel_posts(h: Harness) -> list[Json]:
    return h.sent(CHANNEL)


async def post_and_prompt(
    h: Harness, chat: int, post_id: str, *, photos: int = 1, user_id: int | None = None,
    chat_type: str = "private", text: str = "hello world",
) -> Json:  # fmt: skip
    """A link in `chat`; returns the forward prompt that follows the media."""
    urls = [h.photo(f"{post_id}-{i}") for i in range(photos)]
    h.fx.add_post(post_id, text=text, photos=urls)
    before = len(prompts(h, chat))
    h.api.user_message(chat, f"https://x.com/alice/status/{post_id}", user_id=user_id,
                       chat_type=chat_type)  # fmt: skip
    await h.api.wait_for(lambda: len(prompts(h, chat)) > before, 10)
    await h.wait_idle()
    return prompts(h, chat)[-1]


async def press(
    h: Harness, chat: int, message: Json, data: str, user_id: int | None = None
) -> str | None:
    """Press a button (or send forged `data`) under `message`; returns the answer's text."""
    update = h.api.callback_query(chat, message["message_id"], data, user_id)
    query_id = update["callback_query"]["id"]
    await h.api.wait_for(lambda: query_id in h.api.callback_answers, 5)
    text = h.api.callback_answers[query_id].get("text")
    return str(text) if text is not None else None


async def press_label(
    h: Harness, chat: int, message: Json, label: str, user_id: int | None = None
) -> str | None:
    # The previous press is answered before its edit lands: wait for the button to show.
    await h.api.wait_for(lambda: label in buttons(current(h, chat, message)), 5)
    data = buttons(current(h, chat, message))[label]
    return await press(h, chat, message, data, user_id)


async def barrier(h: Harness, chat: int, **kw: Any) -> None:
    """Make sure the bot has handled what was sent before: a /help from the same sender
    is answered only after the updates before it were taken (handlers are quick)."""
    before = len(h.sent(chat))
    h.api.user_message(chat, "/help", **kw)
    await h.api.wait_for(lambda: len(h.sent(chat)) > before, 5)
    await h.wait_idle()


async def forwarded(h: Harness, count: int = 1) -> list[Json]:
    await h.api.wait_for(lambda: len(channel_posts(h)) >= count, 10)
    await h.wait_idle()
    return channel_posts(h)


async def prompt_record(h: Harness, chat: int, message: Json) -> object:
    state = await h.services.chats.get(chat, h.clock())
    for record in state.records.values():
        if record.kind == PROMPT and record.data.get("message_id") == message["message_id"]:
            return record
    return None


# --- forward ---------------------------------------------------------------------------------


async def test_no_channel_no_prompt(h: Harness) -> None:
    h.fx.add_post("1", text="x", photos=[h.photo("p1")])
    h.api.user_message(USER, "https://x.com/alice/status/1")
    await h.api.wait_for(lambda: h.sent(USER), 10)
    await h.wait_idle()
    assert all(not buttons(m) for m in h.sent(USER))


async def test_a_channel_is_not_offered_to_forward_to_itself(h: Harness) -> None:
    await link_channel(h, CHANNEL)
    h.fx.add_post("2", text="x", photos=[h.photo("p2")])
    h.api.user_message(CHANNEL, "https://x.com/alice/status/2")
    await h.api.wait_for(lambda: any("photo" in m for m in h.sent(CHANNEL)), 10)
    await h.wait_idle()
    assert all(not buttons(m) for m in h.sent(CHANNEL))


async def test_forward_copies_by_file_id_with_the_caption(h: Harness) -> None:
    await link_channel(h, USER)
    prompt = await post_and_prompt(h, USER, "10", text="to the channel")
    media = h.sent(USER)[-2]
    assert set(buttons(prompt)) == {"Forward to channel", "Edit caption", "Skip"}
    assert "My Channel" in prompt["text"]
    assert await press_label(h, USER, prompt, "Forward to channel") == "Forwarding…"
    (post,) = await forwarded(h)
    assert post["photo"][-1]["file_id"] == media["photo"][-1]["file_id"]
    assert post["caption"] == media["caption"]
    (call,) = [c for c in h.api.calls_for("sendPhoto", CHANNEL) if c.status == 200]
    assert not call.params["photo"].startswith("http"), "copied by file_id, not fetched again"
    await h.api.wait_for(lambda: "Forwarded" in current(h, USER, prompt)["text"], 5)
    done = current(h, USER, prompt)
    assert done["text"] == "Forwarded to My Channel."
    assert not buttons(done)
    assert await prompt_record(h, USER, prompt) is None


async def test_album_is_forwarded_as_one_media_group(h: Harness) -> None:
    await link_channel(h, USER)
    prompt = await post_and_prompt(h, USER, "11", photos=3)
    await press_label(h, USER, prompt, "Forward to channel")
    posts = await forwarded(h, 3)
    assert len(posts) == 3
    assert len({p["media_group_id"] for p in posts}) == 1
    assert "caption" in posts[0]
    assert all("caption" not in p for p in posts[1:])
    calls = [c for c in h.api.calls_for("sendMediaGroup", CHANNEL) if c.status == 200]
    assert len(calls) == 1
    assert all(not m["media"].startswith("http") for m in calls[0].params["media"])


async def test_edit_then_forward_uses_the_new_caption(h: Harness) -> None:
    await link_channel(h, USER)
    prompt = await post_and_prompt(h, USER, "12")
    assert await press_label(h, USER, prompt, "Edit caption") == "Send me the new caption."
    await h.api.wait_for(lambda: "Send me" in current(h, USER, prompt)["text"], 5)
    asking = current(h, USER, prompt)
    assert set(buttons(asking)) == {"Keep caption", "Skip"}
    sent_before = len(h.sent(USER))
    # The new caption holds a link: it is a caption, not a post to fetch.
    h.api.user_message(USER, "My <own> words https://x.com/bob/status/999")
    await h.api.wait_for(lambda: "The caption will be" in current(h, USER, prompt)["text"], 5)
    confirm = current(h, USER, prompt)
    assert "My &lt;own&gt; words" in confirm["text"] or "My <own> words" in confirm["text"]
    assert set(buttons(confirm)) == {"Forward", "Edit again", "Skip"}
    await press_label(h, USER, prompt, "Forward")
    (post,) = await forwarded(h)
    assert post["caption"] == "My <own> words https://x.com/bob/status/999"
    assert len(h.sent(USER)) == sent_before, "the caption was not delivered as a link"
    assert h.fx.hits.get("/bob/status/999", 0) == 0


async def test_keep_caption_then_forward(h: Harness) -> None:
    await link_channel(h, USER)
    prompt = await post_and_prompt(h, USER, "13")
    media = h.sent(USER)[-2]
    await press_label(h, USER, prompt, "Edit caption")
    assert await press_label(h, USER, prompt, "Keep caption") == "Check the caption, then forward."
    await press_label(h, USER, prompt, "Forward")
    (post,) = await forwarded(h)
    assert post["caption"] == media["caption"]


async def test_edit_before_forwarding_always_asks_first(h: Harness) -> None:
    await link_channel(h, USER, edit_before_forward=True)
    prompt = await post_and_prompt(h, USER, "14")
    assert await press_label(h, USER, prompt, "Forward to channel") == "Send me the new caption."
    assert channel_posts(h) == []
    h.api.user_message(USER, "checked first")
    await h.api.wait_for(lambda: "Forward" in buttons(current(h, USER, prompt)), 5)
    await press_label(h, USER, prompt, "Forward")
    (post,) = await forwarded(h)
    assert post["caption"] == "checked first"


async def test_skip_forwards_nothing(h: Harness) -> None:
    await link_channel(h, USER)
    prompt = await post_and_prompt(h, USER, "15")
    assert await press_label(h, USER, prompt, "Skip") == "Not forwarded."
    await h.api.wait_for(lambda: not buttons(current(h, USER, prompt)), 5)
    assert current(h, USER, prompt)["text"] == "Not forwarded."
    assert await prompt_record(h, USER, prompt) is None
    h.api.user_message(USER, "not a caption any more")
    await barrier(h, USER)
    assert current(h, USER, prompt)["text"] == "Not forwarded."
    assert channel_posts(h) == []


async def test_expired_prompt_is_edited_and_its_buttons_go(h: Harness) -> None:
    await link_channel(h, USER)
    prompt = await post_and_prompt(h, USER, "16")
    await press_label(h, USER, prompt, "Edit caption")
    await h.api.wait_for(lambda: "Keep caption" in buttons(current(h, USER, prompt)), 5)
    stale = buttons(current(h, USER, prompt))
    clock(h).offset += TTL + 1
    done = await sweep_once(h.services)
    assert done["prompts_expired"] == 1
    expired = current(h, USER, prompt)
    assert expired["text"] == "This prompt expired; nothing was forwarded."
    assert not buttons(expired)
    # A client still showing the old buttons, and a caption sent too late: nothing happens.
    assert await press(h, USER, prompt, stale["Keep caption"]) == "This button has expired."
    h.api.user_message(USER, "too late")
    await barrier(h, USER)
    assert current(h, USER, prompt) == expired
    assert channel_posts(h) == []


async def test_pressed_twice_forwards_once(h: Harness) -> None:
    await link_channel(h, USER)
    prompt = await post_and_prompt(h, USER, "17")
    data = buttons(prompt)["Forward to channel"]
    # Two presses land before the bot answers either (a double tap).
    first = h.api.callback_query(USER, prompt["message_id"], data)
    second = h.api.callback_query(USER, prompt["message_id"], data)
    ids = [u["callback_query"]["id"] for u in (first, second)]
    await h.api.wait_for(lambda: all(i in h.api.callback_answers for i in ids), 5)
    await forwarded(h)
    answers = sorted(str(h.api.callback_answers[i].get("text")) for i in ids)
    assert "Forwarding…" in answers
    # And once more after it was done, from a client that still shows the button.
    assert await press(h, USER, prompt, data) == "This button has expired."
    await barrier(h, USER)
    assert len(channel_posts(h)) == 1
    forward_tasks = await h.services.queue.list(chat_id=CHANNEL)
    assert len(forward_tasks) == 1


async def test_forged_and_malformed_data_change_nothing(h: Harness) -> None:
    await link_channel(h, USER)
    prompt = await post_and_prompt(h, USER, "18")
    prompt_id = int(buttons(prompt)["Skip"].rsplit(":", 1)[1])
    forged = [
        "garbage",
        "",
        "v2:fwd:1",
        "v1:fwd:01",
        encode(CallbackData(Action.FORWARD, (prompt_id + 1,))),
        encode(CallbackData(Action.CONFIRM, (prompt_id,))),
        encode(CallbackData(Action.SETTING, ("delete",))),
        encode(CallbackData(Action.RETRY, (1,))),
        "v1:fwd:" + "9" * 60,
    ]
    for data in forged:
        assert await press(h, USER, prompt, data) == "This button has expired.", data
    await barrier(h, USER)
    assert channel_posts(h) == []
    assert current(h, USER, prompt)["text"] == prompt["text"]
    state = await h.services.chats.get(USER, h.clock())
    assert state.settings.delete_original is False


async def test_button_on_a_message_that_never_had_it(h: Harness) -> None:
    await link_channel(h, USER)
    prompt = await post_and_prompt(h, USER, "19")
    media = h.sent(USER)[-2]
    data = buttons(prompt)["Forward to channel"]
    assert await press(h, USER, media, data) == "This button has expired."
    await h.wait_idle()
    assert channel_posts(h) == []


# --- groups: whose button is it ---------------------------------------------------------------


async def test_someone_elses_button_is_for_admins_only(h: Harness) -> None:
    await link_channel(h, GROUP)
    prompt = await post_and_prompt(h, GROUP, "20", user_id=MEMBER, chat_type="supergroup")
    assert await press_label(h, GROUP, prompt, "Skip", STRANGER) == "Only admins can do that."
    assert await press_label(h, GROUP, prompt, "Forward to channel", STRANGER) == (
        "Only admins can do that."
    )
    # Nor may the member who sent the link speak for the channel (issue 30).
    for label in ("Forward to channel", "Edit caption"):
        assert await press_label(h, GROUP, prompt, label, MEMBER) == "Only admins can do that."
    await h.wait_idle()
    assert channel_posts(h) == []
    assert buttons(current(h, GROUP, prompt)) == buttons(prompt)
    # An admin may.
    assert await press_label(h, GROUP, prompt, "Edit caption", ADMIN) == "Send me the new caption."
    assert await press_label(h, GROUP, prompt, "Keep caption", ADMIN) is not None
    await press_label(h, GROUP, prompt, "Forward", ADMIN)
    await forwarded(h)


async def test_the_owner_may_dismiss_his_own_answer(h: Harness) -> None:
    await link_channel(h, GROUP)
    prompt = await post_and_prompt(h, GROUP, "25", user_id=MEMBER, chat_type="supergroup")
    assert await press_label(h, GROUP, prompt, "Skip", MEMBER) != "Only admins can do that."
    await h.api.wait_for(lambda: not buttons(current(h, GROUP, prompt)), 5)
    assert channel_posts(h) == []


async def test_the_right_to_post_in_the_channel_is_checked_at_the_press(h: Harness) -> None:
    """Rights change after /channel linked the channel: an admin of the group who is no
    admin of the channel, a private user demoted since, the bot's own right taken away."""
    await link_channel(h, GROUP)
    h.api.add_chat(GROUP, "supergroup", title="The Group", admins=[ADMIN, STRANGER])
    h.services.authority.forget(GROUP)
    prompt = await post_and_prompt(h, GROUP, "26", user_id=MEMBER, chat_type="supergroup")
    for label in ("Forward to channel", "Edit caption"):
        answer = await press_label(h, GROUP, prompt, label, STRANGER)
        assert answer == "Only admins of My Channel who may post there can forward to it."
    await link_channel(h, USER)
    mine = await post_and_prompt(h, USER, "27")
    channel = h.api.chat(CHANNEL)
    assert channel is not None
    channel.creator = None  # the private user gave the channel away
    h.services.authority.forget(CHANNEL)
    answer = await press_label(h, USER, mine, "Forward to channel")
    assert answer == "Only admins of My Channel who may post there can forward to it."
    channel.creator = USER
    channel.bot_can_post = False
    h.services.authority.forget(CHANNEL)
    answer = await press_label(h, USER, mine, "Forward to channel")
    assert answer == (
        "I cannot post in My Channel: make me an admin there allowed to post messages."
    )
    await h.wait_idle()
    assert h.api.calls_for("sendPhoto", CHANNEL) == []
    assert await h.services.queue.list(chat_id=CHANNEL) == []
    assert buttons(current(h, USER, mine)) == buttons(mine)


async def test_caption_by_reply_to_the_prompt_in_a_group(h: Harness) -> None:
    """With privacy mode on, a bot sees replies to itself: that path must work alone."""
    await link_channel(h, GROUP)
    prompt = await post_and_prompt(h, GROUP, "21", user_id=MEMBER, chat_type="supergroup")
    # A member's reply (the link's own sender's too) is an ordinary message; an admin's
    # reply is the caption.
    for who in (STRANGER, MEMBER):
        h.api.user_message(GROUP, "not mine to edit", user_id=who, chat_type="supergroup",
                           reply_to=prompt["message_id"])  # fmt: skip
        await barrier(h, GROUP, user_id=who)
    assert current(h, GROUP, prompt)["text"] == prompt["text"]
    h.api.user_message(GROUP, "admin's words", user_id=ADMIN, chat_type="supergroup",
                       reply_to=prompt["message_id"])  # fmt: skip
    await h.api.wait_for(lambda: "admin's words" in current(h, GROUP, prompt)["text"], 5)
    await press_label(h, GROUP, prompt, "Forward", ADMIN)
    (post,) = await forwarded(h)
    assert post["caption"] == "admin's words"


async def test_anonymous_admins_reply_sets_the_caption(h: Harness) -> None:
    await link_channel(h, GROUP)
    prompt = await post_and_prompt(h, GROUP, "22", user_id=MEMBER, chat_type="supergroup")
    h.api.user_message(GROUP, "from the admins", chat_type="supergroup", sender_chat=GROUP,
                       reply_to=prompt["message_id"])  # fmt: skip
    await h.api.wait_for(lambda: "from the admins" in current(h, GROUP, prompt)["text"], 5)


async def test_only_the_editor_s_next_text_is_the_caption(h: Harness) -> None:
    await link_channel(h, GROUP)
    prompt = await post_and_prompt(h, GROUP, "23", user_id=MEMBER, chat_type="supergroup")
    await press_label(h, GROUP, prompt, "Edit caption", ADMIN)
    await h.api.wait_for(lambda: "Send me" in current(h, GROUP, prompt)["text"], 5)
    for who in (STRANGER, MEMBER):
        h.api.user_message(GROUP, "someone chatting", user_id=who, chat_type="supergroup")
        await barrier(h, GROUP, user_id=who)
    assert "Send me the new caption" in current(h, GROUP, prompt)["text"]
    h.api.user_message(GROUP, "the editor speaks", user_id=ADMIN, chat_type="supergroup")
    await h.api.wait_for(lambda: "the editor speaks" in current(h, GROUP, prompt)["text"], 5)


async def test_a_caption_too_long_is_refused_and_the_edit_stays(h: Harness) -> None:
    await link_channel(h, USER)
    prompt = await post_and_prompt(h, USER, "24")
    await press_label(h, USER, prompt, "Edit caption")
    h.api.user_message(USER, "x" * 1100)
    await h.api.wait_for(lambda: "1100 characters" in h.sent(USER)[-1].get("text", ""), 5)
    assert "Send me the new caption" in current(h, USER, prompt)["text"]
    h.api.user_message(USER, "short")
    await h.api.wait_for(lambda: "short" in current(h, USER, prompt)["text"], 5)


# --- failures ---------------------------------------------------------------------------------


async def test_a_failed_forward_is_retried(h: Harness) -> None:
    await link_channel(h, USER)
    prompt = await post_and_prompt(h, USER, "30")
    h.api.fail_next("sendPhoto", 502, "Bad Gateway", chat_id=CHANNEL)
    await press_label(h, USER, prompt, "Forward to channel")
    await h.api.wait_for(lambda: h.api.calls_for("sendPhoto", CHANNEL), 5)
    backing_off: list[Any] = []

    async def settled() -> bool:
        backing_off[:] = await h.services.queue.list(chat_id=CHANNEL, state="pending")
        return bool(backing_off) and backing_off[0].last_error is not None

    for _ in range(500):  # the failed call settles: pending again, behind Telegram's hold
        if await settled():
            break
        await asyncio.sleep(0.01)
    # A 502 is Telegram unreachable, not the forward's failure: no attempt counted, and
    # not ambiguous (the front end answered that the call failed).
    assert backing_off[0].attempts == 0
    assert backing_off[0].ambiguous_sends == 0
    (post,) = await forwarded(h)  # the hold's first probe (about a second) sends it
    assert post["photo"]
    await h.api.wait_for(lambda: current(h, USER, prompt)["text"].startswith("Forwarded"), 5)


async def test_a_forward_that_cannot_succeed_is_reported_on_the_prompt(h: Harness) -> None:
    await link_channel(h, USER)
    prompt = await post_and_prompt(h, USER, "31")
    # The bot is removed from the channel after the press was checked, before the send.
    h.api.fail_next("sendPhoto", 403, "Forbidden: bot was kicked from the channel chat",
                    chat_id=CHANNEL)  # fmt: skip
    await press_label(h, USER, prompt, "Forward to channel")
    await h.api.wait_for(lambda: "Could not forward" in current(h, USER, prompt)["text"], 10)
    text = current(h, USER, prompt)["text"]
    assert text.startswith("Could not forward to My Channel: I cannot post there any more")
    assert not buttons(current(h, USER, prompt))
    (dead,) = await h.services.queue.list(state="dead")
    assert dead.kind == "forward"
    # No "could not deliver your link" notice: the prompt said it.
    assert not any("could not deliver" in m.get("text", "") for m in h.sent(USER))


# --- the settings menu ------------------------------------------------------------------------


async def open_menu(h: Harness, chat: int, **kw: Any) -> Json:
    before = len(h.sent(chat))
    h.api.user_message(chat, "/settings", **kw)
    await h.api.wait_for(lambda: len(h.sent(chat)) > before, 5)
    return h.sent(chat)[-1]


async def test_settings_toggle_is_written_and_shown(h: Harness) -> None:
    menu = await open_menu(h, USER)
    assert "Caption: full text" in buttons(menu)
    assert await press_label(h, USER, menu, "Caption: full text") == "Caption: short"
    state = await h.services.chats.get(USER, h.clock())
    assert state.settings.caption_style == "short"
    await h.api.wait_for(lambda: "Caption: short" in buttons(current(h, USER, menu)), 5)
    assert await press_label(h, USER, menu, "Edit before forwarding: off") == (
        "Edit before forwarding: on"
    )
    assert (await h.services.chats.get(USER, h.clock())).settings.edit_before_forward


async def test_settings_two_quick_presses_flip_twice(h: Harness) -> None:
    menu = await open_menu(h, USER)
    data = buttons(menu)["Spoiler for sensitive: on"]
    a = h.api.callback_query(USER, menu["message_id"], data)
    b = h.api.callback_query(USER, menu["message_id"], data)
    ids = [u["callback_query"]["id"] for u in (a, b)]
    await h.api.wait_for(lambda: all(i in h.api.callback_answers for i in ids), 5)
    settings = (await h.services.chats.get(USER, h.clock())).settings
    # Each press flips what the database holds: on -> off -> on (or the second was stale).
    answers = sorted(str(h.api.callback_answers[i].get("text")) for i in ids)
    if "This button has expired." in answers:
        assert settings.spoiler_sensitive is False
    else:
        assert settings.spoiler_sensitive is True


async def test_group_settings_are_for_admins(h: Harness) -> None:
    menu = await open_menu(h, GROUP, user_id=ADMIN, chat_type="supergroup")
    assert "Delete link message: off" in buttons(menu), "the bot may delete here"
    answer = await press_label(h, GROUP, menu, "Delete link message: off", MEMBER)
    assert answer == "Only admins can do that."
    assert (await h.services.chats.get(GROUP, h.clock())).settings.delete_original is False
    assert await press_label(h, GROUP, menu, "Delete link message: off", ADMIN) == (
        "Delete link message: on"
    )
    assert (await h.services.chats.get(GROUP, h.clock())).settings.delete_original is True


async def test_delete_original_removes_the_link_message_after_delivery(h: Harness) -> None:
    await h.services.chats.set_settings(GROUP, h.clock(), delete_original=True)
    h.fx.add_post("40", text="x", photos=[h.photo("d")])
    update = h.api.user_message(GROUP, "https://x.com/a/status/40", user_id=MEMBER,
                                chat_type="supergroup")  # fmt: skip
    mid = update["message"]["message_id"]
    await h.api.wait_for(lambda: h.api.calls_for("deleteMessage", GROUP), 10)
    (call,) = h.api.calls_for("deleteMessage", GROUP)
    assert call.params["message_id"] == mid
    assert call.status == 200
    assert any("photo" in m for m in h.sent(GROUP))


async def test_menu_close(h: Harness) -> None:
    menu = await open_menu(h, USER)
    assert await press_label(h, USER, menu, "Close") is None
    await h.api.wait_for(lambda: not buttons(current(h, USER, menu)), 5)


# --- dead letters -----------------------------------------------------------------------------


async def make_dead_letter(h: Harness) -> int:
    task = await h.services.queue.enqueue("deliver", "{}", USER, now=h.clock())
    h.services.workers.wake()
    await h.wait_idle()
    got = await h.services.queue.get(task.id)
    assert got is not None
    assert got.state == "dead"
    return task.id


async def test_dead_letter_retry_button(h: Harness) -> None:
    task_id = await make_dead_letter(h)
    before = len(h.sent(OPERATOR))
    h.api.user_message(OPERATOR, "/dead")
    await h.api.wait_for(lambda: len(h.sent(OPERATOR)) > before, 5)
    listing = h.sent(OPERATOR)[-1]
    assert f"#{task_id}" in listing["text"]
    label = f"Retry #{task_id}"
    assert label in buttons(listing)
    # A user who is not an operator cannot press it (even with the data).
    answer = await press(h, OPERATOR, listing, buttons(listing)[label], user_id=USER)
    assert answer == "That command is for the bot's operators."
    assert await press_label(h, OPERATOR, listing, label) == f"Task #{task_id} is queued again."
    await h.wait_idle()
    got = await h.services.queue.get(task_id)
    assert got is not None
    assert got.attempts == 1, "it ran again (and, unreadable, died again)"


def _linked(text: str, *urls: str) -> tuple[str, list[MessageEntity]]:
    """A caption as Telegram shows it: `text`, then each URL as a text link on itself."""
    entities = []
    for url in urls:
        text += "\n"
        entities.append(
            MessageEntity("text_link", len(text.encode("utf-16-le")) // 2, len(url), url=url)
        )
        text += url
    return text, entities


@pytest.mark.parametrize(
    ("caption", "url", "kind"),
    [
        (_linked("<b>Bob</b> Cats", "https://videos.example/watch/1"),
         "https://videos.example/watch/1", "other"),
        (_linked("🎵 see https://a.example/x", "https://a.example/x", "https://v.example/2"),
         "https://v.example/2", "other"),
        (_linked("a site yt-dlp read for X", "https://x.com/a/status/5"),
         "https://x.com/a/status/5", "other"),
        (_linked("no link"), None, None),
        (_linked("short link", "https://t.co/abc"), None, None),
    ],
    ids=["the-link", "the-last-link", "any-site-asked-of-yt-dlp", "none", "a-tco-link"],
)  # fmt: skip
def test_sound_link_is_the_captions_last_link(
    caption: tuple[str, list[MessageEntity]], url: str | None, kind: str | None
) -> None:
    link = sound_link(*caption)
    assert (link.url if link else None, link.kind if link else None) == (url, kind)
