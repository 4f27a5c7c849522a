"""The sound alone of another site's video, end to end: the real bot and PTB client, the
real yt-dlp and ffmpeg against a page and a clip served on 127.0.0.1, the Bot API stand-in.

Under every video from another site a 🎵 button; a press queues the sound like a link
and it arrives as an audio message in reply to the video, with the site's title and
uploader; the same sound again is sent by file_id; a chat set to "audio only" gets the
sound for its links, never the video cached under the same link. A video with no sound
(a DASH manifest of picture-only renditions) reaches an "audio only" chat as the video,
and its button answers that it has no sound.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from standins.harness import Harness
from standins.media_server import tiny_jpeg
from standins.streams import Streams, serve_dash
from xbot.handlers.callbacks import SOUND_COMING
from xbot.i18n import translator
from xbot.sources.ytdlp import NO_SOUND
from xbot.tasks.other_sites import SOUND_DATA

CHAT = 8101
OTHER_CHAT = 8102
GROUP = -1008103
MEMBER = 8104

pytestmark = pytest.mark.skipif(
    not (shutil.which("ffmpeg") and shutil.which("ffprobe")), reason="needs ffmpeg"
)


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A 2 s clip: H.264 picture and AAC sound, made once by ffmpeg."""
    path = tmp_path_factory.mktemp("sound") / "clip.mp4"
    subprocess.run(
        ["ffmpeg", "-hide_banner", "-loglevel", "error", "-y",
         "-f", "lavfi", "-i", "sine=frequency=440:duration=2",
         "-f", "lavfi", "-i", "color=c=blue:s=64x48:d=2:r=10",
         "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac", "-b:a", "32k",
         "-shortest", "-movflags", "+faststart", str(path)],
        check=True, timeout=60,
    )  # fmt: skip
    return path.read_bytes()


@pytest.fixture
async def h(start_harness: Callable[..., Awaitable[Harness]]) -> Harness:
    return await start_harness(ytdlp_sites="all")


def page(h: Harness, name: str, clip: bytes) -> str:
    """A page about the clip, saying its title, uploader, length and still (JSON-LD)."""
    video = h.media.add(f"/media/{name}.mp4", clip, "video/mp4")
    still = h.photo(f"{name}-still", data=tiny_jpeg(160, 120))
    return h.video_page(
        name,
        video,
        json_ld={
            "@context": "https://schema.org",
            "@type": "VideoObject",
            "name": "Cats & boxes",
            "contentUrl": video,
            "thumbnailUrl": still,
            "duration": "PT2S",
            "author": {"@type": "Person", "name": "Bob"},
        },
    )


def ok_calls(h: Harness, method: str, chat: int) -> list[Any]:
    return [c for c in h.api.calls_for(method, chat) if c.status == 200]


def buttons(message: dict[str, Any]) -> dict[str, str]:
    rows = (message.get("reply_markup") or {}).get("inline_keyboard", [])
    return {b["text"]: b.get("callback_data", "") for row in rows for b in row}


async def video_for(h: Harness, chat: int, url: str, **kw: Any) -> dict[str, Any]:
    h.api.user_message(chat, url, **kw)
    await h.api.wait_for(lambda: any("video" in m for m in h.sent(chat)), 20)
    await h.wait_idle(15)
    return next(m for m in h.sent(chat) if "video" in m)


async def press(h: Harness, chat: int, message_id: int, user: int | None = None) -> str | None:
    query_id = h.api.callback_query(chat, message_id, SOUND_DATA, user)["callback_query"]["id"]
    await h.api.wait_for(lambda: query_id in h.api.callback_answers, 5)
    text = h.api.callback_answers[query_id].get("text")
    return None if text is None else str(text)


async def audio_after(h: Harness, chat: int, count: int) -> Any:
    await h.api.wait_for(lambda: len(ok_calls(h, "sendAudio", chat)) >= count, 20)
    await h.wait_idle(15)
    return ok_calls(h, "sendAudio", chat)[count - 1]


async def test_the_sound_button_sends_the_clips_sound_in_reply_to_the_video(
    h: Harness, clip: bytes
) -> None:
    url = page(h, "cats", clip)
    video = await video_for(h, CHAT, url)
    (label,) = [t for t, d in buttons(video).items() if d == SOUND_DATA]
    assert "🎵" in label

    answer = await press(h, CHAT, video["message_id"])
    assert answer == translator("en").gettext(SOUND_COMING), "answered at once"
    call = await audio_after(h, CHAT, 1)
    assert "audio" in call.files, "uploaded"
    assert call.params["title"] == "Cats & boxes"
    assert call.params["performer"] == "Bob"
    assert call.params["duration"] == 2
    assert "thumbnail" in call.params, "the site's still goes with it"
    assert call.params["reply_parameters"]["message_id"] == video["message_id"]
    assert f'href="{url}"' in call.params["caption"]
    sent = next(m for m in h.sent(CHAT) if "audio" in m)
    audio = sent["audio"]
    # The Audio Telegram answers with, as a client reads it.
    assert (audio["title"], audio["performer"], audio["duration"]) == ("Cats & boxes", "Bob", 2)
    assert audio["file_name"] == "audio.m4a"
    assert audio["mime_type"].startswith("audio/")
    assert audio["file_size"] > 0
    assert audio["thumbnail"]["width"] == 160
    assert "reply_markup" not in sent, "no button under the sound itself"
    assert ok_calls(h, "sendVideo", CHAT) == [ok_calls(h, "sendVideo", CHAT)[0]], "one video"


async def test_the_same_sound_again_is_sent_by_file_id_without_a_download(
    h: Harness, clip: bytes
) -> None:
    url = page(h, "again", clip)
    video = await video_for(h, CHAT, url)
    await press(h, CHAT, video["message_id"])
    first = await audio_after(h, CHAT, 1)
    file_id = next(m for m in h.sent(CHAT) if "audio" in m)["audio"]["file_id"]
    hits = h.media.hits["/media/again.mp4"]
    # Another chat: the same link's video (from the cache, with its button), then its sound.
    other = await video_for(h, OTHER_CHAT, url)
    assert SOUND_DATA in buttons(other).values(), "a cached video carries the button too"
    await press(h, OTHER_CHAT, other["message_id"])
    second = await audio_after(h, OTHER_CHAT, 1)
    assert second.files == {}, "no upload"
    assert second.params["audio"] == file_id
    assert h.media.hits["/media/again.mp4"] == hits, "no download"
    assert "audio" in first.files


async def test_a_chat_set_to_audio_only_gets_the_sound_never_the_cached_video(
    h: Harness, clip: bytes
) -> None:
    url = page(h, "only", clip)
    await video_for(h, CHAT, url)  # the video is in the cache now, under the link
    h.api.user_message(OTHER_CHAT, "/settings")
    await h.api.wait_for(lambda: any(buttons(m) for m in h.sent(OTHER_CHAT)), 10)
    menu = next(m for m in h.sent(OTHER_CHAT) if buttons(m))
    (toggle,) = [d for t, d in buttons(menu).items() if "🎵" in t and "audio" in t.lower()]
    query_id = h.api.callback_query(OTHER_CHAT, menu["message_id"], toggle)["callback_query"]["id"]
    await h.api.wait_for(lambda: query_id in h.api.callback_answers, 5)
    assert (await h.services.chats.get(OTHER_CHAT, h.clock())).settings.ytdlp_audio

    update = h.api.user_message(OTHER_CHAT, url)
    call = await audio_after(h, OTHER_CHAT, 1)
    assert call.params["title"] == "Cats & boxes"
    assert call.params["reply_parameters"]["message_id"] == update["message"]["message_id"]
    assert ok_calls(h, "sendVideo", OTHER_CHAT) == [], "the sound alone"


async def test_any_member_of_a_group_may_ask_for_the_sound(h: Harness, clip: bytes) -> None:
    """Like pasting a link, which any member may do; the task is the presser's (the
    queue's bound on one user's work in flight holds for presses too)."""
    url = page(h, "group", clip)
    await h.services.chats.set_settings(GROUP, h.clock(), ytdlp=True)
    video = await video_for(h, GROUP, url, user_id=MEMBER + 1, chat_type="supergroup")
    await press(h, GROUP, video["message_id"], MEMBER)
    call = await audio_after(h, GROUP, 1)
    assert call.params["reply_parameters"]["message_id"] == video["message_id"]


async def test_an_audio_only_chats_sound_is_forwarded_to_its_channel_by_file_id(
    h: Harness, clip: bytes
) -> None:
    channel, user = -1008105, 8106
    h.api.add_chat(channel, "channel", title="Tunes", username="tunes", creator=user)
    await h.services.chats.set_settings(
        user, h.clock(), channel_id=channel, channel_title="Tunes", ytdlp_audio=True
    )
    h.api.user_message(user, page(h, "fwd", clip))

    def prompt() -> dict[str, Any] | None:
        found = [m for m in h.sent(user) if "Forward this post" in m.get("text", "")]
        return found[-1] if found else None

    await h.api.wait_for(lambda: prompt() is not None, 30)
    await h.wait_idle(30)  # the prompt's record is written when the task is done
    message = prompt()
    assert message is not None
    sent = next(m for m in h.sent(user) if "audio" in m)
    h.api.callback_query(user, message["message_id"], buttons(message)["Forward to channel"], user)
    await h.api.wait_for(lambda: any("audio" in m for m in h.sent(channel)), 20)
    (copied,) = [m for m in h.sent(channel) if "audio" in m]
    assert copied["audio"]["file_id"] == sent["audio"]["file_id"], "by file_id"
    assert copied["audio"]["title"] == "Cats & boxes"


async def test_an_audio_only_chat_gets_a_video_without_sound_as_the_video(
    h: Harness, streams: Streams
) -> None:
    """The "audio only" setting means the sound where there is one: a post without any is
    sent as without the setting, never with a sentence that it does not fit."""
    await h.services.chats.set_settings(CHAT, h.clock(), ytdlp_audio=True)
    video = await video_for(h, CHAT, serve_dash(h.media, streams, "/mute", sound=False))
    assert video["video"]["height"] == 1080, "the best, as without the setting"
    assert ok_calls(h, "sendAudio", CHAT) == []
    assert [m["text"] for m in h.sent(CHAT) if "text" in m] == [], "no sentence"


async def test_the_sound_button_under_a_video_without_sound_says_it_has_none(
    h: Harness, streams: Streams
) -> None:
    video = await video_for(h, CHAT, serve_dash(h.media, streams, "/quiet", sound=False))
    await press(h, CHAT, video["message_id"])
    sentence = translator("en").gettext(NO_SOUND)
    await h.api.wait_for(lambda: any(m.get("text") == sentence for m in h.sent(CHAT)), 20)
    await h.wait_idle(15)
    assert ok_calls(h, "sendAudio", CHAT) == []
    assert [m["text"] for m in h.sent(CHAT) if "text" in m] == [sentence], "one sentence"


async def test_an_audio_only_chat_gets_a_bare_silent_file_as_the_video(
    h: Harness, streams: Streams
) -> None:
    """A bare file states no codecs, so its silence shows only when the sound is taken
    out after the download: the same answer as for a manifest, not a retried failure."""
    await h.services.chats.set_settings(CHAT, h.clock(), ytdlp_audio=True)
    url = h.media.add("/bare/silent.mp4", streams.videos[240].read_bytes(), "video/mp4")
    video = await video_for(h, CHAT, url)
    assert video["video"]["height"] == 240
    assert ok_calls(h, "sendAudio", CHAT) == []
    assert [m["text"] for m in h.sent(CHAT) if "text" in m] == [], "no sentence"
