"""Post sources: one protocol, and one table deciding which source serves a link."""

from __future__ import annotations

from pathlib import Path

import attrs
import httpx
import pytest

from xbot.config import Settings
from xbot.errors import UnsupportedLink
from xbot.links import Link, classify
from xbot.media.models import Post
from xbot.sources import PostSource, SourceRouter, XApiSource, YtdlpSource
from xbot.sources.x import XApi
from xbot.sources.ytdlp import VideoInfo, post_of_info


@attrs.define
class Named:
    """A source that answers every link with a post naming itself."""

    name: str
    asked: list[Link] = attrs.field(factory=list)

    async def fetch(self, link: Link) -> Post:
        self.asked.append(link)
        return Post(key=link.key, url=link.url, author_name=self.name, author_handle="", text="")


def link(url: str) -> Link:
    found = classify(url, allow_private=True)
    assert found is not None
    return found


async def test_the_router_hands_each_link_to_the_source_of_its_kind() -> None:
    x, other = Named("x"), Named("other")
    router = SourceRouter({"x": x, "other": other})
    post = await router.fetch(link("https://x.com/a/status/1"))
    assert post.author_name == "x"
    assert [k.key for k in x.asked] == ["x:1"]
    assert other.asked == []


async def test_a_kind_without_a_source_is_an_unsupported_link() -> None:
    router = SourceRouter({"x": Named("x")})
    unserved = link("https://example.com/video")
    assert not router.serves(unserved)
    assert router.source_for(unserved) is None
    with pytest.raises(UnsupportedLink):
        await router.fetch(unserved)


async def test_every_source_implements_the_protocol() -> None:
    async with httpx.AsyncClient() as client:
        x = XApiSource(XApi(client, "http://127.0.0.1:9"))
        assert isinstance(x, PostSource)
        assert isinstance(SourceRouter({"x": x}), PostSource)
        assert isinstance(Named("fake"), PostSource)


async def test_the_x_source_refuses_a_link_without_a_post_id() -> None:
    async with httpx.AsyncClient() as client:
        x = XApiSource(XApi(client, "http://127.0.0.1:9"))
        with pytest.raises(UnsupportedLink):
            await x.fetch(Link("https://x.com/a", "x:?", "x"))


def test_a_yt_dlp_extraction_is_a_post_with_its_one_video() -> None:
    info = VideoInfo(key="yt:youtube:abc", url="https://youtu.be/abc", title="T", uploader="U",
                     duration=3.0, width=640, height=360, size=1000, adult=True)  # fmt: skip
    post = post_of_info(info)
    assert (post.key, post.url, post.author_name, post.text) == (info.key, info.url, "U", "T")
    assert post.sensitive
    assert post.source == "ytdlp"
    (item,) = post.media
    assert (item.kind, item.width, item.height, item.duration) == ("video", 640, 360, 3.0)


def test_the_yt_dlp_source_implements_the_protocol(tmp_path: Path) -> None:
    assert isinstance(YtdlpSource(Settings(data_dir=tmp_path)), PostSource)
