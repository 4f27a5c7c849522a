"""LinkCache: file_ids by canonical key, with a TTL swept through an index."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xbot.storage.chat_state import VideoQuality
from xbot.storage.db import DbPool
from xbot.storage.link_cache import (
    DEFAULT_TTL,
    PRUNE_SQL,
    CachedItem,
    CachedPost,
    CacheStats,
    LinkCache,
    audio_key,
    entry_key,
    entry_keys,
    link_key,
    quality_key,
)

DAY = 86400.0


@pytest.fixture
def cache(pool: DbPool) -> LinkCache:
    return LinkCache(pool)


def post(key: str = "x:1", created_at: float = 0.0, **kw: object) -> CachedPost:
    fields: dict[str, object] = {
        "url": f"https://x.com/alice/status/{key.rpartition(':')[2]}",
        "caption_parts": {"author_name": "Alice", "author_handle": "alice", "text": "a < b & c"},
        "items": (
            CachedItem("photo", "AgAC-photo", "https://pbs.twimg.com/media/a.jpg?name=orig"),
            CachedItem("video", "BAAC-video"),
        ),
    }
    fields.update(kw)
    return CachedPost(key=key, created_at=created_at, **fields)  # type: ignore[arg-type]


async def write_raw(pool: DbPool, key: str, entry: object, created_at: object = 0.0) -> None:
    await pool.write(
        lambda c: c.execute(
            "INSERT OR REPLACE INTO link_cache (key, entry, created_at) VALUES (?, ?, ?)",
            (key, entry, created_at),
        )
    )


# -- values -------------------------------------------------------------------

items_strategy = st.builds(
    CachedItem,
    kind=st.sampled_from(["photo", "video", "gif", "document"]),
    file_id=st.text(min_size=1),
    source_url=st.none() | st.text(),
)
posts_strategy = st.builds(
    CachedPost,
    key=st.text(min_size=1),
    url=st.text(),
    caption_parts=st.dictionaries(st.text(), st.text(), max_size=4),
    items=st.lists(items_strategy, max_size=10).map(tuple),
    created_at=st.floats(allow_nan=False, allow_infinity=False),
)


@given(posts_strategy)
def test_json_round_trip(entry: CachedPost) -> None:
    assert CachedPost.from_json(entry.to_json()) == entry


def test_json_ignores_unknown_keys() -> None:
    raw = json.loads(post().to_json())
    raw["added_in_a_later_version"] = [1, 2]
    raw["items"][0]["width"] = 1200
    assert CachedPost.from_json(json.dumps(raw)) == post()


GOOD = json.loads(post().to_json())


@pytest.mark.parametrize(
    "entry",
    [
        "",
        "not json",
        "[]",
        "null",
        b"\xff",
        json.dumps({**GOOD, "key": None}),
        json.dumps({**GOOD, "key": ""}),
        json.dumps({**GOOD, "url": 5}),
        json.dumps({**GOOD, "caption_parts": None}),
        json.dumps({**GOOD, "caption_parts": {"text": 5}}),
        json.dumps({**GOOD, "items": "AgAC"}),
        json.dumps({**GOOD, "items": [{"kind": "sticker", "file_id": "a"}]}),
        json.dumps({**GOOD, "items": [{"kind": "photo", "file_id": ""}]}),
        json.dumps({**GOOD, "items": [{"kind": "photo"}]}),
        json.dumps({**GOOD, "items": [{"kind": "photo", "file_id": "a", "source_url": 3}]}),
        json.dumps({**GOOD, "items": ["photo"]}),
        json.dumps({**GOOD, "created_at": "yesterday"}),
        json.dumps({**GOOD, "created_at": True}),
        '{"key": "x:1", "url": "u", "caption_parts": {}, "items": [], "created_at": NaN}',
    ],
    ids=[
        "empty",
        "not-json",
        "array",
        "null",
        "bad-utf8",
        "no-key",
        "empty-key",
        "url-not-string",
        "parts-null",
        "part-not-string",
        "items-not-array",
        "unknown-kind",
        "empty-file-id",
        "no-file-id",
        "source-url-not-string",
        "item-not-object",
        "created-at-string",
        "created-at-bool",
        "created-at-nan",
    ],
)
def test_junk_entries_do_not_parse(entry: str | bytes) -> None:
    with pytest.raises(ValueError, match="not a link-cache entry"):
        CachedPost.from_json(entry)


# -- the cache ----------------------------------------------------------------


async def test_put_then_get(cache: LinkCache) -> None:
    await cache.put(post("x:1", created_at=100.0))
    assert await cache.get("x:1", now=100.0) == post("x:1", created_at=100.0)
    assert await cache.get("x:2", now=100.0) is None
    assert await cache.count() == 1


async def test_put_replaces_and_restarts_the_ttl(cache: LinkCache) -> None:
    await cache.put(post("x:1", created_at=0.0))
    fresh = post("x:1", created_at=10 * DAY, items=(CachedItem("gif", "CgAC"),))
    await cache.put(fresh)
    assert await cache.get("x:1", now=10 * DAY + 1) == fresh
    assert await cache.count() == 1


@pytest.mark.parametrize(
    ("age", "ttl", "hit"),
    [
        (0.0, DEFAULT_TTL, True),
        (DEFAULT_TTL, DEFAULT_TTL, True),
        (DEFAULT_TTL + 0.001, DEFAULT_TTL, False),
        (30 * DAY, DEFAULT_TTL, False),
        (2 * DAY, DAY, False),
        (2 * DAY, 3 * DAY, True),
        (-5.0, DEFAULT_TTL, True),
    ],
    ids=[
        "new",
        "exactly-ttl-old",
        "just-past-ttl",
        "month-old",
        "shorter-ttl",
        "longer-ttl",
        "clock-went-back",
    ],
)
async def test_ttl(cache: LinkCache, age: float, ttl: float, hit: bool) -> None:
    created = 1_700_000_000.0
    await cache.put(post("x:1", created_at=created))
    found = await cache.get("x:1", now=created + age, ttl=ttl)
    assert (found is not None) is hit
    # get and prune agree on what is expired.
    assert await cache.prune(now=created + age, ttl=ttl) == (0 if hit else 1)


async def test_prune_counts_and_keeps_the_young(cache: LinkCache) -> None:
    for i in range(10):
        await cache.put(post(f"x:{i}", created_at=i * DAY))
    assert await cache.prune(now=12 * DAY) == 5  # created before day 5
    assert await cache.prune(now=12 * DAY) == 0
    assert await cache.count() == 5
    assert await cache.get("x:5", now=12 * DAY) is not None
    assert await cache.prune(now=100 * DAY, ttl=DEFAULT_TTL) == 5


async def test_prune_is_an_index_search(pool: DbPool) -> None:
    plan = await pool.run(lambda c: c.execute("EXPLAIN QUERY PLAN " + PRUNE_SQL, (0.0,)).fetchall())
    details = [row[-1] for row in plan]
    assert any("SEARCH" in d and "link_cache_created" in d for d in details), details
    assert not any("SCAN" in d for d in details), details


async def test_invalidate(cache: LinkCache) -> None:
    await cache.put(post("x:1"))
    await cache.put(post("x:2"))
    assert await cache.invalidate("x:1") is True
    assert await cache.invalidate("x:1") is False
    assert await cache.get("x:1", now=0.0) is None
    assert await cache.get("x:2", now=0.0) is not None


@pytest.mark.parametrize(
    ("key", "as_documents", "stored_under"),
    [
        ("x:1", False, "x:1"),
        ("x:1", True, "x:1:doc"),
        ("yt:youtube:abc", True, "yt:youtube:abc:doc"),
    ],
    ids=["photos", "as-files", "yt-dlp-as-files"],
)
def test_entry_key(key: str, as_documents: bool, stored_under: str) -> None:
    assert entry_key(key, as_documents=as_documents) == stored_under
    assert stored_under in entry_keys(key)


def test_the_sound_alone_has_its_own_key_which_clearing_removes() -> None:
    assert audio_key("yt:youtube:abc") == "yt:youtube:abc:audio"
    assert audio_key("yt:youtube:abc") not in (entry_key("yt:youtube:abc", as_documents=d)
                                               for d in (False, True))  # fmt: skip
    assert audio_key("url:https://v.example/1") in entry_keys("url:https://v.example/1")


@pytest.mark.parametrize(
    ("quality", "stored_under"),
    [("best", "yt:youtube:abc"), ("720", "yt:youtube:abc|q720"), ("480", "yt:youtube:abc|q480")],
    ids=["best-is-plain", "720", "480"],
)
def test_a_capped_copy_has_its_own_key_which_clearing_removes(
    quality: VideoQuality, stored_under: str
) -> None:
    assert quality_key("yt:youtube:abc", quality) == stored_under
    assert stored_under in entry_keys("yt:youtube:abc")


async def test_forget_removes_the_capped_copies_and_the_sound(cache: LinkCache) -> None:
    """``/clear_cache <link>`` leaves no copy a chat of another quality would be sent."""
    for key in ("yt:v:1", "yt:v:1|q720", "yt:v:1|q480", "yt:v:1:audio", "yt:v:10|q720"):
        await cache.put(post(key))
    assert await cache.forget("yt:v:1") == 4
    assert await cache.get("yt:v:10|q720", now=0.0) is not None


def test_delivery_has_no_key_scheme_of_its_own() -> None:
    """Delivery stores posts under `entry_key`; a second scheme would escape `forget`."""
    from xbot.tasks import delivery

    assert delivery.entry_key is entry_key
    assert not hasattr(delivery, "cache_key")


@pytest.mark.parametrize(
    ("link", "key"),
    [
        ("https://fxtwitter.com/a/status/1?s=20", "x:1"),
        ("https://x.com/a/status/1", "x:1"),
        (" x:1 ", "x:1"),
        ("yt:youtube:abc", "yt:youtube:abc"),
    ],
    ids=["mirror", "canonical", "key-itself", "yt-key-itself"],
)
def test_link_key(link: str, key: str) -> None:
    assert link_key(link) == key


async def test_forget_removes_every_entry_key_of_a_post(cache: LinkCache) -> None:
    await cache.put(post("x:1"))
    await cache.put(post("x:1:doc"))
    await cache.put(post("x:2:doc"))
    await cache.put(post("x:11"))
    assert await cache.forget("x:1") == 2
    assert await cache.forget("x:1") == 0
    assert await cache.forget("x:2") == 1
    assert [await cache.get(k, now=0.0) is None for k in ("x:1", "x:1:doc", "x:2:doc")] == [
        True, True, True
    ]  # fmt: skip
    assert await cache.get("x:11", now=0.0) is not None


async def test_clear_and_count(cache: LinkCache) -> None:
    for i in range(3):
        await cache.put(post(f"x:{i}"))
    assert await cache.count() == 3
    assert await cache.clear() == 3
    assert await cache.count() == 0
    assert await cache.clear() == 0


async def test_stats_count_hits_and_misses(cache: LinkCache) -> None:
    assert await cache.stats() == CacheStats(entries=0, hits=0, misses=0)
    assert (await cache.stats()).hit_rate == 0.0
    await cache.put(post("x:1", created_at=0.0))
    await cache.get("x:1", now=1.0)
    await cache.get("x:1", now=2.0)
    await cache.get("x:1", now=3.0)
    await cache.get("x:9", now=1.0)  # absent
    await cache.get("x:1", now=30 * DAY)  # expired
    stats = await cache.stats()
    assert stats == CacheStats(entries=1, hits=3, misses=2)
    assert stats.hit_rate == pytest.approx(0.6)


@pytest.mark.parametrize(
    ("entry", "created_at"),
    [
        ("not json", 0.0),
        ('{"key": "x:1"}', 0.0),
        (json.dumps({**GOOD, "key": "x:other"}), 0.0),
        (42, 0.0),
        (post("x:1").to_json(), "not a time"),
        (b"\x00\x01", 0.0),
    ],
    ids=["not-json", "partial", "names-another-key", "integer", "bad-created-at", "blob"],
)
async def test_junk_rows_are_misses_until_put_or_invalidate(
    cache: LinkCache, pool: DbPool, entry: object, created_at: object
) -> None:
    await write_raw(pool, "x:1", entry, created_at)
    assert await cache.get("x:1", now=1.0) is None
    assert (await cache.stats()).misses == 1
    await cache.put(post("x:1", created_at=1.0))
    assert await cache.get("x:1", now=1.0) == post("x:1", created_at=1.0)

    await write_raw(pool, "x:1", entry, created_at)
    assert await cache.invalidate("x:1") is True
    assert await cache.count() == 0


@given(
    st.lists(
        st.builds(
            CachedPost,
            key=st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=20),
            url=st.text(max_size=40),
            caption_parts=st.dictionaries(st.text(max_size=5), st.text(), max_size=3),
            items=st.lists(items_strategy, max_size=3).map(tuple),
            created_at=st.floats(0, 1e10),
        ),
        max_size=5,
    )
)
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
async def test_round_trip_through_the_table(cache: LinkCache, entries: list[CachedPost]) -> None:
    await cache.clear()  # one table for every example: start each from empty
    latest = {}
    for entry in entries:
        await cache.put(entry)
        latest[entry.key] = entry
    for key, entry in latest.items():
        assert await cache.get(key, now=entry.created_at) == entry
    assert await cache.count() == len(latest)
