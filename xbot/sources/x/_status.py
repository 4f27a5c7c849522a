"""What every X source answers with, whichever of them fetched the post.

The reasons a post cannot be had (``DELETED``, ``PRIVATE``, …: the sentences every
X source answers with), the patterns an id and a handle must match, a post's
canonical link, the route fxtwitter and vxtwitter answer alike, and the rules a
post's media follow whatever source built it: a quote's media joined to the
post's own (`with_quote_media`, Bluesky's rule too), a GIF in an album sent as
a video (`album_kinds`). `card_link` and `choose_variant` are what the rest of
xbot reads out of a fetched post. All pure.
"""

from __future__ import annotations

import re
from typing import TypeVar

import attrs

from xbot.errors import UnsupportedLink
from xbot.i18n import N_
from xbot.links import Link, classify, x_status_url
from xbot.media.models import MediaItem, Post, Variant
from xbot.sending import video_choice

__all__ = [
    "AGE_GATED",
    "BLOCKED",
    "DELETED",
    "HANDLE",
    "MAX_ALBUM",
    "MIME_CONTAINERS",
    "POST_ID",
    "PRIVATE",
    "PROTECTED",
    "SUSPENDED",
    "UNAVAILABLE",
    "WITHHELD",
    "album_kinds",
    "canonical_url",
    "card_link",
    "choose_variant",
    "post_id_of",
    "status_url",
    "with_quote_media",
]

PRIVATE = N_("This post is private: only its author's approved followers can see it.")
PROTECTED = PRIVATE  # X's word for an account whose posts only approved followers see
DELETED = N_("This post was deleted or does not exist.")
SUSPENDED = N_("The account that posted this is suspended.")
WITHHELD = N_("X withholds this post in the country I fetch from, so I cannot see it.")
AGE_GATED = N_(
    "X shows this post only to signed-in adults (age-restricted or sensitive content), "
    "so I cannot fetch it."
)
BLOCKED = N_("The author of this post does not let me see it.")
UNAVAILABLE = N_("This post is unavailable.")

HANDLE = re.compile(r"[A-Za-z0-9_]{1,50}")
POST_ID = re.compile(r"[0-9]{1,25}")
MIME_CONTAINERS = {
    "video/mp4": "mp4",
    "video/webm": "webm",
    "video/quicktime": "mov",
    "application/x-mpegurl": "m3u8",
    "application/vnd.apple.mpegurl": "m3u8",
}
MAX_ALBUM = 10  # sendMediaGroup's upper bound (xbot.sending.albums.MAX_GROUP)


# -- ids and links ----------------------------------------------------------------


def post_id_of(link: Link) -> str:
    """The id of the post `link` names, for the X sources; a profile link is refused."""
    if link.post_id is None:
        raise UnsupportedLink(N_("That is not a link to a post."))
    return link.post_id


def status_url(base_url: str, post_id: str, handle: str | None) -> str:
    """``{base}/{handle}/status/{id}``: the route fxtwitter and vxtwitter answer alike."""
    if not POST_ID.fullmatch(post_id):
        raise UnsupportedLink(N_("That is not a link to a post."))
    # The handle goes into the path: anything but a plain handle becomes "i".
    path_handle = handle if handle and HANDLE.fullmatch(handle) else "i"
    return f"{base_url.rstrip('/')}/{path_handle}/status/{post_id}"


def canonical_url(post_id: str, handle: str) -> str:
    return x_status_url(post_id, handle)


# -- a post's media ---------------------------------------------------------------


_Item = TypeVar("_Item")


def with_quote_media(
    own: tuple[_Item, ...], quoted: tuple[_Item, ...]
) -> tuple[tuple[_Item, ...], int | None]:
    """The media a post with a quote is answered with, and how many are its own.

    The one owner of the rule for every site (Bluesky's items may still be
    videos whose file is to be located, hence the type variable).

    - No media of its own: the quoted post's media (own count 0).
    - Its own media first; the quoted post's follow only when all of them
      fit in one album (`MAX_ALBUM` items), so a quote never adds a send.
    - Otherwise its own media alone (own count None: all of them are its own).
    """
    if not quoted:
        return own, None
    if not own:
        return quoted, 0
    if len(own) + len(quoted) <= MAX_ALBUM:
        return own + quoted, len(own)
    return own, None


def album_kinds(media: tuple[MediaItem, ...]) -> tuple[MediaItem, ...]:
    """A GIF among other items becomes a video: Telegram's albums take no animations.

    Alone it stays a GIF (sendAnimation). X's GIFs are silent mp4s, which an
    album shows as videos; post order is kept either way.
    """
    if len(media) < 2:
        return media
    return tuple(attrs.evolve(m, kind="video") if m.kind == "gif" else m for m in media)


# -- what callers read out of a post ----------------------------------------------


def card_link(post: Post) -> Link | None:
    """The post's external card (a YouTube video, say) as a link for the other-sites path.

    None without a card, or when the card leads back to X (a quoted post's card).
    """
    if not post.card_url:
        return None
    link = classify(post.card_url)
    return link if link is not None and link.kind == "other" else None


def choose_variant(item: MediaItem, max_bytes: int) -> Variant | None:
    """The highest-ranked encoding whose size (known or estimated) fits `max_bytes`, or None.

    The ranking and the estimate are `xbot.sending.video_choice`'s: H.264 before
    HEVC, mp4 before other containers, never an HLS playlist; a variant of
    unknown size is admitted (the download cap still holds).
    """
    pick = video_choice.best_for(item, max_bytes)
    return None if pick is None else pick.variant
