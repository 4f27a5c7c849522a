"""An X post out of an fxtwitter-compatible API's JSON answer.

`parse_status` is pure: it reads whatever JSON came back (v1 ``{"code", "tweet"}``
or v2 ``{"code", "status"}``, tombstones with their reasons, legacy ``variants``,
quotes, polls, community notes, articles, cards, alt text) and raises nothing but
`FetchError` and its subclasses. The reasons it gives (``DELETED``, ``PRIVATE``,
…) are `xbot.sources.x._status`'s, the sentences every X source answers with; the
ones here (``MALFORMED``, ``API_TROUBLE``, ``NOT_ANSWERING``) are this API's own.
The payload shapes, and where each comes from, are the fixtures in
``tests/data/x/``. The client that fetches the answer is
`xbot.sources.x._fxtwitter.XApi`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from xbot.errors import FetchError, PostUnavailable, TransientFetch
from xbot.i18n import N_
from xbot.media.models import MediaItem, MediaKind, Poll, PollChoice, Post, Variant
from xbot.sending.video_choice import container_from_url
from xbot.sources.jsonget import count as _int
from xbot.sources.jsonget import objs as _dicts
from xbot.sources.jsonget import text as _str
from xbot.sources.jsonget import web_url as _http_url
from xbot.sources.x._fxtwitter_article import article_body
from xbot.sources.x._status import (
    AGE_GATED,
    BLOCKED,
    DELETED,
    HANDLE,
    MIME_CONTAINERS,
    POST_ID,
    PRIVATE,
    SUSPENDED,
    UNAVAILABLE,
    WITHHELD,
    album_kinds,
    canonical_url,
    with_quote_media,
)

MALFORMED = N_("The X API sent an answer I could not read.")
API_TROUBLE = N_("The X API is having trouble; I will try again.")
NOT_ANSWERING = N_("X is not answering right now; I will try again.")

# Tombstone reasons: FxEmbed's five (deleted, suspended, private, blocked,
# unavailable; packages/atmosphere/src/types/api-schemas.ts) and the words
# other fxtwitter-compatible APIs and X's own tombstones use.
_TOMBSTONES = {
    "deleted": DELETED,
    "not_found": DELETED,
    "removed": DELETED,
    "suspended": SUSPENDED,
    "withheld": WITHHELD,
    "age_restricted": AGE_GATED,
    "nsfw": AGE_GATED,
    "sensitive": AGE_GATED,
    "adult": AGE_GATED,
    "private": PRIVATE,
    "protected": PRIVATE,
    "blocked": BLOCKED,
    "unavailable": UNAVAILABLE,
}
# FxEmbed folds withheld into "suspended" and age gates into "private"
# (reasonFromTombstoneEntityScan in providers/twitter/processor.ts), so the
# tombstone's message or X's own tombstone text tells them apart again.
_HINTS = (
    (re.compile(r"withh[eo]ld", re.IGNORECASE), WITHHELD),
    (re.compile(r"\bage\b|age.restrict|adult|sensitive|nsfw", re.IGNORECASE), AGE_GATED),
    (re.compile(r"suspend", re.IGNORECASE), SUSPENDED),
    (re.compile(r"protect|approved followers|limits who can view", re.IGNORECASE), PRIVATE),
    (re.compile(r"delet|no longer exists|does(?: not|n.t) exist", re.IGNORECASE), DELETED),
    (re.compile(r"\bblock", re.IGNORECASE), BLOCKED),
)
# v1 error messages (FxEmbed's src/embed/status.ts) with what they mean.
_V1_MESSAGES = {
    "PRIVATE_TWEET": PRIVATE,
    "NOT_FOUND": DELETED,
    "SUSPENDED": SUSPENDED,
    "WITHHELD": WITHHELD,
    "AGE_RESTRICTED": AGE_GATED,
    "NSFW": AGE_GATED,
}
_HEVC = frozenset({"hevc", "h265", "hvc1", "hev1"})
_MAX_INT = 2**63


# -- reading loose JSON ---------------------------------------------------------


def _seconds(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return float(value) if 0 <= value < _MAX_INT else None
    if isinstance(value, float) and math.isfinite(value) and 0 <= value < _MAX_INT:
        return value
    return None


# -- parsing ---------------------------------------------------------------------


def _codec_from_url(url: str) -> str:
    # X's video URLs name the codec (/vid/avc1/1280x720/…, …/hevc/…); FxEmbed's
    # convertVariantToFormat reads it the same way when a payload does not say.
    lowered = url.split("?", 1)[0].lower()
    for needle, codec in (("hevc", "hevc"), ("vp9", "vp9"), ("av1", "av1"), ("avc1", "h264")):
        if needle in lowered:
            return codec
    return ""


def _format_variant(raw: Mapping[str, Any]) -> Variant | None:
    url = _http_url(raw.get("url"))
    if not url:
        return None
    return Variant(
        url=url,
        container=_str(raw.get("container")).lower() or container_from_url(url),
        codec=_str(raw.get("codec")).lower() or _codec_from_url(url),
        bitrate=_int(raw.get("bitrate")) or 0,
        size=_int(raw.get("size")),
    )


def _legacy_variant(raw: Mapping[str, Any]) -> Variant | None:
    url = _http_url(raw.get("url"))
    if not url:
        return None
    mime = _str(raw.get("content_type")).lower()
    return Variant(
        url=url,
        container=MIME_CONTAINERS.get(mime) or container_from_url(url),
        codec=_codec_from_url(url),
        bitrate=_int(raw.get("bitrate")) or 0,
    )


def _variants(raw: Mapping[str, Any]) -> tuple[Variant, ...]:
    formats = [_format_variant(f) for f in _dicts(raw.get("formats"))]
    if not formats:
        formats = [_legacy_variant(v) for v in _dicts(raw.get("variants"))]
    return tuple(v for v in formats if v is not None)


def _item(raw: object) -> MediaItem | None:
    """One entry of photos[], videos[] or all[]; None for what cannot be sent."""
    if not isinstance(raw, dict):
        return None
    kind_name = _str(raw.get("type")).lower()
    url = _http_url(raw.get("url"))
    width, height = _int(raw.get("width")), _int(raw.get("height"))
    alt = _str(raw.get("altText")) or _str(raw.get("alt_text"))
    if kind_name in ("photo", "image"):
        if not url:
            return None
        return MediaItem(kind="photo", url=url, width=width, height=height, alt_text=alt)
    if kind_name not in ("video", "gif", "animated_gif"):
        return None
    kind: MediaKind = "video" if kind_name == "video" else "gif"
    size = _int(raw.get("filesize"))
    variants = _variants(raw)
    if not variants and url:
        if kind == "gif" and container_from_url(url) == "" and _str(raw.get("format")) == "":
            # FxEmbed with GIF transcoding on: `url` is the still (a .jpg), no formats.
            return MediaItem(kind="photo", url=url, width=width, height=height, alt_text=alt)
        container = MIME_CONTAINERS.get(_str(raw.get("format")).lower())
        variants = (
            Variant(
                url=url,
                container=container or container_from_url(url),
                codec=_codec_from_url(url),
                size=size,
            ),
        )
    if not url:
        best = max(variants, key=lambda v: v.bitrate, default=None)
        if best is None:
            return None
        url = best.url
    thumbnail = _http_url(raw.get("thumbnail_url")) or None
    return MediaItem(
        kind=kind,
        url=url,
        variants=variants,
        width=width,
        height=height,
        duration=_seconds(raw.get("duration")),
        thumbnail_url=thumbnail,
        size=size,
        alt_text=alt,
    )


def _media(status: Mapping[str, Any]) -> tuple[MediaItem, ...]:
    media = status.get("media")
    if not isinstance(media, dict):
        return ()
    everything = media.get("all")
    if isinstance(everything, list) and everything:
        raw: list[object] = list(everything)  # post order, photos and videos interleaved
    else:
        raw = []
        for key in ("photos", "videos"):
            value = media.get(key)
            if isinstance(value, list):
                raw.extend(value)
    return tuple(item for item in (_item(r) for r in raw) if item is not None)


def _poll(status: Mapping[str, Any]) -> Poll | None:
    """FxEmbed's APIPoll: ``{choices[{label, count, percentage}], total_votes, ends_at,
    time_left_en}``; "Final results" in time_left_en marks a closed poll."""
    raw = status.get("poll")
    if not isinstance(raw, dict):
        return None
    choices = []
    for c in _dicts(raw.get("choices")):
        label = _str(c.get("label")).strip()
        if not label:
            continue
        share = _seconds(c.get("percentage"))
        choices.append(
            PollChoice(
                label=label, votes=_int(c.get("count")) or 0, percentage=min(share or 0.0, 100.0)
            )
        )
    if not choices:
        return None
    closed = _str(raw.get("time_left_en")).strip().lower() == "final results"
    return Poll(
        choices=tuple(choices), total_votes=_int(raw.get("total_votes")) or 0, closed=closed
    )


def _note(status: Mapping[str, Any]) -> str:
    # v2: {text, facets}; the legacy (v1/embed) shape: {text, entities}. Both carry text.
    raw = status.get("community_note")
    return _str(raw.get("text")).strip() if isinstance(raw, dict) else ""


def _card_url(status: Mapping[str, Any]) -> str:
    """An external link card's target: media.external (a player, e.g. YouTube), else card.url."""
    media = status.get("media")
    external = media.get("external") if isinstance(media, dict) else None
    if isinstance(external, dict) and (url := _http_url(external.get("url"))):
        return url
    card = status.get("card")
    return _http_url(card.get("url")) if isinstance(card, dict) else ""


def _article(status: Mapping[str, Any]) -> tuple[str, MediaItem | None]:
    """An X article's title and cover image (``article.cover_media.media_info``)."""
    raw = status.get("article")
    if not isinstance(raw, dict):
        return "", None
    title = _str(raw.get("title")).strip()
    cover = raw.get("cover_media")
    info = cover.get("media_info") if isinstance(cover, dict) else None
    image = None
    if isinstance(info, dict) and (url := _http_url(info.get("original_img_url"))):
        image = MediaItem(
            kind="photo",
            url=url,
            width=_int(info.get("original_img_width")),
            height=_int(info.get("original_img_height")),
        )
    return title, image


def _code_error(code: int, message: object = None) -> FetchError:
    text = _str(message)
    if code == 503 or text.upper() == "UPSTREAM_UNAVAILABLE":
        return TransientFetch(NOT_ANSWERING)
    if code == 429 or code >= 500:
        return TransientFetch(API_TROUBLE)
    if text.upper() in _V1_MESSAGES:
        return PostUnavailable(_V1_MESSAGES[text.upper()])
    if code in (401, 403):
        return PostUnavailable(_hinted(text) or PRIVATE)
    if code in (404, 410):
        return PostUnavailable(_hinted(text) or DELETED)
    return FetchError(MALFORMED)


def _hinted(message: str) -> str | None:
    words = message.replace("_", " ")
    for pattern, sentence in _HINTS:
        if pattern.search(words):
            return sentence
    return None


def tombstone_reason(reason: object, message: object = None) -> str:
    """The plain sentence for a tombstone: its reason, refined by its message."""
    key = _str(reason).lower()
    if key in ("deleted", "not_found", "removed"):
        return DELETED
    return _hinted(_str(message)) or _TOMBSTONES.get(key, UNAVAILABLE)


def _tombstone(raw: Mapping[str, Any]) -> PostUnavailable:
    return PostUnavailable(tombstone_reason(raw.get("reason"), raw.get("message")))


def _is_tombstone(value: object) -> bool:
    return isinstance(value, dict) and value.get("type") == "tombstone"


def _author(status: Mapping[str, Any]) -> tuple[str, str]:
    author = status.get("author")
    author = author if isinstance(author, dict) else {}
    handle = _str(author.get("screen_name"))
    if not HANDLE.fullmatch(handle):
        handle = ""
    return _str(author.get("name")), handle


def _quote(status: Mapping[str, Any]) -> Post | None:
    """The quoted post (one level deep), or None: absent, a tombstone, unreadable."""
    raw = status.get("quote")
    if not isinstance(raw, dict) or _is_tombstone(raw):
        return None
    quote_id = _str(raw.get("id"))
    if not POST_ID.fullmatch(quote_id):
        return None
    name, handle = _author(raw)
    return Post(
        key=f"x:{quote_id}",
        url=canonical_url(quote_id, handle),
        author_name=name,
        author_handle=handle,
        text=_str(raw.get("text")),
        media=_media(raw),
        sensitive=raw.get("possibly_sensitive") is True,
        source="x",
        poll=_poll(raw),
    )


def parse_status(data: object, *, post_id: str) -> Post:
    """A `Post` from a decoded API answer for `post_id`.

    The key and link are built from `post_id` (the id the user linked) so
    that the link cache finds the post again whatever the API echoes. Both
    shapes: v1 ``{"code", "message", "tweet"}`` and v2 ``{"code", "status"}``
    (whose 404 carries a tombstone with the reason).

    Raises:
        PostUnavailable: private, deleted, suspended, withheld, age-gated, tombstoned.
        TransientFetch: the answer itself reports an upstream failure (5xx code).
        FetchError: anything that is not a status we can read.
    """
    if not isinstance(data, dict):
        raise FetchError(MALFORMED)
    status = data.get("tweet", data.get("status"))
    if isinstance(status, dict) and _is_tombstone(status):
        raise _tombstone(status)
    code = data.get("code", 200)
    if isinstance(code, bool) or not isinstance(code, int):
        raise FetchError(MALFORMED)
    if code != 200:
        raise _code_error(code, data.get("message"))
    if not isinstance(status, dict):
        raise FetchError(MALFORMED)
    name, handle = _author(status)
    own = _media(status)
    title, cover = _article(status)
    if cover is not None and not own:
        own = (cover,)
    quote = _quote(status)
    media, own_count = with_quote_media(own, quote.media if quote else ())
    return Post(
        key=f"x:{post_id}",
        url=canonical_url(post_id, handle),
        author_name=name,
        author_handle=handle,
        text=_str(status.get("text")),
        media=album_kinds(media),
        sensitive=status.get("possibly_sensitive") is True
        or bool(quote and own_count is not None and quote.sensitive),
        source="x",
        quote=quote,
        poll=_poll(status),
        note=_note(status),
        card_url=_card_url(status),
        article_title=title,
        own_media=own_count,
        article_body=article_body(status.get("article")),
    )
