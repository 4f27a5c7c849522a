"""yt-dlp: the one module that imports it, and translates its errors into xbot's tree.

`import yt_dlp` costs ~0.2 s and is needed only when a link to another site
arrives, so it happens lazily, in the worker thread of the first job
(`xbot.app` never imports it; a test pins that). yt-dlp blocks: each job has
one `YoutubeDL`, used from ``asyncio.to_thread``. Its progress hook runs in
that thread and hands snapshots to the loop with ``call_soon_threadsafe``.

The rules that matter, and where they are kept:

- Format (`format_selector`, with the other options in `_options`): chosen
  after extraction, once the formats are known: with ffmpeg the best picture
  that fits beside the best sound (its size estimated first, by yt-dlp's own
  selection), merged into one MP4; else the best single file that fits.
  ``<?`` admits formats of unknown size (a direct link, a DASH manifest
  without a duration), which the hook then caps while they download.
- The cap (`YtdlpJob._hook`): yt-dlp's own ``max_filesize`` trusts
  Content-Length and skips silently; the hook counts the bytes of all the
  parts together and raises ``DownloadCancelled`` past the limit, with or
  without a length. A download over the cap steps down (`step_below`): the
  same choice again below the rendition that was too big, up to `MAX_STEPS`
  times, so a wrong estimate costs a retry, not the video.
- Nothing fits: the sentence says why (`no_format_error`): too big only when
  something would be there without the limit.
- Cancellation: a cancelled job sets a flag that the hook (and every request
  yt-dlp makes) checks, so the thread stops at its next block, and kills a
  merge under way (`xbot.media.ffmpeg.kill_children`: ffmpeg is a child
  process the thread waits for); the caller's temp folder is removed again
  when a thread outlives the grace period.
- SSRF: the job's thread runs inside `xbot.media.connguard.guarded`, so every
  connection yt-dlp opens (pages, embeds, media, fragments, each redirect hop)
  is checked on the address it actually connects to; a name that resolves
  differently the second time gains nothing. Before that, every URL it
  requests passes `YtdlpJob`'s guard (`host_guard`: scheme, user info,
  literal and resolved addresses), an early and clear refusal. A refusal is
  `BlockedAddress`, translated here (`YtdlpJob._in_thread`).
- Pages in memory (`bound_whole_reads`): yt-dlp reads a page, a manifest or an
  API answer whole (``urlh.read()``), and urllib3 undoes its Content-Encoding
  as it goes; a 7 KB ``gzip, gzip`` page became 3 GiB in the job's thread.
  Each whole read is done in `PAGE_STEP` reads (urllib3 >= 2.6 bounds what
  one read inflates) and refused past `MAX_PAGE`. Media files are not read
  whole: yt-dlp's downloader asks for ``identity``, reads in blocks, and the
  hook caps them.
- Time (`xbot.media.speed_floor`): the download is held to the speed floor,
  measured on the bytes the hook sees, by a `SpeedWatch` on the loop; saying
  what a link is (no bytes to measure) has `extract_limit`. Past either, the
  job is cancelled and the sockets its thread opened are shut down from the
  loop (`connguard.Watch.shut_down`): a read blocked on a dripping server
  wakes at once, where the hook alone would wait for the next block to fill.
  yt-dlp's own ``throttledratelimit`` is no use here: it re-extracts and tries
  again rather than give up.
- Errors (`translate`): exactly once, into `PostUnavailable` (login, age,
  geo, private or removed, live, a "confirm you're not a bot" check: also one
  warning line for the operator), `UnsupportedLink`, `TooLarge` and
  `TransientFetch` (everything that may pass: the task is retried).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import gc
import logging
import re
import shutil
import socket
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import attrs
import httpx

from xbot.errors import (
    BlockedAddress,
    FetchError,
    NoSound,
    PostUnavailable,
    TooLarge,
    TooSlow,
    TransientFetch,
    UnsupportedLink,
)
from xbot.i18n import N_, reason_template
from xbot.logs import kv
from xbot.media import connguard, ffmpeg, netguard
from xbot.media.speed_floor import SLOW_SITE, SpeedWatch
from xbot.sending.progress import Snapshot
from xbot.sources.ytdlp._options import (
    EXTRACT_FORMAT,
    YtdlpConfig,
    audio_options,
    build_options,
    cache_key,
    format_selector,
)

log = logging.getLogger(__name__)

MAX_STEPS = 4  # downloads of one link that may run over the cap before it is too big
REPORT_EVERY = 0.25  # the thread hands the loop at most this many snapshots a second
# A page read whole: a video's page and its player script are a few MB; a page past
# this is no page of a video, and each job's thread holds it twice while it joins.
MAX_PAGE = 16 * 1024 * 1024
PAGE_STEP = 1024 * 1024

# The sentences people read (`PostUnavailable.reason`), and the retry reason.
LOGIN_REQUIRED = N_(
    "That video is only shown to signed-in or age-verified accounts, which I am not."
)
GEO_BLOCKED = N_("That video is not available in the country this bot runs in.")
GONE = N_("That video is private, was removed, or does not exist.")
LIVE = N_("That is a live stream, or it has not started yet; I can only fetch recorded videos.")
REFUSED = N_("That site would not give me the video.")
UNSUPPORTED = N_("I cannot fetch a video from that link.")
NO_FORMAT_FITS = N_("no version of that video fits the upload limit")
NO_SINGLE_FILE = N_(
    "That site sends the picture and the sound of this video separately, and this bot "
    "cannot join them (ffmpeg is not installed)."
)
NO_SOUND = N_("This video has no sound.")
OVER_LIMIT = N_("the video is over the upload limit")
SITE_FAILED = N_("the site did not answer properly")
SITE_FAILED_HTTP = reason_template(N_("the site did not answer properly (HTTP {status})"))
PAGE_TOO_LARGE = N_("That page is far too large to be a video's page.")
BOT_CHECK = N_(
    "That site wants me to sign in to prove I am not a bot, so I cannot fetch the video now."
)
# What the operator reads once per refusal (the chat gets BOT_CHECK).
BOT_CHECK_LOG = (
    "yt-dlp: the site asks for a sign-in to prove this is not a bot; give the bot a "
    'logged-in account\'s cookies (XBOT_YTDLP_COOKIES, docs/deployment.md "YouTube") %s'
)

_URL = re.compile(r"\w+://\S+")
_LIVE = re.compile(r"live event will begin|premieres? in|is_upcoming|this live stream|is live now")
_GONE = re.compile(
    r"private video|video is private|video unavailable|video is unavailable|has been removed"
    r"|been deleted|no longer available|does not exist|not found|account .*terminated"
    r"|content (?:is|isn't|is not) available|post (?:is )?unavailable|removed by"
)
_LOGIN = re.compile(
    r"sign in|log in|login|--cookies|confirm your age|age.restricted|age verification"
    r"|age.gate|members.only|registered users|inappropriate|premium|paid content|requires payment"
)
# YouTube's "Sign in to confirm you're not a bot" (a straight or curly apostrophe).
_BOT_CHECK = re.compile(r"confirm (?:that )?you\W?re not a (?:ro)?bot")
_GEO = re.compile(r"your country|your location|geo.restrict|not available in your region|territor")


@attrs.frozen
class VideoInfo:
    """What yt-dlp found for a link, as the bot needs it.

    Attributes:
        key: the link-cache key (`cache_key`).
        url: the video's page (the caption's link).
        title, uploader: for the caption ("" when unknown).
        duration, width, height: for sendVideo's player.
        thumbnail: a still, when the site gives one.
        audio_only: the chosen format has no picture.
        sound: False when no format has sound (a video without any, an image);
            a format that does not say (a direct link) counts as sound.
        ext: the file extension of the chosen format (``mp4``).
        size: bytes, when the site says (exact or approximate).
        adult: the site marks it 18+.
    """

    key: str
    url: str
    title: str = ""
    uploader: str = ""
    duration: float | None = None
    width: int | None = None
    height: int | None = None
    thumbnail: str | None = None
    audio_only: bool = False
    sound: bool = True
    ext: str = "mp4"
    size: int | None = None
    adult: bool = False


def _opt_int(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return None
    return int(value)


def _opt_str(*values: object) -> str:
    for value in values:
        if isinstance(value, str) and value.strip():
            return value.strip()
    return ""


def first_video(info: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The video of an extraction result: itself, or a playlist's first entry."""
    if info.get("_type", "video") != "playlist":
        return info
    for entry in info.get("entries") or ():
        if isinstance(entry, Mapping):
            return first_video(entry)
    return None


def has_sound(info: Mapping[str, Any]) -> bool:
    """Pure: some format of the extraction result may have sound. Only a format that
    says ``acodec: none`` has none; one that does not say (a direct link) may have."""
    formats = [f for f in info.get("formats") or () if isinstance(f, Mapping)] or [info]
    return any(f.get("acodec") != "none" for f in formats)


def video_info(info: Mapping[str, Any], fallback_url: str) -> VideoInfo:
    """Pure: the fields of a (sanitized) yt-dlp info dict that the bot uses.

    Raises:
        PostUnavailable: a live or upcoming stream (it would never end).
    """
    if info.get("is_live") or info.get("live_status") in ("is_live", "is_upcoming"):
        raise PostUnavailable(LIVE)
    url = _opt_str(info.get("webpage_url"), info.get("original_url"), fallback_url)
    extractor = _opt_str(info.get("extractor_key"), info.get("extractor"), "generic")
    ext = _opt_str(info.get("ext")).lower()
    return VideoInfo(
        key=cache_key(extractor, _opt_str(info.get("id")), url),
        url=url,
        title=_opt_str(info.get("title"), info.get("fulltitle")),
        uploader=_opt_str(
            info.get("uploader"), info.get("channel"), info.get("creator"), info.get("artist")
        ),
        duration=float(d) if (d := _opt_int(info.get("duration"))) else None,
        width=_opt_int(info.get("width")),
        height=_opt_int(info.get("height")),
        thumbnail=_opt_str(info.get("thumbnail")) or None,
        audio_only=info.get("vcodec") == "none",
        sound=has_sound(info),
        ext=ext if re.fullmatch(r"[a-z0-9]{1,5}", ext) else "mp4",
        size=_opt_int(info.get("filesize")) or _opt_int(info.get("filesize_approx")),
        adult=(_opt_int(info.get("age_limit")) or 0) >= 18,
    )


# --- errors ----------------------------------------------------------------------------


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and what it wraps: ``DownloadError.exc_info``, ``ExtractorError.cause``, chains."""
    seen: list[BaseException] = []
    todo = [exc]
    while todo and len(seen) < 10:
        current = todo.pop(0)
        if any(current is s for s in seen):
            continue
        seen.append(current)
        yield current
        exc_info = getattr(current, "exc_info", None)
        wrapped = exc_info[1] if isinstance(exc_info, tuple) and len(exc_info) > 1 else None
        for inner in (
            wrapped,
            getattr(current, "cause", None),
            current.__cause__,
            current.__context__,
        ):
            if isinstance(inner, BaseException):
                todo.append(inner)


def _message(exc: BaseException) -> str:
    """The words of one error, for the patterns: without URLs (a path may say "login")."""
    from yt_dlp.utils import DownloadError

    exc_info = getattr(exc, "exc_info", None)
    if isinstance(exc, DownloadError) and exc_info and exc_info[1] is not None:
        return ""  # it repeats its cause's words, with the video id before them
    # ExtractorError keeps the site's sentence without the "ERROR: [site] id:" prefix.
    text = getattr(exc, "orig_msg", None) or str(exc)
    return _URL.sub(" ", str(text)).lower()


def translate(exc: BaseException) -> FetchError:
    """The one translation of yt-dlp's errors. Pure: a table of cases in the tests."""
    from yt_dlp.networking.exceptions import HTTPError, TransportError
    from yt_dlp.utils import ExtractorError, GeoRestrictedError, UnsupportedError

    chain = list(_causes(exc))
    for e in chain:
        if isinstance(e, FetchError):  # our own guard, raised inside yt-dlp
            return e
    text = " | ".join(_message(e) for e in chain)
    if any(isinstance(e, GeoRestrictedError) for e in chain):
        return PostUnavailable(GEO_BLOCKED)
    if any(isinstance(e, UnsupportedError) for e in chain) or re.search(
        r"unsupported url|no suitable extractor", text
    ):
        return UnsupportedLink(UNSUPPORTED)
    if "requested format is not available" in text:
        return TooLarge(NO_FORMAT_FITS)
    # FFmpegExtractAudio on a file with no sound stream (a direct link that stated no
    # codecs, so `has_sound` could not tell before the download): no sound, not a failure
    # to retry.
    if "unable to obtain file audio codec" in text:
        return NoSound(NO_SOUND)
    if _LIVE.search(text):
        return PostUnavailable(LIVE)
    # Before the login patterns ("sign in"): only the operator's cookies help here.
    if _BOT_CHECK.search(text):
        return PostUnavailable(BOT_CHECK)
    # "Private video. Sign in if you've been granted access": private wins over login.
    if _GONE.search(text):
        return PostUnavailable(GONE)
    if _GEO.search(text):
        return PostUnavailable(GEO_BLOCKED)
    if _LOGIN.search(text):
        return PostUnavailable(LOGIN_REQUIRED)
    for e in chain:
        if isinstance(e, HTTPError):
            status = e.status
            if status in (404, 410):
                return PostUnavailable(GONE)
            if status == 401:
                return PostUnavailable(LOGIN_REQUIRED)
            if status == 451:
                return PostUnavailable(GEO_BLOCKED)
            if status == 429 or status >= 500:
                return TransientFetch(SITE_FAILED_HTTP.format(status=status))
            return PostUnavailable(REFUSED)
    if any(isinstance(e, TransportError | OSError | TimeoutError) for e in chain):
        return TransientFetch(SITE_FAILED)
    if any(isinstance(e, ExtractorError) and e.expected for e in chain):
        return PostUnavailable(REFUSED)
    return TransientFetch(SITE_FAILED)


# --- the choice of format --------------------------------------------------------------


def size_of(fmt: Mapping[str, Any], duration: object = None) -> int | None:
    """A format's size in bytes: stated, estimated by yt-dlp, or bitrate x duration. Pure."""
    stated = _opt_int(fmt.get("filesize")) or _opt_int(fmt.get("filesize_approx"))
    if stated:
        return stated
    seconds = _opt_int(fmt.get("duration")) or _opt_int(duration)
    rate = next((r for k in ("tbr", "abr", "vbr") if (r := fmt.get(k)) and r > 0), None)
    if seconds and isinstance(rate, int | float):
        return int(rate * 1000 / 8 * seconds)
    return None


def step_below(part: Mapping[str, Any] | None) -> str | None:
    """The filter that steps down from a rendition that ran over the cap. Pure.

    Below its height where it has one (the next rendition, not a twin of the same
    size in another codec), else anything but that format.
    """
    if not part:
        return None
    height = _opt_int(part.get("height"))
    if height:
        return f"[height<{height}]"
    format_id = _opt_str(part.get("format_id"))
    if format_id and '"' not in format_id:
        return f'[format_id!="{format_id}"]'
    return None


def select(ydl: Any, formats: list[Mapping[str, Any]], spec: str) -> list[dict[str, Any]]:
    """What yt-dlp's own selection picks from `formats` (sorted, as extraction left them)."""
    selector = ydl.build_format_selector(spec)
    return list(
        selector(
            {
                "formats": formats,
                "has_merged_format": any(
                    "none" not in (f.get("acodec"), f.get("vcodec")) for f in formats
                ),
                "incomplete_formats": all(f.get("vcodec") == "none" for f in formats)
                or all(f.get("acodec") == "none" for f in formats),
            }
        )
    )


def video_selector(
    ydl: Any,
    formats: list[Mapping[str, Any]],
    duration: object,
    config: YtdlpConfig,
    below: tuple[str, ...] = (),
) -> str:
    """The selector of one attempt. The sound yt-dlp's ``ba`` picks is sized first
    (stated, estimated, or bitrate x duration; unknown counts as nothing, the hook
    caps it), so that the picture gets what is left: the *sum* fits."""
    audio = 0
    if config.merge:
        best_audio = select(ydl, formats, "ba")
        if best_audio:
            audio = size_of(best_audio[0], duration) or 0
    return format_selector(
        config.limit_bytes,
        merge=config.merge,
        audio_bytes=audio,
        max_height=config.max_height,
        below=below,
    )


def no_format_error(ydl: Any, formats: list[Mapping[str, Any]], config: YtdlpConfig) -> FetchError:
    """Why nothing was chosen, as the sentence that is true.

    Too big only when something would be chosen without the limit; a site that
    keeps picture and sound apart, where this bot has no ffmpeg, says so.
    """
    unlimited = format_selector(2**62, merge=config.merge, max_height=config.max_height)
    if select(ydl, formats, unlimited):
        return TooLarge(NO_FORMAT_FITS)
    if not config.merge and select(ydl, formats, "bv+ba"):
        return PostUnavailable(NO_SINGLE_FILE)
    return UnsupportedLink(UNSUPPORTED)


# --- the job ---------------------------------------------------------------------------


def _close_leaked() -> None:
    """Close the part file a stopped fragment download leaves open (yt-dlp closes it on
    success only), before the next attempt writes beside it; it is garbage by now."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()


def _empty(folder: Path) -> None:
    """Remove what an attempt left in the job's folder (its parts), keep the folder."""
    for entry in folder.iterdir() if folder.is_dir() else ():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


# Seconds between shut-downs of a given-up job's sockets while its thread has not ended.
SHUT_AGAIN = 0.05


async def _blocking_resolver(host: str, port: int) -> list[str]:
    # Runs in the yt-dlp thread, inside a throwaway loop: blocking is fine there.
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def host_guard(allow_private: bool) -> Callable[[str], None]:
    """A check for every URL yt-dlp requests (pages, embeds, media, fragments).

    The same policy as `netguard`: scheme, no user info, and every address
    the host resolves to must be public. A host is resolved once per job.
    """
    checked: set[tuple[str, int]] = set()

    def guard(url: str) -> None:
        netguard.check_url(url, allow_private)
        if allow_private:
            return
        parsed = httpx.URL(url)
        where = (parsed.host, parsed.port or (443 if parsed.scheme == "https" else 80))
        if where in checked:
            return
        asyncio.run(netguard.resolve_and_check(*where, allow_private, resolver=_blocking_resolver))
        checked.add(where)

    return guard


async def _shut_until_done(watch: connguard.Watch, work: asyncio.Future[Any], grace: float) -> None:
    """Shut the watch's sockets down until the thread ends, at most `grace` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace
    while True:
        watch.shut_down()
        left = deadline - loop.time()
        if work.done() or left <= 0:
            return
        await asyncio.wait({work}, timeout=min(SHUT_AGAIN, left))


def bound_whole_reads(response: Any, limit: int = MAX_PAGE) -> None:
    """Make ``response.read()`` (the whole body) read `PAGE_STEP` at a time and raise
    `FetchError` past `limit` decoded bytes; reads of a given size stay as they are."""
    read = response.read

    def bounded(amt: int | None = None) -> bytes:
        if amt is not None and amt >= 0:
            return read(amt)  # type: ignore[no-any-return]
        parts: list[bytes] = []
        size = 0
        while chunk := read(PAGE_STEP):
            size += len(chunk)
            if size > limit:
                response.close()
                raise FetchError(PAGE_TOO_LARGE)
            parts.append(chunk)
        return b"".join(parts)

    response.read = bounded


@functools.cache
def _guarded_youtubedl() -> type[Any]:
    """A `YoutubeDL` whose every request passes the job's `before_request` first.

    ``YoutubeDL.urlopen`` is where extractors and downloaders (HTTP, fragments)
    send requests; checking there covers embeds and media on other hosts.
    """
    import yt_dlp

    class GuardedYoutubeDL(yt_dlp.YoutubeDL):  # type: ignore[misc]
        before_request: Callable[[str], None] = staticmethod(lambda url: None)

        def urlopen(self, req: Any) -> Any:
            url = req if isinstance(req, str) else getattr(req, "url", None) or req.get_full_url()
            self.before_request(str(url))
            response = super().urlopen(req)
            final = getattr(response, "url", None)
            if isinstance(final, str) and final != url:
                # Redirects are followed inside yt-dlp's handler, where no hook runs:
                # the request went out, but what a refused address answered is not used.
                try:
                    self.before_request(final)
                except BaseException:
                    response.close()
                    raise
            bound_whole_reads(response)
            # A download stopped by the hook leaves its response open (yt-dlp closes
            # it only on success): keep hold of it so the job can close its socket.
            opened = [r for r in getattr(self, "_xbot_opened", ()) if not r.closed]
            self._xbot_opened = [*opened, response]
            return response

        def close_responses(self) -> None:
            for response in getattr(self, "_xbot_opened", ()):
                with contextlib.suppress(Exception):
                    response.close()
            self._xbot_opened = []

    return GuardedYoutubeDL


@attrs.define
class YtdlpJob:
    """One link through yt-dlp: `extract`, then (on a cache miss) `download`.

    ``async with YtdlpJob(url, folder, config) as job``; the files land in
    `folder` (the caller's prefixed temp folder, which it removes).

    Attributes:
        on_progress: called on the event loop with each `Snapshot`.
        guard: checks each URL yt-dlp requests (default: `host_guard`).
        policy: which addresses its connections may reach (default: the guard's own,
            `connguard.policy_for`; tests let a local port stand for a public host).
        audio: the sound alone (`audio_options`): M4A or MP3, for an audio message.
    """

    url: str
    folder: Path
    config: YtdlpConfig
    on_progress: Callable[[Snapshot], None] | None = None
    guard: Callable[[str], None] | None = None
    policy: connguard.Policy | None = None
    audio: bool = False
    _ydl: Any = attrs.field(default=None, init=False)
    _raw: Mapping[str, Any] | None = attrs.field(default=None, init=False)
    _cancel: threading.Event = attrs.field(factory=threading.Event, init=False)
    _over_cap: bool = attrs.field(default=False, init=False)
    _loop: asyncio.AbstractEventLoop | None = attrs.field(default=None, init=False)
    _busy: asyncio.Future[Any] | None = attrs.field(default=None, init=False)
    _reported: float = attrs.field(default=0.0, init=False)
    _speed: SpeedWatch | None = attrs.field(default=None, init=False)
    # The current attempt's parts (file -> bytes), all bytes so far (for the speed
    # floor), the picture part being fetched, the expected total, a merge under way.
    _parts: dict[str, int] = attrs.field(factory=dict, init=False)
    _ever: int = attrs.field(default=0, init=False)
    _tried: Mapping[str, Any] | None = attrs.field(default=None, init=False)
    _expected: int | None = attrs.field(default=None, init=False)
    _merging: bool = attrs.field(default=False, init=False)
    _resting: bool = attrs.field(default=False, init=False)  # the speed floor, while merging

    async def __aenter__(self) -> YtdlpJob:
        self._loop = asyncio.get_running_loop()
        if self.guard is None:
            self.guard = host_guard(self.config.allow_private)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._ydl is None:
            return
        if self._busy is not None and not self._busy.done():
            # The thread outlived its grace: it closes the YoutubeDL when it ends.
            self._busy.add_done_callback(lambda _: self._close_sync())
            return
        await asyncio.to_thread(self._close_sync)

    async def extract(self) -> VideoInfo:
        """What the link is (no download yet): its cache key, title, size, …"""
        raw = await self._in_thread(self._extract_sync, limit=self.config.extract_limit)
        self._raw = raw
        return video_info(raw, self.url)

    async def download(self) -> Path:
        """Download what `extract` chose; the file is inside `folder` and under the cap."""
        if self._raw is None:
            raise RuntimeError("extract() first")
        path: Path = await self._in_thread(self._download_sync, self._raw)
        return path

    def cancel(self) -> None:
        """Stop the thread at its next block or request (also done on cancellation),
        and a merge under way (ffmpeg, a child process the thread waits for)."""
        self._cancel.set()
        ffmpeg.kill_children(str(self.folder))

    # -- the loop side ---------------------------------------------------------------

    async def _in_thread(
        self, fn: Callable[..., Any], *args: Any, limit: float | None = None
    ) -> Any:
        """`fn` in a thread, held to `limit` seconds if given, else to the speed floor."""
        watch = connguard.Watch(self.config.allow_private, policy=self.policy)
        work = asyncio.ensure_future(asyncio.to_thread(self._guarded, watch, fn, *args))
        self._busy = work
        try:
            if limit is not None:
                try:
                    async with asyncio.timeout(limit):
                        return await asyncio.shield(work)
                except TimeoutError:
                    log.info("yt-dlp too slow %s", kv(url=self.url, limit=limit))
                    raise TooSlow(SLOW_SITE) from None
            self._speed = SpeedWatch(self.config.floor)
            async with self._speed.held():
                return await asyncio.shield(work)
        except (asyncio.CancelledError, TooSlow) as exc:
            self.cancel()
            if isinstance(exc, TooSlow):
                # Its reads may be blocked on a dripping socket: wake them, close them,
                # and again while the grace lasts (a connect that was under way).
                await _shut_until_done(watch, work, self.config.cancel_grace)
            else:
                with contextlib.suppress(BaseException):
                    await asyncio.wait_for(asyncio.shield(work), self.config.cancel_grace)
            if not work.done():
                ffmpeg.kill_children(str(self.folder))  # a merge started as it was cancelled
                # Still blocked (a stalled socket): clean up after it when it ends.
                folder = self.folder
                work.add_done_callback(lambda _: shutil.rmtree(folder, ignore_errors=True))
            raise
        except Exception as exc:
            if watch.refused:
                log.info("yt-dlp refused %s", kv(url=self.url, address=watch.refused[0]))
                raise BlockedAddress(netguard.BLOCKED_REASON) from exc
            if self._over_cap:
                raise TooLarge(OVER_LIMIT) from exc
            error = translate(exc)
            if error.reason == BOT_CHECK:
                log.warning(BOT_CHECK_LOG, kv(url=self.url))
            else:
                log.info("yt-dlp failed %s", kv(url=self.url, error=error))
            raise error from exc

    def _sample(self, done: int) -> None:
        """The hook's byte count, on the loop: the speed watch's next sample."""
        if self._speed is not None and self._resting:
            self._resting = False
            self._speed.resume(done)
        if self._speed is not None:
            # Short and due: the watch's own timer ends the download, in its task.
            with contextlib.suppress(TooSlow):
                self._speed.sample(done)

    def _on_merge(self) -> None:
        """The merge started (on the loop): no bytes arrive while it runs, so the speed
        floor rests (the task's budget still bounds it); the status message says so."""
        if self._speed is not None:
            self._speed.rest()
            self._resting = True
        if self.on_progress is not None:
            self.on_progress(Snapshot("merge", self._ever, self._expected))

    def _report(self, snapshot: Snapshot) -> None:
        if self.on_progress is None or self._loop is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop is closing: nobody is watching
            self._loop.call_soon_threadsafe(self.on_progress, snapshot)

    # -- the thread side -------------------------------------------------------------

    def _guarded(self, watch: connguard.Watch, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn` with every connection of this thread checked (`xbot.media.connguard`)."""
        with connguard.guarded(watch):
            return fn(*args)

    def _before_request(self, url: str) -> None:
        from yt_dlp.utils import DownloadCancelled

        if self._cancel.is_set():
            raise DownloadCancelled("the job was cancelled")
        assert self.guard is not None
        self.guard(url)

    def _new_ydl(self) -> Any:
        options = build_options(self.config, self.folder, self._hook, self._pp_hook)
        if self.audio:
            # ffmpeg (with the merge's own limits) takes the sound out of local files only.
            options.update(audio_options(self.config.limit_bytes, convert=self.config.merge))
            # Extraction must not fail where no format is sound (a video without any):
            # that is for the task to decide on (`VideoInfo.sound`), not "nothing fits".
            options["format"] = f"{options['format']}/{EXTRACT_FORMAT}"
        ydl = _guarded_youtubedl()(options)
        ydl.before_request = self._before_request
        # Copies into this job's own jar (never ``cookiefile``: yt-dlp writes that file
        # back when it closes); the jar sends each only to its own domain.
        for cookie in self.config.cookies.jar:
            ydl.cookiejar.set_cookie(copy.copy(cookie))
        return ydl

    def _extract_sync(self) -> Mapping[str, Any]:
        if self._ydl is None:
            self._ydl = self._new_ydl()
        try:
            info = self._ydl.extract_info(self.url, download=False)
        finally:
            self._ydl.close_responses()
        video = first_video(info or {})
        if video is None:
            raise UnsupportedLink(UNSUPPORTED)
        sanitized: Mapping[str, Any] = self._ydl.sanitize_info(video)
        return sanitized

    def _download_sync(self, raw: Mapping[str, Any]) -> Path:
        """Choose, download (and merge); over the cap, choose again below and retry."""
        formats = [f for f in raw.get("formats") or () if isinstance(f, Mapping)]
        below: list[str] = []
        for attempt in range(MAX_STEPS):
            spec = self._choose(raw, formats, tuple(below), first=attempt == 0)
            self._ydl.format_selector = self._ydl.build_format_selector(spec)
            self._parts, self._tried, self._over_cap = {}, None, False
            try:
                return self._download_once(raw)
            except BaseException:
                step = step_below(self._tried)
                if not self._over_cap or self._cancel.is_set() or step is None:
                    raise
                if attempt + 1 == MAX_STEPS:
                    raise
                log.info("yt-dlp over the cap, stepping down %s", kv(url=self.url, below=step))
                below.append(step)
            _close_leaked()
            _empty(self.folder)
        raise AssertionError("unreachable")  # pragma: no cover

    def _choose(
        self,
        raw: Mapping[str, Any],
        formats: list[Mapping[str, Any]],
        below: tuple[str, ...],
        *,
        first: bool,
    ) -> str:
        """The selector for this attempt, by yt-dlp's own selection over the formats.

        Raises:
            TooLarge, PostUnavailable, UnsupportedLink: nothing to choose
                (`no_format_error`; after a step down: too big).
        """
        config = self.config
        if self.audio:
            spec = str(audio_options(config.limit_bytes, convert=config.merge)["format"])
            chosen = select(self._ydl, formats, spec) if formats else [dict(raw)]
            if not chosen:
                raise no_format_error(self._ydl, formats, config)
            self._expected = size_of(chosen[0], raw.get("duration"))
            return spec
        spec = video_selector(self._ydl, formats, raw.get("duration"), config, below)
        chosen = select(self._ydl, formats, spec) if formats else [dict(raw)]
        if not chosen:
            if not first:
                self._over_cap = True
                raise TooLarge(OVER_LIMIT)
            raise no_format_error(self._ydl, formats, config)
        parts = chosen[0].get("requested_formats") or [chosen[0]]
        sizes = [size_of(p, raw.get("duration")) for p in parts]
        self._expected = sum(s for s in sizes if s) if all(sizes) else None
        return spec

    def _download_once(self, raw: Mapping[str, Any]) -> Path:
        try:
            result = self._ydl.process_ie_result(dict(raw), download=True)
        finally:
            self._ydl.close_responses()
            self._merging = False
        downloads = result.get("requested_downloads") or ()
        paths = [Path(d["filepath"]) for d in downloads if d.get("filepath")]
        if not paths or not paths[0].is_file():
            raise TransientFetch(SITE_FAILED)
        path = paths[0].resolve()
        if not path.is_relative_to(self.folder.resolve()):
            raise TransientFetch(SITE_FAILED)  # never hand out a file from elsewhere
        if path.stat().st_size > self.config.limit_bytes:
            self._over_cap = True
            raise TooLarge(OVER_LIMIT)
        return path

    def _pp_hook(self, status: dict[str, Any]) -> None:
        """yt-dlp's post-processor hook (its thread): a merge starting."""
        from yt_dlp.utils import DownloadCancelled

        if self._cancel.is_set():
            raise DownloadCancelled("the job was cancelled")
        if status.get("postprocessor") == "Merger" and status.get("status") == "started":
            self._merging = True
            if self._loop is not None:
                with contextlib.suppress(RuntimeError):  # the loop is closing
                    self._loop.call_soon_threadsafe(self._on_merge)

    def _hook(self, status: dict[str, Any]) -> None:
        """yt-dlp's progress hook (its thread): the cap, cancellation, then progress."""
        from yt_dlp.utils import DownloadCancelled

        if self._cancel.is_set():
            raise DownloadCancelled("the job was cancelled")
        part = status.get("info_dict") or {}
        if part.get("vcodec") != "none" and self._tried is None:
            self._tried = part  # the picture (or the single file) of this attempt
        name = str(status.get("filename") or status.get("tmpfilename") or "")
        done_part = _opt_int(status.get("downloaded_bytes")) or 0
        self._ever += max(0, done_part - self._parts.get(name, 0))
        self._parts[name] = done_part
        done = sum(self._parts.values())
        total_part = _opt_int(status.get("total_bytes"))
        limit = self.config.limit_bytes
        if done > limit or (total_part is not None and done - done_part + total_part > limit):
            self._over_cap = True
            raise DownloadCancelled("over the upload limit")
        if self._loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closing
                self._loop.call_soon_threadsafe(self._sample, self._ever)
        now = time.monotonic()
        finished = status.get("status") == "finished"
        if finished or now - self._reported >= REPORT_EVERY:
            self._reported = now
            estimate = self._expected or total_part or _opt_int(status.get("total_bytes_estimate"))
            self._report(Snapshot("download", done, estimate))

    def _close_sync(self) -> None:
        ydl, self._ydl = self._ydl, None
        if ydl is not None:
            with contextlib.suppress(Exception):
                ydl.close()
