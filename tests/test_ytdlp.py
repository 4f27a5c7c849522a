"""yt-dlp's boundary: options, the format under the cap, cache keys, info fields, and its
errors translated once into sentences (a table of synthetic yt-dlp exceptions)."""

from __future__ import annotations

import io
import subprocess
import sys
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from yt_dlp.networking.common import Response
from yt_dlp.networking.exceptions import HTTPError, TransportError
from yt_dlp.utils import (
    DownloadError,
    ExtractorError,
    GeoRestrictedError,
    UnsupportedError,
)

from xbot.errors import (
    BlockedAddress,
    FetchError,
    NoSound,
    PostUnavailable,
    TooLarge,
    TransientFetch,
    UnsupportedLink,
)
from xbot.sources import ytdlp
from xbot.sources.ytdlp import (
    EXTRACT_FORMAT,
    FORMAT_SORT,
    GEO_BLOCKED,
    GONE,
    LIVE,
    LOGIN_REQUIRED,
    MERGE_OPTIONS,
    NO_SINGLE_FILE,
    REFUSED,
    UNSUPPORTED,
    YtdlpConfig,
    allowed_extractors,
    build_options,
    cache_key,
    disk_need,
    first_video,
    format_selector,
    host_guard,
    no_format_error,
    select,
    size_of,
    step_below,
    translate,
    video_info,
    video_selector,
)


def test_importing_the_app_does_not_import_yt_dlp() -> None:
    # A fresh interpreter: this test process imported yt_dlp above.
    code = "import sys, xbot.app, xbot.tasks.other_sites; print('yt_dlp' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(
    ("sites", "expected"),
    [("known", ["default", "-generic", "-mediasite.*"]), ("all", ["default"])],
    ids=["known-without-any-host", "all-with-generic"],
)
def test_allowed_extractors(sites: str, expected: list[str]) -> None:
    assert allowed_extractors(sites) == expected


def test_known_leaves_out_every_extractor_that_takes_any_host() -> None:
    """Each extractor's own test URLs, moved to a host no site owns: with ``known``
    none may still claim one (the generic and Mediasite's would; a new one fails here)."""
    import yt_dlp

    ydl = yt_dlp.YoutubeDL({"quiet": True, "allowed_extractors": allowed_extractors("known")})
    claimed: dict[str, str] = {}
    for ie in ydl._ies.values():
        tests = [*(getattr(ie, "_TESTS", None) or ()), *(getattr(ie, "_EMBED_TESTS", None) or ())]
        for case in tests:
            url = case.get("url") if isinstance(case, dict) else None
            parts = urllib.parse.urlsplit(url) if isinstance(url, str) else None
            if parts is None or parts.scheme not in ("http", "https"):
                continue
            foreign = parts._replace(netloc="attacker.example").geturl()
            if ie.suitable(foreign):
                claimed.setdefault(ie.ie_key(), foreign)
    assert claimed == {}
    everything = yt_dlp.YoutubeDL({"quiet": True, "allowed_extractors": allowed_extractors("all")})
    assert {"Generic", "Mediasite"} <= set(everything._ies), "the names still exist"


def test_allowed_extractors_refuses_anything_else() -> None:
    with pytest.raises(ValueError, match="XBOT_YTDLP_SITES"):
        allowed_extractors("everything")


def test_format_selector_spelling() -> None:
    assert format_selector(50 * 2**20) == (
        "best[filesize<?52428800][filesize_approx<?52428800][protocol!*=?rtmp]"
    )
    with pytest.raises(ValueError):
        format_selector(0)


def _fmt(format_id: str, **fields: Any) -> dict[str, Any]:
    base = {"format_id": format_id, "ext": "mp4", "vcodec": "avc1", "acodec": "mp4a",
            "url": f"https://cdn.example/{format_id}", "protocol": "https"}  # fmt: skip
    return {**base, **fields}


SELECTIONS: list[tuple[str, list[dict[str, Any]], list[str]]] = [
    ("known-fits-beats-known-too-big", [_fmt("big", filesize=80), _fmt("small", filesize=40)],
     ["small"]),
    ("unknown-size-admitted", [_fmt("direct")], ["direct"]),
    ("known-too-big-refused", [_fmt("big", filesize=80)], []),
    ("approx-too-big-refused", [_fmt("big", filesize_approx=90)], []),
    ("approx-fits-beats-better-approx-too-big",
     [_fmt("a", filesize_approx=40), _fmt("b", filesize_approx=90, tbr=5000)], ["a"]),
    ("either-size-too-big-refuses", [_fmt("x", filesize=40, filesize_approx=90)], []),
    ("video-only-never-chosen", [_fmt("v", acodec="none", filesize=1)], []),
    ("best-that-fits", [_fmt("lo", filesize=10, tbr=100), _fmt("hi", filesize=45, tbr=900)],
     ["hi"]),
    # rtmpdump, a child program, would fetch it beyond the connect-time guard.
    ("rtmp-never-chosen", [_fmt("r", protocol="rtmp", tbr=900), _fmt("h", tbr=100)], ["h"]),
    ("no-protocol-admitted", [_fmt("p", protocol=None)], ["p"]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("formats", "chosen"),
    [(f, c) for _, f, c in SELECTIONS],
    ids=[name for name, *_ in SELECTIONS],
)
def test_format_selector_as_yt_dlp_applies_it(
    formats: list[dict[str, Any]], chosen: list[str]
) -> None:
    import yt_dlp

    select = yt_dlp.YoutubeDL({"quiet": True}).build_format_selector(format_selector(50))
    ctx = {"formats": formats, "has_merged_format": False, "incomplete_formats": False}
    assert [f["format_id"] for f in select(ctx)] == chosen


def _v(
    format_id: str, height: int, size: int, vcodec: str = "avc1", **fields: Any
) -> dict[str, Any]:
    return _fmt(format_id, acodec="none", vcodec=vcodec, height=height, filesize=size,
                tbr=height, **fields)  # fmt: skip


def _a(format_id: str, size: int | None, acodec: str = "mp4a", **fields: Any) -> dict[str, Any]:
    return _fmt(format_id, **{"vcodec": "none", "acodec": acodec, "filesize": size,
                              "abr": 128, "ext": "m4a", **fields})  # fmt: skip


LADDER = [_v("v240", 240, 10), _v("v720", 720, 30), _v("v1080", 1080, 60), _a("a", 10)]

# (name, formats, format_selector's arguments (limit 50), what yt-dlp then picks)
MERGES: list[tuple[str, list[dict[str, Any]], dict[str, Any], list[str]]] = [
    ("best-picture-that-fits-beside-the-sound", LADDER, {"audio_bytes": 10}, ["v720+a"]),
    # 1080p alone fits (45 < 50), but not with its sound.
    ("the-sum-counts-not-the-picture-alone",
     [_v("v720", 720, 30), _v("v1080", 1080, 45), _a("a", 10)], {"audio_bytes": 10},
     ["v720+a"]),
    ("a-chats-cap", LADDER, {"audio_bytes": 10, "max_height": 480}, ["v240+a"]),
    ("nothing-under-the-cap-the-smallest",
     [_v("v720", 720, 30), _v("v1080", 1080, 35), _a("a", 10)],
     {"audio_bytes": 10, "max_height": 480}, ["v720+a"]),
    ("a-step-down-below-a-rendition", LADDER, {"audio_bytes": 10, "below": ("[height<720]",)},
     ["v240+a"]),
    ("unknown-sizes-admitted-for-the-hook-to-cap",
     [_v("v720", 720, 0), _v("v1080", 1080, 0), _a("a", None)], {}, ["v1080+a"]),
    ("h264-over-vp9-and-av1-at-a-lower-height",
     [_v("h264", 720, 20), _v("vp9", 1080, 20, vcodec="vp9"),
      _v("av1", 1080, 20, vcodec="av01.0.08M.08"), _a("a", 10)], {"audio_bytes": 10},
     ["h264+a"]),
    ("vp9-only-is-sent-as-it-is",
     [_v("vp9lo", 480, 20, vcodec="vp9"), _v("vp9hi", 720, 30, vcodec="vp9"), _a("a", 10)],
     {"audio_bytes": 10}, ["vp9hi+a"]),
    ("aac-over-opus",
     [_v("v", 720, 20), _a("opus", 10, acodec="opus", abr=160), _a("aac", 10)],
     {"audio_bytes": 10}, ["v+aac"]),
    ("a-single-file-when-nothing-merges-that-fits",
     [_v("v1080", 1080, 60), _a("a", 10), _fmt("muxed", filesize=20, height=240)],
     {"audio_bytes": 10}, ["muxed"]),
    ("no-sound-anywhere-a-silent-video", [_v("v240", 240, 10), _v("v720", 720, 30)], {},
     ["v720"]),
    ("nothing-fits", [_v("v1080", 1080, 60), _a("a", 10)], {"audio_bytes": 10}, []),
]  # fmt: skip


@pytest.mark.parametrize(
    ("formats", "arguments", "chosen"),
    [(f, a, c) for _, f, a, c in MERGES],
    ids=[name for name, *_ in MERGES],
)
def test_merged_choice_as_yt_dlp_applies_it(
    formats: list[dict[str, Any]], arguments: dict[str, Any], chosen: list[str]
) -> None:
    import yt_dlp

    ydl = yt_dlp.YoutubeDL({"quiet": True, "format_sort": list(FORMAT_SORT)})
    # Sorted by yt-dlp's own rules, as extraction leaves them (worst first).
    info = {"formats": [dict(f) for f in formats], "id": "x", "title": "x"}
    ydl.sort_formats(info)
    spec = format_selector(50, merge=True, **arguments)
    assert [f["format_id"] for f in select(ydl, info["formats"], spec)] == chosen


def test_merged_selector_spelling() -> None:
    assert format_selector(100, merge=True, audio_bytes=30, max_height=720) == (
        "bv[height<=?720][filesize<?70][filesize_approx<?70][protocol!*=?rtmp]"
        "+ba[protocol!*=?rtmp]"
        "/best[height<=?720][filesize<?100][filesize_approx<?100][protocol!*=?rtmp]"
        "/wv[filesize<?70][filesize_approx<?70][protocol!*=?rtmp]+ba[protocol!*=?rtmp]"
        "/worst[filesize<?100][filesize_approx<?100][protocol!*=?rtmp]"
    )
    # The sound alone over the limit: only a single file could fit.
    assert format_selector(100, merge=True, audio_bytes=100) == format_selector(100)


@pytest.mark.parametrize(
    ("fmt", "duration", "size"),
    [
        ({"filesize": 10, "filesize_approx": 20}, None, 10),
        ({"filesize_approx": 20}, None, 20),
        ({"tbr": 800}, 10, 1_000_000),
        ({"abr": 128}, 8.0, 128_000),
        ({"tbr": 800}, None, None),
        ({"tbr": 800, "duration": 10}, None, 1_000_000),
        ({}, 10, None),
    ],
    ids=["stated", "approx", "tbr-x-duration", "abr-x-duration", "no-duration",
         "the-formats-own-duration", "no-rate"],
)  # fmt: skip
def test_size_of(fmt: dict[str, Any], duration: float | None, size: int | None) -> None:
    assert size_of(fmt, duration) == size


@pytest.mark.parametrize(
    ("part", "step"),
    [
        ({"height": 1080, "format_id": "hls-3628"}, "[height<1080]"),
        ({"format_id": "hls-3628"}, '[format_id!="hls-3628"]'),
        ({}, None),
        (None, None),
    ],
    ids=["below-its-height", "not-that-format", "nothing-known", "no-part"],
)
def test_step_below(part: dict[str, Any] | None, step: str | None) -> None:
    assert step_below(part) == step


@pytest.mark.parametrize(
    ("formats", "merge", "error"),
    [
        (LADDER, True, TooLarge),
        ([_v("v", 720, 30), _a("a", 10)], False, PostUnavailable),
        ([_fmt("r", protocol="rtmp")], True, UnsupportedLink),
    ],
    ids=["too-big-with-ffmpeg", "picture-and-sound-apart-without-ffmpeg", "nothing-to-fetch"],
)
def test_no_format_error_tells_the_truth(
    formats: list[dict[str, Any]], merge: bool, error: type[FetchError]
) -> None:
    import yt_dlp

    config = YtdlpConfig(limit_bytes=1, ffmpeg="/usr/bin/ffmpeg" if merge else None)
    found = no_format_error(yt_dlp.YoutubeDL({"quiet": True}), formats, config)
    assert type(found) is error
    if not merge:
        assert found.reason == NO_SINGLE_FILE


def test_with_ffmpeg_the_options_merge_into_one_mp4(tmp_path: Path) -> None:
    config = YtdlpConfig(limit_bytes=1000, ffmpeg="/usr/bin/ffmpeg")
    options = build_options(config, tmp_path, lambda _: None)
    assert options["merge_output_format"] == "mp4"
    assert options["ffmpeg_location"] == "/usr/bin/ffmpeg"
    assert options["postprocessor_args"] == MERGE_OPTIONS["postprocessor_args"]
    # ffmpeg merges local files; it never downloads (GUARDED_OPTIONS still hold).
    assert options["external_downloader"] == {"default": "native"}


def test_build_options_keep_the_rules(tmp_path: Path) -> None:
    def hook(_: dict[str, Any]) -> None:
        return None

    config = YtdlpConfig(limit_bytes=1000, sites="known", overrides={"ratelimit": 5})
    options = build_options(config, tmp_path, hook)
    assert options["quiet"] is True
    assert options["no_warnings"] is True
    assert options["noplaylist"] is True
    assert options["cachedir"] is False
    assert options["restrictfilenames"] is True
    assert options["logger"] is not None
    assert options["socket_timeout"] == 20.0
    assert options["paths"] == {"home": str(tmp_path), "temp": str(tmp_path)}
    assert options["outtmpl"] == {"default": "media.%(ext)s"}  # never a name from the site
    assert options["allowed_extractors"] == allowed_extractors("known")
    # Extraction takes anything; the job chooses (`format_selector`) before it downloads.
    assert options["format"] == EXTRACT_FORMAT
    assert options["format_sort"] == list(FORMAT_SORT)
    assert options["compat_opts"] == ["manifest-filesize-approx"]
    assert "merge_output_format" not in options  # no ffmpeg: nothing to merge
    assert options["progress_hooks"] == [hook]
    assert options["ratelimit"] == 5
    # What keeps yt-dlp inside the connect-time guard, whatever the overrides say.
    assert options["concurrent_fragment_downloads"] == 1
    assert options["external_downloader"] == {"default": "native"}
    assert options["proxy"] == ""


@pytest.mark.parametrize(
    ("extractor", "video_id", "url", "key"),
    [
        ("Youtube", "dQw4w9WgXcQ", "https://www.youtube.com/watch?v=dQw4w9WgXcQ",
         "yt:youtube:dQw4w9WgXcQ"),
        ("Youtube", "dQw4w9WgXcQ", "https://youtu.be/dQw4w9WgXcQ", "yt:youtube:dQw4w9WgXcQ"),
        ("Generic", "video", "https://a.example/video.mp4", "yt:generic:https://a.example/video.mp4"),
        ("Generic", "video", "https://b.example/video.mp4", "yt:generic:https://b.example/video.mp4"),
        ("HTML5MediaEmbed", "page-1", "https://a.example/page",
         "yt:generic:https://a.example/page"),
        ("TikTok", "", "https://tiktok.com/x", "yt:generic:https://tiktok.com/x"),
    ],
    ids=["youtube", "youtube-other-spelling", "generic-a", "generic-b", "html5-embed", "no-id"],
)  # fmt: skip
def test_cache_key(extractor: str, video_id: str, url: str, key: str) -> None:
    assert cache_key(extractor, video_id, url) == key


def test_video_info_takes_what_the_bot_needs() -> None:
    info = video_info(
        {
            "id": "abc",
            "extractor_key": "Vimeo",
            "webpage_url": "https://vimeo.com/abc",
            "title": " A clip ",
            "uploader": "Bob",
            "duration": 12.4,
            "width": 1280,
            "height": 720,
            "thumbnail": "https://i.vimeocdn.com/abc.jpg",
            "ext": "mp4",
            "vcodec": "avc1",
            "filesize_approx": 1234,
            "age_limit": 18,
        },
        "https://vimeo.com/abc?x=1",
    )
    assert info.key == "yt:vimeo:abc"
    assert (info.url, info.title, info.uploader) == ("https://vimeo.com/abc", "A clip", "Bob")
    assert (info.duration, info.width, info.height) == (12.0, 1280, 720)
    assert info.thumbnail == "https://i.vimeocdn.com/abc.jpg"
    assert (info.ext, info.size, info.audio_only, info.adult) == ("mp4", 1234, False, True)


@pytest.mark.parametrize(
    ("raw", "field", "expected"),
    [
        ({"ext": "../etc"}, "ext", "mp4"),
        ({"ext": "webm"}, "ext", "webm"),
        ({"vcodec": "none"}, "audio_only", True),
        ({"width": True, "height": -3}, "width", None),
        ({"channel": "Chan"}, "uploader", "Chan"),
        ({}, "url", "https://fallback.example/v"),
        ({"duration": 0}, "duration", None),
        ({"formats": [{"acodec": "none"}, {"vcodec": "none", "acodec": "none"}]}, "sound",
         False),
        ({"formats": [{"acodec": "none"}, {"acodec": "mp4a.40.2"}]}, "sound", True),
        ({"formats": [{"url": "https://x.example/v.mp4"}]}, "sound", True),
        ({"acodec": "none"}, "sound", False),
        ({}, "sound", True),
    ],
    ids=["ext-not-a-path", "ext-kept", "audio-only", "junk-size", "channel-as-uploader",
         "url-fallback", "zero-duration", "no-format-has-sound", "one-format-has-sound",
         "sound-unstated-may-be", "single-format-silent", "nothing-said-may-be"],
)  # fmt: skip
def test_video_info_is_tolerant(raw: dict[str, Any], field: str, expected: object) -> None:
    assert getattr(video_info(raw, "https://fallback.example/v"), field) == expected


@pytest.mark.parametrize(
    "raw", [{"is_live": True}, {"live_status": "is_upcoming"}], ids=["live", "upcoming"]
)
def test_live_streams_are_refused(raw: dict[str, Any]) -> None:
    with pytest.raises(PostUnavailable, match="live stream"):
        video_info(raw, "https://x.example")


def test_first_video_of_a_playlist() -> None:
    video = {"id": "1", "_type": "video"}
    assert first_video(video) is video
    assert first_video({"_type": "playlist", "entries": [None, video, {"id": "2"}]}) is video
    assert first_video({"_type": "playlist", "entries": []}) is None


# --- the sound alone --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("convert", "selector", "postprocessed"),
    [
        (True, "bestaudio[acodec^=mp4a]{f}/bestaudio{f}/best{f}", True),
        (False, "bestaudio[ext=m4a]{f}/bestaudio[ext=mp3]{f}", False),
    ],
    ids=["with-ffmpeg", "without-ffmpeg"],
)
def test_audio_options(convert: bool, selector: str, postprocessed: bool) -> None:
    fits = "[filesize<?1000][filesize_approx<?1000][protocol!*=?rtmp]"
    options = ytdlp.audio_options(1000, convert=convert)
    assert options["format"] == selector.format(f=fits)
    pps = options.get("postprocessors", [])
    assert bool(pps) is postprocessed
    for pp in pps:
        assert pp == {"key": "FFmpegExtractAudio", "preferredcodec": ytdlp.AUDIO_CODECS}


@pytest.mark.parametrize(
    ("source", "target"),
    [("m4a", "m4a"), ("mp4", "m4a"), ("aac", "m4a"), ("mp3", "mp3"), ("webm", "mp3"),
     ("opus", "mp3"), ("ogg", "mp3")],
    ids=["m4a", "mp4", "aac", "mp3", "webm", "opus", "ogg"],
)  # fmt: skip
def test_the_sound_is_m4a_when_it_is_aac_else_mp3(source: str, target: str) -> None:
    from yt_dlp.postprocessor.ffmpeg import resolve_mapping

    assert resolve_mapping(source, ytdlp.AUDIO_CODECS)[0] == target


def test_audio_options_refuse_a_limit_that_is_no_limit() -> None:
    with pytest.raises(ValueError, match="positive"):
        ytdlp.audio_options(0, convert=True)


# --- errors ----------------------------------------------------------------------------


def _http(status: int, reason: str) -> HTTPError:
    return HTTPError(Response(io.BytesIO(b""), "https://s.example/v", {}, status, reason))


def _caused(error: Exception, message: str = "Unable to download webpage") -> DownloadError:
    """What YoutubeDL raises: a DownloadError whose exc_info holds what the extractor raised."""
    try:
        raise error
    except Exception:
        inner = ExtractorError(f"{message}: {error}", cause=error)
    return _wrapped(inner, "ERROR: [site] login-id: ")


def _wrapped(inner: Exception, prefix: str = "ERROR: ") -> DownloadError:
    return DownloadError(f"{prefix}{inner}", exc_info=(type(inner), inner, None))


def _expected(message: str) -> DownloadError:
    return _wrapped(ExtractorError(message, expected=True, video_id="abc", ie="site"))


HTTP_500 = "the site did not answer properly (HTTP 500)"
GEO = GeoRestrictedError("This video is not available from your location", countries=["US"])
NO_EXTRACTOR = "ERROR: No suitable extractor found for URL https://s.example/"
URL_SAYS_LOGIN = "ERROR: [generic] login: HTTP Error 500 (https://s.example/login)"

TRANSLATIONS: list[tuple[str, BaseException, type[FetchError], str]] = [
    ("private-video",
     _expected("Private video. Sign in if you've been granted access to this video"),
     PostUnavailable, GONE),
    ("removed", _expected("This video has been removed by the uploader"), PostUnavailable, GONE),
    ("unavailable", _expected("Video unavailable"), PostUnavailable, GONE),
    ("age-gate",
     _expected("Sign in to confirm your age. This video may be inappropriate for some users."),
     PostUnavailable, LOGIN_REQUIRED),
    ("bot-check",
     _expected("Sign in to confirm you’re not a bot. Use --cookies-from-browser or --cookies "
               "for the authentication. See  https://github.com/yt-dlp/yt-dlp/wiki/FAQ  for how"),
     PostUnavailable, ytdlp.BOT_CHECK),
    ("bot-check-straight", _expected("Sign in to confirm you're not a bot"),
     PostUnavailable, ytdlp.BOT_CHECK),
    ("no-sound-stream",
     DownloadError(
         "ERROR: Postprocessing: WARNING: unable to obtain file audio codec with ffprobe"
     ),
     NoSound, ytdlp.NO_SOUND),
    ("login-cookies",
     _expected("This content is only available for registered users. Use --cookies"),
     PostUnavailable, LOGIN_REQUIRED),
    ("members-only", _expected("Join this channel to get access to members-only content"),
     PostUnavailable, LOGIN_REQUIRED),
    ("geo-error-class", GEO, PostUnavailable, GEO_BLOCKED),
    ("geo-wrapped", _wrapped(GeoRestrictedError("x")), PostUnavailable, GEO_BLOCKED),
    ("geo-words", _expected("The uploader has not made this video available in your country"),
     PostUnavailable, GEO_BLOCKED),
    ("live-upcoming", _expected("This live event will begin in 3 hours."), PostUnavailable, LIVE),
    ("unsupported-class", _wrapped(UnsupportedError("https://s.example/")),
     UnsupportedLink, UNSUPPORTED),
    ("no-extractor", DownloadError(NO_EXTRACTOR), UnsupportedLink, UNSUPPORTED),
    ("no-format-fits", _expected("Requested format is not available. Use --list-formats"),
     TooLarge, ytdlp.NO_FORMAT_FITS),
    ("http-404", _caused(_http(404, "Not Found")), PostUnavailable, GONE),
    ("http-410", _caused(_http(410, "Gone")), PostUnavailable, GONE),
    ("http-401", _caused(_http(401, "Unauthorized")), PostUnavailable, LOGIN_REQUIRED),
    ("http-451", _caused(_http(451, "Unavailable For Legal Reasons")),
     PostUnavailable, GEO_BLOCKED),
    ("http-403", _caused(_http(403, "Forbidden")), PostUnavailable, REFUSED),
    ("http-500", _caused(_http(500, "Internal Server Error")), TransientFetch, HTTP_500),
    ("http-429", _caused(_http(429, "Too Many Requests")), TransientFetch,
     "the site did not answer properly (HTTP 429)"),
    ("connection-refused", _caused(TransportError("[Errno 111] Connection refused")),
     TransientFetch, ytdlp.SITE_FAILED),
    ("timeout", _caused(TimeoutError("timed out")), TransientFetch, ytdlp.SITE_FAILED),
    ("other-expected", _expected("This tweet has no video"), PostUnavailable, REFUSED),
    ("extractor-bug", _wrapped(ExtractorError("KeyError 'x'")), TransientFetch, ytdlp.SITE_FAILED),
    ("anything-else", ValueError("what"), TransientFetch, ytdlp.SITE_FAILED),
    ("a-url-saying-login",
     DownloadError(URL_SAYS_LOGIN, exc_info=(HTTPError, _http(500, "Internal Server Error"), None)),
     TransientFetch, HTTP_500),
]  # fmt: skip


@pytest.mark.parametrize(
    ("error", "kind", "reason"),
    [(e, k, r) for _, e, k, r in TRANSLATIONS],
    ids=[name for name, *_ in TRANSLATIONS],
)
def test_translate(error: BaseException, kind: type[FetchError], reason: str) -> None:
    translated = translate(error)
    assert type(translated) is kind
    assert translated.reason == reason


def test_translate_passes_our_own_guard_through() -> None:
    blocked = BlockedAddress("no")
    assert translate(_wrapped(blocked)) is blocked


@given(st.text(max_size=200))
def test_translate_never_raises(message: str) -> None:
    for error in (_expected(message), DownloadError(message), ExtractorError(message)):
        assert isinstance(translate(error), FetchError)


# --- the request guard -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "error"),
    [
        ("http://127.0.0.1/v.mp4", BlockedAddress),
        ("http://localhost:8080/v.mp4", BlockedAddress),
        ("http://[::ffff:10.0.0.1]/v.mp4", BlockedAddress),
        ("http://169.254.169.254/latest/meta-data", BlockedAddress),
        ("file:///etc/passwd", UnsupportedLink),
        ("http://user:pw@93.184.216.34/", UnsupportedLink),
    ],
    ids=["loopback", "localhost", "mapped-private", "metadata", "file-scheme", "userinfo"],
)
def test_host_guard_refuses_what_netguard_refuses(url: str, error: type[Exception]) -> None:
    with pytest.raises(error):
        host_guard(allow_private=False)(url)


def test_host_guard_lets_a_public_literal_through_and_everything_when_allowed() -> None:
    host_guard(allow_private=False)("https://93.184.216.34/v.mp4")
    host_guard(allow_private=True)("http://127.0.0.1:1/v.mp4")


@pytest.mark.parametrize(
    ("merge", "need"), [(True, 2000), (False, 1000)], ids=["parts-and-result", "one-file"]
)
def test_disk_need_of_a_merge_holds_the_parts_and_the_result(merge: bool, need: int) -> None:
    assert disk_need(1000, merge) == need


@pytest.mark.parametrize(
    ("audio", "duration", "chosen"),
    [
        (_a("a", 10), None, ["v720+a"]),
        # No size stated: bitrate x duration (128 kbit/s x 8 s = 128 kB): 10 B left, 240p.
        (_a("a", None), 8.0, ["v240+a"]),
        (_a("a", None, abr=None), None, ["v1080+a"]),
    ],
    ids=["stated", "bitrate-x-duration", "unknown-counts-as-nothing"],
)
def test_the_sound_is_sized_first_so_the_sum_fits(
    audio: dict[str, Any], duration: float | None, chosen: list[str]
) -> None:
    import yt_dlp

    ydl = yt_dlp.YoutubeDL({"quiet": True, "format_sort": list(FORMAT_SORT)})
    limit = 50 if duration is None else 128_000 + 10
    ladder = [_v("v240", 240, 5), _v("v720", 720, 30), _v("v1080", 1080, 45), audio]
    info = {"formats": [dict(f) for f in ladder], "id": "x", "title": "x"}
    ydl.sort_formats(info)
    config = YtdlpConfig(limit_bytes=limit, ffmpeg="/usr/bin/ffmpeg")
    spec = video_selector(ydl, info["formats"], duration, config)
    assert [f["format_id"] for f in select(ydl, info["formats"], spec)] == chosen
