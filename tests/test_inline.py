"""Inline mode end to end: ``@bot <link>`` answered through the real PTB client
against the Bot API stand-in, within Telegram's window, never with an error."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from standins._botapi_inline import InlineAnswer
from standins.botapi import BotApiServer
from standins.harness import Harness
from xbot.handlers.inline_results import HELP_PARAMETER, OPEN_PRIVATE
from xbot.ops.doctor import diagnose

USER = 777
CHAT = 501
WINDOW = 10.0  # Telegram's: an answer later than this fails with "query is too old"


@pytest.fixture
async def h(tmp_path: Path) -> AsyncIterator[Harness]:
    harness = await Harness.start(tmp_path / "data")
    harness.api.set_inline_mode(True)
    try:
        yield harness
    finally:
        await harness.stop()


async def ask(h: Harness, text: str, user: int = USER, language: str = "en") -> InlineAnswer:
    """A user (their Telegram in `language`) types ``@bot text``; returns Telegram's
    record of the bot's answer."""
    update = h.api.inline_query(user, text, chat_type="supergroup", language_code=language)
    query_id = update["inline_query"]["id"]
    await h.api.wait_for(lambda: h.api.inline_answer(query_id) is not None, WINDOW)
    answer = h.api.inline_answer(query_id)
    assert answer is not None
    assert answer.latency < WINDOW
    return answer


async def deliver_in_chat(h: Harness, text: str) -> None:
    before = len(h.sent(CHAT))
    h.api.user_message(CHAT, text)
    await h.api.wait_for(lambda: len(h.sent(CHAT)) > before, 15)
    await h.wait_idle(15)


def file_id_of(message: dict[str, object]) -> str:
    for kind in ("photo", "video", "animation"):
        media = message.get(kind)
        if isinstance(media, list):
            return str(media[-1]["file_id"])
        if isinstance(media, dict):
            return str(media["file_id"])
    raise AssertionError(f"no media in {message}")


async def test_a_cached_album_answers_by_file_id_with_the_chat_caption(h: Harness) -> None:
    h.fx.add_post(
        "300",
        author=("Trail Notes", "trail"),
        text="Four days",
        photos=[h.photo(f"r{i}") for i in range(3)],
    )
    await deliver_in_chat(h, "https://x.com/trail/status/300")
    in_chat = h.sent(CHAT)[:3]
    downloads = h.media_hits()
    answer = await ask(h, "https://fxtwitter.com/trail/status/300?s=20")
    assert [r["type"] for r in answer.results] == ["photo"] * 3
    assert [r["photo_file_id"] for r in answer.results] == [file_id_of(m) for m in in_chat]
    caption = h.api.calls_for("sendMediaGroup")[0].params["media"][0]["caption"]
    assert all(r["caption"] == caption and r["parse_mode"] == "HTML" for r in answer.results)
    assert len({r["id"] for r in answer.results}) == 3
    assert answer.button == {"text": "Get all 3 in a private chat", "start_parameter": "a300"}
    assert (answer.cache_time, answer.is_personal) == (300, True), "worded for the asker"
    assert h.media_hits() == downloads, "a cached answer downloads nothing"
    assert not h.fx.hits.get("/trail/status/300", 0) > 1, "nor asks the X API again"


async def test_a_stale_cached_file_id_is_forgotten_and_answered_afresh(h: Harness) -> None:
    h.fx.add_post("310", text="stale", photos=[h.photo("st1"), h.photo("st2")])
    await deliver_in_chat(h, "https://x.com/a/status/310")
    for message in h.sent(CHAT)[-2:]:
        h.api.invalidate_file_id(file_id_of(message))  # Telegram forgot them
    answer = await ask(h, "https://x.com/a/status/310")
    assert [r["type"] for r in answer.results] == ["photo", "photo"]
    assert all("photo_url" in r for r in answer.results), "fresh URLs, not the stale ids"
    refused = [c for c in h.api.calls_for("answerInlineQuery") if c.status == 400]
    assert len(refused) == 1
    assert await h.services.cache.get("x:310", h.clock()) is None, "the stale entry is gone"


async def test_a_fresh_post_answers_with_urls_telegram_fetches(h: Harness) -> None:
    photo = h.photo("p")
    video = h.video("v")
    gif = h.video("g")
    h.fx.add_post(
        "301",
        author=("Cats", "cats"),
        text="three things",
        media=[("photo", photo), ("video", {"url": video, "thumbnail_url": photo})],
    )
    # A GIF among other items is a video since issue 12 (albums take no animations);
    # a GIF alone stays a GIF, and inline it is an mpeg4_gif.
    h.fx.add_post("311", author=("Cats", "cats"), text="three things", media=[("gif", gif)])
    answer = await ask(h, "x.com/cats/status/301")
    photo_r, video_r = answer.results
    (gif_r,) = (await ask(h, "x.com/cats/status/311")).results
    assert (photo_r["type"], photo_r["photo_url"]) == ("photo", photo)
    assert (video_r["type"], video_r["mime_type"]) == ("video", "video/mp4")
    assert video_r["video_url"] == video
    assert video_r["thumbnail_url"] == photo
    assert (gif_r["type"], gif_r["mpeg4_url"]) == ("mpeg4_gif", gif)
    assert all("three things" in r["caption"] for r in answer.results)
    assert answer.button is not None
    assert answer.button["start_parameter"] == "a301"
    assert h.media_hits() == 0, "Telegram fetches the URLs itself"
    assert not h.api.calls_for("sendPhoto"), "nothing is sent to any chat"


async def test_a_query_during_a_chat_delivery_of_the_link_waits_for_it(h: Harness) -> None:
    h.fx.add_post("309", text="both", photos=[h.photo("b1"), h.photo("b2")], delay=0.5)
    h.api.user_message(CHAT, "https://x.com/a/status/309")
    await h.api.wait_for(lambda: h.fx.hits.get("/a/status/309", 0) >= 1, 10)
    answer = await ask(h, "https://x.com/a/status/309")
    assert [r["type"] for r in answer.results] == ["photo", "photo"]
    assert all("photo_file_id" in r for r in answer.results), "by the file_ids just sent"
    assert h.fx.hits.get("/a/status/309", 0) == 1, "one fetch for the chat and the query"


async def test_a_post_with_one_item_has_no_album_button(h: Harness) -> None:
    h.fx.add_post("302", text="one", photos=[h.photo("one")])
    answer = await ask(h, "https://x.com/a/status/302")
    assert len(answer.results) == 1
    assert answer.button is None


async def test_a_text_post_is_one_article(h: Harness) -> None:
    h.fx.add_post("303", author=("Ann", "ann"), text="just words")
    (article,) = (await ask(h, "https://x.com/ann/status/303")).results
    assert article["type"] == "article"
    assert "just words" in article["input_message_content"]["message_text"]


@pytest.mark.parametrize(
    "text",
    ["", "hello there", "https://example.com/page", "https://x.com/alice", "x.com/a/status/"],
    ids=["empty", "words", "other-site", "profile", "no-id"],
)
async def test_garbage_gets_the_hint_button_and_no_error(h: Harness, text: str) -> None:
    answer = await ask(h, text)
    assert answer.results == []
    assert answer.button == {
        "text": "Paste a link to a post on X, Bluesky or pixiv",
        "start_parameter": HELP_PARAMETER,
    }


async def test_a_deleted_post_is_one_article_saying_so(h: Harness) -> None:
    h.fx.add_post("304", deleted=True)
    (article,) = (await ask(h, "https://x.com/gone/status/304")).results
    assert article["type"] == "article"
    assert "deleted" in article["title"].lower() or "not" in article["title"].lower()
    assert article["input_message_content"]["message_text"] == "https://x.com/gone/status/304"


async def test_a_failing_x_api_is_answered_in_time_without_sticking(h: Harness) -> None:
    h.fx.add_post("305", text="later", photos=[h.photo("later")], fault="503")
    answer = await ask(h, "https://x.com/a/status/305")
    assert [r["title"] for r in answer.results] == [OPEN_PRIVATE]
    assert answer.cache_time == 0


async def test_a_slow_fetch_answers_what_is_known_then_the_post(h: Harness) -> None:
    h.services.inline.budget = 0.3
    h.fx.add_post("306", text="slow", photos=[h.photo("s1"), h.photo("s2")], delay=1.0)
    first = await ask(h, "https://x.com/a/status/306")
    assert [r["title"] for r in first.results] == [OPEN_PRIVATE]
    assert first.button == {"text": OPEN_PRIVATE, "start_parameter": "a306"}
    assert first.cache_time == 0, "a partial answer must not stick in Telegram's cache"
    assert first.latency < 1.0
    # The fetch went on; once it lands, the same query is answered with the post.
    await h.api.wait_for(lambda: h.fx.hits.get("/a/status/306", 0) >= 1, 5)
    for _ in range(20):
        again = await ask(h, "https://x.com/a/status/306")
        if again.results[0]["type"] == "photo":
            break
    assert [r["type"] for r in again.results] == ["photo", "photo"]
    assert h.fx.hits.get("/a/status/306", 0) == 1, "one fetch for every query"


async def test_the_album_button_delivers_the_album_in_the_private_chat(h: Harness) -> None:
    h.fx.add_post("307", text="album", photos=[h.photo(f"al{i}") for i in range(4)])
    answer = await ask(h, "https://x.com/a/status/307")
    assert answer.button is not None
    # The button opens the private chat with /start <parameter>, as Telegram does.
    h.api.user_message(USER, f"/start {answer.button['start_parameter']}")
    await h.api.wait_for(lambda: len(h.sent(USER)) >= 4, 15)
    await h.wait_idle(15)
    album = h.sent(USER)
    assert [("photo" in m) for m in album] == [True] * 4
    assert "album" in album[0]["caption"]


@pytest.mark.parametrize("parameter", ["a12x", "a", "a" + "1" * 21, "b123", HELP_PARAMETER])
async def test_other_start_parameters_get_the_welcome(h: Harness, parameter: str) -> None:
    h.api.user_message(USER, f"/start {parameter}")
    await h.api.wait_for(lambda: h.sent(USER), 10)
    (welcome,) = h.sent(USER)
    assert "text" in welcome
    assert not h.fx.hits


async def test_the_allow_list_applies_to_the_user_who_asks(tmp_path: Path) -> None:
    h = await Harness.start(tmp_path / "data", allowed_chat_ids=frozenset({USER}))
    h.api.set_inline_mode(True)
    try:
        h.fx.add_post("308", text="private bot", photos=[h.photo("pb")])
        stranger = await ask(h, "https://x.com/a/status/308", user=USER + 1)
        assert stranger.results == []
        assert stranger.button is not None
        assert stranger.is_personal
        assert not h.fx.hits, "nothing is fetched for a stranger"
        allowed = await ask(h, "https://x.com/a/status/308")
        assert [r["type"] for r in allowed.results] == ["photo"]
        assert allowed.is_personal, "an answer that depends on who asks is personal"
    finally:
        await h.stop()


async def test_polling_asks_telegram_for_inline_queries(h: Harness) -> None:
    def polls() -> list[object]:
        calls = h.api.calls_for("getUpdates")
        return [c.params["allowed_updates"] for c in calls if "allowed_updates" in c.params]

    await h.api.wait_for(polls, 5)  # a long poll is recorded when it returns
    assert all("inline_query" in allowed for allowed in polls())


def test_doctor_says_whether_inline_mode_is_on_and_how_to_turn_it_on(tmp_path: Path) -> None:
    with BotApiServer() as api:
        env = {
            "XBOT_DATA_DIR": str(tmp_path / "data"),
            "XBOT_TOKEN": api.token,
            "XBOT_BOT_API_URL": f"{api.url}/bot",
        }
        off = "\n".join(diagnose(env, timeout=5).lines())
        api.set_inline_mode(True)
        on = "\n".join(diagnose(env, timeout=5).lines())
    assert "warn  inline mode: off" in off
    assert "/setinline" in off
    assert "ok    inline mode: on" in on


async def test_an_answer_too_late_is_a_log_line_not_an_error(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="xbot")  # whatever an earlier test did to logging
    h.api.inline_answer_window = 0.0  # every answer arrives after Telegram gave up
    query_id = h.api.inline_query(USER, "hello")["inline_query"]["id"]
    await h.api.wait_for(lambda: h.api.calls_for("answerInlineQuery"), 10)
    (call,) = h.api.calls_for("answerInlineQuery")
    assert (call.status, h.api.inline_answer(query_id)) == (400, None)
    await h.api.wait_for(lambda: "inline answer refused" in caplog.text, 5)
    assert "handler failed" not in caplog.text


# Issue 16: our words in an inline answer are in the asker's Telegram language; the
# post's own words are not translated.


async def test_garbage_gets_the_hint_in_the_askers_language(h: Harness) -> None:
    answer = await ask(h, "hallo", language="de")
    assert answer.button == {
        "text": "Füge einen Link zu einem Beitrag auf X, Bluesky oder pixiv ein",
        "start_parameter": HELP_PARAMETER,
    }
    assert answer.is_personal, "a shared cache would show the German hint to everyone"


async def test_the_album_button_is_in_the_askers_language(h: Harness) -> None:
    h.fx.add_post("320", text="Zwei Fotos", photos=[h.photo("de1"), h.photo("de2")])
    answer = await ask(h, "https://x.com/a/status/320", language="de-AT")
    assert answer.button == {"text": "Alle 2 im privaten Chat holen", "start_parameter": "a320"}
    english = await ask(h, "https://x.com/a/status/320", user=USER + 1)
    assert english.button is not None
    assert english.button["text"] == "Get all 2 in a private chat"


async def test_a_deleted_post_says_so_in_the_askers_language(h: Harness) -> None:
    h.fx.add_post("321", deleted=True)
    (article,) = (await ask(h, "https://x.com/gone/status/321", language="ru")).results
    assert article["title"] == "Этот пост удалён или не существует."
    assert article["input_message_content"]["message_text"] == "https://x.com/gone/status/321"


async def test_the_album_from_the_button_is_delivered_in_the_users_language(h: Harness) -> None:
    note = {"community_note": {"text": "Das Foto ist alt"}}
    h.fx.add_post("322", text="Zwei", photos=[h.photo("n1"), h.photo("n2")], extra=note)
    answer = await ask(h, "https://x.com/a/status/322", language="de")
    assert all("Community-Notiz: Das Foto ist alt" in r["caption"] for r in answer.results)
    assert answer.button is not None
    h.api.user_message(USER, f"/start {answer.button['start_parameter']}", language_code="de")
    await h.api.wait_for(lambda: len(h.sent(USER)) >= 2, 15)
    await h.wait_idle(15)
    assert "Community-Notiz: Das Foto ist alt" in h.sent(USER)[0]["caption"]
