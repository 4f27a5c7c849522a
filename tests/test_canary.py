"""The canary's verdicts (pure, table-driven) and which source is asked for which post."""

from __future__ import annotations

import json

import pytest

from xbot.config import check_settings, load_settings
from xbot.errors import FetchError, PostUnavailable, TransientFetch
from xbot.media.models import MediaItem, Post
from xbot.sources.canary import RESULTS, verdict

PHOTO = MediaItem(kind="photo", url="https://pbs.twimg.com/media/a.jpg")


def post(media: tuple[MediaItem, ...] = (PHOTO,), handle: str = "ellen") -> Post:
    return Post(key="x:1", url="https://x.com/e/status/1", author_name="E",
                author_handle=handle, text="hi", media=media)  # fmt: skip


def not_json() -> FetchError:
    try:
        json.loads("<html>")
    except ValueError as exc:
        try:
            raise FetchError("the X API answered with something unreadable") from exc
        except FetchError as err:
            return err
    raise AssertionError


@pytest.mark.parametrize(
    ("answer", "error", "result"),
    [
        (post(), None, "ok"),
        (post(media=()), None, "broken"),
        (post(handle=""), None, "broken"),
        (None, FetchError("the X API answered with something unreadable"), "broken"),
        (None, not_json(), "down"),
        (None, TransientFetch("the X API is not answering"), "down"),
        (None, TimeoutError(), "down"),
        (None, PostUnavailable("That post was deleted."), "gone"),
    ],
    ids=["ok", "no-media", "no-author", "json-no-post", "html-page", "transient", "timeout",
         "deleted"],
)  # fmt: skip
def test_verdict(answer: Post | None, error: BaseException | None, result: str) -> None:
    said, detail = verdict(answer, error)
    assert said == result
    assert said in RESULTS
    assert detail
    assert "\n" not in detail


def test_canary_settings() -> None:
    s = load_settings(
        {
            "XBOT_CANARY_INTERVAL_S": "600",
            "XBOT_CANARY_POSTS": "https://bsky.app/profile/a.bsky.social/post/3k, https://x.com/a/status/5",
        }
    )
    assert s.canary_interval == 600.0
    assert s.canary_posts == (
        "https://bsky.app/profile/a.bsky.social/post/3k",
        "https://x.com/a/status/5",
    )
    assert load_settings({}).canary_interval == 0.0
    for env, words in [
        ({"XBOT_CANARY_INTERVAL_S": "5"}, "too often"),
        ({"XBOT_CANARY_POSTS": "https://example.com/video"}, "not a link to an X"),
    ]:
        _, problems = check_settings(env)
        assert len(problems) == 1
        assert words in problems[0]
