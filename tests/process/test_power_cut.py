"""A power cut costs nothing: what Telegram was told is handled is on the disk (issue 31).

The real `xbot run` as a child process over the power-cut model of its data
dir (tests/powercut: only what was synced survives a cut), against the
stand-ins in this process. Links in several chats, in waves; the power fails
the moment Telegram learns something: right as a getUpdates confirms a wave
(its offset moves past it), or right as Telegram accepts an album of a
two-album post. After each cut the disk is put back as a power loss leaves it
and the bot starts again. Every confirmed link must arrive, and nothing sent
may go again but the send in flight at a cut (per chat, the last one before
it: a chat's messages go one at a time, and none before the record of the
one before it is on the disk).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from powercut import Disk, build
from test_process import Stage, wait_until

from standins import tiny_jpeg
from standins.botapi import BotApiServer, Call

pytestmark = pytest.mark.slow

CHATS = range(8101, 8107)
PHOTOS = 12  # a two-album post: 10 + 2
# Every sync takes this long (a busy disk; a loaded machine's p99 here is tens of
# ms): the data reaches the model's disk only as the sync returns, so a
# confirmation that runs ahead of its sync is caught however fast the disk is.
SYNC_MS = 10


class PowerSwitch(BotApiServer):
    """The Bot API stand-in, with the bot's power switch: cut when Telegram learns something.

    ``cut_past``: cut as a getUpdates confirms every update up to this id.
    ``cut_at_album``: cut as Telegram accepts this many more albums.
    """

    def __init__(self) -> None:
        super().__init__(allow_url_fetch_from_loopback=True)
        self.bot: subprocess.Popen[bytes] | None = None
        self.cut_past: int | None = None
        self.cut_at_album: int | None = None
        self.cuts = 0
        self.restarts: list[float] = []  # when each bot after a cut was started

    def confirmed(self, offset: int) -> None:
        if self.cut_past is not None and offset > self.cut_past:
            self.cut_past = None
            self._cut()

    def recorded(self, call: Call) -> None:
        if call.method == "sendMediaGroup" and call.status == 200 and self.cut_at_album:
            self.cut_at_album -= 1
            if self.cut_at_album == 0:
                self.cut_at_album = None
                self._cut()

    def _cut(self) -> None:
        if self.bot is not None and self.bot.poll() is None:
            self.bot.kill()  # before it can read this answer or write another byte
            self.cuts += 1

    def in_flight(self, chat: int) -> set[tuple[str, ...]]:
        """The chat's sends that may have been in flight at a cut: at each, the last before it.

        Judged by when each request arrived, once every answer is recorded: a
        request the bot wrote just before it died is still handled (and then
        recorded) after the cut, and no request of the dead bot arrives after
        the next one started.
        """
        timed = accepted(self, chat)
        before = ([s for at, s in timed if at < restart] for restart in self.restarts)
        return {sent[-1] for sent in before if sent}


def accepted(api: BotApiServer, chat: int) -> list[tuple[float, tuple[str, ...]]]:
    """What Telegram accepted in a chat, in order of arrival: each send as its media URLs."""
    out: list[tuple[float, tuple[str, ...]]] = []
    for call in api.calls_for("sendPhoto", chat):
        if call.status == 200:
            out.append((call.at, (str(call.params["photo"]),)))
    for call in api.calls_for("sendMediaGroup", chat):
        if call.status == 200:
            out.append((call.at, tuple(str(m["media"]) for m in call.params["media"])))
    return sorted(out)


def sends(api: BotApiServer, chat: int) -> list[tuple[str, ...]]:
    return [send for _, send in accepted(api, chat)]


class PoweredStage(Stage):
    """The bot's data dir on the power-cut model."""

    disk: Disk

    def env(self) -> dict[str, str]:
        return {**super().env(), **self.disk.env()}


@pytest.fixture(scope="module")
def shim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("powercut"))


@pytest.fixture
async def stage(tmp_path: Path, shim: Path) -> AsyncIterator[PoweredStage]:
    s = PoweredStage(tmp_path)
    s.api = PowerSwitch()
    s.disk = Disk(shim, s.data, tmp_path / "shadow", sync_delay_ms=SYNC_MS)
    s.disk.power_on()
    await s.start()
    try:
        yield s
    finally:
        await s.stop()


async def start(stage: PoweredStage) -> subprocess.Popen[bytes]:
    polls = len(stage.api.calls_for("deleteWebhook"))
    proc = stage.spawn()
    api = stage.api
    assert isinstance(api, PowerSwitch)
    api.bot = proc
    try:
        await wait_until(lambda: len(api.calls_for("deleteWebhook")) > polls, 20, "polling")
    except BaseException:
        proc.kill()
        proc.wait(5)
        raise
    return proc


async def power_cut(stage: PoweredStage, proc: subprocess.Popen[bytes]) -> None:
    await wait_until(lambda: proc.poll() is not None, 30, "the power cut")
    stage.disk.cut()
    api = stage.api
    assert isinstance(api, PowerSwitch)
    api.restarts.append(time.monotonic())  # the stand-in's clock (Call.at)


def delivered(stage: Stage, chat: int, urls: list[str]) -> bool:
    got = {url for send in sends(stage.api, chat) for url in send}
    return set(urls) <= got


async def test_power_cuts_at_confirmations_lose_no_link_and_resend_only_what_was_in_flight(
    stage: PoweredStage,
) -> None:
    api = stage.api
    assert isinstance(api, PowerSwitch)
    wanted: dict[int, list[str]] = {chat: [] for chat in CHATS}
    proc = await start(stage)
    try:
        for wave, cut in enumerate(["confirmation", "album", "confirmation", "album"]):
            photos = PHOTOS if wave % 2 else 1
            for chat in CHATS:
                urls = [
                    stage.media.add(f"/w{wave}/{chat}/{i}.jpg", tiny_jpeg(), "image/jpeg")
                    for i in range(photos)
                ]
                post = f"{chat}{wave}"
                stage.fx.add_post(post, text=f"wave {wave}", photos=urls)
                wanted[chat] += urls
                update = api.user_message(chat, f"https://x.com/a/status/{post}")
            if cut == "confirmation":
                api.cut_past = int(update["update_id"])
            else:
                api.cut_at_album = 4  # some chats have an album accepted, the next one going
            await power_cut(stage, proc)
            proc = await start(stage)
            await wait_until(
                lambda: all(delivered(stage, c, wanted[c]) for c in CHATS),
                30,
                "every confirmed link",
            )
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert api.cuts == 4, "every cut fell on a running bot"
    for chat in CHATS:
        seen: set[tuple[str, ...]] = set()
        for send in sends(api, chat):
            assert send not in seen or send in api.in_flight(chat), (
                f"chat {chat}: sent twice, and not in flight at a cut: {send}"
            )
            seen.add(send)
    assert "Traceback" not in stage.log()
    assert not os.environ.get("POWERCUT_ROOT"), "the model is the child's, never this process's"
