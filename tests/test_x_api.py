"""The fxtwitter client: parsing over hand-written payloads, variant choice, HTTP classes, t.co."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xbot.errors import FetchError, PostUnavailable, TransientFetch, UnsupportedLink
from xbot.media.models import MediaItem, Post, Variant
from xbot.sending import video_choice
from xbot.sources import x
from xbot.sources.x import (
    AGE_GATED,
    DELETED,
    MALFORMED,
    NOT_ANSWERING,
    PRIVATE,
    SUSPENDED,
    WITHHELD,
    XApi,
    card_link,
    choose_variant,
    expand_tco,
    parse_status,
    with_quote_media,
)

DATA = Path(__file__).parent / "data"
MB = 1024 * 1024


def load(name: str) -> Any:
    return json.loads((DATA / f"xapi_{name}.json").read_text(encoding="utf-8"))


def named_reason(name: str) -> str:
    """A reason by its constant's name (``DELETED``), as the package exports it."""
    reason: str = getattr(x, name)
    return reason


# -- parse_status over files ---------------------------------------------------------

V = "https://video.twimg.com/amplify_video/1800"
VIDEO_VARIANTS = (
    Variant(url=f"{V}/pl/abc.m3u8?tag=16", container="m3u8", codec="h264", bitrate=0),
    Variant(f"{V}/vid/avc1/480x270/a.mp4?tag=16", "mp4", "h264", 632000, 1200000),
    Variant(f"{V}/vid/avc1/1280x720/c.mp4?tag=16", "mp4", "h264", 2176000, None),
    Variant(f"{V}/vid/hevc/1920x1080/d.mp4?tag=16", "mp4", "hevc", 4000000, 9000000),
    Variant(f"{V}/vid/avc1/1920x1080/e.mp4?tag=16", "mp4", "h264", 10368000, 60000000),
)
MIXED_VIDEO_URL = "https://video.twimg.com/ext_tw_video/16/pu/vid/avc1/720x720/v.mp4?tag=12"
L = "https://video.twimg.com/ext_tw_video/15/pu"

PARSED: list[tuple[str, str, Post]] = [
    (
        "photo",
        "1234567890",
        Post(
            key="x:1234567890",
            url="https://x.com/alice/status/1234567890",
            author_name="Alice Example",
            author_handle="alice",
            text="Sunset over the bay 🌅 & friends <3",
            media=(
                MediaItem(
                    kind="photo",
                    url="https://pbs.twimg.com/media/GabcDEFxyz.jpg?name=orig",
                    width=2048,
                    height=1365,
                    alt_text="A sunset",
                ),
            ),
        ),
    ),
    (
        "video",
        "1800000000000000001",
        Post(
            key="x:1800000000000000001",
            url="https://x.com/bob_films/status/1800000000000000001",
            author_name="Bob Films",
            author_handle="bob_films",
            text="New trailer",
            sensitive=True,
            media=(
                MediaItem(
                    kind="video",
                    url=f"{V}/vid/avc1/1280x720/c.mp4?tag=16",
                    variants=VIDEO_VARIANTS,
                    width=1280,
                    height=720,
                    duration=31.5,
                    thumbnail_url="https://pbs.twimg.com/amplify_video_thumb/1800/img/t.jpg",
                ),
            ),
        ),
    ),
    (
        "gif",
        "1700000000000000002",
        Post(
            key="x:1700000000000000002",
            url="https://x.com/carol/status/1700000000000000002",
            author_name="Carol",
            author_handle="carol",
            text="when the build passes",
            media=(
                MediaItem(
                    kind="gif",
                    url="https://video.twimg.com/tweet_video/GifAbc.mp4",
                    variants=(
                        Variant("https://video.twimg.com/tweet_video/GifAbc.mp4", "mp4", "h264"),
                    ),
                    width=498,
                    height=280,
                    duration=0.0,
                    thumbnail_url="https://pbs.twimg.com/tweet_video_thumb/GifAbc.jpg",
                ),
            ),
        ),
    ),
    (
        "mixed_all",
        "1600000000000000003",
        Post(
            key="x:1600000000000000003",
            url="https://x.com/dan/status/1600000000000000003",
            author_name="Dan",
            author_handle="dan",
            text="photo, clip, photo",
            media=(
                MediaItem("photo", "https://pbs.twimg.com/media/P1.jpg?name=orig", (), 800, 600),
                MediaItem(
                    kind="video",
                    url=MIXED_VIDEO_URL,
                    variants=(Variant(MIXED_VIDEO_URL, "mp4", "h264", 950000),),
                    width=720,
                    height=720,
                    duration=12.04,
                ),
                MediaItem("photo", "https://pbs.twimg.com/media/P2.png?name=orig", (), 1200, 900),
            ),
        ),
    ),
    (
        "photos_videos_no_all",
        "1600000000000000004",
        Post(
            key="x:1600000000000000004",
            url="https://x.com/erin/status/1600000000000000004",
            author_name="Erin",
            author_handle="erin",
            text="older answer without all[]",
            media=(
                MediaItem("photo", "https://pbs.twimg.com/media/Q1.jpg?name=orig", (), 640, 480),
                MediaItem(
                    kind="video",
                    url="https://video.twimg.com/ext_tw_video/17/pu/vid/v.mp4",
                    variants=(
                        Variant(
                            "https://video.twimg.com/ext_tw_video/17/pu/vid/v.mp4",
                            "mp4",
                            size=3000000,
                        ),
                    ),
                    size=3000000,
                ),
            ),
        ),
    ),
    (
        "legacy_variants",
        "1500000000000000005",
        Post(
            key="x:1500000000000000005",
            url="https://x.com/frank/status/1500000000000000005",
            author_name="Frank",
            author_handle="frank",
            text="legacy variants",
            media=(
                MediaItem(
                    kind="video",
                    url=f"{L}/vid/1280x720/hi.mp4?tag=12",
                    variants=(
                        Variant(f"{L}/pl/list.m3u8?tag=12", "m3u8", "", 0),
                        Variant(f"{L}/vid/480x270/lo.mp4?tag=12", "mp4", "", 256000),
                        Variant(f"{L}/vid/1280x720/hi.mp4?tag=12", "mp4", "", 2176000),
                    ),
                    width=1280,
                    height=720,
                    duration=8.0,
                    thumbnail_url="https://pbs.twimg.com/ext_tw_video_thumb/15/pu/img/t.jpg",
                ),
            ),
        ),
    ),
    (
        "text_only",
        "1400000000000000006",
        Post(
            key="x:1400000000000000006",
            url="https://x.com/gina/status/1400000000000000006",
            author_name="Gina",
            author_handle="gina",
            text="just setting up my bot",
        ),
    ),
    (
        "v2_status",
        "1300000000000000007",
        Post(
            key="x:1300000000000000007",
            url="https://x.com/hank/status/1300000000000000007",
            author_name="Hank",
            author_handle="hank",
            text="from the v2 endpoint",
            media=(
                MediaItem("photo", "https://pbs.twimg.com/media/V2.jpg?name=orig", (), 100, 100),
            ),
        ),
    ),
    (
        "missing_fields",
        "1100000000000000009",
        Post(
            key="x:1100000000000000009",
            url="https://x.com/i/status/1100000000000000009",
            author_name="",
            author_handle="",
            text="",
            media=(
                MediaItem("photo", "https://pbs.twimg.com/media/Only.jpg?name=orig"),
                MediaItem(
                    kind="video",
                    url="https://video.twimg.com/x/noitemurl.mp4",
                    variants=(
                        Variant("https://video.twimg.com/x/noitemurl.mp4", "mp4", "", 500000),
                    ),
                ),
            ),
        ),
    ),
    (
        "wrong_types",
        "1000000000000000010",
        Post(
            key="x:1000000000000000010",
            url="https://x.com/i/status/1000000000000000010",
            author_name="",
            author_handle="",
            text="",
            media=(MediaItem("photo", "https://pbs.twimg.com/media/Good.jpg?name=orig"),),
        ),
    ),
]


@pytest.mark.parametrize(("name", "post_id", "expected"), PARSED, ids=[n for n, _, _ in PARSED])
def test_parse_status_files(name: str, post_id: str, expected: Post) -> None:
    assert parse_status(load(name), post_id=post_id) == expected


REFUSED: list[tuple[str, type[FetchError], str]] = [
    ("tombstone", PostUnavailable, SUSPENDED),
    ("private", PostUnavailable, PRIVATE),
    ("not_found", PostUnavailable, DELETED),
    ("api_fail", TransientFetch, "try again"),
    ("tweet_not_object", FetchError, MALFORMED),
]


@pytest.mark.parametrize(("name", "error", "reason"), REFUSED, ids=[n for n, _, _ in REFUSED])
def test_parse_status_refusals(name: str, error: type[FetchError], reason: str) -> None:
    with pytest.raises(error) as info:
        parse_status(load(name), post_id="1")
    assert type(info.value) is error
    assert reason in info.value.reason


@pytest.mark.parametrize(
    ("data", "error", "reason"),
    [
        (None, FetchError, MALFORMED),
        ([], FetchError, MALFORMED),
        ("OK", FetchError, MALFORMED),
        ({}, FetchError, MALFORMED),
        ({"code": "200", "tweet": {}}, FetchError, MALFORMED),
        ({"code": True, "tweet": {}}, FetchError, MALFORMED),
        ({"code": 400, "tweet": None}, FetchError, MALFORMED),
        ({"code": 410, "tweet": None}, PostUnavailable, DELETED),
        ({"code": 503, "message": "UPSTREAM_UNAVAILABLE"}, TransientFetch, "try again"),
        (
            {"code": 404, "status": {"type": "tombstone", "reason": "deleted"}},
            PostUnavailable,
            DELETED,
        ),
        ({"status": {"type": "tombstone", "reason": "private"}}, PostUnavailable, PRIVATE),
        ({"status": {"type": "tombstone", "reason": "blocked"}}, PostUnavailable, "let me see"),
        ({"status": {"type": "tombstone", "reason": 7}}, PostUnavailable, "unavailable"),
        ({"status": {"type": "tombstone"}}, PostUnavailable, "unavailable"),
    ],
    ids=[
        "null",
        "list",
        "string",
        "empty-object",
        "code-as-string",
        "code-as-bool",
        "code-400",
        "code-410",
        "code-503",
        "v2-tombstone-deleted",
        "tombstone-private",
        "tombstone-blocked",
        "tombstone-reason-wrong-type",
        "tombstone-no-reason",
    ],
)
def test_parse_status_inline_refusals(data: object, error: type[FetchError], reason: str) -> None:
    with pytest.raises(error) as info:
        parse_status(data, post_id="1")
    assert type(info.value) is error
    assert reason in info.value.reason


def test_key_and_link_come_from_the_requested_id() -> None:
    data = load("photo")
    data["tweet"]["id"] = "999"
    post = parse_status(data, post_id="1234567890")
    assert post.key == "x:1234567890"
    assert post.url == "https://x.com/alice/status/1234567890"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (640, 640),
        (640.0, 640),
        (0, 0),
        (True, None),
        (False, None),
        (-1, None),
        (float("nan"), None),
        (float("inf"), None),
        (1e300, None),
        (2**70, None),
        ("640", None),
        (None, None),
        ([640], None),
    ],
    ids=[
        "int",
        "float",
        "zero",
        "true",
        "false",
        "negative",
        "nan",
        "inf",
        "huge-float",
        "huge-int",
        "string",
        "null",
        "list",
    ],
)
def test_numbers_are_read_strictly(value: object, expected: int | None) -> None:
    photo = {"type": "photo", "url": "https://pbs.twimg.com/media/A.jpg", "width": value}
    video = {"type": "video", "url": "https://v.example/a.mp4", "duration": value}
    data = {"code": 200, "tweet": {"media": {"all": [photo, video]}}}
    media = parse_status(data, post_id="1").media
    assert media[0].width == expected
    assert media[1].duration == (None if expected is None else float(expected))


# -- hypothesis: no input makes parse_status raise anything but FetchError ----------

KEYS = [
    "code", "message", "tweet", "status", "type", "reason", "media", "all", "photos", "videos",
    "url", "width", "height", "duration", "formats", "variants", "container", "codec", "bitrate",
    "size", "content_type", "format", "filesize", "thumbnail_url", "author", "name",
    "screen_name", "text", "possibly_sensitive", "id",
]  # fmt: skip

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
    | st.sampled_from(
        ["photo", "video", "gif", "tombstone", "mp4", "hevc", "https://a.example/v.mp4"]
    )
)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=8), children, max_size=6)
    ),
    max_leaves=40,
)


def check_parse(data: object) -> None:
    try:
        post = parse_status(data, post_id="123")
    except FetchError as exc:
        # Either outcome is fine here, so pytest.raises does not fit.
        assert exc.reason.endswith(".")  # noqa: PT017
        return
    for item in post.media:
        assert item.url.startswith(("https://", "http://"))
        chosen = choose_variant(item, 50 * MB)
        assert chosen is None or chosen.url.startswith(("https://", "http://"))


# Shaped like a status, with hostile values in the fields: reaches the fields
# five levels down that free-form JSON almost never builds.
NASTY = [float("nan"), float("inf"), -1, True, 2**70, 1e300, "12", None, [], {}]
leaf = st.sampled_from(NASTY) | scalars
urls = st.sampled_from(
    ["https://v.example/a.mp4", "https://v.example/p.m3u8", "http://p.example/a.jpg"]
)
variant_json = st.fixed_dictionaries(
    {"url": urls},
    optional={
        "container": st.sampled_from(["mp4", "m3u8", "webm"]) | leaf,
        "codec": st.sampled_from(["h264", "hevc"]) | leaf,
        "bitrate": leaf,
        "size": leaf,
        "content_type": st.sampled_from(["video/mp4", "application/x-mpegURL"]) | leaf,
    },
)
NUMBERS = ("width", "height", "duration", "filesize")
item_json = st.fixed_dictionaries(
    {
        "type": st.sampled_from(["photo", "video", "gif", "image", "animated_gif", "sticker", 7]),
        "url": urls,
    },
    optional={
        **dict.fromkeys(NUMBERS, leaf),
        "thumbnail_url": urls | leaf,
        "format": st.just("video/mp4") | leaf,
        "formats": st.lists(variant_json | leaf, max_size=3) | leaf,
        "variants": st.lists(variant_json | leaf, max_size=3) | leaf,
    },
)
items_json = st.lists(item_json | leaf, min_size=1, max_size=3) | leaf
status_json = st.fixed_dictionaries(
    {
        "media": st.fixed_dictionaries(
            {}, optional={"all": items_json, "photos": items_json, "videos": items_json}
        )
    },
    optional={
        "type": st.just("tombstone") | leaf,
        "reason": leaf,
        "text": leaf,
        "possibly_sensitive": leaf,
        "author": st.fixed_dictionaries({}, optional={"name": leaf, "screen_name": leaf}) | leaf,
    },
)
envelope_json = st.fixed_dictionaries(
    {"tweet": status_json},
    optional={"code": st.sampled_from([200, 401, 404, 500, "200", None]), "status": leaf},
)


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(envelope_json)
def test_parse_status_status_shaped_json_raises_only_fetch_errors(data: object) -> None:
    check_parse(data)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(json_values)
def test_parse_status_arbitrary_json_raises_only_fetch_errors(data: object) -> None:
    check_parse(data)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(
    json_values | st.just(None),
    st.sampled_from(["video", "mixed_all", "legacy_variants"]),
    st.data(),
)
def test_parse_status_mutated_payload_raises_only_fetch_errors(
    replacement: object, name: str, data: st.DataObject
) -> None:
    payload = load(name)
    # Walk down a random path of the valid payload and replace what is there.
    node: Any = payload
    while True:
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        if not keys:
            break
        key = data.draw(st.sampled_from(keys))
        child = node[key]
        # Descend three times in four: the interesting fields sit five levels down.
        if isinstance(child, dict | list) and child and data.draw(st.integers(0, 3)) > 0:
            node = child
            continue
        node[key] = replacement
        break
    check_parse(payload)


# -- choose_variant ------------------------------------------------------------------


def video(*variants: Variant) -> MediaItem:
    return MediaItem(kind="video", url="https://v.example/default.mp4", variants=variants)


H264_LOW = Variant("https://v.example/low.mp4", "mp4", "h264", 600_000, 2 * MB)
H264_MID = Variant("https://v.example/mid.mp4", "mp4", "h264", 2_000_000, None)
H264_HIGH = Variant("https://v.example/high.mp4", "mp4", "h264", 10_000_000, 60 * MB)
HEVC_TOP = Variant("https://v.example/hevc.mp4", "mp4", "hevc", 20_000_000, 9 * MB)
HLS = Variant("https://v.example/pl.m3u8", "m3u8", "h264", 99_000_000, None)
WEBM = Variant("https://v.example/v.webm", "webm", "vp9", 30_000_000, 5 * MB)

CHOICES = [
    ("highest-fitting-mp4", video(H264_LOW, H264_HIGH), 50 * MB, H264_LOW),
    ("highest-when-all-fit", video(H264_LOW, H264_HIGH), 100 * MB, H264_HIGH),
    ("unknown-size-admitted", video(H264_LOW, H264_MID, H264_HIGH), 20 * MB, H264_MID),
    ("hevc-dropped", video(H264_LOW, HEVC_TOP), 50 * MB, H264_LOW),
    ("hevc-last-resort", video(HEVC_TOP, H264_HIGH), 50 * MB, HEVC_TOP),
    ("hevc-only", video(HEVC_TOP), 50 * MB, HEVC_TOP),
    ("hls-never", video(HLS, H264_LOW), 50 * MB, H264_LOW),
    ("hls-only", video(HLS), 50 * MB, None),
    ("webm-dropped-when-mp4", video(WEBM, H264_LOW), 50 * MB, H264_LOW),
    ("webm-when-no-mp4", video(WEBM, HLS), 50 * MB, WEBM),
    ("nothing-fits", video(H264_HIGH), 50 * MB, None),
    ("size-equal-to-limit", video(H264_HIGH), 60 * MB, H264_HIGH),
    (
        "no-variants-uses-item-url",
        MediaItem(kind="gif", url="https://v.example/g.mp4", size=MB),
        50 * MB,
        Variant("https://v.example/g.mp4", "mp4", size=MB),
    ),
    (
        "no-variants-item-too-big",
        MediaItem(kind="gif", url="https://v.example/g.mp4", size=60 * MB),
        50 * MB,
        None,
    ),
    (
        "fixture-video-50mb",
        parse_status(load("video"), post_id="1").media[0],
        50 * MB,
        VIDEO_VARIANTS[2],
    ),
    (
        "fixture-legacy",
        parse_status(load("legacy_variants"), post_id="1").media[0],
        50 * MB,
        Variant(f"{L}/vid/1280x720/hi.mp4?tag=12", "mp4", "", 2176000),
    ),
]


@pytest.mark.parametrize(
    ("item", "max_bytes", "expected"),
    [c[1:] for c in CHOICES],
    ids=[c[0] for c in CHOICES],
)
def test_choose_variant(item: MediaItem, max_bytes: int, expected: Variant | None) -> None:
    assert choose_variant(item, max_bytes) == expected


variant_st = st.builds(
    Variant,
    url=st.just("https://v.example/x"),
    container=st.sampled_from(["mp4", "webm", "m3u8", ""]),
    codec=st.sampled_from(["h264", "hevc", "vp9", ""]),
    bitrate=st.integers(0, 10**8),
    size=st.none() | st.integers(0, 100 * MB),
)


@given(st.lists(variant_st, max_size=8), st.integers(1, 100 * MB))
def test_choose_variant_invariants(variants: list[Variant], max_bytes: int) -> None:
    item = MediaItem(kind="video", url="https://v.example/x.m3u8", variants=tuple(variants))
    chosen = choose_variant(item, max_bytes)

    def fits(v: Variant) -> bool:
        return v.container != "m3u8" and (v.size is None or v.size <= max_bytes)

    best_plain_mp4 = [v for v in variants if fits(v) and v.container == "mp4" and v.codec != "hevc"]
    if chosen is None:
        assert not any(fits(v) and v.container == "mp4" for v in variants)
        return
    assert chosen in variants
    assert fits(chosen)
    if best_plain_mp4:
        assert chosen in best_plain_mp4
        assert chosen.bitrate == max(v.bitrate for v in best_plain_mp4)
    same_class = [v for v in variants if (v.codec == "hevc") == (chosen.codec == "hevc")]
    if any(v.container == "mp4" for v in same_class):
        assert chosen.container == "mp4"


# -- XApi.fetch over MockTransport ------------------------------------------------------

Handler = Callable[[httpx.Request], httpx.Response]


def api(handler: Handler, **kwargs: Any) -> XApi:
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return XApi(client, base_url="https://api.fx.example/", **kwargs)


def body(name: str) -> bytes:
    return (DATA / f"xapi_{name}.json").read_bytes()


async def test_fetch_parses_and_sends_user_agent() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, content=body("photo"))

    post = await api(handler, user_agent="xbot-test/1").fetch("1234567890", "alice")
    assert post.author_handle == "alice"
    assert str(seen[0].url) == "https://api.fx.example/alice/status/1234567890"
    assert seen[0].headers["User-Agent"] == "xbot-test/1"


@pytest.mark.parametrize(
    ("handle", "path"),
    [
        (None, "/i/status/1"),
        ("", "/i/status/1"),
        ("bob_2", "/bob_2/status/1"),
        ("../admin", "/i/status/1"),
        ("a/b", "/i/status/1"),
        ("a?b=1", "/i/status/1"),
    ],
    ids=["none", "empty", "plain", "traversal", "slash", "query"],
)
async def test_fetch_puts_only_plain_handles_in_the_path(handle: str | None, path: str) -> None:
    paths: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        paths.append(request.url.path)
        return httpx.Response(200, content=body("text_only"))

    await api(handler).fetch("1", handle)
    assert paths == [path]


async def test_fetch_falls_back_to_the_handleless_route_on_404() -> None:
    paths: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        paths.append(request.url.path)
        if request.url.path == "/status/1234567890":  # an API that routes only this form
            return httpx.Response(200, content=body("photo"))
        return httpx.Response(404, text="no route")

    post = await api(handler).fetch("1234567890", "alice")
    assert post.key == "x:1234567890"
    # v2 is asked first (it names a reason); not routed here, so the handleless v1 form.
    assert paths == ["/alice/status/1234567890", "/2/status/1234567890", "/status/1234567890"]


V2_AFTER_404 = [
    ("suspended", {"code": 404, "status": {"type": "tombstone", "reason": "suspended"}},
     SUSPENDED),
    ("deleted", {"code": 404, "status": {"type": "tombstone", "reason": "deleted"}}, DELETED),
    ("protected", {"code": 404, "status": {"type": "tombstone", "reason": "private",
     "message": "This account owner limits who can view their posts."}}, PRIVATE),
    ("withheld", {"code": 404, "status": {"type": "tombstone", "reason": "suspended",
     "message": "This post is withheld in your country."}}, WITHHELD),
    ("age-gated", {"code": 404, "status": {"type": "tombstone", "reason": "private",
     "message": "Age-restricted adult content."}}, AGE_GATED),
]  # fmt: skip


@pytest.mark.parametrize(
    ("answer", "sentence"), [c[1:] for c in V2_AFTER_404], ids=[c[0] for c in V2_AFTER_404]
)
async def test_a_v1_404_asks_v2_for_the_reason(answer: dict[str, Any], sentence: str) -> None:
    paths: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        paths.append(request.url.path)
        if request.url.path.startswith("/2/"):
            return httpx.Response(404, json=answer)
        return httpx.Response(404, json={"code": 404, "message": "NOT_FOUND", "tweet": None})

    with pytest.raises(PostUnavailable) as info:
        await api(handler).fetch("7", "alice")
    assert info.value.reason == sentence
    assert paths[:2] == ["/alice/status/7", "/2/status/7"]


async def test_a_v1_404_then_a_v2_post_is_the_post() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.startswith("/2/"):
            return httpx.Response(200, content=body("v2_status"))
        return httpx.Response(404, json={"code": 404, "message": "NOT_FOUND", "tweet": None})

    post = await api(handler).fetch("1300000000000000007")
    assert post.author_handle == "hank"


async def test_upstream_unavailable_is_x_not_answering() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(503, json={"code": 503, "message": "UPSTREAM_UNAVAILABLE"})

    with pytest.raises(TransientFetch) as info:
        await api(handler).fetch("7")
    assert info.value.reason == NOT_ANSWERING


@pytest.mark.parametrize("status", [401, 500], ids=["private", "server-error"])
async def test_fetch_does_not_fall_back_on_other_statuses(status: int) -> None:
    paths: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        paths.append(request.url.path)
        return httpx.Response(status, json={"code": status, "tweet": None})

    with pytest.raises(FetchError):
        await api(handler).fetch("1", "alice")
    assert paths == ["/alice/status/1"]


@pytest.mark.parametrize("post_id", ["", "abc", "1/2", "12?x", "1" * 26], ids=str)
async def test_fetch_refuses_non_ids(post_id: str) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise AssertionError("no request for a bad id")

    with pytest.raises(UnsupportedLink):
        await api(handler).fetch(post_id)


HUGE = b'{"code": 200, "tweet": {"text": "' + b"a" * (3 * MB) + b'"}}'

FETCH_CASES: list[tuple[str, httpx.Response, type[FetchError], str]] = [
    ("401-private", httpx.Response(401, content=body("private")), PostUnavailable, PRIVATE),
    ("403", httpx.Response(403, content=b"Forbidden"), PostUnavailable, PRIVATE),
    ("404-deleted", httpx.Response(404, content=body("not_found")), PostUnavailable, DELETED),
    ("410", httpx.Response(410), PostUnavailable, DELETED),
    ("429", httpx.Response(429), TransientFetch, "try again"),
    ("500", httpx.Response(500, content=body("api_fail")), TransientFetch, "try again"),
    ("502-html", httpx.Response(502, content=b"<html>Bad Gateway</html>"), TransientFetch, "again"),
    ("503", httpx.Response(503), TransientFetch, "try again"),
    ("418", httpx.Response(418), FetchError, MALFORMED),
    ("200-html", httpx.Response(200, content=b"<!doctype html><p>hi"), FetchError, MALFORMED),
    ("200-garbage", httpx.Response(200, content=b"\xff\xfe\x00garbage"), FetchError, MALFORMED),
    ("200-empty", httpx.Response(200, content=b""), FetchError, MALFORMED),
    ("200-huge", httpx.Response(200, content=HUGE), FetchError, MALFORMED),
    ("200-deep", httpx.Response(200, content=b"[" * 200_000), FetchError, MALFORMED),
    ("200-bignum", httpx.Response(200, content=b"1" * 5000), FetchError, MALFORMED),
    (
        "200-body-404",
        httpx.Response(200, json={"code": 404, "tweet": None}),
        PostUnavailable,
        DELETED,
    ),
    ("200-tombstone", httpx.Response(200, content=body("tombstone")), PostUnavailable, SUSPENDED),
]


@pytest.mark.parametrize(
    ("response", "error", "reason"),
    [c[1:] for c in FETCH_CASES],
    ids=[c[0] for c in FETCH_CASES],
)
async def test_fetch_status_classes(
    response: httpx.Response, error: type[FetchError], reason: str
) -> None:
    with pytest.raises(error) as info:
        await api(lambda r: response).fetch("1")
    assert type(info.value) is error
    assert reason in info.value.reason
    assert info.value.reason.endswith(".")
    assert "\n" not in info.value.reason


@pytest.mark.parametrize(
    "exc",
    [httpx.ConnectError("refused"), httpx.ConnectTimeout("slow"), httpx.ReadTimeout("slow"),
     httpx.RemoteProtocolError("reset")],
    ids=lambda e: type(e).__name__,
)  # fmt: skip
async def test_fetch_network_failures_are_transient(exc: httpx.HTTPError) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise exc

    with pytest.raises(TransientFetch, match="X API"):
        await api(handler).fetch("1")


async def test_fetch_body_that_fails_midway_is_transient() -> None:
    class Broken(httpx.AsyncByteStream):
        async def __aiter__(self) -> Any:
            yield b'{"code": 200, '
            raise httpx.ReadError("reset")

    with pytest.raises(TransientFetch):
        await api(lambda r: httpx.Response(200, stream=Broken())).fetch("1")


async def test_fetch_body_at_the_cap_is_read() -> None:
    content = body("text_only")
    post = await api(lambda r: httpx.Response(200, content=content), max_body=len(content)).fetch(
        "1400000000000000006"
    )
    assert post.text == "just setting up my bot"


# -- expand_tco --------------------------------------------------------------------------


def tco(handler: Handler) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.MockTransport(handler), follow_redirects=True)


async def test_expand_tco_reads_location_without_following() -> None:
    methods: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        methods.append(request.method)
        assert request.url.host == "t.co"  # following the redirect would ask x.com
        return httpx.Response(301, headers={"Location": "https://x.com/alice/status/1"})

    async with tco(handler) as client:
        assert await expand_tco(client, "https://t.co/AbC123") == "https://x.com/alice/status/1"
    assert methods == ["HEAD"]


async def test_expand_tco_falls_back_to_get() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "HEAD":
            return httpx.Response(405)
        return httpx.Response(302, headers={"Location": "https://x.com/bob/status/2"})

    async with tco(handler) as client:
        assert await expand_tco(client, "https://t.co/xyz") == "https://x.com/bob/status/2"


async def test_expand_tco_resolves_relative_location() -> None:
    async with tco(lambda r: httpx.Response(302, headers={"Location": "/other"})) as client:
        assert await expand_tco(client, "https://t.co/xyz") == "https://t.co/other"


@pytest.mark.parametrize(
    ("url", "response"),
    [
        ("https://example.com/abc", None),
        ("https://user@t.co/abc", None),
        ("ftp://t.co/abc", None),
        ("https://t.co/abc", httpx.Response(200, content=b"<html>")),
        ("https://t.co/abc", httpx.Response(404)),
        ("https://t.co/abc", httpx.Response(301)),
        ("https://t.co/abc", httpx.Response(301, headers={"Location": "javascript:alert(1)"})),
        ("https://t.co/abc", httpx.Response(301, headers={"Location": "file:///etc/passwd"})),
    ],
    ids=[
        "not-tco",
        "userinfo",
        "ftp",
        "no-redirect",
        "not-found",
        "no-location",
        "javascript",
        "file",
    ],
)
async def test_expand_tco_unsupported(url: str, response: httpx.Response | None) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        assert response is not None, "no request for a link that is not t.co"
        return response

    async with tco(handler) as client:
        with pytest.raises(UnsupportedLink):
            await expand_tco(client, url)


@pytest.mark.parametrize(
    "outcome",
    [httpx.Response(503), httpx.Response(429), httpx.ConnectTimeout("slow")],
    ids=["503", "429", "timeout"],
)
async def test_expand_tco_transient(outcome: httpx.Response | Exception) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    async with tco(handler) as client:
        with pytest.raises(TransientFetch):
            await expand_tco(client, "https://t.co/abc")


# -- tests/data/x: every real-shaped payload, through the parser and the client -------
#
# Each NAME.json is a payload in a shape some public source documents (NAME.md names
# it); NAME.expect.json says what xbot must make of it. A fixture added there is
# tested here without new code.

X_DATA = DATA / "x"
X_FIXTURES = sorted(
    p.name.removesuffix(".json")
    for p in X_DATA.glob("*.json")
    if not p.name.endswith(".expect.json")
)
ERRORS: dict[str, type[FetchError]] = {
    "PostUnavailable": PostUnavailable,
    "TransientFetch": TransientFetch,
    "FetchError": FetchError,
}


def x_fixture(name: str) -> tuple[Any, dict[str, Any]]:
    body = json.loads((X_DATA / f"{name}.json").read_text(encoding="utf-8"))
    expect = json.loads((X_DATA / f"{name}.expect.json").read_text(encoding="utf-8"))
    return body, expect


def check_post(post: Post, want: dict[str, Any]) -> None:
    """Compare the parts of `post` that `want` names (and only those)."""
    got: dict[str, Any] = {
        "author_handle": post.author_handle,
        "text": post.text,
        "kinds": [m.kind for m in post.media],
        "urls": [m.url for m in post.media],
        "alt": [m.alt_text for m in post.media],
        "own_media": post.own_media,
        "quote_handle": post.quote.author_handle if post.quote else None,
        "quote_url": post.quote.url if post.quote else None,
        "poll": [[c.label, c.votes] for c in post.poll.choices] if post.poll else None,
        "poll_closed": post.poll.closed if post.poll else None,
        "note": post.note,
        "card_url": post.card_url,
        "article_title": post.article_title,
        "sensitive": post.sensitive,
        "variants": len(post.media[0].variants) if post.media else None,
    }
    if "pick" in want:
        videos = [m for m in post.media if m.kind != "photo"]
        pick = video_choice.choose(videos[0], upload_limit=50 * MB) if videos else None
        got["pick"] = None if pick is None else {"url": pick.variant.url, "path": pick.path}
    assert {k: got[k] for k in want} == want


def test_every_x_fixture_names_its_source_and_expectation() -> None:
    assert len(X_FIXTURES) >= 29
    for name in X_FIXTURES:
        source = (X_DATA / f"{name}.md").read_text(encoding="utf-8")
        assert "Shape from:" in source, name
        assert (X_DATA / f"{name}.expect.json").exists(), name


@pytest.mark.parametrize("name", X_FIXTURES)
def test_parser_over_every_x_fixture(name: str) -> None:
    body, expect = x_fixture(name)
    if "raises" in expect:
        with pytest.raises(ERRORS[expect["raises"]]) as info:
            parse_status(body, post_id=expect["post_id"])
        assert type(info.value) is ERRORS[expect["raises"]]
        assert info.value.reason == named_reason(expect["reason"])
        return
    post = parse_status(body, post_id=expect["post_id"])
    assert post.key == f"x:{expect['post_id']}"
    check_post(post, expect["post"])


@pytest.mark.parametrize("name", X_FIXTURES)
async def test_client_over_every_x_fixture(name: str) -> None:
    """The same payloads over HTTP: v1 files at the v1 route, v2 files at /2/status."""
    body, expect = x_fixture(name)
    code = body.get("code", 200) if isinstance(body, dict) else 200
    is_v2 = name.startswith("v2_")
    not_found = {"code": 404, "message": "NOT_FOUND", "tweet": None}

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.startswith("/2/"):
            return httpx.Response(code, json=body) if is_v2 else httpx.Response(404, text="no")
        return httpx.Response(404, json=not_found) if is_v2 else httpx.Response(code, json=body)

    client = api(handler)
    if "raises" in expect:
        with pytest.raises(ERRORS[expect["raises"]]) as info:
            await client.fetch(expect["post_id"], "someone")
        assert info.value.reason == named_reason(expect["reason"])
        return
    check_post(await client.fetch(expect["post_id"], "someone"), expect["post"])


@pytest.mark.parametrize(
    ("card_url", "offered"),
    [
        ("", None),
        ("https://www.youtube.com/embed/dQw4w9WgXcQ", "https://www.youtube.com/embed/dQw4w9WgXcQ"),
        ("https://x.com/bob/status/5", None),  # a card back to X is no other site
        ("https://t.co/AbC", None),
    ],
    ids=["none", "youtube", "x-card", "tco"],
)
def test_card_link_offers_only_other_sites(card_url: str, offered: str | None) -> None:
    post = Post(key="x:1", url="https://x.com/a/status/1", author_name="", author_handle="",
                text="", card_url=card_url)  # fmt: skip
    link = card_link(post)
    assert (link.url if link else None) == offered


@pytest.mark.parametrize(
    ("own", "quoted", "kinds", "own_count"),
    [
        (0, 2, 2, 0),
        (1, 2, 3, 1),
        (4, 6, 10, 4),
        (4, 7, 4, None),
        (3, 0, 3, None),
    ],
    ids=["quote-only", "both-fit", "exactly-ten", "over-ten-own-only", "no-quote"],
)
def test_with_quote_media_rule(own: int, quoted: int, kinds: int, own_count: int | None) -> None:
    mine = tuple(MediaItem("photo", f"https://p/o{i}.jpg") for i in range(own))
    theirs = tuple(MediaItem("photo", f"https://p/q{i}.jpg") for i in range(quoted))
    media, count = with_quote_media(mine, theirs)
    assert len(media) == kinds
    assert count == own_count
    assert media[: min(own, len(media))] == mine[: len(media)]
