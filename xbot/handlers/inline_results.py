"""What `@bot <link>` answers: the pure planning of inline query results.

The handler (`xbot.handlers.inline`) finds what is known about the link — a
link-cache entry (Telegram ``file_id``s), a freshly fetched post, a failure,
or nothing in time — and this module turns that into one `InlineAnswer`:

- cached: one ``InlineQueryResultCached*`` per item, by ``file_id``;
- fresh: URL results Telegram fetches itself, by the chats' rule
  (`xbot.media.by_url`: photos up to 5 MB in Telegram's photo shape, an mp4
  video variant within 20 MB, GIFs as ``mpeg4_gif``);
- either with the caption a chat would get on every result (each result
  becomes its own message), and, for more than one item, a button that opens
  the private chat with ``/start <parameter>`` (`album_parameter`) where the
  album is delivered; an upload-only item (its host refuses Telegram's fetch)
  is never a URL result;
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

from xbot.i18n import DEFAULT, N_, translate_reason, translator
from xbot.links import SITES, Link, classify, site_named
from xbot.media.by_url import URL_OTHER_LIMIT, by_url
from xbot.media.models import MediaItem, Post
from xbot.sending.caption import build_caption, build_text_reply, post_from_parts
from xbot.sources.x import choose_variant
from xbot.storage.link_cache import CachedPost

__all__ = [
    "ALBUM_PREFIX",
    "HELP_PARAMETER",
    "InlineAnswer",
    "album_link",
    "album_parameter",
    "album_post_id",
    "for_cached",
    "for_failure",
    "for_fresh",
    "for_hint",
    "for_not_allowed",
    "for_timeout",
    "parse_query",
]

MAX_RESULTS: Final = 50
ALBUM_PREFIX: Final = "a"  # /start a<post id>: the whole album in the private chat
HELP_PARAMETER: Final = "inline_help"
_ALBUM_RE: Final = re.compile(rf"^{ALBUM_PREFIX}([0-9]{{1,20}})$")
# Inline answers only the sites whose `Site.inline` says a fetch fits within Telegram's
# window. yt-dlp's other sites ("other") stay out: their download (often a whole video
# through yt-dlp) cannot finish within the ~10 s an inline answer has, and Telegram
# cannot fetch their pages as media by URL. The album button names a post of any of
# them (`Site.album_parameter`), derived from its cache key so nothing is stored.
INLINE_SITES: Final = tuple(site for site in SITES if site.inline)

# Telegram caches an answer per query text on its servers for `cache_time` seconds and,
# unless `is_personal`, serves it to everyone who types the same text without asking us.
# A whole answer (cached or fetched) may stay 5 minutes: the user's next keystrokes are
# spared. A partial one (the fetch ran out of time, the X API had trouble) must not stick:
# 0, so the next keystroke asks again. Every answer is personal (the handler says so): it
# is worded in the asker's language, and a shared cache would hand a German user's answer
# to a Russian one typing the same link; with the allow-list on it also depends on who may
# ask at all.
CACHE_WHOLE: Final = 300
CACHE_HINT: Final = 3600  # the hint never changes
CACHE_PARTIAL: Final = 0

# Our sentences, English msgids translated where the answer is built (in `lang`).
OPEN_PRIVATE: Final = N_("Open in private chat to get all media")
PASTE_HINT: Final = N_("Paste a link to a post on X, Bluesky or pixiv")
NOT_ALLOWED: Final = N_("This bot is private")


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


def _inline(link: Link | None) -> bool:
    site = site_named(link.kind) if link is not None else None
    return site is not None and site.inline


def parse_query(text: str, *, allow_private: bool = False) -> Link | None:
    """The post a query names (on a site inline mode serves): its first word that is a
    link to one, else None."""
    for word in text.split()[:5]:
        link = classify(word, allow_private=allow_private)
        if link is not None and _inline(link) and link.post_id:
            return link
    return None


def album_parameter(key: str) -> str | None:
    """The album button's start parameter for the post under cache `key`; None when the
    key has no spelling within Telegram's rule (the answer then goes without a button)."""
    for site in INLINE_SITES:
        if (parameter := site.album_parameter(key)) is not None:
            return parameter
    return None


def album_link(parameter: str) -> Link | None:
    """The link an album button's start parameter names, or None for anything else."""
    for site in INLINE_SITES:
        if (url := site.album_url(parameter)) is not None:
            link = classify(url)  # the same validation as a pasted link
            return link if _inline(link) else None
    return None


def album_post_id(parameter: str) -> str | None:
    """The post id of an album button's start parameter, or None for anything else."""
    m = _ALBUM_RE.match(parameter)
    return m.group(1) if m else None


def album_button(key: str, count: int, lang: str = DEFAULT) -> InlineQueryResultsButton | None:
    parameter = album_parameter(key)
    if parameter is None:
        return None
    text = translator(lang).ngettext(
        "Get all {n} in a private chat", "Get all {n} in a private chat", count
    )
    return InlineQueryResultsButton(text.format(n=count), start_parameter=parameter)


def _id(post_id: str, index: int) -> str:
    return f"{post_id}-{index}"


def _title(post: Post) -> str:
    who = post.author_name or post.author_handle or "X"
    return f"{who} (@{post.author_handle})" if post.author_handle else who


def for_cached(
    cached: CachedPost, post_id: str, *, personal: bool, lang: str = DEFAULT
) -> InlineAnswer:
    """One result per cached item, by file_id, the chat's caption (in `lang`) on each."""
    post = post_from_parts(cached.key, cached.url, cached.caption_parts)
    caption = build_caption(post, lang=lang)
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
        album_button(cached.key, count, lang) if count > 1 else None,
        CACHE_WHOLE,
        personal,
        "cached",
        cached.key,
    )


def _url_result(item: MediaItem, rid: str, caption: str, title: str) -> InlineQueryResult | None:
    """The item as a result Telegram fetches by URL, or None when it cannot."""
    if not by_url(item):
        # The chats' rule (upload-only hosts, a photo's size and shape): what Telegram
        # would refuse is no URL result. Cached, it is answered by file_id; fresh, by the
        # way to the private chat, where it is uploaded as in any chat.
        return None
    if item.kind == "photo":
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


def for_fresh(post: Post, post_id: str, *, personal: bool, lang: str = DEFAULT) -> InlineAnswer:
    """URL results for a post just fetched; a text post becomes one article. Our words
    (caption, button) in `lang`, the post's as written."""
    if not post.media:
        article = InlineQueryResultArticle(
            _id(post_id, 0),
            _title(post),
            InputTextMessageContent(
                build_text_reply(post, lang),
                parse_mode=ParseMode.HTML,
                link_preview_options=LinkPreviewOptions(is_disabled=True),
            ),
            description=post.text[:100] or post.url,
        )
        return InlineAnswer((article,), None, CACHE_WHOLE, personal, "text")
    caption = build_caption(post, lang=lang)
    title = _title(post)
    results = [
        r
        for index, item in enumerate(post.media[:MAX_RESULTS])
        if (r := _url_result(item, _id(post_id, index), caption, title)) is not None
    ]
    count = len(post.media)
    if not results:
        kind = "upload-only" if any(m.upload_only for m in post.media) else "too-large"
        return for_timeout(
            post_id, post.url, personal=personal, key=post.key, count=count, kind=kind, lang=lang
        )
    # A missing item (over Telegram's URL limits, or upload only) is in the album the
    # button delivers.
    wanted = count > 1 or len(results) < count
    button = album_button(post.key, count, lang) if wanted else None
    return InlineAnswer(tuple(results), button, CACHE_WHOLE, personal, "fresh")


def for_timeout(
    post_id: str,
    url: str,
    *,
    personal: bool,
    key: str,
    count: int = 0,
    kind: str = "timeout",
    lang: str = DEFAULT,
) -> InlineAnswer:
    """What is known when the post could not be fetched in time (or not by URL): the
    link, and the way to the private chat (the post under cache `key`), where the album
    is delivered as usual."""
    open_private = translator(lang).gettext(OPEN_PRIVATE)
    article = InlineQueryResultArticle(
        _id(post_id, 0),
        open_private,
        InputTextMessageContent(url, link_preview_options=LinkPreviewOptions(is_disabled=True)),
        description=url,
    )
    parameter = album_parameter(key)
    button = (
        None
        if parameter is None
        else InlineQueryResultsButton(open_private, start_parameter=parameter)
    )
    return InlineAnswer((article,), button, CACHE_PARTIAL, personal, kind)


def for_failure(
    post_id: str, url: str, reason: str, *, personal: bool, lasting: bool, lang: str = DEFAULT
) -> InlineAnswer:
    """One article saying why a post cannot be shown (deleted, private, refused): the
    source's English reason (a msgid or a filled template) in `lang`."""
    article = InlineQueryResultArticle(
        _id(post_id, 0),
        translate_reason(reason, lang),
        InputTextMessageContent(url, link_preview_options=LinkPreviewOptions(is_disabled=True)),
        description=url,
    )
    return InlineAnswer(
        (article,), None, CACHE_WHOLE if lasting else CACHE_PARTIAL, personal, "failed"
    )


def for_hint(*, personal: bool, lang: str = DEFAULT) -> InlineAnswer:
    """Not a link to a post inline serves: no results, and the button says what to paste."""
    hint = translator(lang).gettext(PASTE_HINT)
    button = InlineQueryResultsButton(hint, start_parameter=HELP_PARAMETER)
    return InlineAnswer((), button, CACHE_HINT, personal, "hint")


def for_not_allowed(lang: str = DEFAULT) -> InlineAnswer:
    button = InlineQueryResultsButton(
        translator(lang).gettext(NOT_ALLOWED), start_parameter=HELP_PARAMETER
    )
    return InlineAnswer((), button, CACHE_WHOLE, True, "not-allowed")
