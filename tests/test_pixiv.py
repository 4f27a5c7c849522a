"""pixiv: the ajax JSON into a Post (pure), and the source over a MockTransport."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from xbot.errors import FetchError, PostUnavailable, TransientFetch
from xbot.links import classify
from xbot.media import ugoira
from xbot.media.models import R18, R18G, Frame
from xbot.sending.caption import caption_parts, post_from_parts
from xbot.sources import pixiv
from xbot.sources.jsonget import JsonAnswer
from xbot.sources.pixiv import (
    PixivSource,
    SessionStatus,
    hashtag,
    parse_pages,
    parse_status,
    parse_ugoira,
    parse_work,
    to_post,
)

DATA = Path(__file__).parent / "data" / "pixiv"


def load(name: str) -> Any:
    return json.loads((DATA / name).read_text())


def answer(name: str, status: int = 200) -> JsonAnswer:
    return JsonAnswer(status, load(name))


def test_single_page_work_caption_parts_and_the_referer_rule() -> None:
    work = parse_work(answer("illust_single.json"), work_id="124000001")
    assert work.first is not None
    post = to_post(work, (work.first,))
    assert (post.key, post.url) == ("pixiv:124000001", "https://www.pixiv.net/artworks/124000001")
    assert (post.author_name, post.author_handle, post.source) == ("みつき", "mitsuki_art", "pixiv")
    assert (post.title, post.text) == ("夏の空", "#オリジナル #女の子 #blue_sky")
    (item,) = post.media
    assert item.url.endswith("/img-original/img/2024/11/20/18/00/05/124000001_p0.png")
    assert item.fallback_url is not None
    assert item.fallback_url.endswith("124000001_p0_master1200.jpg")
    assert item.headers == (("Referer", "https://www.pixiv.net/"),)
    assert item.upload_only
    assert (item.width, item.height) == (2480, 3508)


def test_pages_in_page_order() -> None:
    work = parse_work(answer("illust_multi.json"), work_id="124000002")
    assert work.page_count == 3
    pages = parse_pages(answer("pages_multi.json"))
    assert [p.url.rsplit("_", 1)[1] for p in pages] == ["p0.png", "p1.png", "p2.png"]


@pytest.mark.parametrize(
    ("name", "status", "reason"),
    [
        ("illust_r18.json", 200, pixiv.R18),
        ("illust_my_pixiv.json", 200, pixiv.MY_PIXIV),
        ("illust_not_found.json", 404, pixiv.DELETED),
        ("illust_not_found.json", 400, pixiv.DELETED),
        ("illust_single.json", 403, pixiv.LOGIN),
    ],
    ids=["r18", "my-pixiv", "not-found", "error-400", "forbidden"],
)
def test_answers_that_are_a_sentence(name: str, status: int, reason: str) -> None:
    with pytest.raises(PostUnavailable) as info:
        parse_work(answer(name, status), work_id="1")
    assert info.value.reason == reason


def test_r18g_and_null_urls() -> None:
    data = load("illust_r18.json")
    data["body"]["xRestrict"] = 2
    with pytest.raises(PostUnavailable, match="R-18G"):
        parse_work(JsonAnswer(200, data), work_id="1")
    data = load("illust_single.json")
    data["body"]["urls"] = dict.fromkeys(data["body"]["urls"])
    with pytest.raises(PostUnavailable) as info:
        parse_work(JsonAnswer(200, data), work_id="1")
    assert info.value.reason == pixiv.LOGIN


@pytest.mark.parametrize(
    "body", [None, [], {"error": False}, {"error": False, "body": []}, "html"],
    ids=["not-json", "list", "no-body", "empty-body", "string"],
)  # fmt: skip
def test_junk_is_a_fetch_error(body: object) -> None:
    with pytest.raises(FetchError) as info:
        parse_work(JsonAnswer(200, body), work_id="1")
    assert type(info.value) is FetchError


@pytest.mark.parametrize(
    ("tag", "shown"),
    [("オリジナル", "#オリジナル"), ("blue sky", "#blue_sky"), ("a  b\tc", "#a_b_c")],
    ids=["japanese", "space", "runs"],
)
def test_hashtag(tag: str, shown: str) -> None:
    assert hashtag(tag) == shown


# -- the source, over httpx.MockTransport ------------------------------------------------


class Api:
    def __init__(self) -> None:
        self.calls: list[str] = []
        self.fail = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.calls.append(request.url.path)
        assert request.headers["Referer"] == "https://www.pixiv.net/"
        if self.fail:
            self.fail -= 1
            return httpx.Response(503, text="<html>busy</html>")
        routes = {
            "/ajax/illust/124000001": "illust_single.json",
            "/ajax/illust/124000002": "illust_multi.json",
            "/ajax/illust/124000002/pages": "pages_multi.json",
        }
        name = routes.get(request.url.path)
        if name is None:
            return httpx.Response(404, json=load("illust_not_found.json"))
        return httpx.Response(200, json=load(name))


def source(api: Api) -> PixivSource:
    return PixivSource(httpx.AsyncClient(transport=httpx.MockTransport(api)), "https://px.test")


async def test_a_single_page_work_is_one_request() -> None:
    api = Api()
    link = classify("https://www.pixiv.net/en/artworks/124000001")
    assert link is not None
    post = await source(api).fetch(link)
    assert len(post.media) == 1
    assert api.calls == ["/ajax/illust/124000001"]


async def test_a_work_of_several_pages_asks_for_the_pages() -> None:
    api = Api()
    link = classify("https://phixiv.net/artworks/124000002")
    assert link is not None
    post = await source(api).fetch(link)
    assert len(post.media) == 3
    assert api.calls == ["/ajax/illust/124000002", "/ajax/illust/124000002/pages"]


async def test_missing_work_and_a_down_pixiv() -> None:
    api = Api()
    link = classify("https://www.pixiv.net/artworks/999")
    assert link is not None
    with pytest.raises(PostUnavailable):
        await source(api).fetch(link)
    api.fail = 1
    with pytest.raises(TransientFetch):
        await source(api).fetch(link)


# -- signed in: R-18 works, ugoira, the session's status ---------------------------------


@pytest.mark.parametrize(
    ("x_restrict", "rating"), [(1, R18), (2, R18G), (7, R18G), ("1", R18G)],
    ids=["r18", "r18g", "unknown-is-strictest", "string-is-strictest"],
)  # fmt: skip
def test_a_signed_in_answer_carries_the_rating(x_restrict: object, rating: int) -> None:
    data = load("illust_r18_signed_in.json")
    data["body"]["xRestrict"] = x_restrict
    work = parse_work(JsonAnswer(200, data), work_id="124000004")
    assert work.first is not None
    post = to_post(work, (work.first,))
    assert post.rating == rating
    assert post.media[0].url.endswith("/img-original/img/2024/11/21/00/00/12/124000004_p0.jpg")


def test_the_rating_survives_the_link_cache_record() -> None:
    work = parse_work(answer("illust_r18_signed_in.json"), work_id="124000004")
    assert work.first is not None
    post = to_post(work, (work.first,))
    assert post_from_parts(post.key, post.url, caption_parts(post)).rating == R18
    parts = caption_parts(post) | {"rating": "junk"}
    assert post_from_parts(post.key, post.url, parts).rating == R18G, "junk is the strictest"


def test_ugoira_meta_is_one_animation_of_its_frames() -> None:
    work = parse_work(answer("illust_ugoira.json"), work_id="124000003")
    assert work.animation
    item = parse_ugoira(answer("ugoira_meta.json"), work)
    assert item.kind == "gif"
    assert item.url.endswith("124000003_ugoira1920x1080.zip")
    assert item.fallback_url is not None
    assert item.fallback_url.endswith("_ugoira600x600.zip")
    assert item.headers == (("Referer", "https://www.pixiv.net/"),)
    assert item.upload_only
    assert [f.delay_ms for f in item.frames] == [60, 60, 120, 60, 250, 60, 60, 1000]
    assert item.frames[0] == Frame("000000.jpg", 60)
    assert item.duration == pytest.approx(1.67)


@pytest.mark.parametrize(
    "frames",
    [
        [],
        [{"file": "000000.jpg", "delay": 0}],
        [{"file": "000000.jpg", "delay": -5}],
        [{"file": "000000.jpg", "delay": 3_600_000}],
        [{"file": "000000.jpg", "delay": "60"}],
        [{"file": "000000.jpg"}],
        [{"file": f"{n:06d}.jpg", "delay": 60} for n in range(ugoira.MAX_FRAMES + 1)],
        [{"file": f"{n:06d}.jpg", "delay": 60_000} for n in range(11)],
        [{"file": "", "delay": 60}],
        [{"file": "a\nfile evil.jpg", "delay": 60}],
    ],
    ids=["none", "zero-delay", "negative", "an-hour", "string-delay", "no-delay",
         "too-many", "too-long-in-all", "no-name", "newline-in-name"],
)  # fmt: skip
def test_an_impossible_frame_list_is_one_sentence(frames: list[Any]) -> None:
    work = parse_work(answer("illust_ugoira.json"), work_id="124000003")
    data = load("ugoira_meta.json")
    data["body"]["frames"] = frames
    with pytest.raises(PostUnavailable) as info:
        parse_ugoira(JsonAnswer(200, data), work)
    assert info.value.reason == ugoira.BAD_FRAMES


@pytest.mark.parametrize(
    ("name", "status", "edit", "expected"),
    [
        ("self_status_signed_in.json", 200, {}, SessionStatus(True, 1)),
        ("self_status_signed_in.json", 200, {"user_x_restrict": "2"}, SessionStatus(True, 2)),
        ("self_status_signed_in.json", 200, {"user_x_restrict": "0"}, SessionStatus(True, 0)),
        ("self_status_signed_in.json", 200, {"user_x_restrict": 2}, SessionStatus(True, 2)),
        ("self_status_signed_out.json", 200, {}, SessionStatus(False, 0)),
        ("self_status_signed_out.json", 401, {}, SessionStatus(False, 0)),
    ],
    ids=["r18", "r18g", "all-ages", "a-number", "signed-out", "unauthorized"],
)
def test_the_session_status(
    name: str, status: int, edit: dict[str, Any], expected: SessionStatus
) -> None:
    data = load(name)
    data["body"]["user_status"].update(edit)
    assert parse_status(JsonAnswer(status, data)) == expected


def test_a_status_answer_that_is_junk() -> None:
    with pytest.raises(FetchError):
        parse_status(JsonAnswer(200, {"error": False, "body": []}))


SESSION = "31415926_SeCrEtVaLuE0123456789abcdef"


class SignedInApi:
    """pixiv's ajax for one R-18 work and one ugoira, counting each request's cookie."""

    def __init__(self) -> None:
        self.cookies: list[str | None] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        cookie = request.headers.get("Cookie")
        self.cookies.append(cookie)
        signed_in = cookie == f"PHPSESSID={SESSION}"
        routes = {
            "/ajax/illust/124000004": "illust_r18_signed_in.json"
            if signed_in
            else "illust_r18.json",
            "/ajax/illust/124000003": "illust_ugoira.json",
            "/ajax/illust/124000003/ugoira_meta": "ugoira_meta.json",
        }
        name = routes.get(request.url.path)
        if name is None:
            return httpx.Response(404, json=load("illust_not_found.json"))
        return httpx.Response(200, json=load(name))


def signed_in_source(api: SignedInApi, session: str = SESSION, **options: Any) -> PixivSource:
    client = httpx.AsyncClient(transport=httpx.MockTransport(api))
    return PixivSource(client, "https://px.test", session=session, **options)


async def test_the_session_goes_on_every_ajax_request_and_opens_r18() -> None:
    api = SignedInApi()
    link = classify("https://www.pixiv.net/artworks/124000004")
    assert link is not None
    post = await signed_in_source(api).fetch(link)
    assert post.rating == R18
    assert api.cookies == [f"PHPSESSID={SESSION}"]
    assert post.media[0].headers == (("Referer", "https://www.pixiv.net/"),), "no cookie there"


async def test_without_a_session_no_cookie_and_r18_is_a_sentence() -> None:
    api = SignedInApi()
    link = classify("https://www.pixiv.net/artworks/124000004")
    assert link is not None
    with pytest.raises(PostUnavailable) as info:
        await signed_in_source(api, session="").fetch(link)
    assert info.value.reason == pixiv.R18
    assert api.cookies == [None]


async def test_an_expired_session_is_one_warning_line(caplog: pytest.LogCaptureFixture) -> None:
    api = SignedInApi()
    source = signed_in_source(api, session="31415926_expired")
    link = classify("https://www.pixiv.net/artworks/124000004")
    assert link is not None
    for _ in range(3):
        with pytest.raises(PostUnavailable) as info:
            await source.fetch(link)
        assert info.value.reason == pixiv.R18
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1
    assert "XBOT_PIXIV_SESSION" in warnings[0].getMessage()
    assert "31415926_expired" not in caplog.text


@pytest.mark.parametrize(
    ("animations", "kind"), [(True, "gif"), (False, None)], ids=["ffmpeg", "no-ffmpeg"]
)
async def test_an_ugoira_is_an_animation_only_with_ffmpeg(
    animations: bool, kind: str | None
) -> None:
    api = SignedInApi()
    link = classify("https://www.pixiv.net/artworks/124000003")
    assert link is not None
    source = signed_in_source(api, animations=animations)
    if kind is None:
        with pytest.raises(PostUnavailable) as info:
            await source.fetch(link)
        assert info.value.reason == pixiv.UGOIRA
        return
    post = await source.fetch(link)
    assert [m.kind for m in post.media] == [kind]
    assert len(post.media[0].frames) == 8
