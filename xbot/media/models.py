"""Values that describe a post and its media, whatever site they came from."""

from __future__ import annotations

from typing import Literal

import attrs

MediaKind = Literal["photo", "video", "gif"]

# How adult a work is, as pixiv rates it (``xRestrict``): sent only where a chat
# allows it (`xbot.storage.chat_state.ChatSettings.allows_rating`), always under a spoiler.
ALL_AGES, R18, R18G = 0, 1, 2


@attrs.frozen
class Variant:
    """One encoding of a video or GIF.

    Attributes:
        url: where the bytes are.
        container: ``mp4``, ``webm``, ``m3u8`` … (lower case).
        codec: ``h264``, ``hevc``, ``vp9``, ``av1`` or ``""`` when unknown.
        bitrate: bits per second, 0 when unknown.
        size: bytes when the source says, else None.
    """

    url: str
    container: str = "mp4"
    codec: str = ""
    bitrate: int = 0
    size: int | None = None


@attrs.frozen
class Frame:
    """One still of an animation made of frames: its file in the archive, its delay (ms)."""

    file: str
    delay_ms: int


@attrs.frozen
class MediaItem:
    """One photo, video or GIF of a post, in post order.

    Attributes:
        kind: ``photo``, ``video`` or ``gif`` (Telegram: sendPhoto/sendVideo/sendAnimation).
        url: the default URL (photos: the original size; videos: the best variant).
        variants: for videos and GIFs, the candidate encodings (may be empty for photos).
        width, height, duration: as the source reports them (duration in seconds).
        thumbnail_url: a still for videos, when known.
        size: bytes when known.
        alt_text: the author's description of a photo ("" when none). Telegram
            has no field for it; the link cache keeps it for later use.
        headers: request headers the media host insists on (pixiv: its Referer).
        upload_only: Telegram cannot fetch this by URL (the host refuses it, or the
            thumbnail must go along): always download and upload.
        fallback_url: photos: a smaller rendition for when the original is over
            Telegram's photo limits (pixiv's ``regular``); else it goes as a document.
            An animation made of frames: the smaller archive.
        frames: an animation that comes as an archive of still frames (pixiv's
            ugoira): `url` is the archive, each frame its file name in it and how
            long it shows, in milliseconds; turned into an MP4 before it is sent.
    """

    kind: MediaKind
    url: str
    variants: tuple[Variant, ...] = ()
    width: int | None = None
    height: int | None = None
    duration: float | None = None
    thumbnail_url: str | None = None
    size: int | None = None
    alt_text: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    upload_only: bool = False
    fallback_url: str | None = None
    frames: tuple[Frame, ...] = ()


@attrs.frozen
class PollChoice:
    """One answer of a poll: its label, its votes and their share (0-100)."""

    label: str
    votes: int = 0
    percentage: float = 0.0


@attrs.frozen
class Poll:
    """A poll attached to a post.

    Attributes:
        choices: in the order the post shows them.
        total_votes: all votes cast.
        closed: voting has ended (the counts are the result).
    """

    choices: tuple[PollChoice, ...]
    total_votes: int = 0
    closed: bool = False


SpanKind = Literal["bold", "italic", "underline", "strikethrough", "code", "text_link"]
SPAN_KINDS: tuple[str, ...] = ("bold", "italic", "underline", "strikethrough", "code", "text_link")


@attrs.frozen
class TextSpan:
    """Formatting over part of a `RichText`, as a Telegram message entity has it.

    Attributes:
        kind: the entity type (``text_link`` carries `url`).
        offset, length: in UTF-16 code units of the text, as Telegram counts.
        url: the link's target, for ``text_link``.
    """

    kind: SpanKind
    offset: int
    length: int
    url: str = ""


@attrs.frozen
class RichText:
    """Plain text with formatting spans: a long text to send as messages of its own.

    Attributes:
        text: the visible text (plain, not escaped).
        spans: formatting over it, in any order; they may nest.
    """

    text: str
    spans: tuple[TextSpan, ...] = ()


@attrs.frozen
class Post:
    """A post ready to be captioned and sent.

    Attributes:
        key: the link-cache key (``{site}:{id}`` for a site of `xbot.links.SITES`,
            ``x:{id}`` say, or ``yt:{extractor}:{id}``).
        url: the canonical link shown in the caption.
        author_name, author_handle: who posted it (handle without ``@``; may be empty).
        text: the post text (plain, not escaped), or a title for other sites.
        media: the items in post order.
        sensitive: the source marked it as possibly sensitive.
        source: its site's name (`xbot.links.SITES`), ``gallerydl`` or ``ytdlp``.
        quote: the post this one quotes (its own `media` included), when it is readable.
        poll: the post's poll, if any.
        note: a community note's text shown under the post ("" when none).
        card_url: an external link card's target (a YouTube video, say), "" when none.
        article_title: the title of an X article the post carries ("" when none).
        title: a heading the caption shows above the author line (a pixiv
            work's title; "" when none).
        own_media: how many of `media` are the post's own (the rest came from
            `quote`); None when all of them are.
        article_body: an X article's full text (paragraphs, headings in bold, links),
            as far as the source gives it; None when the post carries none.
        rating: `ALL_AGES`, `R18` or `R18G` (pixiv's rating of the work).
    """

    key: str
    url: str
    author_name: str
    author_handle: str
    text: str
    media: tuple[MediaItem, ...] = ()
    sensitive: bool = False
    source: str = "x"
    quote: Post | None = None
    poll: Poll | None = None
    note: str = ""
    card_url: str = ""
    article_title: str = ""
    own_media: int | None = None
    title: str = ""
    article_body: RichText | None = None
    rating: int = ALL_AGES
