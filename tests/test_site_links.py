"""Bluesky and pixiv links: every spelling of a post maps to one Link; other pages to none."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from xbot.links import classify, plan_links

DID = "did:plc:pzdr5ylumf7vmvwasrpr5bf2"
RKEY = "3l4omssdl632g"
BY_HANDLE = f"https://bsky.app/profile/alice.bsky.social/post/{RKEY}"
BY_DID = f"https://bsky.app/profile/{DID}/post/{RKEY}"
WORK = "https://www.pixiv.net/artworks/120000001"

BSKY_SPELLINGS = [
    (BY_HANDLE, BY_HANDLE, "plain"),
    (f"{BY_HANDLE}?ref_src=embed&utm_source=x", BY_HANDLE, "tracking"),
    (f"{BY_HANDLE}/", BY_HANDLE, "trailing-slash"),
    (f"{BY_HANDLE}#top", BY_HANDLE, "fragment"),
    (f"bsky.app/profile/alice.bsky.social/post/{RKEY}", BY_HANDLE, "no-scheme"),
    (f"https://BSKY.APP/profile/Alice.Bsky.Social/post/{RKEY}", BY_HANDLE, "case"),
    (f"https://bsky.app/profile/@alice.bsky.social/post/{RKEY}", BY_HANDLE, "at-sign"),
    (f"https://www.bsky.app/profile/alice.bsky.social/post/{RKEY}", BY_HANDLE, "www"),
    (f"https://fxbsky.app/profile/alice.bsky.social/post/{RKEY}", BY_HANDLE, "fxbsky"),
    (f"https://d.fxbsky.app/profile/alice.bsky.social/post/{RKEY}", BY_HANDLE, "fxbsky-direct"),
    (f"https://bskx.app/profile/alice.bsky.social/post/{RKEY}", BY_HANDLE, "bskx"),
    (f"https://vxbsky.app/profile/alice.bsky.social/post/{RKEY}", BY_HANDLE, "vxbsky"),
    (f"https://bsyy.app/profile/alice.bsky.social/post/{RKEY}", BY_HANDLE, "bsyy"),
    (f"https://xbsky.app/profile/alice.bsky.social/post/{RKEY}", BY_HANDLE, "xbsky"),
    (f"https://cbsky.app/profile/alice.bsky.social/post/{RKEY}", BY_HANDLE, "cbsky"),
    (f"https://bskye.app/profile/alice.bsky.social/post/{RKEY}", BY_HANDLE, "bskye"),
    (BY_DID, BY_DID, "did"),
    (
        f"https://bsky.app/profile/did%3Aplc%3Apzdr5ylumf7vmvwasrpr5bf2/post/{RKEY}",
        BY_DID,
        "did-percent",
    ),
    (f"https://bsky.app/profile/{DID}/post/{RKEY}/liked-by", BY_DID, "suffix"),
]


@pytest.mark.parametrize(("raw", "url"), [c[:2] for c in BSKY_SPELLINGS],
                         ids=[c[2] for c in BSKY_SPELLINGS])  # fmt: skip
def test_bluesky_spellings(raw: str, url: str) -> None:
    link = classify(raw)
    assert link is not None
    assert (link.kind, link.url, link.post_id) == ("bsky", url, RKEY)
    assert link.key == "bsky:" + url.split("/profile/")[1].replace("/post/", "/")


def test_bluesky_handle_and_did_keys_differ_until_resolved() -> None:
    # The source resolves the handle first; only then do both share `bsky:{did}/{rkey}`.
    by_handle, by_did = classify(BY_HANDLE), classify(BY_DID)
    assert by_handle is not None
    assert by_did is not None
    assert by_handle.handle == "alice.bsky.social"
    assert by_did.key == f"bsky:{DID}/{RKEY}"


PIXIV_SPELLINGS = [
    (WORK, "plain"),
    ("https://pixiv.net/artworks/120000001", "bare-host"),
    ("https://www.pixiv.net/en/artworks/120000001", "lang-en"),
    ("https://www.pixiv.net/zh-tw/artworks/120000001", "lang-zh-tw"),
    ("https://www.pixiv.net/artworks/120000001#1", "fragment"),
    ("https://www.pixiv.net/artworks/120000001?utm_source=share", "tracking"),
    ("https://www.pixiv.net/member_illust.php?mode=medium&illust_id=120000001", "member-illust"),
    ("https://touch.pixiv.net/member_illust.php?illust_id=120000001", "touch"),
    ("https://www.pixiv.net/i/120000001", "short"),
    ("https://phixiv.net/artworks/120000001", "phixiv"),
    ("https://www.phixiv.net/en/artworks/120000001", "phixiv-lang"),
    ("https://phixiv.net/artworks/120000001/3", "phixiv-page"),
    ("pixiv.net/artworks/0120000001", "leading-zero-no-scheme"),
]


@pytest.mark.parametrize(
    "raw", [c[0] for c in PIXIV_SPELLINGS], ids=[c[1] for c in PIXIV_SPELLINGS]
)
def test_pixiv_spellings(raw: str) -> None:
    link = classify(raw)
    assert link is not None
    assert (link.kind, link.url, link.key, link.post_id) == (
        "pixiv", WORK, "pixiv:120000001", "120000001"
    )  # fmt: skip


NOT_POSTS = [
    ("https://bsky.app/profile/alice.bsky.social", "bsky-profile"),
    ("https://bsky.app/search?q=cats", "bsky-search"),
    ("https://bsky.app/profile/alice.bsky.social/feed/aaa", "bsky-feed"),
    ("https://bsky.app/profile/alice/post/3l4omssdl632g", "bsky-handle-one-label"),
    ("https://bsky.app/profile/did:plc:short/post/3l4omssdl632g", "bsky-bad-did"),
    ("https://bsky.app/profile/alice.bsky.social/post/..", "bsky-dotdot"),
    ("https://bsky.app:8443/profile/alice.bsky.social/post/3l4omssdl632g", "bsky-port"),
    ("https://www.pixiv.net/users/1", "pixiv-user"),
    ("https://www.pixiv.net/tags/cat", "pixiv-tag"),
    ("https://www.pixiv.net/artworks/abc", "pixiv-not-number"),
    ("https://www.pixiv.net/artworks/0", "pixiv-zero"),
    ("https://www.pixiv.net/member_illust.php?id=5", "pixiv-member-page"),
    ("https://www.pixiv.net/artworks/1234567890123", "pixiv-too-long"),
]


@pytest.mark.parametrize("raw", [c[0] for c in NOT_POSTS], ids=[c[1] for c in NOT_POSTS])
def test_pages_of_these_sites_that_are_not_posts_are_not_links(raw: str) -> None:
    # Not "other" either: yt-dlp fetches no images from these sites.
    assert classify(raw) is None


def test_mirror_spellings_of_one_work_count_once_in_a_message() -> None:
    plan = plan_links([WORK, "https://phixiv.net/en/artworks/120000001", BY_DID, BY_DID + "?x=1"])
    assert [link.key for link in plan.links] == ["pixiv:120000001", f"bsky:{DID}/{RKEY}"]


@given(st.sampled_from([c[0] for c in BSKY_SPELLINGS] + [c[0] for c in PIXIV_SPELLINGS]))
def test_canonical_links_classify_to_themselves(raw: str) -> None:
    link = classify(raw)
    assert link is not None
    assert classify(link.url) == link
