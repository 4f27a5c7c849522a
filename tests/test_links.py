"""Links: every spelling of an X post, t.co, other sites, and hostile input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, provisional
from hypothesis import strategies as st
from telegram import Update

from xbot.links import (
    MAX_URL_LENGTH,
    Entity,
    Link,
    canonicalize_x,
    classify,
    extract_links,
    is_tco,
    plan_links,
)

DATA = Path(__file__).parent / "data"
ALICE = "https://x.com/alice/status/1234567890"

# (input, canonical url) — every spelling seen in the wild maps to one Link.
X_SPELLINGS = [
    ("https://x.com/alice/status/1234567890", ALICE, "x"),
    ("http://x.com/alice/status/1234567890", ALICE, "http"),
    ("x.com/alice/status/1234567890", ALICE, "no-scheme"),
    ("https://twitter.com/alice/status/1234567890", ALICE, "twitter"),
    ("https://www.twitter.com/alice/status/1234567890", ALICE, "www-twitter"),
    ("https://www.x.com/alice/status/1234567890", ALICE, "www-x"),
    ("https://mobile.twitter.com/alice/status/1234567890", ALICE, "mobile"),
    ("https://m.twitter.com/alice/status/1234567890", ALICE, "m"),
    ("https://fxtwitter.com/alice/status/1234567890", ALICE, "fxtwitter"),
    ("https://fixupx.com/alice/status/1234567890", ALICE, "fixupx"),
    ("https://fixvx.com/alice/status/1234567890", ALICE, "fixvx"),
    ("https://vxtwitter.com/alice/status/1234567890", ALICE, "vxtwitter"),
    ("https://twittpr.com/alice/status/1234567890", ALICE, "twittpr"),
    ("https://xfixup.com/alice/status/1234567890", ALICE, "xfixup"),
    ("https://d.fxtwitter.com/alice/status/1234567890", ALICE, "d-prefix"),
    ("https://dl.fixupx.com/alice/status/1234567890", ALICE, "dl-prefix"),
    ("https://g.fxtwitter.com/alice/status/1234567890", ALICE, "g-prefix"),
    ("https://m.fixupx.com/alice/status/1234567890", ALICE, "m-mirror-prefix"),
    ("https://t.fxtwitter.com/alice/status/1234567890", ALICE, "t-prefix"),
    ("https://x.com/alice/status/1234567890/photo/1", ALICE, "photo-suffix"),
    ("https://x.com/alice/status/1234567890/video/1", ALICE, "video-suffix"),
    ("https://fxtwitter.com/alice/status/1234567890/en", ALICE, "translate-suffix"),
    ("https://x.com/alice/status/1234567890/", ALICE, "trailing-slash"),
    ("https://x.com/alice/statuses/1234567890", ALICE, "statuses"),
    ("https://x.com/alice/status/1234567890?s=20&t=AbCdEf-gh_123", ALICE, "tracking"),
    ("https://x.com/alice/status/1234567890?s=46", ALICE, "s46"),
    ("https://x.com/alice/status/1234567890#m", ALICE, "fragment"),
    ("https://twitter.com/#!/alice/status/1234567890", ALICE, "hashbang"),
    ("HTTPS://X.COM/alice/status/1234567890", ALICE, "uppercase-host"),
    ("https://X.com./alice/status/1234567890", ALICE, "trailing-dot-host"),
    ("https://x.com:443/alice/status/1234567890", ALICE, "default-port"),
    ("https://x.com/alice/status/01234567890", ALICE, "leading-zero"),
    ("  https://x.com/alice/status/1234567890\n", ALICE, "whitespace-around"),
    ("\u200bhttps://x.com/alice/status/1234567890\u200f", ALICE, "zero-width-around"),
    ("https://x.com/i/status/1234567890", "https://x.com/i/status/1234567890", "i-status"),
    ("https://x.com/i/web/status/1234567890", "https://x.com/i/status/1234567890", "i-web"),
    ("https://d.fxtwitter.com/i/status/1234567890", "https://x.com/i/status/1234567890", "d-i"),
    ("https://x.com/Alice_01/status/1", "https://x.com/Alice_01/status/1", "handle-case-kept"),
    ("x.com/a/status/" + "9" * 25, "https://x.com/a/status/" + "9" * 25, "25-digit-id"),
]

# Issue 12: the forms people paste that xbot did not know, each with where it comes from.
I_POST = "https://x.com/i/status/1234567890"
MORE_SPELLINGS = [
    # FxEmbed src/realms/twitter/routes/status.ts: /status/ID.(mp4|png|jpe?g|gifv?) is
    # "direct media", and a :name tail picks the image size (pbs.twimg.com's :orig).
    ("https://fxtwitter.com/alice/status/1234567890.mp4", ALICE, "suffix-mp4"),
    ("https://d.fxtwitter.com/alice/status/1234567890.jpg", ALICE, "suffix-jpg"),
    ("https://fxtwitter.com/alice/status/1234567890.png", ALICE, "suffix-png"),
    ("https://fxtwitter.com/alice/status/1234567890.gif", ALICE, "suffix-gif"),
    ("https://fixupx.com/alice/status/1234567890.jpg:orig", ALICE, "suffix-jpg-orig"),
    ("https://fxtwitter.com/alice/status/1234567890:orig", ALICE, "suffix-orig"),
    ("https://vxtwitter.com/alice/status/1234567890.mp4", ALICE, "vx-suffix-mp4"),
    # A handle written with @ (copied from a profile header).
    ("https://x.com/@alice/status/1234567890", ALICE, "at-handle"),
    # FxEmbed router.ts: /:endpoint{status(es)?}/:id with no handle; yt-dlp TwitterIE: /statuses/ID
    ("https://twitter.com/status/1234567890", I_POST, "status-no-handle"),
    ("https://twitter.com/statuses/1234567890", I_POST, "statuses-no-handle"),
    ("https://x.com/i/web/status/1234567890/photo/1", I_POST, "i-web-photo"),
    # FxEmbed router.ts: /:prefix{(dir|dl)}/:handle/status/:id.
    ("https://fxtwitter.com/dl/alice/status/1234567890", ALICE, "path-dl"),
    ("https://fxtwitter.com/dir/alice/status/1234567890", ALICE, "path-dir"),
    ("https://fixupx.com/dl/alice/status/1234567890/photo/2", ALICE, "path-dl-photo"),
    ("https://g.fixupx.com/alice/status/1234567890", ALICE, "g-fixupx"),
    ("https://d.vxtwitter.com/alice/status/1234567890", ALICE, "d-vxtwitter"),
    ("https://x.com/alice/status/1234567890/video/1?s=20", ALICE, "video-tail-tracking"),
    # yt-dlp TwitterCardIE: /i/videos/tweet/ID, /i/videos/ID, /i/cards/tfw/v1/ID.
    ("https://twitter.com/i/videos/tweet/1234567890", I_POST, "card-videos-tweet"),
    ("https://twitter.com/i/videos/1234567890", I_POST, "card-videos"),
    ("https://twitter.com/i/cards/tfw/v1/1234567890", I_POST, "card-tfw"),
    # Nitter front ends (zedeus/nitter wiki; yt-dlp NitterIE, the NitterRedirect plugin).
    ("https://nitter.net/alice/status/1234567890#m", ALICE, "nitter-net"),
    ("https://nitter.poast.org/alice/status/1234567890", ALICE, "nitter-poast"),
    ("https://nitter.privacydev.net/alice/status/1234567890", ALICE, "nitter-privacydev"),
    ("https://nitter.tiekoetter.com/alice/status/1234567890", ALICE, "nitter-tiekoetter"),
    ("https://xcancel.com/alice/status/1234567890", ALICE, "xcancel"),
    ("https://lightbrd.com/alice/status/1234567890", ALICE, "lightbrd"),
    ("https://nuku.trabun.org/alice/status/1234567890", ALICE, "nuku"),
    ("https://nitter.net/i/status/1234567890", I_POST, "nitter-i-status"),
]


@pytest.mark.parametrize(
    ("raw", "canonical"), [c[:2] for c in MORE_SPELLINGS], ids=[c[2] for c in MORE_SPELLINGS]
)
def test_every_pasted_form_canonicalises(raw: str, canonical: str) -> None:
    link = classify(raw)
    assert link is not None
    assert link.kind == "x"
    assert link.url == canonical
    assert link.key == "x:1234567890"
    assert classify(link.url) == link


@pytest.mark.parametrize(
    "raw",
    [
        "https://x.com/alice/status/1234567890.exe",
        "https://x.com/alice/status/1234567890.mp4.mp4",
        "https://x.com/alice/status/1234567890:orig:orig",
        "https://x.com/alice/status/.mp4",
        "https://x.com/@/status/1",
        "https://x.com/i/videos/tweet/abc",
        "https://nitter.net/alice",
    ],
)
def test_suffixes_and_forms_that_are_no_post(raw: str) -> None:
    assert classify(raw) is None


@pytest.mark.parametrize(
    ("raw", "canonical"), [c[:2] for c in X_SPELLINGS], ids=[c[2] for c in X_SPELLINGS]
)
def test_every_x_spelling_canonicalises(raw: str, canonical: str) -> None:
    link = canonicalize_x(raw)
    assert link is not None
    assert link.url == canonical
    assert link.kind == "x"
    assert link.key == f"x:{link.post_id}"
    assert canonical.endswith(f"/status/{link.post_id}")
    assert classify(raw) == link


def test_handle_is_none_when_the_link_names_none() -> None:
    link = canonicalize_x("https://x.com/i/status/5")
    assert link == Link("https://x.com/i/status/5", "x:5", "x", "5", None)
    assert canonicalize_x("https://x.com/bob/status/5") == Link(
        "https://x.com/bob/status/5", "x:5", "x", "5", "bob"
    )


# Inputs that are no X post, and what classify makes of them.
NOT_X = [
    ("https://x.com/alice", None, "profile"),
    ("https://x.com/search?q=cats", None, "search"),
    ("https://x.com/home", None, "home"),
    ("https://x.com/i/spaces/1YqKDqWqgzPJV", None, "space"),
    ("https://x.com/alice/status/", None, "no-id"),
    ("https://x.com/alice/status/abc", None, "letters-id"),
    ("https://x.com/alice/status/12a", None, "mixed-id"),
    ("https://x.com/alice/status/-5", None, "negative-id"),
    ("https://x.com/alice/status/0", None, "zero-id"),
    ("https://x.com/alice/status/" + "1" * 26, None, "26-digit-id"),
    ("https://x.com/alice/status/١٢٣", None, "arabic-digits"),
    ("https://x.com/al-ice/status/1", None, "bad-handle"),
    ("https://x.com/%61lice/status/1", None, "percent-handle"),
    ("https://x.com:8443/alice/status/1", None, "odd-port"),
    ("https://x.com:99999/alice/status/1", None, "port-out-of-range"),
    ("https://x.com:abc/alice/status/1", None, "port-junk"),
    ("https://x.com@evil.com/alice/status/1", None, "userinfo-host"),
    ("https://alice@x.com/alice/status/1", None, "userinfo-user"),
    ("https://api.fxtwitter.com/alice/status/1", "other", "api-host"),
    ("https://pbs.twimg.com/media/abc.jpg", "other", "media-host"),
    ("https://x.com.evil.com/alice/status/1", "other", "suffix-attack"),
    ("https://evilx.com/alice/status/1", "other", "evilx"),
    ("https://www.www.x.com/alice/status/1", "other", "double-prefix"),
    ("ftp://x.com/alice/status/1", None, "ftp"),
    ("javascript:alert(1)//x.com/a/status/1", None, "javascript"),
    ("data:text/html,x.com/a/status/1", None, "data"),
    ("https://x.com/alice/status/1\u200b2", None, "zero-width-inside"),
    ("https://x.com/alice/status/1\u202e2", None, "rtl-override-inside"),
    ("https://x.com/alice/sta tus/1", None, "space-inside"),
    ("https://x\u0301.com/alice/status/1", "other", "combining-in-host"),
    ("https://ｘ.com/alice/status/1", "x", "fullwidth-host-folds-to-x"),
    ("https://x.com/alice/status/1" + "/a" * 1100, None, "too-long"),
    ("", None, "empty"),
    ("x", None, "one-char"),
    ("https://", None, "scheme-only"),
]


@pytest.mark.parametrize(("raw", "kind"), [c[:2] for c in NOT_X], ids=[c[2] for c in NOT_X])
def test_what_is_not_an_x_post(raw: str, kind: str | None) -> None:
    link = classify(raw)
    assert (link.kind if link else None) == kind
    if kind != "x":
        assert canonicalize_x(raw) is None


TCO = [
    ("https://t.co/AbCdEf1234", True, "https"),
    ("http://t.co/AbCdEf1234", True, "http"),
    ("t.co/AbCdEf1234", True, "no-scheme"),
    ("https://T.CO/AbCdEf1234", True, "upper-host"),
    ("https://t.co/AbCdEf1234?amp=1", True, "query"),
    ("https://t.co/AbCdEf1234/", True, "trailing-slash"),
    ("https://t.co/", False, "no-code"),
    ("https://t.co/a/b", False, "two-segments"),
    ("https://t.co/ab-cd", False, "dash"),
    ("https://t.co:8080/AbCd", False, "port"),
    ("https://x@t.co/AbCd", False, "userinfo"),
    ("https://t.co.evil.com/AbCd", False, "suffix-attack"),
    ("https://tt.co/AbCd", False, "other-host"),
]


@pytest.mark.parametrize(("raw", "ok"), [c[:2] for c in TCO], ids=[c[2] for c in TCO])
def test_tco(raw: str, ok: bool) -> None:
    assert is_tco(raw) is ok
    link = classify(raw)
    if ok:
        assert link == Link("https://t.co/AbCdEf1234", "tco:AbCdEf1234", "tco")
    else:
        assert link is None or link.kind == "other"


def test_tco_code_is_case_sensitive() -> None:
    a, b = classify("https://t.co/abc"), classify("https://t.co/ABC")
    assert a is not None
    assert b is not None
    assert a.key != b.key


OTHER = [
    (
        "https://www.youtube.com/watch?v=dQw4w9WgXcQ",
        "https://www.youtube.com/watch?v=dQw4w9WgXcQ",
        "yt",
    ),
    ("HTTPS://WWW.Example.COM/Path?Q=1#frag", "https://www.example.com/Path?Q=1", "case-frag"),
    ("https://example.com", "https://example.com/", "empty-path"),
    ("https://example.com:443/a", "https://example.com/a", "default-port"),
    ("http://example.com:80/a", "http://example.com/a", "default-port-http"),
    ("https://example.com:8443/a", "https://example.com:8443/a", "odd-port-kept"),
    ("https://example.com./a", "https://example.com/a", "trailing-dot"),
    ("https://пример.рф/видео", "https://xn--e1afmkfd.xn--p1ai/видео", "idn"),
    ("https://a_b.example.com/", "https://a_b.example.com/", "underscore-label"),
]


@pytest.mark.parametrize(("raw", "url"), [c[:2] for c in OTHER], ids=[c[2] for c in OTHER])
def test_other_links_are_normalised_minimally(raw: str, url: str) -> None:
    assert classify(raw) == Link(url, f"url:{url}", "other")


JUNK = [
    "https://127.0.0.1/video.mp4",
    "https://127.1/video.mp4",
    "https://0x7f.1/video.mp4",
    "https://2130706433/video.mp4",
    "https://[::1]/video.mp4",
    "https://[::ffff:127.0.0.1]/video.mp4",
    "https://[fe80::1/",
    "https://localhost/video.mp4",
    "https://localhost./video.mp4",
    "https://foo.localhost/video.mp4",
    "https://printer.local/",
    "https://db.internal/",
    "https://intranet/",
    "https://user:pw@example.com/",
    "https://@example.com/",
    "https://-bad-.example.com/",
    "https://a..b.com/",
    "https://example.com:0x50/",
    "example.com/watch?v=1",
    "www.youtube.com/watch?v=1",
    "notes.py",
    "javascript:alert(document.cookie)",
    "JavaScript://example.com/%0Aalert(1)",
    "data:text/html;base64,PHNjcmlwdD4=",
    "ftp://example.com/file",
    "file:///etc/passwd",
    "mailto:a@example.com",
    "tg://resolve?domain=x",
    "https://example.com/" + "a" * MAX_URL_LENGTH,
    "https://ex ample.com/",
    "https://example.com/a\x00b",
    "https://example.com/a\u2028b",
    "https://\u202eexample.com/",
]


@pytest.mark.parametrize("raw", JUNK, ids=[f"junk{i}" for i in range(len(JUNK))])
def test_junk_is_refused(raw: str) -> None:
    assert classify(raw) is None


PRIVATE_ALLOWED = [
    ("http://127.0.0.1:8080/v.mp4", "http://127.0.0.1:8080/v.mp4", "ipv4"),
    ("http://[::1]:8080/v.mp4", "http://[::1]:8080/v.mp4", "ipv6"),
    ("http://localhost:8080/v.mp4", "http://localhost:8080/v.mp4", "localhost"),
]


@pytest.mark.parametrize(
    ("raw", "url"), [c[:2] for c in PRIVATE_ALLOWED], ids=[c[2] for c in PRIVATE_ALLOWED]
)
def test_allow_private_admits_local_hosts_for_tests_and_demo(raw: str, url: str) -> None:
    assert classify(raw) is None
    assert classify(raw, allow_private=True) == Link(url, f"url:{url}", "other")


# --- extract_links -----------------------------------------------------------


def _u16(s: str) -> int:
    return len(s.encode("utf-16-le")) // 2


def _url_entity(text: str, url: str) -> Entity:
    start = text.index(url)
    return Entity("url", _u16(text[:start]), _u16(url))


def test_extract_from_a_real_update_with_emoji_and_text_links() -> None:
    raw = json.loads((DATA / "links_message_update.json").read_text(encoding="utf-8"))
    message = Update.de_json(raw, None).message
    assert message is not None
    assert message.text is not None
    urls = extract_links(message.text, message.entities)
    assert urls == [
        "https://x.com/alice/status/1234567890?s=20",
        "fxtwitter.com/alice/status/1234567890/photo/1",
        "https://vxtwitter.com/bob/status/42",
        "https://t.co/AbCdEf1234",
        "https://www.youtube.com/watch?v=dQw4w9WgXcQ",
    ]
    plan = plan_links(urls)
    assert [link.key for link in plan.links] == [
        "x:1234567890",
        "x:42",
        "tco:AbCdEf1234",
        "url:https://www.youtube.com/watch?v=dQw4w9WgXcQ",
    ]


EXTRACT = [
    ("🎉 " + ALICE, None, [ALICE], "emoji-shifts-by-2"),
    ("👨‍👩‍👧 " + ALICE, None, [ALICE], "zwj-family"),
    ("𝕏𝕏𝕏 " + ALICE, None, [ALICE], "astral-letters"),
    ("שלום " + ALICE + " עולם", None, [ALICE], "rtl-around"),
    ("e\u0301\u0301 " + ALICE, None, [ALICE], "combining-before"),
    ("\u200b\u200f" + ALICE, None, [ALICE], "zero-width-before"),
]


@pytest.mark.parametrize(
    ("text", "entities", "expected"), [c[:3] for c in EXTRACT], ids=[c[3] for c in EXTRACT]
)
def test_extract_counts_utf16(text: str, entities: None, expected: list[str]) -> None:
    assert extract_links(text, [_url_entity(text, ALICE)]) == expected


def test_extract_ignores_entities_out_of_range_and_other_types() -> None:
    text = "see " + ALICE
    good = _url_entity(text, ALICE)
    entities = [
        Entity("url", -1, 5),
        Entity("url", 0, 0),
        Entity("url", 2, -3),
        Entity("url", len(text), 1),
        Entity("url", good.offset, good.length + 1),
        Entity("url", 10**12, 10**12),
        Entity("bold", 0, 3),
        Entity("mention", 0, 3),
        Entity("text_link", 0, 3, url=None),
        Entity("text_link", 0, 3, url=""),
        good,
    ]
    assert extract_links(text, entities) == [ALICE]


def test_extract_keeps_order_of_appearance_even_if_entities_arrive_unsorted() -> None:
    text = "a https://a.example.com/ b https://b.example.com/"
    first = _url_entity(text, "https://a.example.com/")
    second = _url_entity(text, "https://b.example.com/")
    hidden = Entity("text_link", 0, 1, url="https://c.example.com/")
    assert extract_links(text, [second, first, hidden]) == [
        "https://c.example.com/",
        "https://a.example.com/",
        "https://b.example.com/",
    ]


def test_extract_a_split_surrogate_pair_gives_junk_not_a_crash() -> None:
    text = "🎉" + ALICE
    urls = extract_links(text, [Entity("url", 1, _u16(ALICE) + 1)])
    assert len(urls) == 1
    assert classify(urls[0]) is None


def test_hostile_4096_char_message_with_60_links() -> None:
    pieces = [f"🎉 https://x.com/u{i}/status/{1000 + i} \u200f" for i in range(60)]
    text = "".join(pieces)
    text += "x" * (4096 - len(text))
    entities = [_url_entity(text, f"https://x.com/u{i}/status/{1000 + i}") for i in range(60)]
    urls = extract_links(text, entities)
    assert len(urls) == 60
    plan = plan_links(urls)
    assert len(plan.links) == 10
    assert plan.skipped == 50
    assert plan.unsupported == ()
    assert [link.post_id for link in plan.links] == [str(1000 + i) for i in range(10)]


# --- plan_links --------------------------------------------------------------


def test_plan_dedupes_mirror_spellings_and_reports_unsupported() -> None:
    plan = plan_links(
        [
            "https://fxtwitter.com/alice/status/1234567890",
            "https://x.com/i/status/1234567890",
            "javascript:alert(1)",
            "https://twitter.com/alice/status/1234567890?s=20",
            "https://example.com/v",
            "javascript:alert(1)",
            "https://example.com/v#again",
            "https://x.com/bob",
        ],
        limit=10,
    )
    assert [link.url for link in plan.links] == [ALICE, "https://example.com/v"]
    assert plan.skipped == 0
    # A profile on X is no post, and the sender hears nothing for it (issue 12).
    assert plan.unsupported == ("javascript:alert(1)",)


# Pages on X and its front ends that are no post: refused, and quiet.
QUIET = [
    ("https://x.com/bob", "profile"),
    ("https://twitter.com/search?q=cats&src=typed_query", "search"),
    ("https://x.com/i/lists/1234567890", "list"),
    ("https://x.com/i/spaces/1YqKDqWqgzPJV", "space"),
    ("https://x.com/bob/with_replies", "profile-tab"),
    ("https://x.com/hashtag/cats", "hashtag"),
    ("https://nitter.net/bob", "nitter-profile"),
    ("https://xcancel.com/search?q=cats", "xcancel-search"),
    ("https://fxtwitter.com/bob/media", "mirror-profile-media"),
]


@pytest.mark.parametrize("raw", [c[0] for c in QUIET], ids=[c[1] for c in QUIET])
def test_non_posts_on_x_are_refused_quietly(raw: str) -> None:
    assert classify(raw) is None
    plan = plan_links([raw])
    assert plan.links == ()
    assert plan.unsupported == ()


def test_a_non_x_junk_link_is_still_reported() -> None:
    assert plan_links(["javascript:alert(1)"]).unsupported == ("javascript:alert(1)",)


def test_a_broken_post_link_on_x_is_still_reported() -> None:
    raw = "https://x.com/not:a:handle/status/105"
    assert plan_links([raw]).unsupported == (raw,)


def test_plan_limit_counts_distinct_links_only() -> None:
    urls = [f"x.com/a/status/{i}" for i in range(1, 6)] * 2
    plan = plan_links(urls, limit=3)
    assert [link.post_id for link in plan.links] == ["1", "2", "3"]
    assert plan.skipped == 2
    assert plan_links(urls, limit=0).skipped == 5
    with pytest.raises(ValueError, match="limit"):
        plan_links(urls, limit=-1)


# --- properties --------------------------------------------------------------

_handles = st.from_regex(r"[A-Za-z0-9_]{1,15}", fullmatch=True).filter(lambda h: h != "i")
_ids = st.integers(min_value=1, max_value=10**25 - 1)


@st.composite
def x_spellings(draw: st.DrawFn) -> tuple[str, int]:
    scheme = draw(st.sampled_from(["", "http://", "https://", "HTTPS://", "Https://"]))
    prefix = draw(st.sampled_from(["", "www.", "mobile.", "m.", "d.", "dl.", "g.", "t.", "i."]))
    host = draw(
        st.sampled_from(
            ["x.com", "twitter.com", "fxtwitter.com", "fixupx.com", "vxtwitter.com", "fixvx.com"]
        )
    )
    if draw(st.booleans()):
        prefix, host = "", draw(st.sampled_from(["nitter.net", "xcancel.com", "nitter.poast.org"]))
    if draw(st.booleans()):
        host = host.upper()
    sid = draw(_ids)
    path = draw(
        st.sampled_from(
            [
                "/{h}/status/{i}",
                "/{h}/statuses/{i}",
                "/@{h}/status/{i}",
                "/i/status/{i}",
                "/i/web/status/{i}",
                "/status/{i}",
                "/dl/{h}/status/{i}",
                "/dir/{h}/status/{i}",
                "/i/videos/tweet/{i}",
                "/{h}/status/{i}.mp4",
                "/{h}/status/{i}.jpg:orig",
            ]
        )
    ).format(h=draw(_handles), i=sid)
    suffix = draw(st.sampled_from(["", "/", "/photo/1", "/video/2", "/en"]))
    query = draw(st.sampled_from(["", "?s=20", "?s=20&t=AbC_d-e", "?ref_src=twsrc%5Etfw"]))
    frag = draw(st.sampled_from(["", "#m", "#"]))
    return scheme + prefix + host + path + suffix + query + frag, sid


@given(x_spellings())
def test_property_every_generated_spelling_is_the_same_post(case: tuple[str, int]) -> None:
    raw, sid = case
    link = canonicalize_x(raw)
    assert link is not None
    assert link.key == f"x:{sid}"
    assert canonicalize_x(link.url) == link
    assert classify(link.url) == link


_url_like = st.builds(
    "{}{}/{}".format,
    st.sampled_from(["https://", "http://", "", "HTTP://"]),
    st.text(st.characters(codec="utf-8"), max_size=30),
    st.text(max_size=30),
)


@given(
    st.one_of(
        x_spellings().map(lambda c: c[0]), provisional.urls(), _url_like, st.text(max_size=200)
    )
)
def test_property_classify_is_idempotent_and_never_raises(raw: str) -> None:
    link = classify(raw)
    if link is not None:
        assert classify(link.url) == link
        assert len(link.url) <= MAX_URL_LENGTH
    x = canonicalize_x(raw)
    if x is not None:
        assert canonicalize_x(x.url) == x
    private = classify(raw, allow_private=True)
    if private is not None:
        assert classify(private.url, allow_private=True) == private


_entities = st.builds(
    Entity,
    type=st.sampled_from(["url", "text_link", "bold", "mention", "code"]),
    offset=st.integers(min_value=-5, max_value=300),
    length=st.integers(min_value=-5, max_value=300),
    url=st.one_of(st.none(), st.text(max_size=50)),
)


@given(st.text(max_size=300), st.lists(_entities, max_size=20))
def test_property_extract_never_raises(text: str, entities: list[Entity]) -> None:
    urls = extract_links(text, entities)
    assert len(urls) <= len(entities)
    plan_links(urls)


@given(
    st.lists(st.one_of(x_spellings().map(lambda c: c[0]), provisional.urls()), max_size=40),
    st.integers(min_value=0, max_value=15),
)
def test_property_plan_never_exceeds_limit(urls: list[str], limit: int) -> None:
    plan = plan_links(urls, limit)
    assert len(plan.links) <= limit
    keys = [link.key for link in plan.links]
    assert len(keys) == len(set(keys))
    distinct = {link.key for u in urls if (link := classify(u)) is not None}
    assert len(plan.links) + plan.skipped == len(distinct)
