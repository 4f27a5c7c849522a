"""The Bot API stand-in's rate-limit mode: Telegram's flood limits, enforced with 429s."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import telegram
from telegram import InputMediaPhoto
from telegram.error import BadRequest, RetryAfter

from standins._botapi_limits import Admission, TelegramLimits, ideal_makespan
from standins.botapi import BotApiServer, retry_after_seconds
from standins.media_server import MediaServer, tiny_jpeg

GROUP = -1_000_777


@pytest.fixture(autouse=True)
def _ptb_timedelta(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PTB_TIMEDELTA", "1")  # RetryAfter.retry_after without a warning


def admitted(limits: TelegramLimits, chat: int, at: float, items: int = 1) -> bool:
    return isinstance(limits.admit("sendMessage", chat, items, at), Admission)


@pytest.mark.parametrize(
    ("sends", "then", "expected"),
    [
        ([(5, 0.0)] * 3, (5, 0.0), 1),  # a private chat's burst of 3, then ~1/s
        ([(5, 0.0)] * 3, (5, 1.0), None),
        ([(5, 0.0)] * 3, (6, 0.0), None),  # another chat goes on
        ([(GROUP, float(i)) for i in range(20)], (GROUP, 20.0), 40),  # 20/min in a group
        ([(GROUP, float(i)) for i in range(20)], (GROUP, 60.0), None),
        ([(c, 0.0) for c in range(30)], (99, 0.5), 1),  # 30/s across chats
        ([(c, 0.0) for c in range(30)], (99, 1.0), None),
    ],
    ids=["chat-burst", "chat-refilled", "other-chat", "group-20", "group-window-moved",
         "global-30", "global-window-moved"],
)  # fmt: skip
def test_limits(
    sends: list[tuple[int, float]], then: tuple[int, float], expected: int | None
) -> None:
    limits = TelegramLimits()
    for chat, at in sends:
        assert admitted(limits, chat, at)
    got = limits.admit("sendMessage", then[0], 1, then[1])
    assert (None if isinstance(got, Admission) else got) == expected


def test_an_album_counts_as_its_items_and_a_failed_send_counts_for_nothing() -> None:
    limits = TelegramLimits()
    album = limits.admit("sendMediaGroup", GROUP, 10, 0.0)
    assert isinstance(album, Admission)
    assert admitted(limits, GROUP, 1.0, items=10)
    assert not admitted(limits, GROUP, 2.0)  # 20 items in the window
    limits.give_back(album)  # Telegram could not fetch the URLs: nothing delivered
    assert admitted(limits, GROUP, 3.0)
    assert limits.admit("sendChatAction", GROUP, 1, 3.0) == Admission(0, 0, 3.0)  # not counted


def test_the_ideal_schedule_of_25_messages_to_one_group() -> None:
    # Burst of 3, then 1/s: message 19 at 17 s; 20..22 when the first three leave
    # the 60 s window, then 1/s: the last at 62 s.
    assert ideal_makespan([(GROUP, 1)] * 25) == pytest.approx(62.0, abs=0.05)
    assert ideal_makespan([(c, 1) for c in range(60)]) == pytest.approx(1.0, abs=0.05)


@pytest.fixture
async def srv() -> AsyncIterator[BotApiServer]:
    async with BotApiServer(allow_url_fetch_from_loopback=True, url_fetch_timeout=2.0) as s:
        s.add_chat(GROUP, "supergroup")
        s.set_telegram_limits(TelegramLimits(group_max=4))
        yield s


async def test_through_ptb_past_a_limit_is_a_429_and_a_refused_url_costs_nothing(
    srv: BotApiServer,
) -> None:
    async with MediaServer() as media:
        bot = telegram.Bot(srv.token, base_url=f"{srv.url}/bot")
        async with bot:
            missing = f"{media.url}/gone.jpg"  # 404: "failed to get HTTP URL content"
            for _ in range(3):
                with pytest.raises(BadRequest, match=r"(?i)failed to get http url content"):
                    await bot.send_photo(GROUP, missing)
            photo = media.add("/p.jpg", tiny_jpeg(), "image/jpeg")
            sent = await bot.send_media_group(GROUP, [InputMediaPhoto(photo)] * 4)
            assert len(sent) == 4  # the three refusals spent nothing of the 4 allowed
            with pytest.raises(RetryAfter) as info:
                await bot.send_message(GROUP, "one more")
            assert 1 <= retry_after_seconds(info.value.retry_after) <= 60
    assert [c.status for c in srv.calls_for("sendMessage")] == [429]
