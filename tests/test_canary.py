"""The canary's verdicts (pure, table-driven), its settings, and its loop going on after a bug."""

from __future__ import annotations

import json

import pytest
from conftest import eventually

from xbot.config import check_settings, load_settings
from xbot.errors import FetchError, PostUnavailable, TransientFetch
from xbot.links import Link, classify
from xbot.media.models import MediaItem, Post
from xbot.sources.canary import RESULTS, Canary, CanaryTarget, verdict

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


class FlakySource:
    """A source whose first answer is a bug (not a fetch error), then the canary post."""

    name = "flaky"

    def __init__(self) -> None:
        self.asked = 0

    async def fetch(self, link: Link) -> Post:
        self.asked += 1
        if self.asked == 1:
            raise KeyError("a parser bug")
        return post()


async def test_a_round_that_raises_is_logged_and_the_canary_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    link = classify("https://x.com/e/status/1")
    assert link is not None
    source = FlakySource()
    canary = Canary([CanaryTarget(source, link)], interval=0.0, clock=lambda: 1.0)
    loop = canary.periodic()
    loop.start()
    try:
        await eventually(lambda: canary.rounds >= 2, within=5, what="two more rounds")
    finally:
        await loop.stop()
    assert canary.results["flaky"][0] == "ok"
    failed = [r for r in caplog.records if r.getMessage().startswith("canary failed")]
    assert len(failed) == 1
    assert (failed[0].levelname, failed[0].name) == ("WARNING", "xbot.sources.canary")
    assert failed[0].exc_info, "a bug is logged with its traceback"
