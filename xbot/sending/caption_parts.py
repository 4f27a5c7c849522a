"""What the link cache keeps to caption a post again, and the post it gives back.

`caption_parts` turns a `Post` into the plain values its caption is rebuilt
from; `post_from_parts` is the way back (without media): the record's shape, apart from
how a caption is laid out (`xbot.sending.caption`, which re-exports both).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from xbot.media.models import (
    ALL_AGES,
    R18G,
    SPAN_KINDS,
    Poll,
    PollChoice,
    Post,
    RichText,
    TextSpan,
)

__all__ = ["caption_parts", "post_from_parts"]


def caption_parts(post: Post) -> dict[str, str]:
    """The plain values a caption is rebuilt from (the link cache keeps them).

    Alt text rides along (``alt``, a JSON list in media order): Telegram has
    no field for it, so the cache's record is where it is kept for later use.
    An X article's body (``article_body``: its text and spans as JSON) too, so the
    same post from the cache sends the same text messages.
    """
    parts = {
        "author_name": post.author_name,
        "author_handle": post.author_handle,
        "text": post.text,
        "sensitive": "1" if post.sensitive else "0",
    }
    if post.quote is not None:
        parts.update(
            quote_name=post.quote.author_name,
            quote_handle=post.quote.author_handle,
            quote_text=post.quote.text,
            quote_url=post.quote.url,
        )
    if post.poll is not None:
        parts["poll"] = json.dumps(
            {
                "closed": post.poll.closed,
                "total": post.poll.total_votes,
                "choices": [[c.label, c.votes, c.percentage] for c in post.poll.choices],
            },
            ensure_ascii=False,
        )
    if post.note:
        parts["note"] = post.note
    if post.article_title:
        parts["article_title"] = post.article_title
    if post.title:
        parts["title"] = post.title
    if post.rating:
        # The cache keeps the rating: an R-18 work served by file_id is gated as a fresh one.
        parts["rating"] = str(post.rating)
    if post.article_body is not None:
        body = post.article_body
        parts["article_body"] = json.dumps(
            {
                "text": body.text,
                "spans": [[t.kind, t.offset, t.length, t.url] for t in body.spans],
            },
            ensure_ascii=False,
        )
    if any(m.alt_text for m in post.media):
        parts["alt"] = json.dumps([m.alt_text for m in post.media], ensure_ascii=False)
    return parts


def _parts_poll(raw: str | None) -> Poll | None:
    if not raw:
        return None
    try:
        data = json.loads(raw)
        choices = tuple(
            PollChoice(str(label), int(votes), float(pct)) for label, votes, pct in data["choices"]
        )
        return Poll(choices=choices, total_votes=int(data["total"]), closed=bool(data["closed"]))
    except (ValueError, TypeError, KeyError):
        return None  # an old or damaged record: the caption goes without its poll


def _parts_body(raw: str | None) -> RichText | None:
    if not raw:
        return None
    try:
        data = json.loads(raw)
        spans = tuple(
            TextSpan(kind, int(offset), int(length), str(url))
            for kind, offset, length, url in data["spans"]
            if kind in SPAN_KINDS
        )
        return RichText(str(data["text"]), spans)
    except (ValueError, TypeError, KeyError):
        return None  # an old or damaged record: the post goes without its article body


def post_from_parts(key: str, url: str, parts: Mapping[str, str]) -> Post:
    """The `Post` (without media) that `caption_parts` described, to caption it again.

    The one decoder of a link-cache record: chats, forwards, yt-dlp's answers from the
    cache and inline mode all read a record through it, so each captions it alike. A
    record that names its ``source`` (yt-dlp's) keeps it: its caption rules follow.
    """
    quote = None
    if parts.get("quote_url"):
        quote = Post(
            key="",
            url=parts["quote_url"],
            author_name=parts.get("quote_name", ""),
            author_handle=parts.get("quote_handle", ""),
            text=parts.get("quote_text", ""),
        )
    return Post(
        key=key,
        url=url,
        author_name=parts.get("author_name", ""),
        author_handle=parts.get("author_handle", ""),
        text=parts.get("text", ""),
        sensitive=parts.get("sensitive") == "1",
        source=parts.get("source") or "x",  # only yt-dlp's records name theirs
        quote=quote,
        poll=_parts_poll(parts.get("poll")),
        note=parts.get("note", ""),
        article_title=parts.get("article_title", ""),
        title=parts.get("title", ""),
        article_body=_parts_body(parts.get("article_body")),
        rating=_parts_rating(parts.get("rating")),
    )


def _parts_rating(raw: str | None) -> int:
    # A damaged rating counts as the strictest: never let junk open the gate.
    if not raw:
        return ALL_AGES
    return int(raw) if raw in ("1", "2") else R18G
