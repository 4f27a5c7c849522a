"""What Telegram fetches by URL itself: the one rule chats and inline mode both follow. Pure.

A chat's send (`xbot.tasks.delivery`) tries the URL first and uploads when
Telegram cannot fetch it; an inline answer (`xbot.handlers.inline_results`)
has no upload, so an item outside this rule is left to the album button.
Which video variant goes (within `URL_OTHER_LIMIT`) is each caller's choice:
a chat prefers a better version it can upload, inline mode wants an mp4.
"""

from __future__ import annotations

from xbot.media.models import MediaItem

__all__ = [
    "URL_OTHER_LIMIT",
    "URL_PHOTO_LIMIT",
    "by_url",
    "photo_ratio_ok",
    "photo_shape_ok",
]

URL_PHOTO_LIMIT = 5 * 1024 * 1024  # Telegram fetches photos by URL up to 5 MB
URL_OTHER_LIMIT = 20 * 1024 * 1024  # and other media up to 20 MB
MAX_SIDES = 10_000  # a photo's width + height, at most
MAX_RATIO = 20  # its longer side over its shorter one, at most


def photo_shape_ok(item: MediaItem) -> bool:
    """Telegram's photo rules: width + height ≤ 10000 and aspect ratio ≤ 20 (unknown: ok)."""
    w, h = item.width or 0, item.height or 0
    if not w or not h:
        return True
    return w + h <= MAX_SIDES and max(w, h) / min(w, h) <= MAX_RATIO


def photo_ratio_ok(item: MediaItem) -> bool:
    """Aspect ratio ≤ 20: a smaller rendition of the same picture cannot fix a wider one."""
    w, h = item.width or 0, item.height or 0
    return not w or not h or max(w, h) / min(w, h) <= MAX_RATIO


def by_url(item: MediaItem) -> bool:
    """Whether Telegram may be handed the item's URL at all.

    Never an upload-only item (its host refuses Telegram's fetch); a photo within
    5 MB and Telegram's photo shape; a video or GIF yes, through a variant within
    `URL_OTHER_LIMIT` the caller picks.
    """
    if item.upload_only:
        return False
    if item.kind == "photo":
        return (item.size is None or item.size <= URL_PHOTO_LIMIT) and photo_shape_ok(item)
    return True
