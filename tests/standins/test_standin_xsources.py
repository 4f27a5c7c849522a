"""The vxtwitter and syndication stand-ins serve what the real ones would, for the same posts,
and every X source stand-in fails on command the ways real sources fail."""

from __future__ import annotations

import httpx
import pytest

from standins._outage import OUTAGES, Outages
from standins.fxapi import FxApiServer
from standins.syndication import SyndicationServer
from standins.vxapi import VxApiServer
from xbot.errors import FetchError, PostUnavailable, TransientFetch
from xbot.links import Link
from xbot.sources.x import (
    Syndication,
    VxApi,
    XApi,
    XApiSource,
    parse_status,
    parse_syndication,
    parse_vx,
    token,
)

POST = "1790001234567890123"


def _link(post_id: str = POST) -> Link:
    return Link(f"https://x.com/alice/status/{post_id}", f"x:{post_id}", "x", post_id, "alice")


def _register(*servers: object) -> None:
    for server in servers:
        server.add_post(  # type: ignore[attr-defined]
            POST,
            author=("Alice", "alice"),
            text="boats & <birds>",
            media=[
                ("photo", "https://pbs.twimg.com/media/A.jpg?name=orig"),
                ("video", "https://video.twimg.com/v/1280x720/B.mp4"),
                ("gif", "https://video.twimg.com/tweet_video/C.mp4"),
            ],
        )


def test_the_converted_shapes_parse_to_the_fxtwitter_post() -> None:
    from standins.fxapi import build_status
    from standins.syndication import syndication_from_fx
    from standins.vxapi import vx_from_fx

    photo = ("photo", "https://pbs.twimg.com/media/A.jpg?name=orig")
    status = build_status(POST, author=("Alice", "alice"), text="boats & <birds>", media=[photo])
    fx = parse_status({"code": 200, "message": "OK", "tweet": status}, post_id=POST)
    assert parse_vx(vx_from_fx(status), post_id=POST) == fx
    assert parse_syndication(syndication_from_fx(status), post_id=POST) == fx


async def test_three_stand_ins_one_post_through_the_real_clients() -> None:
    async with FxApiServer() as fx, VxApiServer() as vx, SyndicationServer() as syn:
        _register(fx, vx, syn)
        async with httpx.AsyncClient() as client:
            posts = [
                await XApiSource(XApi(client, fx.url)).fetch(_link()),
                await VxApi(client, vx.url).fetch(_link()),
                await Syndication(client, syn.url).fetch(_link()),
            ]
        assert syn.tokens == [(POST, token(POST))]
    for post in posts[1:]:
        assert (post.author_handle, post.text, post.url) == (
            posts[0].author_handle, posts[0].text, posts[0].url,
        )  # fmt: skip
        assert [m.kind for m in post.media] == ["photo", "video", "gif"]
        assert post.media[0].url == posts[0].media[0].url


async def test_what_each_says_of_a_post_it_does_not_have() -> None:
    async with VxApiServer() as vx, SyndicationServer() as syn:
        syn.add_tombstone("5")
        async with httpx.AsyncClient() as client:
            # BetterTwitFix's "failed to scan" page with 200: no answer about the post.
            with pytest.raises(TransientFetch):
                await VxApi(client, vx.url).fetch(_link("4"))
            with pytest.raises(PostUnavailable):
                await Syndication(client, syn.url).fetch(_link("4"))
            with pytest.raises(PostUnavailable):
                await Syndication(client, syn.url).fetch(_link("5"))


@pytest.mark.parametrize("server_type", [FxApiServer, VxApiServer, SyndicationServer])
@pytest.mark.parametrize("mode", sorted(OUTAGES - {"hang"}))
async def test_outage_switches(server_type: type[Outages], mode: str) -> None:
    async with server_type() as server:
        _register(server)
        server.set_outage(mode, count=1)
        async with httpx.AsyncClient() as client:
            source = {
                FxApiServer: lambda: XApiSource(XApi(client, server.url)),
                VxApiServer: lambda: VxApi(client, server.url),
                SyndicationServer: lambda: Syndication(client, server.url),
            }[server_type]()
            with pytest.raises(FetchError) as raised:
                await source.fetch(_link())
            # Transient, or (fxtwitter's client) junk whose cause says it was not JSON.
            assert isinstance(raised.value, TransientFetch) or isinstance(
                raised.value.__cause__, ValueError
            )
            assert (await source.fetch(_link())).author_handle == "alice"  # count=1: back


async def test_refuse_then_accept_on_the_same_port() -> None:
    async with VxApiServer() as vx:
        _register(vx)
        url = vx.url
        await vx.refuse()
        async with httpx.AsyncClient() as client:
            with pytest.raises(TransientFetch, match="Could not connect"):
                await VxApi(client, url).fetch(_link())
            await vx.accept()
            assert vx.url == url
            assert (await VxApi(client, url).fetch(_link())).author_handle == "alice"


async def test_a_hang_outlasts_the_clients_timeout() -> None:
    async with SyndicationServer() as syn:
        _register(syn)
        syn.set_outage("hang")
        async with httpx.AsyncClient() as client:
            source = Syndication(client, syn.url, timeout=httpx.Timeout(0.2))
            with pytest.raises(TransientFetch, match="No answer in time"):
                await source.fetch(_link())
