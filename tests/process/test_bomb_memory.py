"""A decompression bomb against the real bot (issue 30): `xbot run` in its own process
gets, in a private chat, a post whose photo is 7 KB of ``gzip, gzip`` that inflates to
3 GiB. The bot refuses it with one sentence, its resident memory grows by no more than
a fixed few MB meanwhile, and an X link sent right after is answered.

The scene is bench/upload_bench.py's (the Bot API stand-in, like Telegram, cannot
fetch 127.0.0.1, so the bot downloads the photo itself through `download()`), with the
cloud Bot API's 50 MB upload limit.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_upload_memory import load_bench

from standins.botapi import BotApiServer
from standins.media_server import bomb, tiny_jpeg

pytestmark = pytest.mark.slow

MB = 1024 * 1024
# Steps of 64 KiB, one network read, the allocator's slack. Before the fix the bot
# took about 1.5 GB of this bomb in a few seconds (and the unit's MemoryMax=512M).
BOUND_MB = 24
BOMB = 3 * 1024 * MB


def test_a_gzip_bomb_is_refused_in_bounded_memory_and_the_bot_goes_on(tmp_path: Path) -> None:
    bench = load_bench()
    stage = bench.Stage(tmp_path)
    stage.api = BotApiServer()  # the cloud Bot API: 50 MB uploads
    env = stage.env

    def cloud_env() -> dict[str, str]:
        return {**env(), "XBOT_UPLOAD_LIMIT_MB": "50"}

    stage.env = cloud_env
    chat = bench.CHAT
    with stage:
        pid = stage.start_bot()
        stage.measure("video", 4 * MB)  # warm: the code of a download and an upload loaded
        if not bench.reset_peak(pid):
            pytest.skip("/proc/PID/clear_refs is not writable here: no peak to measure")
        coding = "gzip, gzip"
        url = stage.media.add("/b.jpg", bomb(BOMB, coding), "image/jpeg",
                              headers={"content-encoding": coding})  # fmt: skip
        stage.fx.add_post(900, text="a bomb", photos=[url])
        said = len(stage.api.calls_for("sendMessage", chat))
        base = bench.status_kb(pid, "VmRSS")
        stage.api.user_message(chat, "https://x.com/bomb/status/900")

        def sentences() -> list[str]:
            calls = stage.api.calls_for("sendMessage", chat)[said:]
            return [str(c.params.get("text", "")) for c in calls if c.status == 200]

        bench.wait(sentences, 120.0, "an answer to the bomb")
        peak = bench.status_kb(pid, "VmHWM")
        growth = (peak - base) / 1024
        assert growth < BOUND_MB, f"RSS {base // 1024} -> {peak // 1024} MB (+{growth:.0f})"
        assert sentences() == [
            "1 of the post's files is over the 50 MB upload limit, so I left it out: "
            "https://x.com/bomb/status/900"
        ]

        # And the bot goes on: the next link is answered.
        photo = stage.media.add("/ok.jpg", tiny_jpeg(640, 480), "image/jpeg")
        stage.fx.add_post(901, text="next", photos=[photo])
        sent = len(stage.api.calls_for("sendPhoto", chat))
        stage.api.user_message(chat, "https://x.com/next/status/901")
        bench.wait(
            lambda: any(c.status == 200 for c in stage.api.calls_for("sendPhoto", chat)[sent:]),
            60.0,
            "the next link answered",
        )
        log = stage.log()
    assert "Traceback" not in log
