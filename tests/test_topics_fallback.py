"""The topic fallback rule (`xbot.sending.topics.fallback`): a table of cases."""

from __future__ import annotations

import pytest

from xbot.sending.destination import Destination
from xbot.sending.topics import fallback

FORUM = -1002000
GENERAL = Destination(FORUM, "supergroup")


@pytest.mark.parametrize(
    ("dest", "error", "expected"),
    [
        (Destination(FORUM, "supergroup", 7, 40), "Message thread not found", GENERAL),
        (Destination(FORUM, "supergroup", 7, None), "Topic_closed", GENERAL),
        (Destination(FORUM, "supergroup", 7, 40), "Bad Request: TOPIC_DELETED", GENERAL),
        # A task from before topics were stored: the quote alone put it in the topic.
        (Destination(FORUM, "supergroup", None, 40), "Topic_closed", GENERAL),
        (GENERAL, "Message thread not found", None),
        (GENERAL, "Topic_closed", None),
        (Destination(FORUM, "supergroup", 7, 40), "Message is too long", None),
        (Destination(FORUM, "supergroup", 7, 40), "Chat not found", None),
    ],
    ids=["thread-gone", "closed", "deleted", "legacy-quote", "general-thread", "general-closed",
         "other-400", "chat-gone"],
)  # fmt: skip
def test_fallback(dest: Destination, error: str, expected: Destination | None) -> None:
    assert fallback(dest, error) == expected


def test_falling_back_twice_is_impossible() -> None:
    once = fallback(Destination(FORUM, "supergroup", 7, 40), "Topic_closed")
    assert once is not None
    assert fallback(once, "Topic_closed") is None
