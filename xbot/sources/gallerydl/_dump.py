"""gallery-dl's JSON dump (``-j``) of one link, as the bot's `Post`. Pure: no process here.

``python -m gallery_dl -j URL`` prints one JSON list of messages, each
``[type, ...]``: ``[2, kwdict]`` (a post's metadata, "Directory"),
``[3, url, kwdict]`` (one file and its metadata, "Url"), ``[6, url, kwdict]``
(a link for another extractor, "Queue"), and ``[-1, {"error", "message"}]``
when the extraction failed (gallery-dl's `DataJob`: it still exits 0). The
file's metadata is the post's plus the file's own (``num``, ``extension``,
Mastodon's ``media``); with ``output.private`` it keeps the private keys,
of which ``_http_headers`` is what a file needs sent with its request.

The dump is untrusted input from another program that read a website:
every field is checked for its type, a wrong shape is `FetchError` (junk,
one sentence), never an exception of ours. The rules kept here:

- One post: a second post's metadata (a profile, a tag, a pool: gallery-dl's
  "Directory" message once per post) makes the link a gallery, one sentence.
- Files in the post's order; at most `MAX_FILES` (the rest is left out).
- What each file is: Mastodon's ``media.type`` when given (``gifv`` is a
  silent loop, sent as X's GIFs are), else its extension. ``ytdl:`` URLs
  (a video gallery-dl hands to yt-dlp) and Queue links are not files here.
- No file at all: `NoMedia` (an `UnsupportedLink`), so the other library
  may try the link.
- Who, what, whether sensitive: the first of the fields extractors use
  (`author_of`, `text_of`, `sensitive_of`), as a table of cases in the tests.
- Headers: the file's ``_http_headers``, and a Referer of the post's own
  site when it gives none (what a browser sends; hosts that check it want it).
"""

from __future__ import annotations

import html
import json
import re
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from xbot.errors import FetchError, PostUnavailable, TransientFetch, UnsupportedLink
from xbot.i18n import N_
from xbot.media.models import MediaItem, MediaKind, Post

__all__ = [
    "GONE",
    "JUNK",
    "LOGIN",
    "MAX_FILES",
    "NOT_KNOWN",
    "NO_MEDIA",
    "WHOLE_GALLERY",
    "NoMedia",
    "gallery_key",
    "parse_dump",
]

MAX_FILES = 100  # ten albums; a gallery of thousands is not a post
DIRECTORY, URL, QUEUE, ERROR = 2, 3, 6, -1

# The sentences people read (the reason of the error raised).
GONE = N_("That post is private, was removed, or does not exist.")
LOGIN = N_("That post is only shown to signed-in accounts, which I am not.")
REFUSED = N_("That site would not give me the post.")
JUNK = N_("That site answered with something I could not read.")
NOT_KNOWN = N_("I cannot fetch anything from that link.")
NO_MEDIA = N_("That post has no pictures or videos I can send.")
SITE_FAILED = N_("the site did not answer properly")
WHOLE_GALLERY = N_("That link is a whole gallery, not a post; I only send single posts.")

_PHOTO = frozenset({"jpg", "jpeg", "png", "webp", "jfif", "bmp", "avif", "heic"})
_VIDEO = frozenset({"mp4", "m4v", "mov", "webm", "mkv"})
_STATUS = re.compile(r"'(\d{3}) ")  # HttpError: "'404 Not Found' for 'https://…'"
_TAG = re.compile(r"<[^>]+>")
_BREAK = re.compile(r"<br\s*/?>|</p>\s*<p[^>]*>", re.IGNORECASE)
_HEADER_NAME = re.compile(r"[A-Za-z0-9-]{1,64}")


class NoMedia(UnsupportedLink):
    """gallery-dl read the post but found no file the bot can send (yt-dlp may)."""


def gallery_key(link_key: str) -> str:
    """The link cache's key for what gallery-dl sent: its own, beside yt-dlp's ``url:``."""
    if link_key.startswith("gdl:"):
        return link_key
    return "gdl:" + link_key.removeprefix("url:")


def _str(value: object) -> str:
    return value.strip() if isinstance(value, str) else ""


def _first_str(*values: object) -> str:
    for value in values:
        if text := _str(value):
            return text
    return ""


def _int(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return None
    return int(value)


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def plain_text(value: str) -> str:
    """HTML (Mastodon's ``content``) as plain text: line breaks kept, tags dropped."""
    if "<" not in value and "&" not in value:
        return value.strip()
    text = _BREAK.sub("\n", value)
    text = re.sub(r"</?p[^>]*>", "\n", text, flags=re.IGNORECASE)
    return html.unescape(_TAG.sub("", text)).strip()


def author_of(meta: Mapping[str, Any]) -> tuple[str, str]:
    """(name, handle) from the fields extractors name their author with."""
    account = _map(meta.get("account"))  # Mastodon, Misskey-like
    if account:
        handle = _first_str(account.get("acct"), account.get("username"))
        return _first_str(account.get("display_name"), handle), handle
    for field in ("author", "user", "owner", "uploader"):
        value = meta.get(field)
        if isinstance(value, Mapping):
            handle = _first_str(value.get("username"), value.get("name"), value.get("nick"))
            name = _first_str(value.get("display_name"), value.get("nick"), value.get("name"))
            return name or handle, handle
        if text := _str(value):
            return text, ""
    # *booru: the artist tags; the uploader's name otherwise.
    artists = _first_str(meta.get("tag_string_artist"), meta.get("artist"))
    if artists:
        return artists.replace(" ", ", ").replace("_", " "), ""
    handle = _first_str(meta.get("username"), meta.get("uploader_name"))
    return handle, handle


def text_of(meta: Mapping[str, Any]) -> str:
    """The post's own words: its text, else its title or description."""
    for field in ("content", "text", "description", "caption", "title"):
        value = meta.get(field)
        if text := _str(value):
            return plain_text(text)
    return ""


def sensitive_of(meta: Mapping[str, Any]) -> bool:
    """Marked sensitive by the site: Mastodon's flag, a *booru rating, reddit's over_18."""
    for field in ("sensitive", "nsfw", "over_18", "adult", "possibly_sensitive"):
        if meta.get(field) is True:
            return True
    rating = _str(meta.get("rating")).lower()
    return rating in {"q", "e", "questionable", "explicit"}


def kind_of(url: str, meta: Mapping[str, Any]) -> MediaKind | None:
    """photo, video or gif; None for what the bot does not send (audio, archives, …)."""
    media = _map(meta.get("media"))
    media_type = _str(media.get("type")).lower()
    if media_type == "image":
        return "photo"
    if media_type == "gifv":
        return "gif"
    if media_type == "video":
        return "video"
    if media_type in {"audio", "unknown"}:
        return None
    ext = _str(meta.get("extension")).lower()
    if not ext:
        path = urllib.parse.urlsplit(url).path
        ext = path.rpartition(".")[2].lower() if "." in path.rpartition("/")[2] else ""
    if ext in _PHOTO:
        return "photo"
    if ext == "gif":
        return "gif"
    if ext in _VIDEO:
        return "video"
    return None


def headers_of(meta: Mapping[str, Any], page_url: str) -> tuple[tuple[str, str], ...]:
    """What the file's request carries: gallery-dl's ``_http_headers``, and a Referer."""
    out: dict[str, str] = {}
    for name, value in _map(meta.get("_http_headers")).items():
        if (
            isinstance(name, str)
            and _HEADER_NAME.fullmatch(name)
            and isinstance(value, str)
            and "\n" not in value
            and "\r" not in value
            and name.lower() not in {"host", "cookie", "content-length", "transfer-encoding"}
        ):
            out[name] = value[:2000]
    if not any(name.lower() == "referer" for name in out):
        parts = urllib.parse.urlsplit(page_url)
        out["Referer"] = f"{parts.scheme}://{parts.netloc}/"
    return tuple(out.items())


def _size(meta: Mapping[str, Any]) -> tuple[int | None, int | None]:
    media_meta = _map(_map(_map(meta.get("media")).get("meta")).get("original"))
    width = _int(media_meta.get("width")) or _int(meta.get("width"))
    height = _int(media_meta.get("height")) or _int(meta.get("height"))
    width = width or _int(meta.get("image_width"))
    height = height or _int(meta.get("image_height"))
    return width, height


def _http_url(value: object) -> str:
    url = _str(value)
    return url if urllib.parse.urlsplit(url).scheme in ("http", "https") else ""


def _error(entry: Mapping[str, Any]) -> FetchError:
    """gallery-dl's error message (``[-1, {error, message}]``) as ours."""
    name = _str(entry.get("error"))
    message = _str(entry.get("message")).lower()
    if name == "NotFoundError":
        return PostUnavailable(GONE)
    if name in {"AuthRequired", "AuthorizationError", "AuthenticationError"}:
        return PostUnavailable(LOGIN)
    if name in {"HttpError", "ChallengeError"}:
        status = int(m.group(1)) if (m := _STATUS.search(message)) else 0
        if status in (404, 410):
            return PostUnavailable(GONE)
        if status in (401, 403):
            return PostUnavailable(LOGIN)
        if status == 429 or status >= 500:
            return TransientFetch(SITE_FAILED)
        return PostUnavailable(REFUSED)
    if name == "AbortExtraction":
        if "access token" in message or "login" in message or "cookies" in message:
            return PostUnavailable(LOGIN)
        return PostUnavailable(REFUSED)
    if name in {"ConnectionError", "Timeout", "ReadTimeout", "ConnectTimeout"}:
        return TransientFetch(SITE_FAILED)
    # JSONDecodeError, KeyError, TypeError…: the site's answer was not what the extractor reads.
    return FetchError(JUNK)


@attrs.frozen
class _File:
    url: str
    meta: Mapping[str, Any]


def _messages(raw: bytes | str) -> list[Any]:
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise FetchError(JUNK) from exc
    if not isinstance(data, list):
        raise FetchError(JUNK)
    return data


def parse_dump(raw: bytes | str, *, link_key: str, link_url: str) -> Post:
    """The post that gallery-dl's ``-j`` dump of `link_url` describes.

    Raises:
        PostUnavailable: gallery-dl reported the post missing, private or login-only.
        TransientFetch: the site failed in a way that may pass (5xx, 429, connection).
        NoMedia: read fine, but no file the bot can send.
        FetchError: the dump is junk (not gallery-dl's shape, or an error of a parser).
    """
    messages = _messages(raw)
    post_meta: Mapping[str, Any] = {}
    files: list[_File] = []
    for message in messages:
        if not isinstance(message, Sequence) or isinstance(message, str) or not message:
            raise FetchError(JUNK)
        kind = message[0]
        if kind == ERROR and len(message) >= 2 and isinstance(message[1], Mapping):
            if not files:
                raise _error(message[1])
            break  # what came before the error is the post: send that
        if kind == DIRECTORY and isinstance(message[-1], Mapping):
            if post_meta:
                raise FetchError(WHOLE_GALLERY)
            post_meta = message[-1]
        elif kind == URL and len(message) >= 3 and isinstance(message[2], Mapping):
            url = _http_url(message[1])
            if url and len(files) < MAX_FILES:
                files.append(_File(url, message[2]))
        elif kind in (QUEUE, URL, DIRECTORY):
            continue  # a link for another extractor, a ytdl: video, a shape we skip
        else:
            raise FetchError(JUNK)
    items: list[MediaItem] = []
    for file in files:
        media_kind = kind_of(file.url, file.meta)
        if media_kind is None:
            continue
        width, height = _size(file.meta)
        items.append(
            MediaItem(
                kind=media_kind,
                url=file.url,
                width=width,
                height=height,
                size=_int(file.meta.get("file_size")) or _int(file.meta.get("size")),
                alt_text=_str(_map(file.meta.get("media")).get("description")),
                headers=headers_of(file.meta, link_url),
                # The bot fetches every file itself: through the SSRF guard, with the headers.
                upload_only=True,
            )
        )
    if not items:
        raise NoMedia(NO_MEDIA)
    meta = post_meta or files[0].meta
    name, handle = author_of(meta)
    return Post(
        key=gallery_key(link_key),
        url=link_url,
        author_name=name,
        author_handle=handle,
        text=text_of(meta),
        media=tuple(items),
        sensitive=sensitive_of(meta),
        source="gallerydl",
    )
