"""What Telegram fetches by URL (`xbot.media.by_url`): one table, for chats and inline mode."""

from __future__ import annotations

import pytest

from xbot.media.by_url import URL_PHOTO_LIMIT, by_url, photo_ratio_ok, photo_shape_ok
from xbot.media.models import MediaItem

U = "https://media.example/f"


@pytest.mark.parametrize(
    ("item", "fetched"),
    [
        (MediaItem("photo", U, width=800, height=600), True),
        (MediaItem("photo", U), True),
        (MediaItem("photo", U, size=URL_PHOTO_LIMIT), True),
        (MediaItem("photo", U, size=URL_PHOTO_LIMIT + 1), False),
        (MediaItem("photo", U, width=5000, height=5000), True),
        (MediaItem("photo", U, width=5001, height=5000), False),
        (MediaItem("photo", U, width=100, height=2000), True),
        (MediaItem("photo", U, width=100, height=2001), False),
        (MediaItem("photo", U, width=2001, height=100), False),
        (MediaItem("photo", U, width=800, height=600, upload_only=True), False),
        (MediaItem("video", U), True),
        (MediaItem("video", U, upload_only=True), False),
        (MediaItem("gif", U), True),
    ],
    ids=[
        "photo",
        "photo-size-unknown",
        "photo-at-5MB",
        "photo-over-5MB",
        "sides-at-10000",
        "sides-over-10000",
        "ratio-at-20",
        "ratio-over-20-tall",
        "ratio-over-20-wide",
        "upload-only-photo",
        "video",
        "upload-only-video",
        "gif",
    ],
)
def test_by_url(item: MediaItem, fetched: bool) -> None:
    assert by_url(item) is fetched


@pytest.mark.parametrize(
    ("width", "height", "shape", "ratio"),
    [
        (None, None, True, True),
        (0, 600, True, True),
        (9000, 1000, True, True),
        (9000, 1001, False, True),
        (20000, 1000, False, True),
        (21000, 1000, False, False),
    ],
    ids=["unknown", "zero-side", "at-both-limits", "sides-over", "ratio-at-20-but-big", "ratio-21"],
)
def test_photo_shape_and_ratio(
    width: int | None, height: int | None, shape: bool, ratio: bool
) -> None:
    item = MediaItem("photo", U, width=width, height=height)
    assert (photo_shape_ok(item), photo_ratio_ok(item)) == (shape, ratio)
