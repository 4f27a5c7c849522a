"""The pure planning of inline answers (`xbot.handlers.inline_results`): tables of cases."""

from __future__ import annotations

import re

import attrs
import pytest

from xbot.handlers import inline_results as plan
from xbot.media.models import MediaItem, Poll, PollChoice, Post, Variant
from xbot.sending.caption import build_caption, caption_parts
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
# Within 5 MB but outside Telegram's photo shape: it refuses them by URL as chats learnt.
TALL_PHOTO = MediaItem("photo", "https://pbs.example/tall.jpg", width=200, height=8000)
WIDE_PHOTO = MediaItem("photo", "https://pbs.example/wide.jpg", width=7000, height=4000)


@pytest.mark.parametrize(
    ("media", "types", "button"),
    [
        ((PHOTO,), ["photo"], False),
        ((PHOTO, VIDEO, GIF), ["photo", "video", "mpeg4_gif"], True),
        ((BIG_PHOTO, PHOTO), ["photo"], True),
        ((HUGE_VIDEO,), ["article"], True),
        ((NO_THUMB, PHOTO), ["photo"], True),
        ((WEBM,), ["article"], True),
        ((TALL_PHOTO, PHOTO), ["photo"], True),
        ((WIDE_PHOTO,), ["article"], True),
    ],
    ids=[
        "one-photo",
        "mixed",
        "photo-over-5MB",
        "video-over-20MB",
        "video-without-still",
        "webm-only",
        "photo-ratio-over-20",
        "photo-sides-over-10000",
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


def test_a_cached_answer_has_the_chats_caption_quote_poll_and_title_included() -> None:
    quoted = Post(f"x:{ID}9", f"https://x.com/bob/status/{ID}9", "Bob", "bob", "quoted words")
    poll = Poll((PollChoice("Cats", 5, 62.5), PollChoice("Dogs", 3, 37.5)), 8, closed=True)
    whole = attrs.evolve(
        post(PHOTO, text="own words"), quote=quoted, poll=poll, title="A title", note="a note"
    )
    entry = CachedPost(whole.key, whole.url, caption_parts(whole), (CachedItem("photo", "F"),), 0)
    (data,) = [r.to_dict() for r in plan.for_cached(entry, ID, personal=False).results]
    assert data["caption"] == build_caption(whole)  # what a chat gets from the same entry


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


PLC = "did:plc:ewvi7nxzyoun6zhxrhs64oiz"
BSKY = "https://bsky.app/profile"
TID = "3lbdpylqvrk2c"


@pytest.mark.parametrize(
    ("url", "parameter"),
    [
        ("https://x.com/a/status/123", "a123"),
        ("https://www.pixiv.net/en/artworks/120000001", "p120000001"),
        (f"{BSKY}/{PLC}/post/{TID}", f"bewvi7nxzyoun6zhxrhs64oiz{TID}"),
        (f"{BSKY}/alice.bsky.social/post/{TID}", f"h{TID}alice_bsky_social"),
        (f"{BSKY}/did:web:my-site.example/post/{TID}", f"w{TID}my-site_example"),
    ],
)  # fmt: skip
def test_the_album_parameter_names_every_kind_and_comes_back(url: str, parameter: str) -> None:
    link = plan.parse_query(f"look {url}")
    assert link is not None
    assert plan.album_parameter(link.key) == parameter
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", parameter)
    back = plan.album_link(parameter)
    assert back is not None
    assert back.key == link.key


@pytest.mark.parametrize(
    "parameter",
    ["a12x", "p0", "p", "b" + "a" * 24, "bshort3lbdpylqvrk2c", "h3lbdpylqvrk2c_", "x123",
     "w3lbdpylqvrk2c" + "a" * 51],
)  # fmt: skip
def test_other_parameters_name_no_post(parameter: str) -> None:
    assert plan.album_link(parameter) is None


def test_a_key_with_no_short_spelling_gets_no_button() -> None:
    long_handle = "a" * 40 + ".bsky.social"
    assert plan.album_parameter(f"bsky:{long_handle}/3lbdpylqvrk2c") is None
    assert plan.album_parameter("url:https://example.com/v") is None
    answer = plan.for_timeout("r", "u", personal=False, key="url:https://example.com/v")
    assert answer.button is None


def test_other_sites_are_not_inline_queries() -> None:
    assert plan.parse_query("https://www.youtube.com/watch?v=abc") is None


# Issue 16: our words in `lang`, the reasons by `translate_reason`, English by default.


def test_our_words_are_in_the_askers_language() -> None:
    timeout = plan.for_timeout(ID, "u", personal=True, key=f"x:{ID}", lang="ja")
    assert (
        timeout.results[0].title
        == "すべてのメディアを受け取るにはプライベートチャットで開いてください"
    )
    assert timeout.button is not None
    assert timeout.button.text == timeout.results[0].title
    assert plan.for_not_allowed("pt_BR").button.text == "Este bot é privado"  # type: ignore[union-attr]
    assert plan.for_hint(personal=True).button.text == plan.PASTE_HINT  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("lang", "count", "text"),
    [("en", 3, "Get all 3 in a private chat"), ("de", 2, "Alle 2 im privaten Chat holen"),
     ("ru", 5, "Получить все 5 в личном чате"), ("es", 21, "Recibir los 21 en el chat privado")],
    ids=["en", "de", "ru", "es"],
)  # fmt: skip
def test_the_album_button_counts_in_the_askers_language(lang: str, count: int, text: str) -> None:
    button = plan.album_button(f"x:{ID}", count, lang)
    assert button is not None
    assert button.text == text


def test_a_reason_template_is_refilled_in_the_askers_language() -> None:
    reason = "Telegram refused the message (Bad Request)."
    (article,) = plan.for_failure(ID, "u", reason, personal=True, lasting=False, lang="de").results
    assert article.title != reason
    assert "Bad Request" in article.title
    (unknown,) = plan.for_failure(ID, "u", "odd", personal=True, lasting=False, lang="de").results
    assert unknown.title == "odd", "a reason we do not know stays as it was written"
