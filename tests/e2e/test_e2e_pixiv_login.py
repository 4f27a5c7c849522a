"""pixiv with the operator's login: R-18 works where a chat allows them, under spoilers,
and ugoira as animations. The real PTB client over HTTP against the Bot API stand-in,
the pixiv stand-in taught sessions and ``ugoira_meta``, the real queue on a temp file,
real downloads through the SSRF guard, the real ffmpeg (ffprobe reads what it made)."""

from __future__ import annotations

import io
import itertools
import json
import logging
import shutil
import subprocess
import zipfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from standins import Harness
from xbot.handlers.inline import NOT_INLINE, answer_for
from xbot.media import ugoira
from xbot.sources import pixiv
from xbot.tasks.delivery import R18_HERE

SESSION = "31415926_pXsEsSiOnVaLuE7f3a9c2e"
PRIVATE = 7001
GROUP = -1007002
ADMIN = 7100
MEMBER = 7101
R18_WORK = "130000001"
URL = f"https://www.pixiv.net/artworks/{R18_WORK}"

needs_ffmpeg = pytest.mark.skipif(
    shutil.which("ffmpeg") is None or shutil.which("ffprobe") is None, reason="needs ffmpeg"
)


@pytest.fixture
async def px(
    start_harness: Callable[..., Awaitable[Harness]], caplog: pytest.LogCaptureFixture
) -> Harness:
    caplog.set_level(logging.DEBUG)  # every line the bot writes, to look for the session in
    h = await start_harness(pixiv_session=SESSION)
    h.pixiv.add_session(SESSION, x_restrict=2)
    h.api.add_chat(GROUP, "supergroup", "Friends", admins=[ADMIN], creator=ADMIN)
    return h


MEDIA = ("sendPhoto", "sendVideo", "sendAnimation", "sendDocument", "sendMediaGroup")


def media_calls(h: Harness, chat: int) -> list[Any]:
    return [c for c in h.api.calls if c.method in MEDIA and c.chat_id == chat and c.status == 200]


def texts(h: Harness, chat: int) -> list[str]:
    return [m.get("text", "") for m in h.sent(chat) if "text" in m]


async def say(h: Harness, chat: int, text: str, **options: Any) -> None:
    before = len(h.sent(chat))
    h.api.user_message(chat, text, **options)
    await h.api.wait_for(lambda: len(h.sent(chat)) > before, 20)
    await h.wait_idle(20)


async def in_group(h: Harness, text: str, user: int = MEMBER) -> None:
    await say(h, GROUP, text, user_id=user, chat_type="supergroup")


def spoilers(call: Any) -> list[bool]:
    """has_spoiler of every item a media call sent."""
    if call.method == "sendMediaGroup":
        return [bool(m.get("has_spoiler")) for m in call.params["media"]]
    return [bool(call.params.get("has_spoiler"))]


def leftovers(h: Harness) -> list[Path]:
    """Whatever the bot left in its temp folder."""
    tmp = h.settings.data_dir / "tmp"
    return sorted(tmp.rglob("*")) if tmp.exists() else []


async def r18_button(h: Harness, chat: int) -> tuple[int, str, str]:
    """An admin opens /settings in `chat`: the menu's id, the R-18 button's label and data."""
    await say(h, chat, "/settings", user_id=ADMIN, chat_type="supergroup")
    menu = h.sent(chat)[-1]
    buttons = {b["text"]: b["callback_data"]
               for row in menu["reply_markup"]["inline_keyboard"] for b in row}  # fmt: skip
    (label,) = [t for t in buttons if "R-18" in t]
    return menu["message_id"], label, buttons[label]


async def press(h: Harness, chat: int, message_id: int, data: str, user: int) -> str:
    query = h.api.callback_query(chat, message_id, data, user)
    query_id = query["callback_query"]["id"]
    await h.api.wait_for(lambda: query_id in h.api.callback_answers, 5)
    return str(h.api.callback_answers[query_id].get("text"))


# -- R-18 -----------------------------------------------------------------------------


async def test_r18_private_under_spoilers_refused_in_a_group_then_sent_after_the_toggle(
    px: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    h = px
    h.pixiv.add_work(R18_WORK, title="夜", x_restrict=1, pages=2)
    # The private chat turned spoilers off: an R-18 work is hidden all the same.
    await h.services.chats.set_settings(PRIVATE, h.clock(), spoiler_sensitive=False)
    await say(h, PRIVATE, URL)
    (album,) = media_calls(h, PRIVATE)
    assert album.method == "sendMediaGroup"
    assert spoilers(album) == [True, True]
    # A group that never chose: one sentence, though the work is in the link cache now.
    await in_group(h, URL)
    assert not media_calls(h, GROUP)
    assert texts(h, GROUP)[-1] == R18_HERE
    # A member cannot open the gate; an admin can.
    menu, label, data = await r18_button(h, GROUP)
    assert label == "R-18 works: off", "off in a group until an admin turns it on"
    await press(h, GROUP, menu, data, MEMBER)
    assert not (await h.services.chats.get(GROUP, h.clock())).settings.sensitive_works
    images = sum(n for p, n in h.pixiv.hits.items() if p.startswith("/img-"))
    assert await press(h, GROUP, menu, data, ADMIN) == "R-18 works: on"
    await in_group(h, URL)
    (cached,) = media_calls(h, GROUP)
    assert spoilers(cached) == [True, True]
    assert not any(m["media"].startswith("http") for m in cached.params["media"]), "file_ids"
    assert sum(n for p, n in h.pixiv.hits.items() if p.startswith("/img-")) == images
    assert_session_kept(h, caplog)


def assert_session_kept(h: Harness, caplog: pytest.LogCaptureFixture) -> None:
    """The session reached pixiv's ajax, and nothing else: not its image host, not
    Telegram (every parameter of every call), not a log line."""
    assert h.pixiv.cookies["ajax"] > 0
    assert h.pixiv.cookies["image"] == 0
    to_telegram = [c for c in h.api.calls if SESSION in json.dumps(c.params, ensure_ascii=False)]
    assert to_telegram == []
    assert caplog.records, "the log was captured"
    assert SESSION not in caplog.text
    assert not [r for r in caplog.records if SESSION in repr(r.args) or SESSION in r.getMessage()]


async def test_a_default_group_asking_first_gets_one_sentence_and_nothing_is_downloaded(
    px: Harness,
) -> None:
    h = px
    h.pixiv.add_work(R18_WORK, title="夜", x_restrict=1, pages=2)
    await in_group(h, URL)
    assert not media_calls(h, GROUP)
    assert texts(h, GROUP) == [R18_HERE]
    assert not [p for p in h.pixiv.hits if p.startswith("/img-")], "refused before a download"


async def test_r18g_goes_only_to_a_private_chat(px: Harness) -> None:
    h = px
    h.pixiv.add_work("130000002", title="G", x_restrict=2)
    link = "https://www.pixiv.net/artworks/130000002"
    await say(h, PRIVATE, link)
    (call,) = media_calls(h, PRIVATE)
    assert spoilers(call) == [True]
    await h.services.chats.set_settings(GROUP, h.clock(), sensitive_works=True)
    await in_group(h, link)
    assert not media_calls(h, GROUP)
    assert "R-18G" in texts(h, GROUP)[-1]


async def test_inline_mode_never_answers_an_r18_work(px: Harness) -> None:
    h = px
    h.pixiv.add_work(R18_WORK, title="夜", x_restrict=1)
    await say(h, PRIVATE, URL)  # in the cache now
    answer = await answer_for(h.services, PRIVATE, URL)
    assert len(answer.results) == 1
    assert NOT_INLINE in json.dumps(answer.results[0].to_dict(), ensure_ascii=False)


async def test_an_expired_session_is_one_warning_and_the_signed_out_sentence(
    px: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    h = px
    h.pixiv.add_work(R18_WORK, x_restrict=1)
    h.pixiv.add_work("130000003", x_restrict=1)
    h.pixiv.end_session(SESSION)
    await say(h, PRIVATE, URL)
    await say(h, PRIVATE + 1, "https://www.pixiv.net/artworks/130000003")
    assert texts(h, PRIVATE) == [pixiv.R18]
    assert texts(h, PRIVATE + 1) == [pixiv.R18]
    warned = [r for r in caplog.records if "XBOT_PIXIV_SESSION" in r.getMessage()]
    assert len(warned) == 1
    assert warned[0].levelname == "WARNING"
    assert_session_kept(h, caplog)


async def test_a_session_answered_401_is_the_signed_out_sentence(px: Harness) -> None:
    h = px
    h.pixiv.add_work(R18_WORK, x_restrict=1)
    h.pixiv.end_session(SESSION)
    h.pixiv.invalid_status = 401
    await say(h, PRIVATE, URL)
    assert texts(h, PRIVATE) == [pixiv.LOGIN]


# -- ugoira ---------------------------------------------------------------------------

DELAYS = [100, 250, 40, 1000, 70, 60]


def uploaded(h: Harness, chat: int) -> bytes:
    """The bytes of the last animation sent to `chat`, read back from the stand-in."""
    file_id = [m for m in h.sent(chat) if "animation" in m][-1]["animation"]["file_id"]
    base, token = h.api.url, h.settings.token
    with httpx.Client() as client:
        got = client.post(f"{base}/bot{token}/getFile", data={"file_id": file_id})
        return client.get(f"{base}/file/bot{token}/{got.json()['result']['file_path']}").content


def frame_starts(mp4: Path) -> list[int]:
    """Each frame's start in ms, as ffprobe reads the file."""
    out = subprocess.run(
        ["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_frames",
         "-show_entries", "frame=pts,pkt_dts", "-show_entries", "stream=time_base",
         "-of", "json", str(mp4)],
        capture_output=True, check=True, text=True, timeout=60,
    )  # fmt: skip
    data = json.loads(out.stdout)
    num, den = (int(x) for x in data["streams"][0]["time_base"].split("/"))
    return [round(f["pts"] * 1000 * num / den) for f in data["frames"]]


@needs_ffmpeg
async def test_an_ugoira_is_an_animation_keeping_every_frames_delay(
    px: Harness, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    h = px
    h.pixiv.add_ugoira("130000010", DELAYS, size=(65, 47), title="うごく")
    link = "https://www.pixiv.net/artworks/130000010"
    await say(h, PRIVATE, link)
    (call,) = media_calls(h, PRIVATE)
    assert call.method == "sendAnimation"
    assert "animation" in call.files, "uploaded: made here"
    assert call.params["caption"].startswith("<b>うごく</b>")
    assert h.pixiv.refused == 0, "the zip was asked for with pixiv's Referer"
    mp4 = tmp_path / "got.mp4"
    mp4.write_bytes(uploaded(h, PRIVATE))
    starts = frame_starts(mp4)
    # Each frame lasts its own delay: the next one starts when it ends (the last real
    # frame is followed by the repeated one that holds it for its delay).
    assert [b - a for a, b in itertools.pairwise(starts)][: len(DELAYS)] == DELAYS
    probe = subprocess.run(
        ["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries",
         "stream=codec_name,pix_fmt,width,height", "-of", "json", str(mp4)],
        capture_output=True, check=True, text=True, timeout=60,
    )  # fmt: skip
    stream = json.loads(probe.stdout)["streams"][0]
    assert (stream["codec_name"], stream["pix_fmt"]) == ("h264", "yuv420p")
    assert (stream["width"], stream["height"]) == (64, 46), "even: 65x47 cut to 64x46"
    assert (call.params["width"], call.params["height"]) == (64, 46), "the file's own size"
    assert leftovers(h) == []
    # Again, elsewhere: the link cache's file_id, no download, no ffmpeg.
    zips = sum(n for p, n in h.pixiv.hits.items() if p.endswith(".zip"))
    await say(h, PRIVATE + 1, link)
    (again,) = media_calls(h, PRIVATE + 1)
    assert again.method == "sendAnimation"
    assert not again.files
    assert sum(n for p, n in h.pixiv.hits.items() if p.endswith(".zip")) == zips
    assert_session_kept(h, caplog)


@needs_ffmpeg
async def test_an_r18_ugoira_is_an_animation_under_a_spoiler(px: Harness) -> None:
    h = px
    h.pixiv.add_ugoira("130000011", [80, 80, 160], x_restrict=1)
    await say(h, PRIVATE, "https://www.pixiv.net/artworks/130000011")
    (call,) = media_calls(h, PRIVATE)
    assert call.method == "sendAnimation"
    assert spoilers(call) == [True]
    await in_group(h, "https://www.pixiv.net/artworks/130000011")
    assert not media_calls(h, GROUP)


async def test_without_ffmpeg_an_ugoira_is_todays_sentence(px: Harness) -> None:
    h = px
    h.services.sources.by_kind["pixiv"].animations = False  # type: ignore[attr-defined]
    h.pixiv.add_ugoira("130000012", [80, 80])
    await say(h, PRIVATE, "https://www.pixiv.net/artworks/130000012")
    assert texts(h, PRIVATE) == [pixiv.UGOIRA]
    assert not media_calls(h, PRIVATE)


def zip_of(members: dict[str, bytes], method: int = zipfile.ZIP_STORED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", method) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buffer.getvalue()


def frames_meta(names: list[str], delay: int = 80) -> list[dict[str, Any]]:
    return [{"file": n, "delay": delay} for n in names]


BOMB = zip_of({"000000.jpg": bytes(8 * 1024 * 1024)}, zipfile.ZIP_DEFLATED)  # ~8 KB packed
BAD_UGOIRA = [
    ("not-a-zip", {"archive": b"<html>not a zip</html>"}, ugoira.NOT_AN_ARCHIVE),
    ("truncated-zip", {"archive": zip_of({"000000.jpg": b"x" * 5000})[:-40]},
     ugoira.NOT_AN_ARCHIVE),
    ("frame-missing", {"frames": frames_meta(["000000.jpg", "000009.jpg"])},
     ugoira.MISSING_FRAMES),
    ("zero-delay", {"frames": frames_meta(["000000.jpg"], delay=0)}, ugoira.BAD_FRAMES),
    ("absurd-delay", {"frames": frames_meta(["000000.jpg"], delay=86_400_000)},
     ugoira.BAD_FRAMES),
    ("absurd-count", {"frames": frames_meta([f"{n:06d}.jpg" for n in range(5000)], delay=10)},
     ugoira.BAD_FRAMES),
    ("zip-bomb", {"archive": BOMB, "frames": frames_meta(["000000.jpg"])}, ugoira.TOO_BIG),
    ("frames-not-images", {"archive": zip_of({"000000.jpg": b"junk" * 100}),
                           "frames": frames_meta(["000000.jpg"])}, ugoira.NOT_CONVERTED),
]  # fmt: skip


@needs_ffmpeg
@pytest.mark.parametrize(("options", "sentence"), [c[1:] for c in BAD_UGOIRA],
                         ids=[c[0] for c in BAD_UGOIRA])  # fmt: skip
async def test_a_broken_ugoira_is_one_sentence_and_nothing_left(
    px: Harness, monkeypatch: pytest.MonkeyPatch, options: dict[str, Any], sentence: str
) -> None:
    h = px
    monkeypatch.setattr(ugoira, "MAX_UNPACKED", 1024 * 1024)  # the bomb's 8 MB is over it
    h.pixiv.add_ugoira("130000020", [80, 80], **options)
    await say(h, PRIVATE, "https://www.pixiv.net/artworks/130000020")
    assert not media_calls(h, PRIVATE)
    (text,) = texts(h, PRIVATE)
    assert sentence.rstrip(".") in text
    stats = await h.services.queue.stats(h.clock())
    assert stats.counts_by_state.get("pending", 0) == 0, "nothing stuck, nothing retried"
    assert leftovers(h) == []


@needs_ffmpeg
async def test_a_zip_over_the_upload_limit_steps_down_then_is_one_sentence(
    px: Harness,
) -> None:
    h = px
    limit = h.settings.upload_limit
    huge = zip_of({"000000.jpg": b"\xff" * 16, "pad.bin": bytes(limit + 1024)})
    h.pixiv.add_ugoira("130000030", [80], archive=huge, frames=frames_meta(["000000.jpg"]))
    await say(h, PRIVATE, "https://www.pixiv.net/artworks/130000030")
    assert not media_calls(h, PRIVATE)
    (text,) = texts(h, PRIVATE)
    assert "over the 50 MB upload limit" in text
    zips = [p for p in h.pixiv.hits if p.endswith(".zip")]
    assert len(zips) == 2, "the full-size zip, then the 600px one"
    assert leftovers(h) == []


CHANNEL = -1007900


def buttons_of(message: dict[str, Any]) -> dict[str, str]:
    rows = message.get("reply_markup", {}).get("inline_keyboard", [])
    return {b["text"]: b["callback_data"] for row in rows for b in row}


async def test_a_forward_is_offered_only_to_a_channel_that_allows_r18(px: Harness) -> None:
    h = px
    h.pixiv.add_work(R18_WORK, x_restrict=1, pages=2)
    h.pixiv.add_work("130000004", x_restrict=1)
    h.api.add_chat(CHANNEL, "channel", title="Chan", username="chan", creator=PRIVATE)
    await h.services.chats.set_settings(PRIVATE, h.clock(), channel_id=CHANNEL,
                                        channel_title="Chan")  # fmt: skip
    # The channel never chose: the work comes to the private chat, with no forward offered.
    await say(h, PRIVATE, URL)
    assert len(media_calls(h, PRIVATE)) == 1
    assert not [m for m in h.sent(PRIVATE) if "Forward to channel" in buttons_of(m)]
    # The channel allows R-18 works: offered, and forwarded under spoilers.
    await h.services.chats.set_settings(CHANNEL, h.clock(), sensitive_works=True)
    await say(h, PRIVATE, "https://www.pixiv.net/artworks/130000004")
    (prompt,) = [m for m in h.sent(PRIVATE) if "Forward to channel" in buttons_of(m)]
    data = buttons_of(prompt)["Forward to channel"]
    await press(h, PRIVATE, prompt["message_id"], data, PRIVATE)
    await h.api.wait_for(lambda: h.sent(CHANNEL), 15)
    await h.wait_idle(15)
    (forward,) = media_calls(h, CHANNEL)
    assert spoilers(forward) == [True]
