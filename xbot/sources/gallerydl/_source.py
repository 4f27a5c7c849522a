"""Image posts from the sites gallery-dl knows, as a `PostSource`; gallery-dl runs as a process.

gallery-dl is GPL-2.0 and xbot is MIT: it is **never imported** into xbot's
process (a test walks the imports). Each link is one separate process,
``python -m gallery_dl -j URL``, whose JSON dump (`_dump`)
says what the post's files are; the bot then downloads them itself, through
the SSRF guard, like every other download (`xbot.tasks.delivery`).

Whether gallery-dl knows a link is gallery-dl's own answer, given without a
request: it matches the URL against its extractors' patterns (and the extra
instances of the operator's config) first, and says "Unsupported URL" with
exit status 64 when none matches. `UnsupportedLink` then lets yt-dlp try it
(`xbot.sources.other_route`).

The process, and what bounds it (`run_gallerydl`):

- its own process group, killed whole (SIGKILL) when the time limit passes,
  when the task is cancelled (the bot stops, the lease is lost) or when its
  output passes `MAX_OUTPUT` bytes;
- memory limits (``RLIMIT_DATA`` and ``RLIMIT_AS``, Linux: set with ``prlimit`` on the
  child right after it starts, since ``preexec_fn`` is unsafe in a threaded
  program), and its own private temp folder (the project's temp prefix) as
  its HOME, TMPDIR, cache file and working directory; ``--config-ignore``
  keeps it from reading any config but the operator's ``XBOT_GALLERYDL_CONFIG``;
- every connection it makes is checked on the address it is made to: the
  process is started through `xbot.media.connguard` (an audit hook installed
  before gallery-dl's main runs), which ends it at the first refused address;
  that is `BlockedAddress` here. The link's host is checked first as well
  (an early, clear refusal). Every file URL it reports is fetched by the bot,
  guarded like every other download.

Which sites: with ``XBOT_YTDLP_SITES=known`` (the default) only extractors
of known sites. `ANY_HOST_CATEGORIES` take any host: ``directlink`` (any URL
ending in an image extension, handed back as a file without a request) is
refused after the run, ``generic`` (it reads the page) is switched off in
the command (``extractor.generic.enabled``, whatever the operator's config).

Cookies in the operator's config (``extractor.<site>.cookies``: a dict or a
cookies.txt file) go with a file's request only when the file's host is the
post's site or under it (`cookie_header`), never to a CDN of someone else.
A dict names no domain: one under the global ``extractor.cookies`` belongs
to no site, and one for an any-host category to no host, so neither is ever
sent; gallery-dl itself would set the global dict on every site's session
(and on every host of an extractor without a cookie domain), so the command
clears it (`config_cookies`, `gallerydl_command`).
"""

from __future__ import annotations

import asyncio
import contextlib
import http.cookiejar
import json
import logging
import os
import resource
import signal
import sys
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import httpx

from xbot.config import Settings
from xbot.errors import BlockedAddress, FetchError, UnsupportedLink
from xbot.i18n import N_
from xbot.links import Link
from xbot.logs import kv
from xbot.media import connguard, netguard
from xbot.media.models import Post
from xbot.media.speed_floor import SLOW_SITE
from xbot.media.tempfiles import temp_folder
from xbot.sources.gallerydl._dump import JUNK, NOT_KNOWN, WHOLE_GALLERY, parse_dump

__all__ = [
    "ANY_HOST_CATEGORIES",
    "DATA_LIMIT",
    "RUNS_AT_ONCE",
    "GalleryDlSource",
    "GalleryOutputTooLarge",
    "GalleryTimeout",
    "RunResult",
    "cookie_header",
    "gallerydl_command",
    "has_global_cookie_dict",
    "run_gallerydl",
]

log = logging.getLogger(__name__)

TIME_LIMIT = 60.0  # one post's extraction; a site that takes longer is given up on
MAX_OUTPUT = 8 * 1024 * 1024  # a post's dump is kilobytes; a gallery of thousands is not a post
# Inside the unit's MemoryMax=512M, with the bot (~150 MB) and RUNS_AT_ONCE runs:
# RLIMIT_DATA bounds what a run can grow (heap and private maps: what a hostile page
# makes it allocate), RLIMIT_AS stops a run that maps more some other way. A run of
# Python, requests and an extractor needs about half of each (docs/benchmarks.md).
MEMORY_LIMIT = 256 * 1024 * 1024  # address space
DATA_LIMIT = 64 * 1024 * 1024  # heap and private maps
# Runs at once, whatever the number of tasks in flight: a task that outlives its first
# seconds hands its worker back (xbot.tasks.worker), so up to 4 x XBOT_WORKERS tasks may
# run, and each run may grow to DATA_LIMIT. The others wait their turn, within their budget.
RUNS_AT_ONCE = 2
UNSUPPORTED_STATUS = 64  # gallery-dl: no extractor matched the URL (decided without a request)
# Extractors that take a URL of any host: not known sites.
ANY_HOST_CATEGORIES = frozenset({"directlink", "generic"})

TOO_SLOW = SLOW_SITE
CRASHED = N_("I could not read that post: the image downloader failed on it.")
TOO_BIG = WHOLE_GALLERY  # a dump past the cap is no single post either


@attrs.frozen
class RunResult:
    """How one gallery-dl process ended.

    Attributes:
        status: its exit status (negative: killed by that signal).
        stdout: everything it printed (at most `MAX_OUTPUT` bytes).
        stderr: the last few kilobytes of its log, for our log line.
        cpu: the child's user + system CPU seconds.
        wall: seconds from start to exit.
    """

    status: int
    stdout: bytes
    stderr: str
    cpu: float
    wall: float


class GalleryTimeout(FetchError):
    """The process did not finish within its time limit (it was killed)."""


class GalleryOutputTooLarge(FetchError):
    """The process printed more than the output cap (it was killed)."""


def gallerydl_command(
    url: str,
    folder: Path,
    *,
    config: Path | None = None,
    python: str = sys.executable,
    max_files: int = 100,
    allow_private: bool = False,
    known_only: bool = True,
    clear_global_cookies: bool = False,
) -> list[str]:
    """The argument list of one run. Pure (the tests read it).

    `known_only`: no generic extractor (``XBOT_YTDLP_SITES=known``);
    `clear_global_cookies`: the operator's global ``extractor.cookies`` is a dict.
    """
    command = [
        *connguard.child_command(python, "gallery_dl", allow_private),
        "--dump-json",
        "--config-ignore",  # no ~/.config/gallery-dl: only what the operator passes
        "--no-colors",
        "--cache-file", str(folder / "cache.sqlite3"),
        "--range", f"1-{max_files}",
        "--post-range", "1-2",  # a second post is enough to tell a gallery from a post
        "-o", "output.private=true",  # keep _http_headers: what a file needs sent
        "-o", "extractor.retries=1",  # the queue retries with backoff; gallery-dl need not
        "-o", "extractor.timeout=20",
        "-o", "extractor.sleep-request=0",
    ]  # fmt: skip
    if config is not None:
        command += ["--config", str(config)]
    # -o is applied after --config: these win over the operator's file.
    if known_only:
        command += ["-o", "extractor.generic.enabled=false"]
    if clear_global_cookies:
        command += ["-o", "extractor.cookies=null"]
    command += ["--", url]
    return command


def _limit_memory(pid: int, limit: int, data: int = DATA_LIMIT) -> None:
    """RLIMIT_AS and RLIMIT_DATA on the child, from outside (Linux); elsewhere it runs
    without them."""
    prlimit = getattr(resource, "prlimit", None)
    if prlimit is None:
        return
    for which, value in ((resource.RLIMIT_AS, limit), (resource.RLIMIT_DATA, min(data, limit))):
        with contextlib.suppress(OSError, ValueError):  # it exited already, or a limit is lower
            prlimit(pid, which, (value, value))


def _kill_group(process: asyncio.subprocess.Process) -> None:
    """SIGKILL to the whole process group: gallery-dl and anything it started (ffmpeg)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            process.kill()  # no group of its own (it left it): the process at least


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


async def run_gallerydl(
    command: Sequence[str],
    folder: Path,
    *,
    time_limit: float = TIME_LIMIT,
    max_output: int = MAX_OUTPUT,
    memory_limit: int = MEMORY_LIMIT,
) -> RunResult:
    """Run one gallery-dl process in `folder` and collect what it printed.

    Raises:
        GalleryTimeout: not done within `time_limit` seconds (killed with its group).
        GalleryOutputTooLarge: more than `max_output` bytes on stdout (killed).
        FetchError: it could not be started at all.
    """
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(folder),
        "TMPDIR": str(folder),
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONIOENCODING": "utf-8",
    }
    started = time.monotonic()
    cpu_before = _child_cpu()
    try:
        process = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=folder,
            env=env,
            start_new_session=True,  # its own process group, killed whole
        )
    except OSError as exc:
        raise FetchError(CRASHED) from exc
    _limit_memory(process.pid, memory_limit)
    out = bytearray()
    err = bytearray()

    too_big = False

    async def read_out() -> None:
        nonlocal too_big
        assert process.stdout is not None
        while chunk := await process.stdout.read(65536):
            out.extend(chunk)
            if len(out) > max_output:
                too_big = True
                _kill_group(process)  # its pipes close: both readers reach EOF
                return

    async def read_err() -> None:
        assert process.stderr is not None
        while chunk := await process.stderr.read(65536):
            err.extend(chunk)
            del err[:-8192]  # the tail is what explains an exit

    try:
        async with asyncio.timeout(time_limit):
            await asyncio.gather(read_out(), read_err())
            status = await process.wait()
    except TimeoutError as exc:
        raise GalleryTimeout(TOO_SLOW) from exc
    finally:
        # Also when cancelled (the bot stops, the lease is lost): the whole group
        # goes, gallery-dl and anything it started, and the child is reaped. Not
        # after it exited and was reaped: its group id may belong to another by then.
        if process.returncode is None:
            _kill_group(process)
            with contextlib.suppress(BaseException):
                await asyncio.shield(process.wait())
        # A killed run's stdout pipe may still be open (a grandchild holds it, or the
        # reader stopped at the cap): asyncio's Process has no public close, and an
        # open transport is a ResourceWarning whenever it is collected.
        transport = getattr(process, "_transport", None)
        if transport is not None:
            transport.close()
    if too_big:
        raise GalleryOutputTooLarge(TOO_BIG)
    return RunResult(
        status=status,
        stdout=bytes(out),
        stderr=err.decode("utf-8", "replace"),
        cpu=max(0.0, _child_cpu() - cpu_before),
        wall=time.monotonic() - started,
    )


# --- cookies ----------------------------------------------------------------------------


def _host_under(host: str, base: str) -> bool:
    return host == base or host.endswith("." + base)


def _site_base(link_url: str) -> str:
    host = (urllib.parse.urlsplit(link_url).hostname or "").lower()
    return host.removeprefix("www.")


def cookie_header(
    file_url: str, link_url: str, cookies: Sequence[tuple[str, str, str]]
) -> str | None:
    """The Cookie header for one file: only cookies of its host, only on the post's site.

    `cookies` are (domain, name, value); a domain "" stands for the post's site
    (a dict in the config names no domain). Pure: a table of cases in the tests.
    """
    host = (urllib.parse.urlsplit(file_url).hostname or "").lower()
    base = _site_base(link_url)
    if not host or not base or not _host_under(host, base):
        return None
    pairs = []
    for raw_domain, name, value in cookies:
        domain = raw_domain.lower().lstrip(".")
        if _host_under(host, domain or base):
            pairs.append(f"{name}={value}")
    return "; ".join(pairs) or None


def has_global_cookie_dict(config: Mapping[str, Any]) -> bool:
    """Whether the config's global ``extractor.cookies`` is a dict (cookies of no domain)."""
    extractor = config.get("extractor")
    return isinstance(extractor, Mapping) and isinstance(extractor.get("cookies"), Mapping)


def config_cookies(config: Mapping[str, Any], category: str) -> list[tuple[str, str, str]]:
    """The cookies the operator's config gives a site: a dict, or a cookies.txt path.

    A dict's cookies name no domain ("" stands for the post's site): only a known
    site's own dict counts; the global one and an any-host category's belong to
    no site and are left out.
    """
    extractor = config.get("extractor")
    if not isinstance(extractor, Mapping):
        return []
    site = extractor.get(category)
    source = site.get("cookies") if isinstance(site, Mapping) else None
    own = source is not None
    if source is None:
        source = extractor.get("cookies")
    if isinstance(source, Mapping):
        if not own or category in ANY_HOST_CATEGORIES:
            return []
        return [("", str(k), str(v)) for k, v in source.items() if isinstance(v, str | int)]
    if isinstance(source, str):
        jar = http.cookiejar.MozillaCookieJar()
        try:
            jar.load(os.path.expanduser(source), ignore_discard=True, ignore_expires=True)
        except (OSError, http.cookiejar.LoadError):
            return []
        # An expiry of 0 is a session cookie (gallery-dl and browsers write it so).
        now = time.time()
        return [(c.domain, c.name, c.value or "") for c in jar if not c.expires or c.expires > now]
    return []  # a browser to read cookies from: gallery-dl's business, not ours


def read_config(path: Path | None) -> Mapping[str, Any]:
    """The operator's gallery-dl config as JSON, or {} (doctor says when it does not parse)."""
    if path is None:
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, Mapping) else {}


def category_of(dump: bytes) -> str:
    """The extractor's category (``mastodon``, an instance's name, ``danbooru``) in a dump."""
    with contextlib.suppress(ValueError, TypeError, IndexError):
        for message in json.loads(dump):
            meta = message[-1]
            if isinstance(meta, Mapping) and isinstance(meta.get("category"), str):
                return str(meta["category"])
    return ""


def with_cookies(post: Post, link_url: str, cookies: Sequence[tuple[str, str, str]]) -> Post:
    if not cookies:
        return post
    media = []
    for item in post.media:
        header = cookie_header(item.url, link_url, cookies)
        extra = () if header is None else (("Cookie", header),)
        media.append(attrs.evolve(item, headers=(*item.headers, *extra)))
    return attrs.evolve(post, media=tuple(media))


# --- the source -------------------------------------------------------------------------


@attrs.define
class GalleryDlSource:
    """gallery-dl as a `PostSource` for links of kind ``gallery``.

    Attributes:
        time_limit, max_output, memory_limit: the bounds of each run (tests shorten them).
        python: the interpreter that runs ``-m gallery_dl`` (the bot's own).
        resolver: name resolution for the SSRF pre-check (tests inject one).
        runs: processes started so far (the tests count them; /stats may show them).
        waiting: fetches waiting for one of the `RUNS_AT_ONCE` slots now.
    """

    settings: Settings
    time_limit: float = TIME_LIMIT
    max_output: int = MAX_OUTPUT
    memory_limit: int = MEMORY_LIMIT
    python: str = sys.executable
    resolver: netguard.Resolver = netguard.system_resolver
    name: str = "gallerydl"
    runs: int = 0
    waiting: int = 0
    _slots: asyncio.Semaphore = attrs.field(
        factory=lambda: asyncio.Semaphore(RUNS_AT_ONCE), init=False
    )

    async def precheck(self, url: str) -> None:
        """The link's host, resolved and checked before gallery-dl opens anything."""
        allow = self.settings.allow_private_networks
        netguard.check_url(url, allow)
        parsed = httpx.URL(url)
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        await netguard.resolve_and_check(parsed.host, port, allow, resolver=self.resolver)

    async def fetch(self, link: Link) -> Post:
        """Run gallery-dl on the link; its dump as a `Post` (nothing downloaded here).

        Raises:
            UnsupportedLink: gallery-dl knows no such link, or found no file to send
                (`NoMedia`); yt-dlp may know it.
            PostUnavailable, TransientFetch, FetchError: as `parse_dump`, and for a
                run that hung, crashed or printed too much (one sentence each).
        """
        await self.precheck(link.url)
        config = self.settings.gallerydl_config
        operator = read_config(config)
        known_only = self.settings.ytdlp_sites == "known"
        with temp_folder(self.settings.data_dir) as folder:
            command = gallerydl_command(
                link.url, folder, config=config, python=self.python,
                allow_private=self.settings.allow_private_networks, known_only=known_only,
                clear_global_cookies=has_global_cookie_dict(operator),
            )  # fmt: skip
            self.waiting += 1
            try:
                await self._slots.acquire()
            finally:
                self.waiting -= 1
            try:
                self.runs += 1
                result = await run_gallerydl(
                    command, folder, time_limit=self.time_limit, max_output=self.max_output,
                    memory_limit=self.memory_limit,
                )  # fmt: skip
            finally:
                self._slots.release()
        log.info(
            "gallery-dl ran %s",
            kv(url=link.url, status=result.status, bytes=len(result.stdout),
               cpu=f"{result.cpu:.2f}", wall=f"{result.wall:.2f}"),
        )  # fmt: skip
        if result.status == connguard.REFUSED_STATUS and connguard.REFUSED_MARKER in result.stderr:
            log.info("gallery-dl refused %s", kv(url=link.url, stderr=result.stderr[-300:]))
            raise BlockedAddress(netguard.BLOCKED_REASON)
        if result.status == UNSUPPORTED_STATUS and not result.stdout.strip():
            raise UnsupportedLink(NOT_KNOWN)
        if result.status != 0:
            log.warning("gallery-dl failed %s", kv(url=link.url, stderr=result.stderr[-500:]))
            raise FetchError(CRASHED)
        if not result.stdout.strip():
            raise FetchError(JUNK)
        category = category_of(result.stdout)
        if known_only and category in ANY_HOST_CATEGORIES:
            # A bare file (directlink answers without a request): not a known site.
            raise UnsupportedLink(NOT_KNOWN)
        post = parse_dump(result.stdout, link_key=link.key, link_url=link.url)
        return with_cookies(post, link.url, config_cookies(operator, category))
