"""pixiv: the ajax JSON into a Post (pure), and the source over a MockTransport."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from xbot.errors import FetchError, PostUnavailable, TransientFetch
from xbot.links import classify
from xbot.sources import pixiv
from xbot.sources.jsonget import JsonAnswer
from xbot.sources.pixiv import PixivSource, hashtag, parse_pages, parse_work, to_post

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
        ("illust_ugoira.json", 200, pixiv.UGOIRA),
        ("illust_r18.json", 200, pixiv.R18),
        ("illust_my_pixiv.json", 200, pixiv.MY_PIXIV),
        ("illust_not_found.json", 404, pixiv.DELETED),
        ("illust_not_found.json", 400, pixiv.DELETED),
        ("illust_single.json", 403, pixiv.LOGIN),
    ],
    ids=["ugoira", "r18", "my-pixiv", "not-found", "error-400", "forbidden"],
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
