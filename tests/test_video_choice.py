"""The pure video decisions: estimate, rank, choose a path, step down.

The format lists are the shapes fxtwitter serves (FxEmbed's
``convertVariantToFormat`` in packages/atmosphere/src/helpers/media.ts turns
X's ``video_info.variants`` into ``{url, bitrate, container, codec}`` with no
size), with X's own bitrate ladder (256 k / 832 k / 2176 k / 10368 k for
270p/360p/720p/1080p, as in yt-dlp's twitter extractor tests and X's
``video_info`` payloads) and its URL layout (``/vid/avc1/1280x720/…mp4``,
``/pl/….m3u8``).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from xbot.media.models import MediaItem, Variant
from xbot.sending.video_choice import (
    MARGIN,
    URL_VIDEO_LIMIT,
    Pick,
    choose,
    estimate,
    ranked,
    step_down,
)

MB = 1024 * 1024
BASE = "https://video.twimg.com/amplify_video/1790000000000000000"
HLS = Variant(f"{BASE}/pl/abc.m3u8?tag=16", "m3u8", "h264", 0)
P270 = Variant(f"{BASE}/vid/avc1/480x270/a.mp4?tag=16", "mp4", "h264", 256_000)
P360 = Variant(f"{BASE}/vid/avc1/640x360/b.mp4?tag=16", "mp4", "h264", 832_000)
P720 = Variant(f"{BASE}/vid/avc1/1280x720/c.mp4?tag=16", "mp4", "h264", 2_176_000)
P1080 = Variant(f"{BASE}/vid/avc1/1920x1080/d.mp4?tag=16", "mp4", "h264", 10_368_000)
HEVC1080 = Variant(f"{BASE}/vid/hevc/1920x1080/e.mp4?tag=21", "mp4", "hevc", 6_000_000)
HEVC720 = Variant(f"{BASE}/vid/hevc/1280x720/f.mp4?tag=21", "mp4", "hevc", 1_500_000)
LADDER = (HLS, P270, P360, P720, P1080)


def video(variants: tuple[Variant, ...], duration: float | None) -> MediaItem:
    return MediaItem("video", variants[-1].url, variants=variants, duration=duration)


def sized(v: Variant, size: int) -> Variant:
    return Variant(v.url, v.container, v.codec, v.bitrate, size)


def test_estimate_is_bitrate_times_duration_with_margin() -> None:
    assert (estimate(P1080, 45.0) or 0) > 10_368_000 * 45 / 8 * (MARGIN - 0.01)
    assert estimate(sized(P1080, 1234), 45.0) == 1234  # a known size wins
    assert estimate(P1080, None) is None
    assert estimate(HLS, 45.0) is None  # no bitrate


def test_ranking_h264_first_then_bitrate_playlists_never() -> None:
    item = video((HLS, HEVC1080, P360, P1080, P720, HEVC720), 30)
    assert ranked(item) == [P1080, P720, P360, HEVC1080, HEVC720]


# (name, variants, duration, upload limit, expected pick (variant, path) or None)
CASES = [
    # The bug of issue 12: 45 s of 1080p is ~67 MB; 720p (~14 MB) goes by URL.
    ("sizes-unknown-long-1080p", LADDER, 45.0, 50 * MB, (P720, "url")),
    ("sizes-unknown-short", LADDER, 10.0, 50 * MB, (P1080, "url")),
    # 20 s of 1080p is ~30 MB: over the URL limit, within the upload limit.
    ("sizes-unknown-mid-upload", LADDER, 20.0, 50 * MB, (P1080, "upload")),
    ("local-bot-api-2000mb", LADDER, 600.0, 2000 * MB, (P1080, "upload")),
    # Upload limit below Telegram's 20 MB URL limit: 720p (~14 MB) still goes by URL.
    ("upload-limit-10mb", LADDER, 45.0, 10 * MB, (P720, "url")),
    (
        "sizes-known",
        (sized(P720, 9 * MB), sized(P1080, 48 * MB)),
        45.0,
        50 * MB,
        (sized(P1080, 48 * MB), "upload"),
    ),
    ("sizes-known-none-fit", (sized(P720, 60 * MB), sized(P1080, 90 * MB)), 45.0, 50 * MB, None),
    ("hevc-only", (HLS, HEVC720, HEVC1080), 30.0, 50 * MB, (HEVC1080, "upload")),
    ("hevc-only-short", (HEVC720, HEVC1080), 10.0, 50 * MB, (HEVC1080, "url")),
    ("hevc-beats-nothing", (HEVC720, sized(P1080, 99 * MB)), 30.0, 50 * MB, (HEVC720, "url")),
    ("m3u8-only", (HLS,), 30.0, 50 * MB, None),
    # One huge variant, no bitrate or size: admitted (the download cap decides).
    (
        "one-unknown-variant",
        (Variant(f"{BASE}/x.mp4"),),
        None,
        50 * MB,
        (Variant(f"{BASE}/x.mp4"), "url"),
    ),
    ("one-huge-variant", (sized(P1080, 3000 * MB),), 3600.0, 50 * MB, None),
    ("no-duration", LADDER, None, 50 * MB, (P1080, "url")),
    # A GIF: bitrate 0, a few seconds.
    (
        "gif",
        (Variant("https://video.twimg.com/tweet_video/AbC.mp4", "mp4", "", 0),),
        4.0,
        50 * MB,
        (Variant("https://video.twimg.com/tweet_video/AbC.mp4", "mp4", "", 0), "url"),
    ),
]


@pytest.mark.parametrize(
    ("variants", "duration", "limit", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_choose(
    variants: tuple[Variant, ...],
    duration: float | None,
    limit: int,
    expected: tuple[Variant, str] | None,
) -> None:
    pick = choose(video(variants, duration), upload_limit=limit)
    assert (None if pick is None else (pick.variant, pick.path)) == expected


def variant_of(pick: Pick | None) -> Variant | None:
    return None if pick is None else pick.variant


def test_step_down_after_a_lying_estimate() -> None:
    # 20 s: 1080p was estimated ~30 MB and chosen for upload, but the file is over 50 MB.
    item = video(LADDER, 20.0)
    assert variant_of(step_down(item, 50 * MB, [])) == P1080
    assert variant_of(step_down(item, 50 * MB, [P1080])) == P720
    assert variant_of(step_down(item, 50 * MB, [P1080, P720])) == P360
    assert step_down(item, 50 * MB, [P1080, P720, P360, P270]) is None


def test_step_down_scales_the_rest_by_how_wrong_the_estimate_was() -> None:
    # 60 s: 720p is estimated ~19 MB; it came back over 50 MB (2.6x off), so 360p
    # (est ~7 MB, scaled ~19 MB) still fits; told 200 MB (10x off), only 270p does.
    item = video(LADDER, 60.0)
    assert variant_of(step_down(item, 50 * MB, [P720])) == P360
    assert variant_of(step_down(item, 50 * MB, [P720], observed=200 * MB)) == P270
    assert step_down(item, 50 * MB, [P720], observed=5000 * MB) is None


def test_step_down_goes_to_hevc_only_after_every_h264() -> None:
    hevc = sized(HEVC720, 5 * MB)  # a size the source names is not scaled
    item = video((hevc, P360), 10.0)
    assert step_down(item, 50 * MB, []) == Pick(P360, "upload", estimate(P360, 10.0))
    assert step_down(item, 50 * MB, [P360]) == Pick(hevc, "upload", 5 * MB)


variant_st = st.builds(
    Variant,
    url=st.sampled_from([f"{BASE}/{i}.mp4" for i in range(6)]),
    container=st.sampled_from(["mp4", "webm", "m3u8"]),
    codec=st.sampled_from(["h264", "hevc", ""]),
    bitrate=st.integers(0, 20_000_000),
    size=st.none() | st.integers(1, 200 * MB),
)


@given(
    st.lists(variant_st, min_size=1, max_size=6, unique_by=lambda v: v.url),
    st.none() | st.floats(0.5, 3600),
    st.sampled_from([10 * MB, 50 * MB, 2000 * MB]),
)
def test_choice_invariants(variants: list[Variant], duration: float | None, limit: int) -> None:
    item = video(tuple(variants), duration)
    pick = choose(item, upload_limit=limit)
    if pick is None:
        return
    assert pick.variant.container != "m3u8"
    cap = URL_VIDEO_LIMIT if pick.path == "url" else limit
    assert pick.estimate is None or pick.estimate <= cap
    # No better-ranked variant fits either path.
    better = ranked(item)[: ranked(item).index(pick.variant)]
    for v in better:
        est = estimate(v, duration)
        assert est is not None
        assert est > max(limit, URL_VIDEO_LIMIT)
    # Stepping down never repeats a variant and ends.
    tried = [pick.variant]
    while (nxt := step_down(item, limit, tried)) is not None:
        assert nxt.variant not in tried
        tried.append(nxt.variant)
    assert len(tried) <= len(variants)
