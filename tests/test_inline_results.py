"""The pure planning of inline answers (`xbot.handlers.inline_results`): tables of cases."""

from __future__ import annotations

import pytest

from xbot.handlers import inline_results as plan
from xbot.media.models import MediaItem, Post, Variant
from xbot.storage.link_cache import CachedItem, CachedPost

ID = "1790000000000000001"


@pytest.mark.parametrize(
    ("text", "post_id"),
    [
        ("https://x.com/a/status/123", "123"),
        ("  fxtwitter.com/a/status/456?s=20  ", "456"),
        ("look https://twitter.com/a/status/789 wow", "789"),
        ("", None),
        ("hello", None),
        ("https://youtube.com/watch?v=abc", None),
        ("https://t.co/abc", None),
        ("https://x.com/alice", None),
    ],
    ids=["x", "mirror-tracking", "in-words", "empty", "word", "other-site", "tco", "profile"],
)
def test_parse_query(text: str, post_id: str | None) -> None:
    link = plan.parse_query(text)
    assert (link.post_id if link else None) == post_id


@pytest.mark.parametrize(
    ("parameter", "post_id"),
    [("a123", "123"), (f"a{ID}", ID), ("a", None), ("a12x", None), ("a" + "1" * 21, None),
     ("A123", None), ("inline_help", None), ("a123 ", None)],
    ids=["short", "real", "empty-id", "letters", "too-long", "capital", "help", "space"],
)  # fmt: skip
def test_album_post_id(parameter: str, post_id: str | None) -> None:
    assert plan.album_post_id(parameter) == post_id


def post(*media: MediaItem, text: str = "hi") -> Post:
    return Post(f"x:{ID}", f"https://x.com/a/status/{ID}", "Ann", "ann", text, media)


PHOTO = MediaItem("photo", "https://pbs.example/p.jpg", width=800, height=600)
BIG_PHOTO = MediaItem("photo", "https://pbs.example/big.jpg", size=6 * 1024 * 1024)
VIDEO = MediaItem(
    "video",
    "https://video.example/v.mp4",
    (
        Variant("https://video.example/lo.mp4", bitrate=1),
        Variant("https://video.example/hi.mp4", bitrate=2),
    ),
    thumbnail_url="https://pbs.example/t.jpg",
    duration=3.5,
)
HUGE_VIDEO = MediaItem(
    "video",
    "https://v/h.mp4",
    (Variant("https://v/h.mp4", size=30 * 1024 * 1024),),
    thumbnail_url="https://t/t.jpg",
)
NO_THUMB = MediaItem("video", "https://v/n.mp4")
WEBM = MediaItem(
    "video",
    "https://v/w.webm",
    (Variant("https://v/w.webm", container="webm"),),
    thumbnail_url="https://t",
)
GIF = MediaItem("gif", "https://video.example/g.mp4")


@pytest.mark.parametrize(
    ("media", "types", "button"),
    [
        ((PHOTO,), ["photo"], False),
        ((PHOTO, VIDEO, GIF), ["photo", "video", "mpeg4_gif"], True),
        ((BIG_PHOTO, PHOTO), ["photo"], True),
        ((HUGE_VIDEO,), ["article"], True),
        ((NO_THUMB, PHOTO), ["photo"], True),
        ((WEBM,), ["article"], True),
    ],
    ids=[
        "one-photo",
        "mixed",
        "photo-over-5MB",
        "video-over-20MB",
        "video-without-still",
        "webm-only",
    ],
)
def test_fresh_results(media: tuple[MediaItem, ...], types: list[str], button: bool) -> None:
    answer = plan.for_fresh(post(*media), ID, personal=False)
    assert [r.to_dict()["type"] for r in answer.results] == types
    assert (answer.button is not None) == button
    if button:
        assert answer.button is not None
        assert answer.button.start_parameter == f"a{ID}"


def test_fresh_video_is_the_best_mp4_with_its_still() -> None:
    (result,) = plan.for_fresh(post(VIDEO), ID, personal=False).results
    data = result.to_dict()
    assert data["video_url"] == "https://video.example/hi.mp4"
    assert (data["mime_type"], data["thumbnail_url"]) == ("video/mp4", "https://pbs.example/t.jpg")
    assert data["video_duration"] == 3


def test_a_gif_without_still_uses_its_mp4() -> None:
    (result,) = plan.for_fresh(post(GIF), ID, personal=False).results
    data = result.to_dict()
    assert data["thumbnail_url"] == data["mpeg4_url"]
    assert data["thumbnail_mime_type"] == "video/mp4"


def test_ids_are_unique_short_and_at_most_fifty() -> None:
    answer = plan.for_fresh(post(*[PHOTO] * 60), ID, personal=False)
    ids = [r.id for r in answer.results]
    assert len(ids) == 50
    assert len(set(ids)) == 50
    assert all(1 <= len(i.encode()) <= 64 for i in ids)


def test_every_result_has_the_caption() -> None:
    answer = plan.for_fresh(post(PHOTO, PHOTO, text="the words"), ID, personal=True)
    assert all("the words" in (r.to_dict()["caption"]) for r in answer.results)
    assert answer.is_personal


@pytest.mark.parametrize(
    ("kind", "type_", "field"),
    [("photo", "photo", "photo_file_id"), ("video", "video", "video_file_id"),
     ("gif", "mpeg4_gif", "mpeg4_file_id"), ("document", "document", "document_file_id")],
    ids=["photo", "video", "gif", "document"],
)  # fmt: skip
def test_cached_results_by_file_id(kind: str, type_: str, field: str) -> None:
    entry = CachedPost(
        f"x:{ID}", "https://x.com/a/status/1", {"text": "t"}, (CachedItem(kind, "FID"),), 0.0
    )  # type: ignore[arg-type]
    answer = plan.for_cached(entry, ID, personal=False)
    (data,) = [r.to_dict() for r in answer.results]
    assert (data["type"], data[field]) == (type_, "FID")
    assert answer.button is None
    assert answer.cache_time == plan.CACHE_WHOLE


@pytest.mark.parametrize(
    ("answer", "cache_time"),
    [
        (plan.for_timeout(ID, "u", personal=False, key=f"x:{ID}"), plan.CACHE_PARTIAL),
        (plan.for_failure(ID, "u", "gone", personal=False, lasting=True), plan.CACHE_WHOLE),
        (plan.for_failure(ID, "u", "odd", personal=False, lasting=False), plan.CACHE_PARTIAL),
        (plan.for_hint(personal=False), plan.CACHE_HINT),
    ],
    ids=["timeout", "lasting-failure", "passing-failure", "hint"],
)
def test_what_may_stick_in_telegrams_cache(answer: plan.InlineAnswer, cache_time: int) -> None:
    assert answer.cache_time == cache_time


def test_not_allowed_is_personal_and_empty() -> None:
    answer = plan.for_not_allowed()
    assert (answer.results, answer.is_personal) == ((), True)
