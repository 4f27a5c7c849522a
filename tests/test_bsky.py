"""Bluesky: the AppView's JSON into a Post (pure), and the source over a MockTransport."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from xbot.errors import FetchError, PostUnavailable, TransientFetch
from xbot.links import classify
from xbot.sending.caption import build_caption
from xbot.sources import bsky
from xbot.sources.bsky import BskySource, ParsedPost, parse_thread, pds_endpoint

DATA = Path(__file__).parent / "data" / "bsky"
DID = "did:plc:z72i7hdynmk6r22z27h6tvur"
PDS = "https://puffball.us-east.host.bsky.network"
QUOTED_DID = "did:plc:ewvi7nxzyoun6zhxrhs64oiz"


def load(name: str) -> Any:
    return json.loads((DATA / name).read_text())


def parsed(name: str, rkey: str = "3lbdpylqvrk2c") -> ParsedPost:
    return parse_thread(load(name), rkey=rkey)


def test_images_in_order_with_sizes_and_caption_parts() -> None:
    post = parsed("thread_images.json").to_post({})
    assert post.key == f"bsky:{DID}/3lbdpylqvrk2c"
    assert post.url == "https://bsky.app/profile/bsky.app/post/3lbdpylqvrk2c"
    assert (post.author_name, post.author_handle, post.source) == ("Bluesky", "bsky.app", "bsky")
    assert [m.kind for m in post.media] == ["photo", "photo"]
    assert all("feed_fullsize" in m.url for m in post.media)
    assert [(m.width, m.height) for m in post.media] == [(2000, 1500), (1500, 2000)]
    assert [m.alt_text for m in post.media] == ["A sunrise over the bay", ""]
    assert not any(m.upload_only for m in post.media)  # Telegram fetches cdn.bsky.app itself


def test_a_shortened_link_facet_becomes_the_full_link() -> None:
    text = parsed("thread_images.json").text
    assert (
        text == "Two photos from this morning 🌅 more at https://example.com/photos/2024/november"
    )


def test_video_is_the_blob_on_the_authors_pds_never_the_playlist() -> None:
    result = parsed("thread_video.json", "3l4omssdl632g")
    assert result.video_dids == {DID}
    (item,) = result.to_post({DID: PDS}).media
    assert item.kind == "video"
    assert item.url.startswith(f"{PDS}/xrpc/com.atproto.sync.getBlob?did=did%3Aplc%3A")
    assert "cid=bafkreifjh7nhuuvvdfsb6qvhcecpxpr3nqxqaqgkvzkqxh6hnp2zdufvqu" in item.url
    assert "m3u8" not in item.url
    assert item.thumbnail_url is not None
    assert item.thumbnail_url.endswith("/thumbnail.jpg")
    assert (item.size, item.width, item.height, item.upload_only) == (5384762, 1920, 1080, True)
    assert [v.container for v in item.variants] == ["mp4"]


def test_quote_with_media_sends_its_own_then_the_quoted_when_all_fit_one_album() -> None:
    post = parsed("thread_record_with_media.json", "3lbquotemedia").to_post({})
    assert [DID in m.url for m in post.media] == [True, False]  # own first, then the quoted
    assert (post.text, post.own_media) == ("Mine is better", 1)
    quote = post.quote
    assert quote is not None
    assert quote.key == f"bsky:{QUOTED_DID}/3laaaaaaaaa22"
    assert quote.url == "https://bsky.app/profile/jay.bsky.team/post/3laaaaaaaaa22"
    assert (quote.author_name, quote.author_handle, quote.text) == (
        "Jay 🦋",
        "jay.bsky.team",
        "what a view",
    )
    caption = build_caption(post)
    assert caption.startswith("<b>Bluesky</b> (@bsky.app)\n\nMine is better\n\n↪ quoting ")
    assert "<b>Jay 🦋</b> (@jay.bsky.team):\nwhat a view" in caption
    assert caption.count('href="https://bsky.app/profile/') == 2  # both posts linked


def test_quote_media_that_would_add_an_album_stays_out() -> None:
    data = load("thread_record_with_media.json")
    media = data["thread"]["post"]["embed"]["media"]
    media["images"] = media["images"] * 10
    post = parse_thread(data, rkey="x").to_post({})
    assert len(post.media) == 10
    assert all(DID in m.url for m in post.media)
    assert post.own_media is None  # all of them are its own
    assert post.quote is not None  # still named and linked in the caption


def test_plain_quote_sends_the_quoted_posts_media() -> None:
    post = parsed("thread_quote.json", "3lbquoteonly1").to_post({})
    assert [m.url.rsplit("/", 1)[1] for m in post.media] == ["bafkreiquotedimage@jpeg"]
    assert (post.text, post.own_media) == ("this!", 0)
    assert post.quote is not None
    assert post.quote.author_handle == "jay.bsky.team"


def test_a_quoted_video_not_sent_needs_no_pds() -> None:
    """Own media that fill an album leave the quote's video out: no PDS is looked up."""
    data = load("thread_record_with_media.json")
    embed = data["thread"]["post"]["embed"]
    embed["media"]["images"] = embed["media"]["images"] * 10
    video = load("thread_video.json")["thread"]["post"]
    quoted = embed["record"]["record"]
    quoted["embeds"] = [video["embed"]]
    quoted["value"]["embed"] = video["record"]["embed"]
    result = parse_thread(data, rkey="x")
    assert result.video_dids == frozenset()
    post = result.to_post({})
    assert post.quote is not None
    assert post.quote.media == ()


@pytest.mark.parametrize(
    "record",
    [
        {
            "$type": "app.bsky.embed.record#viewNotFound",
            "uri": "at://did:plc:a/app.bsky.feed.post/1",
        },
        {
            "$type": "app.bsky.embed.record#viewBlocked",
            "uri": "at://did:plc:a/app.bsky.feed.post/1",
        },
    ],
    ids=["not-found", "blocked"],
)
def test_a_quote_that_is_gone_is_no_quote(record: dict[str, str]) -> None:
    data = load("thread_quote.json")
    data["thread"]["post"]["embed"]["record"] = record
    post = parse_thread(data, rkey="x").to_post({})
    assert (post.media, post.text, post.quote) == ((), "this!", None)


def test_an_external_card_thumbnail_is_not_media() -> None:
    post = parsed("thread_external.json", "3lbexternal12").to_post({})
    assert post.media == ()
    assert post.text == "We wrote about it: https://bsky.social/about/blog/11-20-2024"


def test_sensitive_labels_mark_the_post() -> None:
    assert parsed("thread_sensitive.json").sensitive
    assert not parsed("thread_images.json").sensitive


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("thread_not_found_post.json", bsky.DELETED),
        ("thread_blocked.json", bsky.BLOCKED),
        ("thread_no_unauthenticated.json", bsky.SIGNED_IN_ONLY),
    ],
    ids=["not-found-post", "blocked", "signed-in-only"],
)
def test_answers_that_are_a_sentence(name: str, reason: str) -> None:
    with pytest.raises(PostUnavailable) as info:
        parsed(name)
    assert info.value.reason == reason


@pytest.mark.parametrize(
    "data",
    [None, [], {"thread": None}, {"thread": {"post": {"author": {"did": "nope"}}}}, "x"],
    ids=["null", "list", "null-thread", "bad-did", "string"],
)
def test_junk_is_a_fetch_error(data: object) -> None:
    with pytest.raises(FetchError) as info:
        parse_thread(data, rkey="3l4omssdl632g")
    assert type(info.value) is FetchError


def test_facets_with_bad_ranges_leave_the_text_alone() -> None:
    data = load("thread_images.json")
    record = data["thread"]["post"]["record"]
    record["facets"] = [
        {"index": {"byteStart": 5, "byteEnd": 9999}, "features": [
            {"$type": "app.bsky.richtext.facet#link", "uri": "https://a.example"}]},
        {"index": {"byteStart": 31, "byteEnd": 33}, "features": [  # inside the emoji
            {"$type": "app.bsky.richtext.facet#link", "uri": "https://b.example"}]},
        {"index": {"byteStart": 0, "byteEnd": 3}, "features": [
            {"$type": "app.bsky.richtext.facet#link", "uri": "javascript:alert(1)"}]},
    ]  # fmt: skip
    assert parse_thread(data, rkey="x").text == record["text"]


def test_anchor_words_keep_their_link_after_them() -> None:
    data = load("thread_external.json")
    record = data["thread"]["post"]["record"]
    record["text"] = "read this now"
    record["facets"] = [{"index": {"byteStart": 5, "byteEnd": 9}, "features": [
        {"$type": "app.bsky.richtext.facet#link", "uri": "https://example.com/x"}]}]  # fmt: skip
    assert parse_thread(data, rkey="x").text == "read this (https://example.com/x) now"


def test_did_document_names_the_pds() -> None:
    assert pds_endpoint(load("did_plc.json")) == PDS
    assert (
        pds_endpoint({"service": [{"id": "#atproto_pds", "serviceEndpoint": "file:///x"}]}) is None
    )
    assert pds_endpoint(None) is None


# -- the source, over httpx.MockTransport ------------------------------------------------


class Api:
    """Routes like the AppView and plc.directory, answering from the fixtures."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.thread: tuple[int, Any] = (200, load("thread_video.json"))
        self.fail = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.calls.append(request.url.path)
        if self.fail:
            self.fail -= 1
            return httpx.Response(502, text="bad gateway")
        if request.url.path.endswith("resolveHandle"):
            if request.url.params["handle"] == "bsky.app":
                return httpx.Response(200, json=load("resolve_handle.json"))
            return httpx.Response(400, json=load("resolve_handle_error.json"))
        if request.url.path.endswith("getPostThread"):
            assert request.url.params["uri"] == f"at://{DID}/app.bsky.feed.post/3l4omssdl632g"
            status, body = self.thread
            return httpx.Response(status, json=body)
        if request.url.path == f"/plc/{DID}":
            return httpx.Response(200, json=load("did_plc.json"))
        return httpx.Response(404)


def source(api: Api, now: list[float]) -> BskySource:
    client = httpx.AsyncClient(transport=httpx.MockTransport(api))
    return BskySource(client, client, "https://appview.test", "https://appview.test/plc",
                      clock=lambda: now[0])  # fmt: skip


LINK = "https://bsky.app/profile/bsky.app/post/3l4omssdl632g"


async def test_handle_resolved_once_an_hour_and_the_pds_found_for_the_video() -> None:
    api, now = Api(), [0.0]
    src = source(api, now)
    link = classify(LINK)
    assert link is not None
    resolved = await src.resolve(link)
    assert resolved.key == f"bsky:{DID}/3l4omssdl632g"
    post = await src.fetch(link)
    assert post.media[0].url.startswith(PDS)
    assert api.calls.count("/xrpc/com.atproto.identity.resolveHandle") == 1
    assert api.calls.count(f"/plc/{DID}") == 1
    now[0] = 3601.0
    await src.resolve(link)
    assert api.calls.count("/xrpc/com.atproto.identity.resolveHandle") == 2


async def test_a_did_link_needs_no_resolution() -> None:
    api = Api()
    link = classify(f"https://bsky.app/profile/{DID}/post/3l4omssdl632g")
    assert link is not None
    assert await source(api, [0.0]).resolve(link) == link
    assert api.calls == []


@pytest.mark.parametrize(
    ("thread", "reason"),
    [
        ((400, load("error_not_found.json")), bsky.DELETED),
        ((400, {"error": "InvalidRequest", "message": "Error: uri must be a valid at-uri"}),
         bsky.UNAVAILABLE),
        ((200, load("thread_blocked.json")), bsky.BLOCKED),
    ],
    ids=["not-found", "other-400", "blocked"],
)  # fmt: skip
async def test_source_answers(thread: tuple[int, Any], reason: str) -> None:
    api = Api()
    api.thread = thread
    link = classify(LINK)
    assert link is not None
    with pytest.raises(PostUnavailable) as info:
        await source(api, [0.0]).fetch(link)
    assert info.value.reason == reason


async def test_unknown_handle_is_a_sentence() -> None:
    link = classify("https://bsky.app/profile/nobody.example/post/3l4omssdl632g")
    assert link is not None
    with pytest.raises(PostUnavailable) as info:
        await source(Api(), [0.0]).resolve(link)
    assert info.value.reason == bsky.NO_ACCOUNT


async def test_a_down_appview_is_transient() -> None:
    api = Api()
    api.fail = 1
    link = classify(LINK)
    assert link is not None
    with pytest.raises(TransientFetch):
        await source(api, [0.0]).fetch(link)


async def test_a_did_web_document_is_fetched_through_the_guarded_client() -> None:
    # A did:web names its own host: user-controlled, so it goes through the SSRF guard.
    did = "did:web:alice.example.com"
    trusted_calls: list[str] = []
    guarded_calls: list[str] = []

    def trusted(request: httpx.Request) -> httpx.Response:
        trusted_calls.append(str(request.url))
        data = load("thread_video.json")
        data["thread"]["post"]["author"]["did"] = did
        return httpx.Response(200, json=data)

    def guarded(request: httpx.Request) -> httpx.Response:
        guarded_calls.append(str(request.url))
        return httpx.Response(200, json=load("did_plc.json"))

    src = BskySource(httpx.AsyncClient(transport=httpx.MockTransport(trusted)),
                     httpx.AsyncClient(transport=httpx.MockTransport(guarded)),
                     "https://appview.test", "https://plc.test")  # fmt: skip
    link = classify(f"https://bsky.app/profile/{did}/post/3l4omssdl632g")
    assert link is not None
    post = await src.fetch(link)
    assert guarded_calls == ["https://alice.example.com/.well-known/did.json"]
    assert all("plc.test" not in url for url in trusted_calls)
    assert post.media[0].url.startswith(PDS)


def test_no_display_name_leaves_the_handle_alone() -> None:
    data = load("thread_images.json")
    data["thread"]["post"]["author"].pop("displayName")
    post = parse_thread(data, rkey="x").to_post({})
    assert (post.author_name, post.author_handle) == ("", "bsky.app")
    assert build_caption(post).startswith("<b>@bsky.app</b>")


def test_a_quoted_author_who_wants_signed_in_viewers_is_left_out() -> None:
    data = load("thread_quote.json")
    data["thread"]["post"]["embed"]["record"]["author"]["labels"] = [
        {"val": "!no-unauthenticated", "src": "did:plc:ewvi7nxzyoun6zhxrhs64oiz"}
    ]
    post = parse_thread(data, rkey="x").to_post({})
    assert (post.media, post.text, post.quote) == ((), "this!", None)
