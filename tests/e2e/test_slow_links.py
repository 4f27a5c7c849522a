"""Slow links never starve quick ones (issue 30): the real bot, the Bot API stand-in, and a
media server on 127.0.0.1 that sends its headers, then one byte at a time.

The bot uploads (the stand-in cannot fetch our loopback URLs, like the real
Telegram), so every dripping video goes through the bot's own download. The speed
floor is made small (1 kB/s over a few seconds) so a drip ends within the test, and
a task detaches from its worker after a fraction of a second rather than 5 s; the
mechanism is the real one. Nothing here measures time: each test waits, with a
bound, for the event that must come first.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from standins.harness import Harness

# Each drip: 1 byte every 0.1 s (10 B/s) against a floor of 1 kB/s over WINDOW s, so
# it is given up WINDOW s after its request; long enough that the fresh link, which
# needs only a detach (DETACH s) and a quick fetch, comes first by far.
WINDOW = 15
DETACH = 0.2
TOO_SLOW = "too slowly"


async def _slow_harness(start_harness: Callable[..., Awaitable[Harness]]) -> Harness:
    h = await start_harness(allow_url_fetch=False, min_speed_kbps=1, speed_window=WINDOW)
    h.services.workers.detach_after = DETACH
    return h


def _drip_post(h: Harness, n: int) -> str:
    h.fx.add_post(f"90{n}", text=f"drip {n}", videos=[h.video(f"drip{n}", size=50_000, drip=0.1)])
    return f"https://x.com/a/status/90{n}"


def _media(h: Harness, chat: int) -> list[Any]:
    methods = ("sendPhoto", "sendVideo", "sendMediaGroup")
    return [c for c in h.api.calls if c.chat_id == chat and c.method in methods and c.status == 200]


def _texts(h: Harness, chat: int) -> list[str]:
    return [str(m.get("text", "")) for m in h.sent(chat) if m.get("text")]


async def test_six_drips_from_six_users_do_not_hold_back_a_fresh_link(
    start_harness: Callable[..., Awaitable[Harness]],
) -> None:
    h = await _slow_harness(start_harness)
    drips = [600 + n for n in range(6)]  # six users, each in their private chat
    for n, chat in enumerate(drips):
        h.api.user_message(chat, _drip_post(h, n), user_id=chat)
    # Every drip is in flight: its download asked the media server (more than the
    # four workers: the first ones handed their workers back).
    await h.api.wait_for(lambda: all(h.media.hits[f"/media/drip{n}.mp4"] for n in range(6)), 15)
    fresh = 700
    h.fx.add_post("800", text="fresh", photos=[h.photo("fresh")])
    h.api.user_message(fresh, "https://x.com/b/status/800", user_id=fresh)
    await h.api.wait_for(lambda: _media(h, fresh), 15)
    told = {chat: _texts(h, chat) for chat in drips}
    assert all(TOO_SLOW not in " ".join(t) for t in told.values()), (
        "the fresh link was answered while every drip was still in flight",
        told,
    )
    # Each drip ends with one sentence to its chat, and nothing else.
    await h.api.wait_for(
        lambda: all(TOO_SLOW in " ".join(_texts(h, chat)) for chat in drips), WINDOW + 20
    )
    for chat in drips:
        said = [t for t in _texts(h, chat) if TOO_SLOW in t]
        assert len(said) == 1, (chat, _texts(h, chat))
        assert not _media(h, chat)
    await h.wait_idle(10)


async def test_one_users_work_is_bounded_across_chats(
    start_harness: Callable[..., Awaitable[Harness]],
) -> None:
    h = await _slow_harness(start_harness)
    user = 41
    groups = [-1000 - n for n in range(3)]  # one user, three groups, one drip each
    for n, group in enumerate(groups):
        h.api.user_message(group, _drip_post(h, n), user_id=user, chat_type="supergroup")
    paths = [f"/media/drip{n}.mp4" for n in range(3)]

    def started() -> list[int]:
        return [n for n, path in enumerate(paths) if h.media.hits[path]]

    async def deliveries(n: int) -> list[Any]:
        rows = await h.services.queue.list(chat_id=groups[n])
        return [t for t in rows if t.kind == "deliver"]

    # Two of the three start (which two: the order the updates were handled in).
    await h.api.wait_for(lambda: len(started()) >= 2, 15)
    (waiting,) = [n for n in range(3) if n not in started()]
    # Another user's link, sent after all three: workers are free, so it runs now.
    h.fx.add_post("801", text="other", photos=[h.photo("other")])
    h.api.user_message(701, "https://x.com/b/status/801", user_id=701)
    await h.api.wait_for(lambda: _media(h, 701), 15)
    assert [(t.state, t.user_id) for t in await deliveries(waiting)] == [("pending", user)], (
        "the user's third task waits while their two run, though it is older than the other's"
    )
    # Once the floor ends one of theirs, the third starts: the one that ended is dead by
    # then (its end freed the user's turn). Its sentence is a notice, which a free worker
    # sends before or after the third's download starts: waited for, not assumed.
    await h.api.wait_for(lambda: h.media.hits[paths[waiting]], WINDOW + 20)
    others = [n for n in range(3) if n != waiting]
    ended = [n for n in others if [t.state for t in await deliveries(n)] == ["dead"]]
    assert ended, [(n, [t.state for t in await deliveries(n)]) for n in others]
    await h.api.wait_for(lambda: TOO_SLOW in " ".join(_texts(h, groups[ended[0]])), 10)
