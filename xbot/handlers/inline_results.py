"""What `@bot <link>` answers: the pure planning of inline query results.

The handler (`xbot.handlers.inline`) finds what is known about the link — a
link-cache entry (Telegram ``file_id``s), a freshly fetched post, a failure,
or nothing in time — and this module turns that into one `InlineAnswer`:

- cached: one ``InlineQueryResultCached*`` per item, by ``file_id``;
- fresh: URL results Telegram fetches itself (photos up to its 5 MB URL
  limit, an mp4 video variant within 20 MB, GIFs as ``mpeg4_gif``);
- either with the caption a chat would get on every result (each result
  becomes its own message), and, for more than one item, a button that opens
  the private chat with ``/start a<post id>`` where the album is delivered;
- not in time: an article pointing at the private chat; not a link, or one
  the bot cannot serve: no results and a hint button; a post that failed: one
  article saying why. Never an error.

Result ids are ``<post id>-<index>``: unique per answer and far below 64 bytes.
"""

from __future__ import annotations

import re
from typing import Final

import attrs
from telegram import (
    InlineQueryResult,
    InlineQueryResultArticle,
    InlineQueryResultCachedDocument,
    InlineQueryResultCachedMpeg4Gif,
    InlineQueryResultCachedPhoto,
    InlineQueryResultCachedVideo,
    InlineQueryResultMpeg4Gif,
    InlineQueryResultPhoto,
    InlineQueryResultsButton,
    InlineQueryResultVideo,
    InputTextMessageContent,
    LinkPreviewOptions,
)
from telegram.constants import ParseMode

from xbot.links import Link, classify
from xbot.media.models import MediaItem, Post
from xbot.sending.caption import build_caption, build_text_reply
from xbot.sources.x_api import choose_variant
from xbot.storage.link_cache import CachedPost

__all__ = [
    "ALBUM_PREFIX",
    "HELP_PARAMETER",
    "InlineAnswer",
    "album_post_id",
    "for_cached",
    "for_failure",
    "for_fresh",
    "for_hint",
    "for_not_allowed",
    "for_timeout",
    "parse_query",
    "post_from_cache",
]

MAX_RESULTS: Final = 50
URL_PHOTO_LIMIT: Final = 5 * 1024 * 1024  # Telegram fetches photos by URL up to 5 MB
URL_OTHER_LIMIT: Final = 20 * 1024 * 1024  # and other content up to 20 MB
ALBUM_PREFIX: Final = "a"  # /start a<post id>: the whole album in the private chat
HELP_PARAMETER: Final = "inline_help"
_ALBUM_RE: Final = re.compile(rf"^{ALBUM_PREFIX}([0-9]{{1,20}})$")

# Telegram caches an answer per query text on its servers for `cache_time` seconds and,
# unless `is_personal`, serves it to everyone who types the same text without asking us.
# A whole answer (cached or fetched) is the same for everyone: 5 minutes spares the bot
# the same link typed by a whole group. A partial one (the fetch ran out of time, the X
# API had trouble) must not stick: 0, so the next keystroke asks again. The answer is
# personal whenever the allow-list is on: it depends on who asks, and a shared cache would
# hand an allowed user's answer to anyone typing the same link.
CACHE_WHOLE: Final = 300
CACHE_HINT: Final = 3600  # the hint never changes
CACHE_PARTIAL: Final = 0

OPEN_PRIVATE: Final = "Open in private chat to get all media"
PASTE_HINT: Final = "Paste a link to a post on X"
NOT_ALLOWED: Final = "This bot is private"


@attrs.frozen
class InlineAnswer:
    """The arguments of one ``answerInlineQuery``.

    Attributes:
        results: at most 50, ids unique.
        button: above the results; opens the private chat with a start parameter.
        cache_time: seconds Telegram may serve this answer again without asking.
        is_personal: cached per user rather than for everyone.
        kind: what was answered, for the log line and the tests.
        key: the link-cache key a cached answer came from (to forget a stale one).
    """

    results: tuple[InlineQueryResult, ...]
    button: InlineQueryResultsButton | None
    cache_time: int
    is_personal: bool
    kind: str
    key: str | None = None


def parse_query(text: str, *, allow_private: bool = False) -> Link | None:
    """The X post a query names: its first word that is a link to one, else None."""
    for word in text.split()[:5]:
        link = classify(word, allow_private=allow_private)
        if link is not None and link.kind == "x" and link.post_id:
            return link
    return None


def album_post_id(parameter: str) -> str | None:
    """The post id of an album button's start parameter, or None for anything else."""
    m = _ALBUM_RE.match(parameter)
    return m.group(1) if m else None


def album_button(post_id: str, count: int) -> InlineQueryResultsButton:
    return InlineQueryResultsButton(
        f"Get all {count} in a private chat", start_parameter=f"{ALBUM_PREFIX}{post_id}"
    )


def _id(post_id: str, index: int) -> str:
    return f"{post_id}-{index}"


def post_from_cache(cached: CachedPost) -> Post:
    """The caption parts of a cache entry as a `Post` (for the caption, nothing else)."""
    parts = cached.caption_parts
    return Post(
        key=cached.key,
        url=cached.url,
        author_name=parts.get("author_name", ""),
        author_handle=parts.get("author_handle", ""),
        text=parts.get("text", ""),
        sensitive=parts.get("sensitive") == "1",
    )


def _title(post: Post) -> str:
    who = post.author_name or post.author_handle or "X"
    return f"{who} (@{post.author_handle})" if post.author_handle else who


def for_cached(cached: CachedPost, post_id: str, *, personal: bool) -> InlineAnswer:
    """One result per cached item, by file_id, the chat's caption on each."""
    post = post_from_cache(cached)
    caption = build_caption(post)
    title = _title(post)
    results: list[InlineQueryResult] = []
    for index, item in enumerate(cached.items[:MAX_RESULTS]):
        rid = _id(post_id, index)
        if item.kind == "photo":
            results.append(
                InlineQueryResultCachedPhoto(
                    rid, item.file_id, caption=caption, parse_mode=ParseMode.HTML
                )
            )
        elif item.kind == "video":
            results.append(
                InlineQueryResultCachedVideo(
                    rid, item.file_id, title, caption=caption, parse_mode=ParseMode.HTML
                )
            )
        elif item.kind == "gif":
            results.append(
                InlineQueryResultCachedMpeg4Gif(
                    rid, item.file_id, caption=caption, parse_mode=ParseMode.HTML
                )
            )
        else:
            results.append(
                InlineQueryResultCachedDocument(
                    rid, title, item.file_id, caption=caption, parse_mode=ParseMode.HTML
                )
            )
    count = len(cached.items)
    return InlineAnswer(
        tuple(results),
        album_button(post_id, count) if count > 1 else None,
        CACHE_WHOLE,
        personal,
        "cached",
        cached.key,
    )


def _url_result(item: MediaItem, rid: str, caption: str, title: str) -> InlineQueryResult | None:
    """The item as a result Telegram fetches by URL, or None when it cannot."""
    if item.kind == "photo":
        if item.size is not None and item.size > URL_PHOTO_LIMIT:
            return None
        return InlineQueryResultPhoto(
            rid,
            item.url,
            item.thumbnail_url or item.url,
            photo_width=item.width,
            photo_height=item.height,
            caption=caption,
            parse_mode=ParseMode.HTML,
        )
    variant = choose_variant(item, URL_OTHER_LIMIT)
    if variant is None or variant.container != "mp4":
        return None
    if item.kind == "gif":
        # A GIF from X is an mp4; Telegram takes the mp4 itself as its thumbnail.
        thumb, thumb_mime = (
            (item.thumbnail_url, None) if item.thumbnail_url else (variant.url, "video/mp4")
        )
        return InlineQueryResultMpeg4Gif(
            rid,
            variant.url,
            thumb,
            mpeg4_width=item.width,
            mpeg4_height=item.height,
            thumbnail_mime_type=thumb_mime,
            caption=caption,
            parse_mode=ParseMode.HTML,
        )
    if not item.thumbnail_url:
        return None  # Telegram requires a still for a video result
    return InlineQueryResultVideo(
        rid,
        variant.url,
        "video/mp4",
        item.thumbnail_url,
        title,
        video_width=item.width,
        video_height=item.height,
        video_duration=int(item.duration) if item.duration else None,
        caption=caption,
        parse_mode=ParseMode.HTML,
    )


def for_fresh(post: Post, post_id: str, *, personal: bool) -> InlineAnswer:
    """URL results for a post just fetched; a text post becomes one article."""
    if not post.media:
        article = InlineQueryResultArticle(
            _id(post_id, 0),
            _title(post),
            InputTextMessageContent(
                build_text_reply(post),
                parse_mode=ParseMode.HTML,
                link_preview_options=LinkPreviewOptions(is_disabled=True),
            ),
            description=post.text[:100] or post.url,
        )
        return InlineAnswer((article,), None, CACHE_WHOLE, personal, "text")
    caption = build_caption(post)
    title = _title(post)
    results = [
        r
        for index, item in enumerate(post.media[:MAX_RESULTS])
        if (r := _url_result(item, _id(post_id, index), caption, title)) is not None
    ]
    count = len(post.media)
    if not results:
        return for_timeout(post_id, post.url, personal=personal, count=count, kind="too-large")
    # A missing item (over Telegram's URL limits) is in the album the button delivers.
    button = album_button(post_id, count) if count > 1 or len(results) < count else None
    return InlineAnswer(tuple(results), button, CACHE_WHOLE, personal, "fresh")


def for_timeout(
    post_id: str, url: str, *, personal: bool, count: int = 0, kind: str = "timeout"
) -> InlineAnswer:
    """What is known when the post could not be fetched in time: the link, and the way
    to the private chat, where the album is delivered as usual."""
    article = InlineQueryResultArticle(
        _id(post_id, 0),
        OPEN_PRIVATE,
        InputTextMessageContent(url, link_preview_options=LinkPreviewOptions(is_disabled=True)),
        description=url,
    )
    button = InlineQueryResultsButton(OPEN_PRIVATE, start_parameter=f"{ALBUM_PREFIX}{post_id}")
    return InlineAnswer((article,), button, CACHE_PARTIAL, personal, kind)


def for_failure(
    post_id: str, url: str, reason: str, *, personal: bool, lasting: bool
) -> InlineAnswer:
    """One article saying why a post cannot be shown (deleted, private, refused)."""
    article = InlineQueryResultArticle(
        _id(post_id, 0),
        reason,
        InputTextMessageContent(url, link_preview_options=LinkPreviewOptions(is_disabled=True)),
        description=url,
    )
    return InlineAnswer(
        (article,), None, CACHE_WHOLE if lasting else CACHE_PARTIAL, personal, "failed"
    )


def for_hint(*, personal: bool) -> InlineAnswer:
    """Not a link to an X post: no results, and the button says what to paste."""
    button = InlineQueryResultsButton(PASTE_HINT, start_parameter=HELP_PARAMETER)
    return InlineAnswer((), button, CACHE_HINT, personal, "hint")


def for_not_allowed() -> InlineAnswer:
    button = InlineQueryResultsButton(NOT_ALLOWED, start_parameter=HELP_PARAMETER)
    return InlineAnswer((), button, CACHE_WHOLE, True, "not-allowed")
