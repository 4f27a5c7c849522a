"""The operator's cookies for yt-dlp (``XBOT_YTDLP_COOKIES``): read and checked at start,
and sent only to their own domain, through the real yt-dlp against two hosts on loopback;
and YouTube's "confirm you're not a bot" refusal, end to end through the bot."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from standins.harness import Harness
from xbot.config import load_settings
from xbot.errors import ConfigError
from xbot.i18n import translator
from xbot.sources.ytdlp import BOT_CHECK, YtdlpConfig, YtdlpJob, YtdlpSource, load_cookies
from xbot.sources.ytdlp import over_broad as broad

HEADER = "# Netscape HTTP Cookie File\n"
SECRET = "s3cr3t-value-never-shown"


def line(domain: str, name: str = "SID", value: str = SECRET, *, expires: int = 0) -> str:
    sub = "TRUE" if domain.startswith(".") else "FALSE"
    return f"{domain}\t{sub}\t/\tFALSE\t{expires}\t{name}\t{value}\n"


def write(tmp_path: Path, *lines: str, header: str = HEADER) -> Path:
    path = tmp_path / "cookies.txt"
    path.write_text(header + "".join(lines), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("domain", "expected"),
    [
        ("", True),
        (".", True),
        (".com", True),
        ("com", True),
        ("localhost", True),
        (".co.uk", True),
        (".com.au", True),
        (".github.io", True),
        (".youtube.com", False),
        ("www.youtube.com", False),
        (".bbc.co.uk", False),
        ("alice.github.io", False),
        (".co.com", False),  # a site, not a country's second level
        ("127.0.0.1", False),
        ("::1", False),
    ],
    ids=[
        "empty", "dot", "dot-com", "com", "bare-name", "co-uk", "com-au", "github-io",
        "youtube", "www-host", "bbc-co-uk", "a-github-site", "co-com", "ipv4", "ipv6",
    ],
)  # fmt: skip
def test_over_broad(domain: str, expected: bool) -> None:
    assert broad(domain) is expected


def test_no_file_no_cookies() -> None:
    assert load_cookies(None).jar == ()


def test_a_file_loads_with_its_session_cookies_and_names_its_domains(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        line(".youtube.com"),
        line(".youtube.com", "HSID"),
        line("www.example.org", "id", expires=4_000_000_000),
        "#HttpOnly_.google.com\tTRUE\t/\tTRUE\t0\tSAPISID\tx\n",
        line(".old.example", expires=1),  # expired: never sent, so not loaded
    )
    cookies = load_cookies(path)
    assert len(cookies.jar) == 4
    assert cookies.domains == ("google.com", "www.example.org", "youtube.com")


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (HEADER + line(".com"), "has a cookie for .com, which is not one site"),
        (HEADER + line(""), "has a cookie for (empty)"),
        (HEADER + line(".youtube.com") + line(".co.uk"), "has a cookie for .co.uk"),
        ("SID=abc\n", "is not a Netscape cookies file"),
        (HEADER + f"only\tthree\t{SECRET}\n", "is not a Netscape cookies file"),
    ],
    ids=["public-suffix", "empty-domain", "one-of-several", "no-header", "malformed-line"],
)
def test_a_bad_file_is_one_line_naming_it_never_a_value(
    tmp_path: Path, content: str, words: str
) -> None:
    path = tmp_path / "cookies.txt"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_cookies(path)
    message = str(caught.value)
    assert message.startswith(f"XBOT_YTDLP_COOKIES: {path}")
    assert words in message
    assert "\n" not in message
    assert SECRET not in message


def test_the_bot_refuses_to_start_with_an_over_broad_file(tmp_path: Path) -> None:
    path = write(tmp_path, line(".com"))
    settings = load_settings({"XBOT_DATA_DIR": str(tmp_path), "XBOT_YTDLP_COOKIES": str(path)})
    assert settings.ytdlp_cookies == path
    with pytest.raises(ConfigError, match="not one site"):
        YtdlpSource(settings)


# --- scoped by domain, through the real yt-dlp ----------------------------------------------


class _Host:
    """A tiny HTTP host on one loopback address that records each request's Cookie header."""

    def __init__(self, address: str, routes: dict[str, tuple[str, bytes]]) -> None:
        self.cookies: list[tuple[str, str]] = []
        host = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                host.cookies.append((self.path, self.headers.get("Cookie", "")))
                content_type, body = routes.get(self.path, ("text/plain", b""))
                self.send_response(200 if self.path in routes else 404)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer((address, 0), Handler)
        self.url = f"http://{address}:{self.server.server_address[1]}"

    @contextlib.contextmanager
    def running(self) -> Iterator[_Host]:
        thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.server.shutdown()
            self.server.server_close()
            thread.join(5)


async def test_a_cookie_reaches_its_own_host_and_not_the_other(tmp_path: Path) -> None:
    """The page is on 127.0.0.1, its video on 127.0.0.2; the file names 127.0.0.1 (and a
    site that is neither). yt-dlp asks both hosts; only the named one gets the cookie."""
    video = _Host("127.0.0.2", {"/clip.mp4": ("video/mp4", b"\x00" * 2048)})
    with video.running():
        page = (
            f'<html><head><title>t</title></head><body><video src="{video.url}/clip.mp4">'
            "</video></body></html>"
        ).encode()
        site = _Host("127.0.0.1", {"/page.html": ("text/html", page)})
        with site.running():
            path = write(
                tmp_path,
                line("127.0.0.1", "SID", "for-the-page"),
                line(".example.org", "OTHER", "for-elsewhere"),
            )
            config = YtdlpConfig(
                limit_bytes=10**6, sites="all", allow_private=True, cookies=load_cookies(path)
            )
            folder = tmp_path / "job"
            folder.mkdir()
            async with YtdlpJob(f"{site.url}/page.html", folder, config) as job:
                await job.extract()
                await job.download()
    assert site.cookies, "the page was asked for"
    assert all(c == "SID=for-the-page" for _, c in site.cookies), site.cookies
    assert video.cookies, "the video was asked for"
    assert all(c == "" for _, c in video.cookies), video.cookies


# --- "confirm you're not a bot", end to end -------------------------------------------------


async def _refusing_site(reason: str) -> tuple[asyncio.Server, str]:
    """A site answering every request 403 with YouTube's words as the reason phrase."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            await reader.readuntil(b"\r\n\r\n")
            writer.write(
                f"HTTP/1.1 403 {reason}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode()
            )
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}/watch/abc"


async def test_the_bot_check_is_one_sentence_in_the_chat_and_one_warning_in_the_log(
    start_harness: Callable[..., Awaitable[Harness]], caplog: pytest.LogCaptureFixture
) -> None:
    h = await start_harness(ytdlp_sites="all")
    server, url = await _refusing_site("Sign in to confirm you're not a bot")
    chat = 7301
    try:
        with caplog.at_level(logging.INFO):
            h.api.user_message(chat, url)
            await h.api.wait_for(lambda: any("text" in m for m in h.sent(chat)), 20)
            await h.wait_idle(15)
    finally:
        server.close()
        await server.wait_closed()
    texts = [m["text"] for m in h.sent(chat) if "text" in m]
    assert texts == [translator("en").gettext(BOT_CHECK)]
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.getMessage().split(";")[0] for r in warnings] == [
        "yt-dlp: the site asks for a sign-in to prove this is not a bot"
    ]
    assert url in warnings[0].getMessage()
