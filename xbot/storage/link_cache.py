"""The link cache: a canonical post key → what was sent for it, by Telegram ``file_id``.

The same link again (any chat, any mirror spelling) is answered from here: no
download, one API call per album. An entry keeps the caption *parts*
(unescaped), not a finished caption, so each chat's caption style and template
can rebuild its own.

Entries live ``ttl`` seconds (default 7 days) from ``created_at``; the sweep
deletes older ones with one statement served by the ``link_cache_created``
index. A send that Telegram rejects for a stale ``file_id`` calls `invalidate`.
A row that does not parse is a miss (never an error); the next `put` of that
key overwrites it, `invalidate` deletes it, and the TTL sweep removes it in
any case. Times are float epoch seconds passed in as ``now``.

Every key of the table is made here. A post's own key comes from where it
was found (``x:{id}`` from `xbot.links`, ``yt:{extractor}:{id}`` from
`xbot.sources.ytdlp`); what was sent for it is stored under one *entry key*
per shape a chat can ask for (`entry_key`: photos as photos, or as files,
which are other ``file_id``s). Clearing a post (`forget`: ``/clear_cache
<link>``, ``xbot cache clear <link>``) removes every entry key of it
(`entry_keys`); a stale ``file_id`` (`invalidate`) removes only the entry
that carried it.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Literal, get_args

import apsw
import attrs

from xbot.links import classify
from xbot.storage.chat_state import VIDEO_QUALITIES, VideoQuality
from xbot.storage.db import DbPool

log = logging.getLogger(__name__)

DEFAULT_TTL = 7 * 86400.0

CachedKind = Literal["photo", "video", "gif", "document", "audio"]
CACHED_KINDS: tuple[str, ...] = get_args(CachedKind)


# The entry key of a post sent with its photos as documents.
AS_DOCUMENTS_SUFFIX = ":doc"
# The entry key of a video's sound alone (an audio message), beside the video's own.
AUDIO_SUFFIX = ":audio"
# A video capped by a chat's quality setting (`ChatSettings.video_quality`).
QUALITY_SUFFIX = "|q"


def entry_key(key: str, *, as_documents: bool) -> str:
    """The entry key for a post as a chat wants it (photos as photos, or as files)."""
    return f"{key}{AS_DOCUMENTS_SUFFIX}" if as_documents else key


def audio_key(key: str) -> str:
    """The entry key of the sound alone of the video stored under `key`."""
    return f"{key}{AUDIO_SUFFIX}"


def sound_or_video_key(key: str, *, audio: bool) -> str:
    """The entry key of the video stored under `key`, or of its sound alone."""
    return audio_key(key) if audio else key


def quality_key(key: str, quality: VideoQuality) -> str:
    """The entry key of a video at a chat's quality: a capped copy is never what a
    chat that wants the best is sent. The best keeps the plain key."""
    return key if quality == "best" else f"{key}{QUALITY_SUFFIX}{quality}"


def entry_keys(key: str) -> tuple[str, ...]:
    """Every entry key one post can be stored under: what clearing the post removes."""
    return (
        *(entry_key(key, as_documents=docs) for docs in (False, True)),
        *(quality_key(key, quality) for quality in VIDEO_QUALITIES if quality != "best"),
        audio_key(key),
    )


def link_key(link: str) -> str:
    """The post key of a link as a person pastes it (any mirror spelling), or the key
    itself when one is given (``x:123``)."""
    found = classify(link, allow_private=True)
    if found is not None:
        return found.key
    return link.strip()


def _non_empty_str(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{attribute.name} must be a non-empty string, not {value!r}")


def _finite(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{attribute.name} must be a finite number, not {value!r}")


def _str_map(_: object, attribute: attrs.Attribute[Any], value: Mapping[Any, Any]) -> None:
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ValueError(f"{attribute.name} must map strings to strings")


def _freeze_parts(parts: Mapping[str, str]) -> Mapping[str, str]:
    if not isinstance(parts, Mapping):
        raise TypeError("caption_parts must be a mapping")
    return MappingProxyType(dict(parts))


def _item_tuple(items: Any) -> tuple[CachedItem, ...]:
    out = tuple(items)
    if not all(isinstance(i, CachedItem) for i in out):
        raise TypeError("items must be CachedItems")
    return out


@attrs.frozen
class CachedItem:
    """One sent media item, re-sendable by ``file_id``.

    Attributes:
        kind: how it was sent (sendPhoto, sendVideo, sendAnimation, sendDocument).
        file_id: Telegram's id of the uploaded file.
        source_url: where the media came from (to refetch when the ``file_id``
            has gone stale), if known.
    """

    kind: CachedKind = attrs.field(validator=attrs.validators.in_(CACHED_KINDS))
    file_id: str = attrs.field(validator=_non_empty_str)
    source_url: str | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.instance_of(str))
    )

    def to_dict(self) -> dict[str, object]:
        return {"kind": self.kind, "file_id": self.file_id, "source_url": self.source_url}

    @classmethod
    def from_dict(cls, raw: object) -> CachedItem:
        if not isinstance(raw, Mapping):
            raise TypeError("an item is a JSON object")
        return cls(raw.get("kind"), raw.get("file_id"), raw.get("source_url"))  # type: ignore[arg-type]


@attrs.frozen
class CachedPost:
    """What was sent for one post.

    Attributes:
        key: the canonical key (``x:{id}``, ``yt:{extractor}:{id}``).
        url: the canonical link shown in captions.
        caption_parts: ``author_name``, ``author_handle``, ``text`` … as plain,
            unescaped text, so each chat's style can rebuild the caption.
        items: the media in post order (empty for a post without media).
        created_at: when it was cached (epoch seconds); the TTL counts from here.
    """

    key: str = attrs.field(validator=_non_empty_str)
    url: str = attrs.field(validator=attrs.validators.instance_of(str))
    caption_parts: Mapping[str, str] = attrs.field(converter=_freeze_parts, validator=_str_map)
    items: tuple[CachedItem, ...] = attrs.field(converter=_item_tuple)
    created_at: float = attrs.field(validator=_finite)

    def to_json(self) -> str:
        # ensure_ascii (the default): a lone surrogate from a fetched JSON text
        # must not break SQLite's UTF-8 bind.
        return json.dumps(
            {
                "key": self.key,
                "url": self.url,
                "caption_parts": dict(self.caption_parts),
                "items": [i.to_dict() for i in self.items],
                "created_at": self.created_at,
            },
            separators=(",", ":"),
            allow_nan=False,
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> CachedPost:
        """Raises ValueError on anything that is not a whole entry (a partial one is
        worse than a miss); unknown keys are ignored."""
        try:
            raw = json.loads(text)
            if not isinstance(raw, Mapping):
                raise TypeError("an entry is a JSON object")
            items = raw.get("items")
            if not isinstance(items, list):
                raise TypeError("items is a JSON array")
            return cls(
                raw.get("key"),  # type: ignore[arg-type]
                raw.get("url"),  # type: ignore[arg-type]
                raw.get("caption_parts"),  # type: ignore[arg-type]
                tuple(CachedItem.from_dict(i) for i in items),
                raw.get("created_at"),  # type: ignore[arg-type]
            )
        except (TypeError, ValueError) as exc:
            raise ValueError(f"not a link-cache entry: {exc}") from exc


@attrs.frozen
class CacheStats:
    """For ``/stats``: entries now, and hits and misses since the process started."""

    entries: int
    hits: int
    misses: int

    @property
    def hit_rate(self) -> float:
        looked = self.hits + self.misses
        return self.hits / looked if looked else 0.0


_GET = "SELECT entry, created_at FROM link_cache WHERE key = ?"
_PUT = (
    "INSERT INTO link_cache (key, entry, created_at) VALUES (?, ?, ?) "
    "ON CONFLICT (key) DO UPDATE SET entry = excluded.entry, created_at = excluded.created_at"
)
# Served by link_cache_created (tests/test_link_cache.py reads the query plan).
PRUNE_SQL = "DELETE FROM link_cache WHERE created_at < ?"


def _expired(created_at: float, now: float, ttl: float) -> bool:
    # The same rule as PRUNE_SQL: alive while created_at >= now - ttl.
    return created_at < now - ttl


@attrs.define
class LinkCache:
    """Canonical key → `CachedPost`, in the ``link_cache`` table.

    Attributes:
        pool: the database.
    """

    pool: DbPool
    _hits: int = attrs.field(default=0, init=False)
    _misses: int = attrs.field(default=0, init=False)

    async def get(self, key: str, now: float, ttl: float = DEFAULT_TTL) -> CachedPost | None:
        """The live entry, or None (absent, older than ``ttl``, or unreadable)."""
        rows = await self.pool.run(lambda conn: conn.execute(_GET, (key,)).fetchall())
        post = self._parse(key, rows, now, ttl)
        if post is None:
            self._misses += 1
        else:
            self._hits += 1
        return post

    @staticmethod
    def _parse(key: str, rows: list[Any], now: float, ttl: float) -> CachedPost | None:
        if not rows:
            return None
        entry, created_at = rows[0]
        if not isinstance(created_at, int | float) or _expired(created_at, now, ttl):
            return None
        try:
            post = CachedPost.from_json(entry)
        except ValueError as exc:
            log.warning("link cache entry %s unreadable, treated as a miss: %s", key, exc)
            return None
        if post.key != key:
            log.warning("link cache entry %s names key %s, treated as a miss", key, post.key)
            return None
        return post

    async def put(self, entry: CachedPost) -> None:
        """Store (or replace) the entry; its TTL counts from ``entry.created_at``."""
        await self.pool.write(self.put_op(entry))

    @staticmethod
    def put_op(entry: CachedPost) -> Callable[[apsw.Connection], object]:
        """`put` as a write to run inside another transaction (a task's progress record)."""
        params = (entry.key, entry.to_json(), entry.created_at)
        return lambda conn: conn.execute(_PUT, params).fetchall()

    async def invalidate(self, key: str) -> bool:
        """Forget one entry (a stale ``file_id``, ``/clear_cache <link>``); True if it was there."""

        def _delete(conn: apsw.Connection) -> int:
            conn.execute("DELETE FROM link_cache WHERE key = ?", (key,))
            return conn.changes()

        return await self.pool.write(_delete) > 0

    async def forget(self, key: str) -> int:
        """Forget a post under every entry key it has (`entry_keys`); returns how many."""
        keys = entry_keys(key)
        marks = ", ".join("?" * len(keys))

        def _delete(conn: apsw.Connection) -> int:
            conn.execute(f"DELETE FROM link_cache WHERE key IN ({marks})", keys)  # noqa: S608 - only ?s
            return conn.changes()

        return await self.pool.write(_delete)

    async def prune(self, now: float, ttl: float = DEFAULT_TTL) -> int:
        """Delete entries older than ``ttl``; returns how many."""

        def _prune(conn: apsw.Connection) -> int:
            conn.execute(PRUNE_SQL, (now - ttl,))
            return conn.changes()

        return await self.pool.write(_prune)

    async def clear(self) -> int:
        """Delete every entry; returns how many."""

        def _clear(conn: apsw.Connection) -> int:
            conn.execute("DELETE FROM link_cache")
            return conn.changes()

        return await self.pool.write(_clear)

    async def count(self) -> int:
        rows = await self.pool.run(
            lambda conn: conn.execute("SELECT count(*) FROM link_cache").fetchall()
        )
        (count,) = rows[0]
        assert isinstance(count, int)
        return count

    async def stats(self) -> CacheStats:
        return CacheStats(entries=await self.count(), hits=self._hits, misses=self._misses)
