"""gallery-dl as a process: its dump parsed (tables of real-shaped dumps under
tests/data/gallerydl/), the routing rule, the cookie rule, and the process bounds
(a real child process: a hang, a flood, a crash, a group with a grandchild)."""

from __future__ import annotations

import ast
import asyncio
import ipaddress
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import eventually

from standins.gallery_sites import MastodonServer, gallerydl_config
from xbot.config import Settings
from xbot.errors import (
    BlockedAddress,
    FetchError,
    PostUnavailable,
    TransientFetch,
    UnsupportedLink,
)
from xbot.links import classify
from xbot.media import connguard, netguard
from xbot.media.models import Post
from xbot.sources import gallerydl as dump
from xbot.sources.gallerydl import (
    DATA_LIMIT,
    RUNS_AT_ONCE,
    GalleryDlSource,
    GalleryOutputTooLarge,
    GalleryTimeout,
    config_cookies,
    cookie_header,
    gallerydl_command,
    has_global_cookie_dict,
    run_gallerydl,
)
from xbot.sources.other_route import engines

DATA = Path(__file__).parent / "data" / "gallerydl"
MASTO = "https://mastodon.social/@alice/113467211109934826"
BOORU = "https://danbooru.donmai.us/posts/8123456"


def parse(name: str, url: str = MASTO) -> object:
    raw = (DATA / name).read_bytes()
    return dump.parse_dump(raw, link_key=f"url:{url}", link_url=url)


# -- the dump -------------------------------------------------------------------------


def test_three_photos_in_order_with_author_text_and_referer() -> None:
    post = parse("mastodon_three_photos.json")
    assert isinstance(post, Post)
    assert post.key == f"gdl:{MASTO}"
    assert post.url == MASTO
    assert (post.author_name, post.author_handle) == ("Alice 🌸", "alice")
    assert post.text == "Three pictures from the #park\nand a second line & more"
    assert [m.kind for m in post.media] == ["photo", "photo", "photo"]
    assert [m.url.rsplit("/", 1)[1] for m in post.media] == [
        "113467211109934826000.jpg", "113467211109934826001.jpg", "113467211109934826002.jpg",
    ]  # fmt: skip
    assert [m.alt_text for m in post.media] == ["picture 1", "picture 2", "picture 3"]
    assert (post.media[1].width, post.media[1].height) == (41, 30)
    assert all(m.upload_only for m in post.media), "the bot downloads every file itself"
    assert dict(post.media[0].headers) == {"Referer": "https://mastodon.social/"}
    assert not post.sensitive
    assert post.source == "gallerydl"


def test_sensitive_status_with_a_gifv_is_a_photo_and_a_gif() -> None:
    post = parse("mastodon_sensitive_gifv.json")
    assert isinstance(post, Post)
    assert [m.kind for m in post.media] == ["photo", "gif"]
    assert post.sensitive


def test_booru_post_names_its_artist_and_its_rating() -> None:
    post = parse("danbooru_post.json", BOORU)
    assert isinstance(post, Post)
    assert post.author_name == "mitsuki art"
    assert [m.kind for m in post.media] == ["photo"]
    assert post.media[0].size == 239
    assert post.sensitive, "rating q(uestionable)"


@pytest.mark.parametrize(
    ("name", "error", "reason"),
    [
        ("mastodon_not_found.json", PostUnavailable, dump.GONE),
        ("danbooru_not_found.json", PostUnavailable, dump.GONE),
        ("mastodon_login_only.json", PostUnavailable, dump.LOGIN),
        ("mastodon_junk_page.json", FetchError, dump.JUNK),
    ],
    ids=["mastodon-404", "danbooru-404", "mastodon-401-token", "junk-page"],
)
def test_error_dumps_become_one_sentence(name: str, error: type[Exception], reason: str) -> None:
    with pytest.raises(error) as caught:
        parse(name)
    assert type(caught.value) is error
    assert caught.value.args[0] == reason


def _u(url: str, **meta: object) -> list[object]:
    return [3, url, meta]


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        (b"", FetchError),
        (b"<html>not json</html>", FetchError),
        (b'{"a": 1}', FetchError),
        (b"[1, 2, 3]", FetchError),
        (b'[["x"]]', FetchError),
        (b"[" * 100_000, FetchError),
        (json.dumps([[2, {"id": 1}]]).encode(), dump.NoMedia),
        (json.dumps([[6, "https://example.com/other", {}]]).encode(), dump.NoMedia),
        (json.dumps([_u("ytdl:https://v.redd.it/x", extension="mp4")]).encode(), dump.NoMedia),
        (json.dumps([_u("file:///etc/passwd", extension="jpg")]).encode(), dump.NoMedia),
        (json.dumps([_u("https://e.com/a.mp3", extension="mp3")]).encode(), dump.NoMedia),
        (json.dumps([[-1, {"error": "HttpError", "message": "'503 Service Unavailable' for "
                                                            "'https://e.com'"}]]).encode(),
         TransientFetch),
        (json.dumps([[-1, {"error": "HttpError", "message": "'403 Forbidden' for 'x'"}]]).encode(),
         PostUnavailable),
        (json.dumps([[-1, {"error": "AuthRequired", "message": "cookies needed"}]]).encode(),
         PostUnavailable),
        (json.dumps([[-1, {"error": "KeyError", "message": "'media'"}]]).encode(), FetchError),
    ],
    ids=["empty", "html", "object", "numbers", "unknown-type", "deep", "no-files",
         "queue-only", "ytdl-only", "file-scheme", "audio", "http-503", "http-403",
         "auth-required", "extractor-bug"],
)  # fmt: skip
def test_junk_and_odd_dumps(raw: bytes, error: type[Exception]) -> None:
    with pytest.raises(error) as caught:
        dump.parse_dump(raw, link_key="url:https://e.com/p/1", link_url="https://e.com/p/1")
    if error is FetchError:
        assert type(caught.value) is FetchError


def test_a_second_post_makes_the_link_a_gallery() -> None:
    raw = json.dumps([[2, {"id": 1}], _u("https://e.com/1.jpg", extension="jpg"),
                      [2, {"id": 2}], _u("https://e.com/2.jpg", extension="jpg")])  # fmt: skip
    with pytest.raises(FetchError) as caught:
        dump.parse_dump(raw, link_key="url:https://e.com/u", link_url="https://e.com/u")
    assert caught.value.args[0] == dump.WHOLE_GALLERY


def test_files_before_an_error_are_the_post_and_the_count_is_capped() -> None:
    files = [_u(f"https://e.com/{n}.png", extension="png") for n in range(150)]
    raw = json.dumps([[2, {"author": {"name": "bob", "nick": "Bob"}}], *files,
                      [-1, {"error": "HttpError", "message": "'500 x' for 'y'"}]])  # fmt: skip
    post = dump.parse_dump(raw, link_key="url:https://e.com/p", link_url="https://e.com/p")
    assert len(post.media) == dump.MAX_FILES
    assert post.media[0].url == "https://e.com/0.png"
    assert (post.author_name, post.author_handle) == ("Bob", "bob")


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({}, {"Referer": "https://e.com/"}),
        ({"Referer": "https://www.pixiv.net/"}, {"Referer": "https://www.pixiv.net/"}),
        ({"Origin": "https://e.com", "X-Bad": "a\r\nHost: evil"},
         {"Origin": "https://e.com", "Referer": "https://e.com/"}),
        ({"Cookie": "sid=1", "Host": "evil"}, {"Referer": "https://e.com/"}),
        ({"bad name": "x", "N": 5}, {"Referer": "https://e.com/"}),
    ],
    ids=["referer-added", "referer-kept", "no-header-injection", "no-cookie-or-host",
         "odd-names-and-values"],
)  # fmt: skip
def test_headers_a_file_needs(headers: dict[str, object], expected: dict[str, str]) -> None:
    assert dict(dump.headers_of({"_http_headers": headers}, "https://e.com/p/1")) == expected


@pytest.mark.parametrize(
    ("meta", "author"),
    [
        ({"account": {"display_name": "", "acct": "a@b.social"}}, ("a@b.social", "a@b.social")),
        ({"user": {"username": "kim", "display_name": "Kim"}}, ("Kim", "kim")),
        ({"author": "Plain Name"}, ("Plain Name", "")),
        ({"tag_string_artist": "one_two three"}, ("one two, three", "")),
        ({"username": "u1"}, ("u1", "u1")),
        ({"user": 5}, ("", "")),
    ],
    ids=["mastodon-remote", "user-dict", "author-str", "booru-artists", "username", "junk"],
)
def test_author_of(meta: dict[str, object], author: tuple[str, str]) -> None:
    assert dump.author_of(meta) == author


# -- routing ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "order"),
    [
        (MASTO, ("gallerydl", "ytdlp")),
        ("https://www.reddit.com/r/pics/comments/abc/x/", ("gallerydl", "ytdlp")),
        ("https://www.youtube.com/watch?v=abc", ("ytdlp", "gallerydl")),
        ("https://youtu.be/abc", ("ytdlp", "gallerydl")),
        ("https://m.twitch.tv/videos/1", ("ytdlp", "gallerydl")),
        ("https://notyoutube.com/watch", ("gallerydl", "ytdlp")),
        ("https://cdn.example.com/clip.MP4", ("ytdlp",)),
        ("https://example.com/pic.jpg?x=1", ("ytdlp",)),
        ("https://example.com/v1.2/post", ("gallerydl", "ytdlp")),
    ],
    ids=["mastodon", "reddit", "youtube", "youtu.be", "twitch-sub", "lookalike",
         "direct-mp4", "direct-jpg", "dot-in-dir"],
)  # fmt: skip
def test_route(url: str, order: tuple[str, ...]) -> None:
    assert engines(url) == order


# -- cookies ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("file_url", "cookies", "header"),
    [
        ("https://www.instagram.com/p.jpg", [("", "sid", "1")], "sid=1"),
        ("https://i.instagram.com/p.jpg", [("", "sid", "1")], "sid=1"),
        ("https://scontent.cdninstagram.com/p.jpg", [("", "sid", "1")], None),
        ("https://evil.com/p.jpg", [(".evil.com", "sid", "1")], None),
        ("https://i.instagram.com/p.jpg", [(".instagram.com", "a", "1"), ("x.com", "b", "2")],
         "a=1"),
        ("https://instagram.com.evil.net/p.jpg", [("", "sid", "1")], None),
    ],
    ids=["same-host", "subdomain", "cdn-elsewhere", "foreign-cookie-domain", "by-domain",
         "suffix-trick"],
)  # fmt: skip
def test_cookies_for_that_host_only(
    file_url: str, cookies: list[tuple[str, str, str]], header: str | None
) -> None:
    assert cookie_header(file_url, "https://www.instagram.com/p/abc/", cookies) == header


def test_config_cookies_from_a_dict_and_a_cookies_txt(tmp_path: Path) -> None:
    jar = tmp_path / "cookies.txt"
    jar.write_text("# Netscape HTTP Cookie File\n"
                   ".instagram.com\tTRUE\t/\tTRUE\t0\tsessionid\tabc\n")  # fmt: skip
    config = {"extractor": {"instagram": {"cookies": str(jar)},
                            "reddit": {"cookies": {"token": "t"}}}}  # fmt: skip
    assert config_cookies(config, "instagram") == [(".instagram.com", "sessionid", "abc")]
    assert config_cookies(config, "reddit") == [("", "token", "t")]
    assert config_cookies(config, "other") == []
    assert config_cookies({"extractor": "junk"}, "reddit") == []


@pytest.mark.parametrize(
    ("config", "category", "cookies"),
    [
        ({"cookies": {"sid": "1"}}, "directlink", []),
        ({"cookies": {"sid": "1"}}, "reddit", []),
        ({"cookies": {"sid": "1"}, "reddit": {"cookies": {"t": "2"}}}, "reddit", [("", "t", "2")]),
        ({"directlink": {"cookies": {"sid": "1"}}}, "directlink", []),
        ({"generic": {"cookies": {"sid": "1"}}}, "generic", []),
    ],
    ids=["global-dict-to-a-bare-file", "global-dict-to-a-site", "the-sites-own-dict",
         "an-any-host-categorys-dict", "generic-dict"],
)  # fmt: skip
def test_a_dict_of_no_site_is_never_sent(
    config: dict[str, Any], category: str, cookies: list[tuple[str, str, str]]
) -> None:
    """A dict names no domain: only a known site's own dict stands for that site."""
    assert config_cookies({"extractor": config}, category) == cookies


def test_a_global_cookies_txt_keeps_its_domains(tmp_path: Path) -> None:
    jar = tmp_path / "cookies.txt"
    jar.write_text("# Netscape HTTP Cookie File\n"
                   ".instagram.com\tTRUE\t/\tTRUE\t0\tsessionid\tabc\n")  # fmt: skip
    config = {"extractor": {"cookies": str(jar)}}
    assert config_cookies(config, "directlink") == [(".instagram.com", "sessionid", "abc")]
    assert not has_global_cookie_dict(config)
    assert has_global_cookie_dict({"extractor": {"cookies": {"sid": "1"}}})


# -- the process -----------------------------------------------------------------------


def test_command_keeps_gallerydl_to_its_folder_and_the_operators_config(tmp_path: Path) -> None:
    command = gallerydl_command("https://e.com/p/1", tmp_path, config=tmp_path / "c.json")
    # Through the connect-time guard, which then runs gallery-dl's main.
    assert command[1:5] == ["-P", "-m", "xbot.media.connguard", "gallery_dl"]
    assert "--allow-private" not in command
    assert "--config-ignore" in command
    # After --config: the operator's file cannot switch the generic extractor on.
    assert command.index("extractor.generic.enabled=false") > command.index("--config")
    assert "extractor.cookies=null" not in command
    assert command[command.index("--cache-file") + 1] == str(tmp_path / "cache.sqlite3")
    assert command[command.index("--config") + 1] == str(tmp_path / "c.json")
    assert command[-2:] == ["--", "https://e.com/p/1"], "a URL is never read as an option"


@pytest.mark.parametrize(
    ("options", "present", "absent"),
    [
        ({"allow_private": True}, ["--allow-private"], []),
        ({"known_only": False}, [], ["extractor.generic.enabled=false"]),
        ({"clear_global_cookies": True}, ["extractor.cookies=null"], []),
    ],
    ids=["allow-private", "all-sites", "global-cookie-dict"],
)
def test_command_options(
    tmp_path: Path, options: dict[str, bool], present: list[str], absent: list[str]
) -> None:
    command = gallerydl_command("https://e.com/p/1", tmp_path, **options)
    assert all(p in command for p in present)
    assert not any(a in command for a in absent)
    assert command[-2:] == ["--", "https://e.com/p/1"]


async def test_the_child_refuses_a_loopback_connection_and_says_so(tmp_path: Path) -> None:
    """Real gallery-dl against a Mastodon stand-in on 127.0.0.1, guard on: the first
    connect ends the process with the guard's status; the site never saw a request."""
    async with MastodonServer() as masto:
        masto.add_status("1", photos=1)
        config = tmp_path / "gallery-dl.json"
        config.write_text(json.dumps(gallerydl_config(masto)))
        command = gallerydl_command(masto.status_url("1"), tmp_path, config=config)
        result = await run_gallerydl(command, tmp_path)
        assert result.status == connguard.REFUSED_STATUS, result.stderr
        assert connguard.REFUSED_MARKER in result.stderr
        assert masto.hits.total() == 0
        allowed = gallerydl_command(
            masto.status_url("1"), tmp_path, config=config, allow_private=True
        )
        assert (await run_gallerydl(allowed, tmp_path)).status == 0
        assert masto.hits.total() > 0, "the same run with private networks allowed"


def py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


async def test_a_hang_is_killed_at_the_time_limit_with_its_children(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    code = (
        "import subprocess, sys, time\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
        "time.sleep(60)\n"
    )
    started = time.monotonic()
    with pytest.raises(GalleryTimeout):
        await run_gallerydl(py(code), tmp_path, time_limit=1.5)
    assert time.monotonic() - started < 10
    grandchild = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(grandchild, 0)
        except ProcessLookupError:
            break
        # A zombie until init reaps it: gone from the process table soon after.
        with open(f"/proc/{grandchild}/stat") as stat:
            if stat.read().split()[2] == "Z":
                break
        time.sleep(0.05)
    else:
        pytest.fail("the grandchild outlived the group kill")


async def test_a_flood_of_output_is_cut_at_the_cap(tmp_path: Path) -> None:
    code = "import sys\nwhile True: sys.stdout.write('x' * 65536)\n"
    with pytest.raises(GalleryOutputTooLarge):
        await run_gallerydl(py(code), tmp_path, max_output=1024 * 1024, time_limit=20)


async def test_a_crash_and_its_log_tail_are_reported(tmp_path: Path) -> None:
    code = "import sys\nsys.stderr.write('Traceback: boom\\n')\nsys.exit(1)\n"
    result = await run_gallerydl(py(code), tmp_path)
    assert result.status == 1
    assert "boom" in result.stderr
    assert result.stdout == b""


async def test_the_memory_bound_holds(tmp_path: Path) -> None:
    code = "b = bytearray(600 * 1024 * 1024)\nprint('allocated')\n"
    result = await run_gallerydl(py(code), tmp_path, memory_limit=256 * 1024 * 1024)
    assert result.status != 0
    assert b"allocated" not in result.stdout


async def test_it_runs_in_its_folder_with_a_clean_environment(tmp_path: Path) -> None:
    code = "import os, json\nprint(json.dumps([os.getcwd(), os.environ.get('HOME'), "
    code += "os.environ.get('XBOT_TOKEN')]))"
    os.environ["XBOT_TOKEN"] = "123:secret"
    try:
        result = await run_gallerydl(py(code), tmp_path)
    finally:
        del os.environ["XBOT_TOKEN"]
    cwd, home, token = json.loads(result.stdout)
    assert Path(cwd) == tmp_path
    assert Path(home) == tmp_path
    assert token is None, "the bot's token never reaches gallery-dl"


def test_gallery_dl_is_never_imported_into_xbot() -> None:
    package = Path(__file__).parent.parent / "xbot"
    for path in package.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            assert not any(n.split(".")[0] == "gallery_dl" for n in names), path


def test_the_sentences_are_distinct_msgids() -> None:
    reasons = [dump.GONE, dump.LOGIN, dump.JUNK, dump.NOT_KNOWN, dump.NO_MEDIA]
    assert len(set(reasons)) == len(reasons)
    assert issubclass(dump.NoMedia, UnsupportedLink)


async def test_a_cancelled_run_kills_its_process_group(tmp_path: Path) -> None:
    """The bot stops or the task's lease is lost: the task is cancelled, the process goes."""
    pidfile = tmp_path / "child.pid"
    code = f"import os, time\nopen({str(pidfile)!r}, 'w').write(str(os.getpid()))\ntime.sleep(60)\n"
    run = asyncio.create_task(run_gallerydl(py(code), tmp_path, time_limit=60))
    deadline = time.monotonic() + 10
    while not (pidfile.exists() and pidfile.read_text()):
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    pid = int(pidfile.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # reaped by run_gallerydl: not even a zombie is left


async def test_a_refused_connection_is_one_sentence_from_the_source(tmp_path: Path) -> None:
    """The link's host passes the pre-check (its resolver answers a public address), then
    gallery-dl's own lookup gives loopback: the child is stopped at connect, and the source
    answers `BlockedAddress` with the guard's sentence."""
    name = socket.gethostname()
    try:
        found = {info[4][0] for info in socket.getaddrinfo(name, 80, type=socket.SOCK_STREAM)}
    except OSError:
        found = set()
    if not found or not all(ipaddress.ip_address(a).is_loopback for a in found):
        pytest.skip(f"this machine's name {name!r} does not resolve to loopback")

    async def public(host: str, port: int) -> list[str]:
        return ["93.184.216.34"]

    async with MastodonServer() as masto:
        masto.add_status("1", photos=1)
        root = f"http://{name}:{masto.port}"
        config = tmp_path / "gallery-dl.json"
        config.write_text(json.dumps({"extractor": {"mastodon": {"standin": {"root": root}}}}))
        settings = Settings(data_dir=tmp_path, gallerydl_config=config)
        source = GalleryDlSource(settings, resolver=public)
        link = classify(f"{root}/@alice/1", allow_private=True)
        assert link is not None
        with pytest.raises(BlockedAddress) as caught:
            await source.fetch(link)
        assert caught.value.reason == netguard.BLOCKED_REASON
        assert masto.hits.total() == 0


async def test_the_default_bounds_stop_a_run_that_grows(tmp_path: Path) -> None:
    """Without a memory_limit of its own, a run may not grow past `DATA_LIMIT`: the sum
    of the bot and `RUNS_AT_ONCE` runs stays inside the unit's MemoryMax=512M."""
    code = f"b = bytearray({DATA_LIMIT + 16 * 1024 * 1024})\nprint('allocated')\n"
    result = await run_gallerydl(py(code), tmp_path)
    assert result.status != 0
    assert b"allocated" not in result.stdout
    small = await run_gallerydl(py("b = bytearray(8 * 1024 * 1024)\nprint('ok')\n"), tmp_path)
    assert small.stdout.strip() == b"ok"


async def test_runs_at_once_are_bounded_whatever_the_tasks_in_flight(tmp_path: Path) -> None:
    """Detached tasks may be many (4 x workers); gallery-dl processes at once are
    `RUNS_AT_ONCE`, so their memory bound sums inside the unit's. A stand-in interpreter
    marks itself running and waits for the test's word."""
    running, go = tmp_path / "running", tmp_path / "go"
    running.mkdir()
    fake = tmp_path / "fake-python"
    fake.write_text(
        "#!/bin/sh\n"
        f'touch "{running}/$$"\n'
        f'i=0; while [ ! -e "{go}" ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done\n'
        f'rm "{running}/$$"\n'
        "exit 64\n"  # gallery-dl's "Unsupported URL": the source says UnsupportedLink
    )
    fake.chmod(0o755)

    async def public(host: str, port: int) -> list[str]:
        return ["93.184.216.34"]

    source = GalleryDlSource(Settings(data_dir=tmp_path), python=str(fake), resolver=public)
    link = classify(MASTO)
    assert link is not None
    fetches = [asyncio.create_task(source.fetch(link)) for _ in range(RUNS_AT_ONCE + 2)]
    await eventually(
        lambda: len(list(running.iterdir())) == RUNS_AT_ONCE and source.waiting == 2, 10
    )
    assert len(list(running.iterdir())) == RUNS_AT_ONCE
    go.touch()
    results = await asyncio.gather(*fetches, return_exceptions=True)
    assert all(isinstance(r, UnsupportedLink) for r in results), results
    assert source.runs == RUNS_AT_ONCE + 2
