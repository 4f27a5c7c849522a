"""A link to another site (YouTube, TikTok, Reddit, … through yt-dlp) becomes its video.

The deliver task of a link whose kind is ``other`` lands here
(`Delivery.other_sites`); it sends, records and announces through the same
`Outbox` as X posts. The same rules as for X posts hold:

- **SSRF first.** The URL's host is checked and resolved before yt-dlp
  sees it (`xbot.media.netguard`); inside yt-dlp every connection is checked
  on the address it is made to (`xbot.media.connguard`).
- **Link cache.** The link arrives as ``url:{normalised url}``; only
  yt-dlp knows which video it is (``yt:{extractor}:{id}``). Entries are
  written under both keys: the same URL again is answered without asking
  the site at all, and another spelling of the same video costs one
  extraction and no download.
- **Single flight.** One job per link key and per video key at a time; the
  second waits, then finds the cache filled.
- **Two-phase.** The payload records the sent video right after Telegram
  confirms it, in one write with the cache entries (`Outbox.remember`); a
  task resumed after that point only finishes up.
- **Progress.** The chat action runs meanwhile; a job longer than a few
  seconds gets one status message (`xbot.sending.progress`), deleted when the video
  is sent or turned into the error sentence.
- **Errors** arrive as xbot's own (`xbot.sources.ytdlp.translate`) and leave as
  one sentence in the chat, or as `RetryLater` when the site may recover.
- **The sound alone.** Every video sent carries a 🎵 button (`sound_markup`); a
  press queues a deliver task with ``audio`` set (`xbot.handlers.callbacks`), and a
  chat's "audio only" setting sets it for every link. Such a task asks yt-dlp for
  the sound (M4A, else MP3), sends it with ``sendAudio`` (title and performer from
  the site, duration, thumbnail) and caches it under its own keys
  (`xbot.storage.link_cache.audio_key`), never the video's. A post with no sound
  (`VideoInfo.sound`, known before a download) goes as without the setting; a press
  is told the video has none.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import attrs
import httpx
from telegram import InlineKeyboardButton, InlineKeyboardMarkup

from xbot.config import Settings
from xbot.errors import (
    BlockedAddress,
    FetchError,
    NoSound,
    RetryLater,
    StaleFileId,
    TooLarge,
    TransientFetch,
    UnsupportedLink,
)
from xbot.i18n import DEFAULT, N_, translate_reason, translator
from xbot.logs import kv
from xbot.media import thumbnail as thumbnails
from xbot.media.mp4info import Mp4Info, probe_mp4
from xbot.media.tempfiles import room, temp_folder
from xbot.sending.caption import build_caption, post_from_parts
from xbot.sending.progress import EVERY, FIRST_AFTER, Snapshot, StatusReporter
from xbot.sending.sender import OutMedia, Sender
from xbot.sending.sent import SentItem
from xbot.sources.ytdlp import NO_SOUND, VideoInfo, YtdlpSource, disk_need
from xbot.storage.link_cache import CachedItem, CachedPost, quality_key, sound_or_video_key
from xbot.storage.state import ChatSettings, max_height
from xbot.tasks.callback_data import Action, CallbackData, encode
from xbot.tasks.outbox import Outbox
from xbot.tasks.payloads import DeliverPayload
from xbot.tasks.worker import TaskContext

log = logging.getLogger(__name__)


X_ONLY = N_("I can only fetch posts from X (twitter.com / x.com) here.")
# Translators: the button under a video from another site; it sends the video's sound.
SOUND_ONLY = N_("Sound only")
SOUND_DATA = encode(CallbackData(Action.AUDIO))


def sound_markup(lang: str = DEFAULT) -> InlineKeyboardMarkup:
    """The 🎵 button under a video from another site, in the chat's language."""
    label = f"🎵 {translator(lang).gettext(SOUND_ONLY)}"
    return InlineKeyboardMarkup([[InlineKeyboardButton(label, callback_data=SOUND_DATA)]])


def too_large_sentence(limit_mb: int, url: str, lang: str = DEFAULT) -> str:
    """What a user reads when the video cannot fit; the link lets them open it themselves."""
    return (
        translator(lang)
        .gettext("That video does not fit the {limit} MB upload limit, so I cannot send it: {url}")
        .format(limit=limit_mb, url=url)
    )


def sentence_for(
    error: FetchError, *, url: str, limit_mb: int, group: bool, lang: str = DEFAULT
) -> str | None:
    """The one sentence a failed link gets in its chat, in `lang`, or None to stay quiet.

    A link nothing can fetch is ignored in groups (people paste links for
    each other there, not for the bot) and gets one sentence in private. The
    reason is a msgid where it was raised (a sentence with a detail filled in,
    such as an HTTP status, stays English).
    """
    if isinstance(error, TooLarge):
        return too_large_sentence(limit_mb, url, lang)
    if isinstance(error, UnsupportedLink | BlockedAddress) and group:
        return None
    return translate_reason(error.reason, lang)


def fill_from_header(info: VideoInfo, header: Mp4Info) -> VideoInfo:
    """The picture size and duration of the file sent, from its own header; the site's
    only where the header is silent (the file is what the player shows: a merged
    rendition, a step down, a direct link that said nothing).

    The picture size is taken as a pair, never a site's width with the file's height.
    """
    width, height = info.width, info.height
    if header.width and header.height:
        width, height = header.width, header.height
    return attrs.evolve(info, width=width, height=height, duration=header.duration or info.duration)


def caption_parts(info: VideoInfo) -> dict[str, str]:
    """What the cache keeps to rebuild the caption in each chat's style."""
    return {
        "author_name": info.uploader,
        "author_handle": "",
        "text": info.title,
        "sensitive": "1" if info.adult else "0",
        "source": "ytdlp",
        "ytdlp_key": info.key,
    }


def cache_entries(
    info: VideoInfo,
    link_key: str,
    sent: Sequence[SentItem],
    now: float,
    *,
    audio: bool = False,
) -> list[CachedPost]:
    """What the cache keeps: under the video's key, and under the link's spelling too
    (the sound alone under both keys' `audio_key`)."""
    key = sound_or_video_key(info.key, audio=audio)
    items = tuple(CachedItem(kind=s.kind, file_id=s.file_id, source_url=info.url) for s in sent)
    entry = CachedPost(
        key=key, url=info.url, caption_parts=caption_parts(info), items=items,
        created_at=now,
    )  # fmt: skip
    if link_key == key:
        return [entry]
    return [entry, attrs.evolve(entry, key=link_key)]


@attrs.define
class OtherSites:
    """Delivers non-X links through yt-dlp; `xbot.app` hands it to `Delivery`.

    Attributes:
        outbox: sends, records, announces; its flights are shared with X posts.
        source: yt-dlp (options, sites, the SSRF pre-check) and its jobs.
        guarded: the HTTP client for URLs from the site (the thumbnail).
        progress_first, progress_every: the status message's timings (tests shorten them).
        clock: monotonic seconds for the status message.
    """

    settings: Settings
    outbox: Outbox
    source: YtdlpSource
    guarded: httpx.AsyncClient
    progress_first: float = FIRST_AFTER
    progress_every: float = EVERY
    clock: Callable[[], float] = time.monotonic

    @property
    def sender(self) -> Sender:
        return self.outbox.sender

    async def __call__(
        self,
        ctx: TaskContext,
        payload: DeliverPayload,
        settings: ChatSettings,
        *,
        last: bool = True,
    ) -> bool:
        """Deliver the link; False when yt-dlp does not know it and `last` is not set
        (the caller asks gallery-dl next: `xbot.sources.other_route`)."""
        if any(step.step == 0 for step in payload.sent):
            await self._resume(ctx, payload)
            return True
        if not settings.ytdlp_enabled(payload.chat_type):
            # Turned off since the link was queued, or reached through a t.co link
            # the handler could not see through: the chat's choice holds either way.
            if not payload.is_group:
                await self._say(ctx, payload, translator(payload.dest.lang).gettext(X_ONLY))
            return True
        try:
            await self.source.precheck(payload.url)
        except (BlockedAddress, UnsupportedLink) as exc:
            await self._say_for(ctx, payload, exc)
            return True
        if payload.audio or settings.ytdlp_audio:
            try:
                return await self._deliver(ctx, payload, settings, last=last, audio=True)
            except NoSound:
                # Only a link of an "audio only" chat gets here (a press of the 🎵 button
                # is told that the video has no sound). The setting means "the sound where
                # there is one": a post without any (a silent video, an image yt-dlp
                # claims) goes as it would without the setting, with all that implies (the
                # video's cache, gallery-dl after yt-dlp), never a sentence that is untrue.
                log.info("no sound, the post instead %s", kv(url=payload.url))
        # From here on the link's cache key is the chat's quality's (recorded with
        # what is sent, so a resumed task keeps it). The sound alone has no quality.
        payload = attrs.evolve(payload, key=quality_key(payload.key, settings.video_quality))
        return await self._deliver(ctx, payload, settings, last=last, audio=False)

    async def _deliver(
        self,
        ctx: TaskContext,
        payload: DeliverPayload,
        settings: ChatSettings,
        *,
        last: bool,
        audio: bool,
    ) -> bool:
        link_key = sound_or_video_key(payload.key, audio=audio)
        async with self.outbox.hold(link_key):
            if await self._from_cache(ctx, payload, link_key, settings, audio=audio):
                return True
            return await self._fetch(ctx, payload, settings, last=last, audio=audio)

    async def _fetch(
        self,
        ctx: TaskContext,
        payload: DeliverPayload,
        settings: ChatSettings,
        *,
        last: bool,
        audio: bool,
    ) -> bool:
        status = StatusReporter(
            self.sender,
            payload.dest,
            first_after=self.progress_first,
            every=self.progress_every,
            action="upload_document" if audio else "upload_video",
            clock=self.clock,
        )
        async with status:
            try:
                done = await self._download_and_send(ctx, payload, settings, status, audio=audio)
            except TransientFetch as exc:
                raise RetryLater(exc.reason) from exc  # the status message goes with the block
            except FetchError as exc:
                if isinstance(exc, NoSound) and not payload.audio:
                    raise  # the chat's setting, not a press: the post instead (`__call__`)
                if isinstance(exc, UnsupportedLink) and not last:
                    return False  # not yt-dlp's: gallery-dl is asked next, in silence
                sentence = self._sentence(payload, exc)
                if sentence is not None:
                    await status.fail(sentence)
                return True
            await status.done()
        if done is not None:
            payload, url, parts = done
            await self.outbox.announce(ctx, payload, url, parts)
        return True

    async def _download_and_send(
        self,
        ctx: TaskContext,
        payload: DeliverPayload,
        settings: ChatSettings,
        status: StatusReporter,
        *,
        audio: bool = False,
    ) -> tuple[DeliverPayload, str, Mapping[str, str]] | None:
        """Extract, then (on a cache miss under the video's key) download and send.

        Returns what `announce` needs, or None when the cache answered (it announced).
        """
        link_key = sound_or_video_key(payload.key, audio=audio)
        with temp_folder(self.settings.data_dir) as folder:
            quality = settings.video_quality
            async with self.source.open_job(
                payload.url,
                folder,
                status.update,
                max_height=None if audio else max_height(quality),
                audio=audio,
            ) as job:
                info = await job.extract()
                if audio and not info.sound:
                    raise NoSound(NO_SOUND)  # decided before a byte is downloaded
                if not audio:
                    info = attrs.evolve(info, key=quality_key(info.key, quality))
                key = sound_or_video_key(info.key, audio=audio)
                async with self.outbox.hold_also(key, link_key):
                    if await self._from_cache(ctx, payload, key, settings, audio=audio):
                        return None
                    status.update(Snapshot("download", 0, info.size))
                    # A merge holds the parts and the result at once.
                    need = disk_need(self.settings.upload_limit, job.config.merge)
                    with room(folder, need):
                        path = await job.download()
                    if audio or not info.audio_only:
                        header = await asyncio.to_thread(probe_mp4, path)
                        info = fill_from_header(info, header)
                    thumbnail = await self._thumbnail(info, folder, audio=audio)
                    size = path.stat().st_size
                    status.update(Snapshot("upload", size))
                    out = self._out(info, path, thumbnail, audio=audio)
                    parts = caption_parts(info)
                    items = (
                        await self.outbox.send_step(
                            payload.dest,
                            [out],
                            caption=self._caption(info.key, info.url, parts, settings),
                            spoiler=info.adult and settings.spoiler_sensitive,
                            reply_markup=self._markup(out.kind, payload),
                        )
                    ).items
                    # Phase one: the record and the cache entries, in one write at once.
                    payload = self.outbox.record(ctx, payload, 0, items)
                    entries = cache_entries(info, link_key, items, ctx.clock(), audio=audio)
                    await self.outbox.remember(ctx, *entries)
                    log.info("ytdlp sent %s", kv(key=info.key, size=size, chat=ctx.task.chat_id))
        return payload, info.url, parts

    @staticmethod
    def _out(info: VideoInfo, path: Path, thumbnail: Path | None, *, audio: bool) -> OutMedia:
        """The upload: the sound alone as an audio (title and performer from the site), a
        video, or a file when the site's only format has no picture."""
        if audio:
            return OutMedia(
                "audio",
                path,
                "upload",
                duration=info.duration,
                filename=f"audio{path.suffix}",
                thumbnail=thumbnail,
                title=info.title or None,
                performer=info.uploader or None,
            )
        return OutMedia(
            "document" if info.audio_only else "video",
            path,
            "upload",
            info.width,
            info.height,
            info.duration,
            filename=f"video.{info.ext}",
            thumbnail=thumbnail,
        )

    @staticmethod
    def _markup(kind: str, payload: DeliverPayload) -> InlineKeyboardMarkup | None:
        """The 🎵 button, under a video only."""
        return sound_markup(payload.dest.lang) if kind == "video" else None

    async def _thumbnail(self, info: VideoInfo, folder: Path, *, audio: bool) -> Path | None:
        """The site's still for the player, if it gives one Telegram takes; never fails the video.

        The URL comes from the site, so it goes through the guarded client like the media.
        """
        if (info.audio_only and not audio) or not info.thumbnail:
            return None
        dest = folder / thumbnails.FILENAME
        return await thumbnails.fetch(self.guarded, info.thumbnail, dest)

    async def _from_cache(
        self,
        ctx: TaskContext,
        payload: DeliverPayload,
        key: str,
        settings: ChatSettings,
        *,
        audio: bool = False,
    ) -> bool:
        """Answer from the link cache by file_id; False on a miss or a stale file_id."""
        cached = await self.outbox.lookup(key, ctx.clock())
        if cached is None or not cached.items:
            return False
        parts = cached.caption_parts
        item = cached.items[0]
        link_key = sound_or_video_key(payload.key, audio=audio)
        try:
            sent = (
                await self.outbox.send_step(
                    payload.dest,
                    [OutMedia(item.kind, item.file_id, "file_id")],
                    caption=self._caption(key, cached.url, parts, settings),
                    spoiler=parts.get("sensitive") == "1" and settings.spoiler_sensitive,
                    reply_markup=self._markup(item.kind, payload),
                )
            ).items
        except StaleFileId:
            log.info("stale file_id, fetching again %s", kv(key=key))
            video_key = parts.get("ytdlp_key", key)
            await self.outbox.forget(key, link_key, sound_or_video_key(video_key, audio=audio))
            return False
        payload = self.outbox.record(ctx, payload, 0, sent)
        # Found by the video's key: the link's spelling hits next time. Written at once,
        # with the record, before anything else goes out.
        alias = None
        if key != link_key:
            alias = attrs.evolve(cached, key=link_key, created_at=ctx.clock())
        await self.outbox.remember(ctx, alias)
        await self.outbox.announce(ctx, payload, cached.url, parts)
        return True

    async def _resume(self, ctx: TaskContext, payload: DeliverPayload) -> None:
        """The video went out before a crash: only the follow-up (the prompt) is left."""
        cached = await self.outbox.lookup(payload.key, ctx.clock())
        url = cached.url if cached else payload.url
        parts = cached.caption_parts if cached else {}
        await self.outbox.announce(ctx, payload, url, parts)

    def _caption(self, key: str, url: str, parts: Mapping[str, str], settings: ChatSettings) -> str:
        return build_caption(
            post_from_parts(key, url, parts),
            style=settings.caption_style,
            template=settings.caption_template,
        )

    def _sentence(self, payload: DeliverPayload, error: FetchError) -> str | None:
        return sentence_for(
            error,
            url=payload.url,
            limit_mb=self.settings.upload_limit_mb,
            group=payload.is_group,
            lang=payload.dest.lang,
        )

    async def _say_for(self, ctx: TaskContext, payload: DeliverPayload, error: FetchError) -> None:
        sentence = self._sentence(payload, error)
        if sentence is not None:
            await self._say(ctx, payload, sentence)

    async def _say(self, ctx: TaskContext, payload: DeliverPayload, sentence: str) -> None:
        await self.outbox.say(payload.dest, sentence)
