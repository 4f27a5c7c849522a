"""Inline mode for Bluesky and pixiv, end to end: the real PTB client against the Bot
API, Bluesky and pixiv stand-ins. A fresh Bluesky post is answered with URLs Telegram
fetches; a pixiv work (its host wants a Referer) never is: cached, by file_id, fresh,
by the way to the private chat, where the album button delivers it as usual."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from standins._botapi_inline import InlineAnswer
from standins.bskyapi import did_for
from standins.harness import Harness
from xbot.handlers.inline_results import OPEN_PRIVATE

USER = 777
CHAT = 501
WINDOW = 10.0
ALICE = "alice.bsky.social"
RKEY = "3lbdpylqvrk2c"


@pytest.fixture
async def h(tmp_path: Path) -> AsyncIterator[Harness]:
    harness = await Harness.start(tmp_path / "data")
    harness.api.set_inline_mode(True)
    try:
        yield harness
    finally:
        await harness.stop()


async def ask(h: Harness, text: str) -> InlineAnswer:
    query_id = h.api.inline_query(USER, text, chat_type="supergroup")["inline_query"]["id"]
    await h.api.wait_for(lambda: h.api.inline_answer(query_id) is not None, WINDOW)
    answer = h.api.inline_answer(query_id)
    assert answer is not None
    assert answer.latency < WINDOW
    return answer


async def press(h: Harness, parameter: str, count: int) -> list[dict[str, object]]:
    """The user opens the private chat through the button: ``/start <parameter>``."""
    h.api.user_message(USER, f"/start {parameter}")
    await h.api.wait_for(lambda: len(h.sent(USER)) >= count, 15)
    await h.wait_idle(15)
    return h.sent(USER)


def pixiv_images(h: Harness) -> int:
    return sum(
        n for p, n in h.pixiv.hits.items() if p.startswith(("/img-original/", "/img-master/"))
    )


def no_url_result(answer: InlineAnswer) -> bool:
    urls = ("photo_url", "video_url", "mpeg4_url", "gif_url")
    return not any(key in r for r in answer.results for key in urls)


async def test_a_fresh_bluesky_post_answers_with_urls_and_its_button_delivers(
    h: Harness,
) -> None:
    photos = [h.photo("bi1"), h.photo("bi2")]
    h.bsky.add_post(ALICE, RKEY, name="Alice A", text="two views", images=photos)
    answer = await ask(h, f"https://bsky.app/profile/{ALICE}/post/{RKEY}")
    assert [(r["type"], r["photo_url"]) for r in answer.results] == [("photo", p) for p in photos]
    assert all("two views" in r["caption"] for r in answer.results)
    assert h.media_hits() == 0, "Telegram fetches Bluesky's images itself"
    assert answer.button is not None
    parameter = answer.button["start_parameter"]
    did = did_for(ALICE).removeprefix("did:plc:")
    assert parameter == f"b{did}{RKEY}", "derived from the DID key, nothing stored"
    album = await press(h, parameter, 2)
    assert [("photo" in m) for m in album] == [True, True]
    assert "two views" in str(album[0]["caption"])


async def test_a_bluesky_video_is_never_a_url_result(h: Harness) -> None:
    from standins.media_server import fake_mp4

    h.bsky.add_post(ALICE, "3lbvideo12345", text="a clip", video=fake_mp4(32 * 1024))
    answer = await ask(h, f"https://bsky.app/profile/{ALICE}/post/3lbvideo12345")
    assert no_url_result(answer), "a PDS blob is uploaded, not fetched by Telegram"
    assert answer.button is not None
    assert answer.button["text"] == OPEN_PRIVATE
    # Delivered in a chat (cached under the DID), the handle's query finds it by file_id.
    h.api.user_message(CHAT, f"https://bsky.app/profile/{ALICE}/post/3lbvideo12345")
    await h.api.wait_for(lambda: h.sent(CHAT), 15)
    await h.wait_idle(15)
    again = await ask(h, f"https://bsky.app/profile/{ALICE}/post/3lbvideo12345")
    assert [r["type"] for r in again.results] == ["video"]
    assert "video_file_id" in again.results[0]


async def test_a_cached_pixiv_work_answers_by_file_id(h: Harness) -> None:
    h.pixiv.add_work("120000003", title="Two", pages=2)
    h.api.user_message(CHAT, "https://www.pixiv.net/artworks/120000003")
    await h.api.wait_for(lambda: len(h.sent(CHAT)) >= 2, 15)
    await h.wait_idle(15)
    images = pixiv_images(h)
    answer = await ask(h, "https://www.pixiv.net/en/artworks/120000003")
    assert [r["type"] for r in answer.results] == ["photo", "photo"]
    assert all("photo_file_id" in r for r in answer.results)
    assert no_url_result(answer)
    assert answer.button is not None
    assert answer.button["start_parameter"] == "p120000003"
    assert pixiv_images(h) == images, "a cached answer downloads nothing"


async def test_a_fresh_pixiv_work_is_the_private_chat_button_never_a_url(h: Harness) -> None:
    h.pixiv.add_work("120000004", title="Fresh", pages=3)
    answer = await ask(h, "https://www.pixiv.net/artworks/120000004")
    assert no_url_result(answer), "Telegram's fetch would get pixiv's 403"
    assert [r["type"] for r in answer.results] == ["article"]
    assert answer.button is not None
    assert answer.button == {"text": OPEN_PRIVATE, "start_parameter": "p120000004"}
    assert answer.cache_time == 0
    album = await press(h, "p120000004", 3)
    assert [("photo" in m) for m in album] == [True] * 3
    assert h.pixiv.refused == 0


async def test_other_sites_stay_out_of_inline(h: Harness) -> None:
    answer = await ask(h, "https://www.youtube.com/watch?v=dQw4w9WgXcQ")
    assert answer.results == []
    assert answer.button is not None
    assert answer.button["start_parameter"] == "inline_help"


async def test_a_button_naming_a_bluesky_handle_delivers_after_resolving_it(h: Harness) -> None:
    # What a query answered before the handle was resolved (a timeout) carries.
    h.bsky.add_post(ALICE, RKEY, text="by handle", images=[h.photo("hh1"), h.photo("hh2")])
    album = await press(h, f"h{RKEY}{ALICE.replace('.', '_')}", 2)
    assert [("photo" in m) for m in album] == [True, True]
    assert "by handle" in str(album[0]["caption"])
