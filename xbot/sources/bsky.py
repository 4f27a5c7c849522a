"""Bluesky posts through the public AppView (no login), as the same `Post` as X's.

`parse_thread` is pure: it reads an ``app.bsky.feed.getPostThread`` answer
(lexicon ``app.bsky.feed.defs#threadViewPost``; ``#notFoundPost`` and
``#blockedPost`` are answers too) into a `ParsedPost`, and raises nothing but
`FetchError` and its subclasses. Images (``app.bsky.embed.images#view``) keep
their order. A quote (``app.bsky.embed.record#view``, or
``recordWithMedia#view`` when the post has media of its own) is the post's
`Post.quote`, and its media follow the X rule (`xbot.sources.x.with_quote_media`): the
quoted post's media when the post has none, after its own only when all of
them fit one album. The caption names both authors and links both posts. An
external link card's thumbnail is not media.

A video's view names only an HLS playlist; the file itself is the blob the
record points at, served by the author's PDS at
``{pds}/xrpc/com.atproto.sync.getBlob?did=…&cid=…`` (what yt-dlp's Bluesky
extractor does too). The PDS is found in the author's DID document
(``{XBOT_BSKY_PLC_URL}/{did}`` for ``did:plc``, ``/.well-known/did.json`` for
``did:web``). A DID document is written by the account holder, so its PDS
address is untrusted: the blob (and a ``did:web`` document) go through the
SSRF-guarded client; the AppView and the PLC directory are the operator's.

`BskySource.resolve` turns a handle into its DID before the link cache is
asked, so ``bsky:{did}/{rkey}`` is the one key of a post however it was linked.
"""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import httpx

from xbot.config import DEFAULT_BSKY_API_URL, DEFAULT_BSKY_PLC_URL
from xbot.errors import FetchError, PostUnavailable
from xbot.i18n import N_
from xbot.links import Link, bsky_post_key, bsky_post_url
from xbot.media.models import MediaItem, Post, Variant
from xbot.sources.jsonget import (
    USER_AGENT,
    count,
    get_json,
    obj,
    objs,
    source_timeout,
    text,
    web_url,
)
from xbot.sources.x import with_quote_media

MALFORMED = N_("Bluesky sent an answer I could not read.")
DELETED = N_("This Bluesky post was deleted or does not exist.")
NO_ACCOUNT = N_("This Bluesky account does not exist or was deleted.")
BLOCKED = N_("This Bluesky post is blocked from view, so I cannot show it.")
SIGNED_IN_ONLY = N_("The author shows this Bluesky post only to people who are signed in.")
UNAVAILABLE = N_("This Bluesky post is unavailable.")
NO_VIDEO_FILE = N_("I could not find the file of this Bluesky video.")

# Labels the Bluesky app puts behind a warning: sent as spoilers where the chat wants it.
_SENSITIVE = frozenset({"porn", "sexual", "nudity", "graphic-media", "gore"})
# Moderation labels that hide a post from everyone.
_HIDDEN = frozenset({"!takedown", "!hide"})
_NO_UNAUTHENTICATED = "!no-unauthenticated"
_CONTAINERS = {"video/mp4": "mp4", "video/quicktime": "mov", "video/webm": "webm"}
_DID_TTL = 3600.0
_CACHE_MAX = 10_000


@attrs.frozen
class VideoRef:
    """A video whose file (a blob on the author's PDS) is still to be located."""

    did: str
    cid: str
    size: int | None = None
    mime: str = "video/mp4"
    thumbnail: str | None = None
    width: int | None = None
    height: int | None = None


Item = MediaItem | VideoRef


@attrs.frozen
class ParsedPost:
    """A post as the AppView described it; `to_post` finishes it once videos' PDSes are known.

    Attributes:
        items: the post's own media (a quote's are the quote's `items`).
        quote: the post it quotes, when that one is readable.
    """

    did: str
    handle: str
    name: str
    rkey: str
    text: str
    items: tuple[Item, ...] = ()
    sensitive: bool = False
    quote: ParsedPost | None = None

    @property
    def shown(self) -> tuple[tuple[Item, ...], int | None]:
        """What the chat receives, and how many are the post's own (X's rule)."""
        return with_quote_media(self.items, self.quote.items if self.quote else ())

    @property
    def video_dids(self) -> frozenset[str]:
        return frozenset(i.did for i in self.shown[0] if isinstance(i, VideoRef))

    def to_post(self, pds: Mapping[str, str]) -> Post:
        """The `Post`; `pds` maps each of `video_dids` to its PDS base URL."""
        shown, own = self.shown
        quote = self.quote._post(self.quote.items, pds) if self.quote else None
        post = self._post(shown, pds)
        sensitive = self.sensitive or bool(quote and own is not None and quote.sensitive)
        return attrs.evolve(post, quote=quote, own_media=own, sensitive=sensitive)

    def _post(self, items: tuple[Item, ...], pds: Mapping[str, str]) -> Post:
        # A quoted video that is not sent needs no PDS: it is left out of the quote's media.
        media = tuple(_video_item(i, pds[i.did]) if isinstance(i, VideoRef) else i
                      for i in items if not isinstance(i, VideoRef) or i.did in pds)  # fmt: skip
        return Post(
            key=bsky_post_key(self.did, self.rkey),
            url=bsky_post_url(self.handle or self.did, self.rkey),
            author_name=self.name,
            author_handle=self.handle,
            text=self.text,
            media=media,
            sensitive=self.sensitive,
            source="bsky",
        )


def blob_url(pds: str, did: str, cid: str) -> str:
    query = urllib.parse.urlencode({"did": did, "cid": cid})
    return f"{pds.rstrip('/')}/xrpc/com.atproto.sync.getBlob?{query}"


def _video_item(ref: VideoRef, pds: str) -> MediaItem:
    url = blob_url(pds, ref.did, ref.cid)
    container = _CONTAINERS.get(ref.mime, "mp4")
    # Uploaded, not sent by URL: the thumbnail and the size go along, and a PDS
    # may name the blob's type in a way Telegram's URL fetch does not take.
    return MediaItem(
        kind="video", url=url, variants=(Variant(url=url, container=container, size=ref.size),),
        width=ref.width, height=ref.height, thumbnail_url=ref.thumbnail, size=ref.size,
        upload_only=True,
    )  # fmt: skip


# -- parsing ------------------------------------------------------------------------


def _type(value: Mapping[str, Any]) -> str:
    return text(value.get("$type"))


def _labels(value: Mapping[str, Any]) -> set[str]:
    return {text(label.get("val")) for label in objs(value.get("labels"))}


def _aspect(view: Mapping[str, Any]) -> tuple[int | None, int | None]:
    ratio = obj(view.get("aspectRatio"))
    return count(ratio.get("width")) or None, count(ratio.get("height")) or None


def _images(view: Mapping[str, Any]) -> list[Item]:
    items: list[Item] = []
    for image in objs(view.get("images")):
        url = web_url(image.get("fullsize"))
        if url:
            width, height = _aspect(image)
            items.append(MediaItem(kind="photo", url=url, width=width, height=height,
                                   alt_text=text(image.get("alt")).strip()))  # fmt: skip
    return items


def _video(view: Mapping[str, Any], record_embed: Mapping[str, Any], did: str) -> list[Item]:
    blob = obj(record_embed.get("video"))
    cid = text(view.get("cid")) or text(obj(blob.get("ref")).get("$link"))
    if not cid or not did:
        return []
    width, height = _aspect(view)
    return [
        VideoRef(did=did, cid=cid, size=count(blob.get("size")),
                 mime=text(blob.get("mimeType")).lower() or "video/mp4",
                 thumbnail=web_url(view.get("thumbnail")) or None, width=width, height=height)
    ]  # fmt: skip


def _media(view: Mapping[str, Any], record_embed: Mapping[str, Any], did: str) -> list[Item]:
    """The media of an images or video view (an external card has none)."""
    kind = _type(view)
    if kind.startswith("app.bsky.embed.images"):
        return _images(view)
    if kind.startswith("app.bsky.embed.video"):
        return _video(view, record_embed, did)
    return []


def _with_links(raw: str, facets: object) -> str:
    """The text with each link facet's full URI where the app shows a shortened one.

    Facets index UTF-8 bytes. The app writes ``example.com/long/pa...`` for
    ``https://example.com/long/path``; other anchor text keeps its words and
    gains the URI after it, so every link stays a link.
    """
    data = raw.encode("utf-8")
    spans: list[tuple[int, int, str]] = []
    for facet in objs(facets):
        index = obj(facet.get("index"))
        start, end = count(index.get("byteStart")), count(index.get("byteEnd"))
        uris = [web_url(f.get("uri")) for f in objs(facet.get("features"))
                if _type(f) == "app.bsky.richtext.facet#link"]  # fmt: skip
        uri = next((u for u in uris if u), "")
        if uri and start is not None and end is not None and start < end <= len(data):
            spans.append((start, end, uri))
    out: list[str] = []
    at = 0
    for start, end, uri in sorted(spans):
        if start < at:
            continue  # overlapping facets: keep the first
        try:
            shown = data[start:end].decode("utf-8")
            before = data[at:start].decode("utf-8")
        except UnicodeDecodeError:
            continue  # an index inside a character: leave that facet alone
        out.append(before)
        stem = shown.rstrip(".…").removeprefix("www.")
        bare = uri.split("://", 1)[-1].removeprefix("www.")
        if shown == uri or (stem and bare.startswith(stem)):
            out.append(uri)
        else:
            out.append(f"{shown} ({uri})")
        at = end
    if not spans:
        return raw
    out.append(data[at:].decode("utf-8", "replace"))
    return "".join(out)


def _author(author: Mapping[str, Any]) -> tuple[str, str, str]:
    did = text(author.get("did"))
    handle = text(author.get("handle"))
    if handle == "handle.invalid":
        handle = ""  # the AppView's word for a handle that no longer verifies
    # No display name: the caption shows "@handle" alone rather than the handle twice.
    return did, handle, text(author.get("displayName")).strip()


def _quoted(quoted: Mapping[str, Any]) -> ParsedPost | None:
    """The quoted post (``#viewRecord``) with its media; None: gone, blocked, unreadable."""
    if _type(quoted) != "app.bsky.embed.record#viewRecord" or _labels(quoted) & _HIDDEN:
        return None
    did, handle, name = _author(obj(quoted.get("author")))
    at, _, rkey = text(quoted.get("uri")).rpartition("/")
    if not did.startswith("did:") or not at.endswith("/app.bsky.feed.post") or not rkey:
        return None
    value = obj(quoted.get("value"))
    value_embed = obj(value.get("embed"))
    items: list[Item] = []
    for view in objs(quoted.get("embeds"))[:1]:
        if _type(view).startswith("app.bsky.embed.recordWithMedia"):
            items = _media(obj(view.get("media")), obj(value_embed.get("media")), did)
        else:
            items = _media(view, value_embed, did)
    return ParsedPost(did=did, handle=handle, name=name, rkey=rkey,
                      text=_with_links(text(value.get("text")), value.get("facets")),
                      items=tuple(items),
                      sensitive=bool(_labels(quoted) & _SENSITIVE))  # fmt: skip


def parse_thread(data: object, *, rkey: str) -> ParsedPost:
    """A `ParsedPost` from a decoded getPostThread answer for the post `rkey`.

    Raises:
        PostUnavailable: not found, blocked, hidden by moderation, or shown
            only to signed-in people (the author's ``!no-unauthenticated``).
        FetchError: anything that is not a thread we can read.
    """
    thread = obj(obj(data).get("thread"))
    kind = _type(thread)
    if kind.endswith("#notFoundPost") or thread.get("notFound") is True:
        raise PostUnavailable(DELETED)
    if kind.endswith("#blockedPost") or thread.get("blocked") is True:
        raise PostUnavailable(BLOCKED)
    post = obj(thread.get("post"))
    author = obj(post.get("author"))
    did, handle, name = _author(author)
    if not post or not did.startswith("did:"):
        raise FetchError(MALFORMED)
    if _NO_UNAUTHENTICATED in _labels(author):
        raise PostUnavailable(SIGNED_IN_ONLY)
    labels = _labels(post) | _labels(author)
    if labels & _HIDDEN:
        raise PostUnavailable(UNAVAILABLE)
    record = obj(post.get("record"))
    body = _with_links(text(record.get("text")), record.get("facets"))
    embed, record_embed = obj(post.get("embed")), obj(record.get("embed"))
    kind = _type(embed)
    quoted: Mapping[str, Any] = {}
    if kind.startswith("app.bsky.embed.recordWithMedia"):
        items = _media(obj(embed.get("media")), obj(record_embed.get("media")), did)
        quoted = obj(obj(embed.get("record")).get("record"))
    elif kind.startswith("app.bsky.embed.record"):
        items = []
        quoted = obj(embed.get("record"))
    else:
        items = _media(embed, record_embed, did)
    if _NO_UNAUTHENTICATED in _labels(obj(quoted.get("author"))):
        quoted = {}  # the quoted author shows their posts only to people signed in
    return ParsedPost(did=did, handle=handle, name=name, rkey=rkey, text=body,
                      items=tuple(items), sensitive=bool(labels & _SENSITIVE),
                      quote=_quoted(quoted) if quoted else None)  # fmt: skip


def pds_endpoint(document: object) -> str | None:
    """The ``#atproto_pds`` service of a DID document, or None."""
    for service in objs(obj(document).get("service")):
        if (text(service.get("id")).endswith("#atproto_pds")
                or text(service.get("type")) == "AtprotoPersonalDataServer"):  # fmt: skip
            url = web_url(service.get("serviceEndpoint"))
            if url:
                return url.rstrip("/")
    return None


def _error_name(body: object) -> str:
    return text(obj(body).get("error"))


# -- the HTTP shell -------------------------------------------------------------------


@attrs.define
class BskySource:
    """Bluesky posts from the public AppView.

    Attributes:
        base_url: the operator's ``XBOT_BSKY_API_URL`` (trusted; not SSRF-guarded).
        plc_url: the operator's ``XBOT_BSKY_PLC_URL``, where ``did:plc`` documents are.
        clock: for the handle and PDS memo (an hour each).
    """

    _client: httpx.AsyncClient
    _guarded: httpx.AsyncClient
    base_url: str = DEFAULT_BSKY_API_URL
    plc_url: str = DEFAULT_BSKY_PLC_URL
    name: str = "bsky"
    clock: Callable[[], float] = time.monotonic
    timeout: httpx.Timeout = attrs.field(factory=source_timeout)
    _dids: dict[str, tuple[float, str]] = attrs.field(factory=dict)
    _pdses: dict[str, tuple[float, str]] = attrs.field(factory=dict)

    async def resolve(self, link: Link) -> Link:
        """`link` keyed by its author's DID (``bsky:{did}/{rkey}``).

        Raises:
            PostUnavailable: no account has that handle.
            TransientFetch: the AppView is down or slow.
        """
        actor = link.handle or ""
        if actor.startswith("did:") or link.post_id is None:
            return link
        did = await self._did(actor)
        return attrs.evolve(link, key=bsky_post_key(did, link.post_id), handle=did)

    async def fetch(self, link: Link) -> Post:
        """The post behind `link` (a handle is resolved first).

        Raises:
            PostUnavailable: deleted, blocked, hidden, signed-in only, no such account.
            TransientFetch: the AppView, the PLC directory or a PDS is down or slow.
            FetchError: an answer we cannot read; a video whose file cannot be found.
        """
        link = await self.resolve(link)
        did, rkey = link.handle or "", link.post_id or ""
        answer = await get_json(
            self._client, self._xrpc("app.bsky.feed.getPostThread"), who="Bluesky",
            params={"uri": f"at://{did}/app.bsky.feed.post/{rkey}", "depth": "0",
                    "parentHeight": "0"},
            headers=self._headers(), per_request=self.timeout,
        )  # fmt: skip
        if answer.status == 400:
            raise PostUnavailable(
                DELETED if _error_name(answer.body) == "NotFound" else UNAVAILABLE
            )
        if answer.status != 200 or answer.body is None:
            raise FetchError(MALFORMED)
        parsed = parse_thread(answer.body, rkey=rkey)
        pds = {author: await self._pds(author) for author in parsed.video_dids}
        return parsed.to_post(pds)

    def _xrpc(self, method: str) -> str:
        return f"{self.base_url.rstrip('/')}/xrpc/{method}"

    @staticmethod
    def _headers() -> dict[str, str]:
        return {"User-Agent": USER_AGENT, "Accept": "application/json"}

    def _memo(self, memo: dict[str, tuple[float, str]], key: str) -> str | None:
        hit = memo.get(key)
        if hit is None or hit[0] < self.clock():
            return None
        return hit[1]

    def _remember(self, memo: dict[str, tuple[float, str]], key: str, value: str) -> None:
        if len(memo) >= _CACHE_MAX:
            memo.clear()  # cheap bound; a miss costs one request
        memo[key] = (self.clock() + _DID_TTL, value)

    async def _did(self, handle: str) -> str:
        known = self._memo(self._dids, handle)
        if known is not None:
            return known
        answer = await get_json(
            self._client, self._xrpc("com.atproto.identity.resolveHandle"), who="Bluesky",
            params={"handle": handle}, headers=self._headers(), per_request=self.timeout,
        )  # fmt: skip
        if answer.status == 400:
            raise PostUnavailable(NO_ACCOUNT)
        did = text(obj(answer.body).get("did"))
        if answer.status != 200 or not did.startswith("did:"):
            raise FetchError(MALFORMED)
        self._remember(self._dids, handle, did)
        return did

    async def _pds(self, did: str) -> str:
        known = self._memo(self._pdses, did)
        if known is not None:
            return known
        if did.startswith("did:web:"):
            host = urllib.parse.unquote(did.removeprefix("did:web:"))
            client, url = self._guarded, f"https://{host}/.well-known/did.json"
        else:
            client, url = self._client, f"{self.plc_url.rstrip('/')}/{did}"
        answer = await get_json(client, url, who=N_("the Bluesky directory"),
                                headers=self._headers(), per_request=self.timeout)  # fmt: skip
        endpoint = pds_endpoint(answer.body) if answer.status == 200 else None
        if endpoint is None:
            raise FetchError(NO_VIDEO_FILE)
        self._remember(self._pdses, did, endpoint)
        return endpoint
