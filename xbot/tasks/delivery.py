"""The task behind every link: fetch the post, send its media, remember what was sent.

Two-phase delivery: the payload records each album right after Telegram
confirms it (`TaskContext.stage_payload`, fenced by the lease) and the record
is written before the next album goes out (`TaskContext.flush`), so a crash
between albums resumes with the next album and never resends one; the last
album's record rides on the task's done mark, or on the link cache entry's
write. The link cache is read first (one Bot API call per album, no
download) and written last; one fetch is in flight per key (the outbox's
flights). Sending, recording and the follow-up are the `Outbox`'s; which
source fetches the post is the `PostSource`'s (`xbot.sources`). Links to
other sites go to `xbot.tasks.other_sites`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Protocol

import attrs
import httpx

from xbot.config import Settings
from xbot.errors import (
    AllSourcesDown,
    BlockedAddress,
    FetchError,
    OutageRetry,
    PayloadError,
    Permanent,
    PostUnavailable,
    RetryLater,
    StaleFileId,
    TooLarge,
    TransientFetch,
    UnsupportedLink,
    UrlNotFetched,
)
from xbot.i18n import N_, translate_reason, translator
from xbot.links import OTHER_SITE, Link, classify, site_named
from xbot.logs import kv
from xbot.media import thumbnail as thumbnails
from xbot.media import ugoira
from xbot.media.by_url import URL_OTHER_LIMIT, by_url, photo_ratio_ok, photo_shape_ok
from xbot.media.download import DownloadResult, download
from xbot.media.models import R18, MediaItem, Post, Variant
from xbot.media.mp4info import probe_mp4
from xbot.media.speed_floor import SpeedFloor
from xbot.media.tempfiles import temp_folder
from xbot.metrics import Metrics
from xbot.sending import video_choice
from xbot.sending.albums import PlanKind, one_send, plan_sends
from xbot.sending.caption import (
    CAPTION_LIMIT,
    TEXT_LIMIT,
    build_caption,
    build_text_reply,
    caption_parts,
    post_from_parts,
)
from xbot.sending.caption_long import long_messages, needs_long_text
from xbot.sending.progress import FIRST_AFTER, ChatAction, StatusReporter, keep_chat_action
from xbot.sending.sender import OutMedia, Sender
from xbot.sending.sent import OutKind, SentItem
from xbot.sources import PostSource, other_route
from xbot.sources.gallerydl import gallery_key
from xbot.sources.x import DOWN, card_link, expand_tco
from xbot.storage.link_cache import CachedItem, CachedPost, entry_key
from xbot.storage.queue import Task
from xbot.storage.state import ChatSettings, ChatStore
from xbot.tasks.outbox import Outbox
from xbot.tasks.payloads import DELIVER, DeliverPayload, NoticePayload
from xbot.tasks.worker import FinishedHook, TaskContext

log = logging.getLogger(__name__)

KIND = DELIVER
UPLOAD_PHOTO_LIMIT = 10 * 1024 * 1024  # a bigger photo goes as a document
# Long work shows progress; a link answered sooner (a cache hit, a quick fetch)
# needs no "sending a photo…" status, and skipping it halves the Bot API calls
# of a cache hit (docs/benchmarks.md, "Bot").
CHAT_ACTION_AFTER = 1.0
# Every X source down: the link waits up to an hour (then a dead-letter notice), and
# the chat hears one sentence once the outage is more than a blip.
OUTAGE_BUDGET = 3600.0
OUTAGE_TELL_AFTER = 30.0
TCO_NOWHERE = N_("That t.co link does not lead anywhere I can fetch.")


class OtherSiteDelivery(Protocol):
    """yt-dlp's delivery (`xbot.tasks.other_sites.OtherSites`): False when it does not
    know the link and `last` is not set."""

    def __call__(
        self, ctx: TaskContext, payload: DeliverPayload, settings: ChatSettings, *, last: bool = ...
    ) -> Awaitable[bool]: ...


@attrs.define
class Delivery:
    """Everything a deliver task needs, wired once by the app.

    Attributes:
        outbox: sends, records and announces (the forward prompt hangs there).
        source: fetches a post (`xbot.sources.SourceRouter`: by the link's kind).
        guarded: the HTTP client for user-derived URLs (SSRF guard at connect time).
        other_sites: delivers a link to another site (yt-dlp).
        progress_first: when a gallery-dl post's status message appears (tests shorten it).
    """

    settings: Settings
    outbox: Outbox
    source: PostSource
    chats: ChatStore
    guarded: httpx.AsyncClient
    other_sites: OtherSiteDelivery
    progress_first: float = FIRST_AFTER

    @property
    def sender(self) -> Sender:
        return self.outbox.sender

    async def run(self, ctx: TaskContext) -> None:
        payload = DeliverPayload.from_task(ctx.task)
        now = ctx.clock()
        chat = await self.chats.get(ctx.task.chat_id, now)
        if payload.kind == "tco":
            payload = await self._expand(ctx, payload)
        if payload.kind == "other":
            await self._other_site(ctx, payload, chat.settings)
            return
        if payload.kind == "gallery":
            # Something of it went out through gallery-dl before a restart: go on there.
            await self._gallery(ctx, payload, chat.settings, last=True)
            return
        resolved = await self._resolve(ctx, payload)
        if resolved is None:
            return
        payload = resolved
        async with keep_chat_action(
            self.sender, payload.dest, "upload_photo", after=CHAT_ACTION_AFTER
        ) as action:
            await self._deliver_post(ctx, payload, chat.settings, action)

    async def _other_site(
        self, ctx: TaskContext, payload: DeliverPayload, settings: ChatSettings
    ) -> None:
        """Another site: gallery-dl or yt-dlp first by `other_route.engines`, then the other.
        A video's sound alone (the 🎵 button) is yt-dlp's only."""
        gallery_too = settings.ytdlp_enabled(payload.chat_type) and not payload.audio
        if not gallery_too or not self._serves_gallery():
            await self.other_sites(ctx, payload, settings)  # it answers the chat's choice
            return
        order = other_route.engines(payload.url)
        for n, engine in enumerate(order):
            last = n == len(order) - 1
            if engine == "ytdlp":
                done = await self.other_sites(ctx, payload, settings, last=last)
            else:
                gallery = attrs.evolve(payload, kind="gallery", key=gallery_key(payload.key))
                done = await self._gallery(ctx, gallery, settings, last=last)
            if done:
                return

    def _serves_gallery(self) -> bool:
        serves = getattr(self.source, "serves", None)
        return serves is None or bool(serves(Link(url="", key="", kind="gallery")))

    async def _gallery(
        self, ctx: TaskContext, payload: DeliverPayload, settings: ChatSettings, *, last: bool
    ) -> bool:
        """An image post through gallery-dl, answered as an X post is; False when gallery-dl
        does not know the link (or found nothing to send) and `last` is not set.

        A run can take seconds: the status message says so after `FIRST_AFTER`.
        """
        status = StatusReporter(
            self.sender, payload.dest, first_after=self.progress_first, action="upload_photo"
        )
        async with status:
            try:
                await self._deliver_post(
                    ctx, payload, settings, ChatAction("upload_photo"), fallback=not last
                )
            except UnsupportedLink:
                return False  # not raised when `last`: the chat was answered
            await status.done()
        return True

    async def _expand(self, ctx: TaskContext, payload: DeliverPayload) -> DeliverPayload:
        try:
            target = await expand_tco(self.guarded, payload.url)
        except TransientFetch as exc:
            raise RetryLater(exc.reason) from exc
        except FetchError as exc:
            await self._tell(ctx, payload, TCO_NOWHERE)
            raise Permanent(exc.reason, notify=False) from exc
        link = classify(target)
        if link is None or link.kind == "tco":
            await self._tell(ctx, payload, TCO_NOWHERE)
            raise Permanent("t.co target unsupported", notify=False)
        expanded = attrs.evolve(
            payload, url=link.url, key=link.key, kind=link.kind, post_id=link.post_id,
            handle=link.handle,
        )  # fmt: skip
        await ctx.save_payload(expanded.to_json())
        return expanded

    async def _resolve(self, ctx: TaskContext, payload: DeliverPayload) -> DeliverPayload | None:
        """The link under its final cache key (a Bluesky handle becomes its DID); None: answered."""
        resolve = getattr(self.source, "resolve", None)
        if resolve is None:
            return payload
        try:
            link = await resolve(payload.link)
        except PostUnavailable as exc:
            await self._tell(ctx, payload, exc.reason)
            return None
        except TransientFetch as exc:
            raise RetryLater(exc.reason) from exc
        except FetchError as exc:
            raise Permanent(exc.reason) from exc
        if link.key == payload.key:
            return payload
        resolved = attrs.evolve(payload, url=link.url, key=link.key, handle=link.handle)
        await ctx.save_payload(resolved.to_json())
        return resolved

    async def _deliver_post(
        self,
        ctx: TaskContext,
        payload: DeliverPayload,
        settings: ChatSettings,
        action: ChatAction,
        *,
        fallback: bool = False,
    ) -> None:
        # Photos sent as files are other file_ids than photos: their own entry.
        key = entry_key(payload.key, as_documents=settings.photos_as_documents)
        async with self.outbox.hold(key):
            cached = await self.outbox.lookup(key, ctx.clock())
            if cached is not None:
                rating = post_from_parts(key, cached.url, cached.caption_parts).rating
                refusal = rating_refusal(rating, settings, payload.chat_type)
                if refusal is not None:
                    # The same gate as a fresh fetch: a file_id is no way around it.
                    await self._tell(ctx, payload, refusal)
                    return
                try:
                    payload = await self._send_cached(ctx, payload, cached, settings)
                    await self.outbox.announce(ctx, payload, cached.url, cached.caption_parts)
                    return
                except StaleFileId:
                    log.info("stale file_id, refetching %s", kv(key=key))
                    await self.outbox.forget(key)
                    payload = DeliverPayload.from_task(ctx.task)
            post = await self._fetch(ctx, payload, settings, fallback=fallback)
            if post is None:
                return
            refusal = rating_refusal(post.rating, settings, payload.chat_type)
            if refusal is not None:
                await self._tell(ctx, payload, refusal)
                return
            if any(m.kind != "photo" for m in post.media):
                action.value = "upload_video"
            payload = await self._send_fresh(ctx, payload, post, settings)
            await self.outbox.announce(ctx, payload, post.url, caption_parts(post))

    async def _fetch(
        self,
        ctx: TaskContext,
        payload: DeliverPayload,
        settings: ChatSettings,
        *,
        fallback: bool = False,
    ) -> Post | None:
        """The post from its source; None when the chat was answered instead.

        With `fallback`, a source that does not know the link raises `UnsupportedLink`
        on to the caller, who asks the next one (another site: gallery-dl, yt-dlp).
        """
        try:
            post = await self.source.fetch(payload.link)
        except PostUnavailable as exc:
            await self._tell(ctx, payload, exc.reason)
            return None
        except AllSourcesDown as exc:
            raise self._outage(ctx, payload, exc) from exc
        except TransientFetch as exc:
            raise RetryLater(exc.reason) from exc
        except FetchError as exc:
            if fallback and isinstance(exc, UnsupportedLink):
                raise
            if payload.kind == "gallery":
                # gallery-dl hung, crashed, printed junk, or the link is not one: one
                # sentence, as for yt-dlp's sites (none in a group for a link nothing
                # knows), and the task ends; it is never retried.
                if not (payload.is_group and isinstance(exc, UnsupportedLink | BlockedAddress)):
                    await self._tell(ctx, payload, exc.reason)
                return None
            raise Permanent(exc.reason) from exc
        if not post.media:
            lang = payload.dest.lang
            texts = self._long_texts(post, settings, lang, TEXT_LIMIT)
            if texts:
                # A short first message (author, the start, the link), then the whole text.
                head = build_caption(post, limit=TEXT_LIMIT, lang=lang, lead=True)
                await self.outbox.send_texts(ctx, payload, [head, *texts])
            else:
                await self._say(ctx, payload, build_text_reply(post, lang), html=True)
            card = card_link(post)
            if card and settings.ytdlp_enabled(payload.chat_type):
                # An external card (a YouTube link in the post): its own task, once.
                card_payload = DeliverPayload.for_link(card, payload.dest, user_id=payload.user_id)
                await ctx.queue.enqueue(
                    KIND, card_payload.to_json(), ctx.task.chat_id, now=ctx.clock(),
                    dedup_key=f"card:{ctx.task.id}:{card.key}", user_id=ctx.task.user_id,
                )  # fmt: skip
            return None
        return post

    def _outage(
        self, ctx: TaskContext, payload: DeliverPayload, exc: AllSourcesDown
    ) -> OutageRetry:
        """Every X source is down: wait it out (counted in time), and say so once.

        The sentence waits for a real outage (every breaker open, or the link
        waiting for half a minute): a one-request blip is retried in silence.
        It is a notice task queued in the retry's transaction (`OutageRetry.notice`):
        never a promise without the retry, and, sent inline once, a chat's 429
        hold dropped it for good (docs/reliability.md, finding 12).
        """
        age = ctx.clock() - ctx.task.created_at
        tell = not payload.told_down and (exc.all_open or age >= OUTAGE_TELL_AFTER)
        notice = None
        if tell:
            ctx.stage_payload(attrs.evolve(payload, told_down=True).to_json())
            # Worded now, in the chat's language: the notice carries its text ready-made.
            text = translate_reason(DOWN, payload.dest.lang)
            notice = NoticePayload(text, payload.dest, for_task=ctx.task.id).to_json()
        return OutageRetry(exc.reason, delay=exc.retry_in, budget=OUTAGE_BUDGET, notice=notice)

    async def _send_cached(
        self,
        ctx: TaskContext,
        payload: DeliverPayload,
        cached: CachedPost,
        settings: ChatSettings,
    ) -> DeliverPayload:
        post = post_from_parts(cached.key, cached.url, cached.caption_parts)
        lang = payload.dest.lang
        texts = self._long_texts(post, settings, lang, CAPTION_LIMIT)
        box = [payload]

        async def record(index: int, sent: list[SentItem], message_id: int | None) -> None:
            box[0] = self.outbox.record(ctx, box[0], index, sent, message_id=message_id)

        await self.outbox.send_file_ids(
            ctx,
            payload.dest,
            [SentItem(i.kind, i.file_id) for i in cached.items],
            caption=self._caption(post, settings, lang, lead=bool(texts)),
            spoiler=settings.spoiler_for(sensitive=post.sensitive, rating=post.rating),
            done=payload.steps_sent(),
            record=record,
        )
        # The same messages as the first time: rebuilt from the same caption parts.
        return await self.outbox.send_texts(ctx, box[0], texts)

    async def _send_fresh(
        self, ctx: TaskContext, payload: DeliverPayload, post: Post, settings: ChatSettings
    ) -> DeliverPayload:
        texts = self._long_texts(post, settings, payload.dest.lang, CAPTION_LIMIT)
        caption = self._caption(post, settings, payload.dest.lang, lead=bool(texts))
        as_docs = settings.photos_as_documents
        kinds: list[PlanKind] = [
            "document" if as_docs and m.kind == "photo" else m.kind for m in post.media
        ]
        steps = plan_sends(kinds)
        spoiler = settings.spoiler_for(sensitive=post.sensitive, rating=post.rating)
        for index, step in enumerate(steps):
            if any(s.step == index for s in payload.sent):
                continue
            await ctx.flush()  # the album before is recorded before this one goes out
            media = [post.media[i] for i in step.items]
            sent, skipped, first = await self._send_step(
                ctx, payload, media, caption if index == 0 else None, spoiler, as_docs=as_docs
            )
            payload = self.outbox.record(
                ctx, payload, index, sent, skipped=skipped, message_id=first
            )
        payload = await self.outbox.send_texts(ctx, payload, texts)
        entry = None
        if payload.skipped == 0:
            key = entry_key(post.key, as_documents=as_docs)
            entry = self._cache_entry(post, payload, ctx.clock(), key)
        # The last album's record and the cache entry in one write, before the
        # flight ends: whoever waits for this key reads the entry next.
        await self.outbox.remember(ctx, entry)
        return payload

    async def _send_step(
        self,
        ctx: TaskContext,
        payload: DeliverPayload,
        media: Sequence[MediaItem],
        caption: str | None,
        spoiler: bool,
        *,
        as_docs: bool = False,
    ) -> tuple[list[SentItem], int, int | None]:
        """URL first (Telegram fetches it), upload when Telegram could not.

        Returns what was sent, how many items were left out (too large), and the
        first message's id (None when nothing went).

        Photos as documents always upload: Telegram takes documents by URL
        only for GIF, PDF and ZIP files.
        """
        dest = payload.dest
        limit = self.settings.upload_limit
        by_url = [None if as_docs and m.kind == "photo" else _by_url(m, limit) for m in media]
        if all(o is not None for o in by_url):
            try:
                sent = await self.outbox.send_step(
                    dest, [o for o in by_url if o is not None], caption=caption, spoiler=spoiler
                )
                return sent.items, 0, sent.first_id
            except UrlNotFetched as exc:
                log.info("telegram could not fetch, uploading %s", kv(key=payload.key, error=exc))
        with temp_folder(self.settings.data_dir) as folder:
            uploads: list[OutMedia] = []
            too_large: list[MediaItem] = []
            for n, item in enumerate(media):
                try:
                    uploads.append(await self._download(item, folder, n, as_docs=as_docs))
                except TooLarge:
                    too_large.append(item)
            sent_items: list[SentItem] = []
            first: int | None = None
            if uploads:
                if one_send([u.kind for u in uploads]):
                    groups = [uploads]
                else:  # a photo turned document: keep the order, one message each
                    groups = [[u] for u in uploads]
                for i, group in enumerate(groups):
                    sent = await self.outbox.send_step(
                        dest, group, caption=caption if i == 0 else None, spoiler=spoiler
                    )
                    sent_items.extend(sent.items)
                    first = sent.first_id if first is None else first
        if too_large:
            tr = translator(payload.dest.lang)
            sentence = tr.ngettext(
                "{n} of the post's files is over the {limit} MB upload limit, "
                "so I left it out: {url}",
                "{n} of the post's files are over the {limit} MB upload limit, "
                "so I left them out: {url}",
                len(too_large),
            ).format(n=len(too_large), limit=self.settings.upload_limit_mb, url=payload.url)
            await self._say(ctx, payload, sentence)
            if not sent_items:
                return [], len(too_large), None
        return sent_items, len(too_large), first

    async def _download(
        self, item: MediaItem, folder: Path, n: int, *, as_docs: bool = False
    ) -> OutMedia:
        limit = self.settings.upload_limit
        suffix = ".jpg" if item.kind == "photo" else ".mp4"
        dest = folder / f"{n}{suffix}"
        if item.frames:
            return await self._animation(item, folder, n)
        if item.kind == "photo":
            try:
                result = await self._get(item.url, dest, item)
            except TooLarge:
                if not item.fallback_url:
                    raise
                # Over the upload limit even as a file: the smaller rendition is all that can go.
                result = await self._get(item.fallback_url, dest, item)
                item = attrs.evolve(item, width=None, height=None, fallback_url=None)
        else:
            result = await self._download_video(item, dest, limit)
        kind: OutKind = item.kind
        if kind == "photo" and (
            as_docs or result.size > UPLOAD_PHOTO_LIMIT or not photo_shape_ok(item)
        ):
            kind = "document"  # Telegram refuses it as a photo; a document keeps every pixel
            if not as_docs and item.fallback_url and photo_ratio_ok(item):
                # A smaller rendition the source offers (pixiv's "regular") goes as a photo.
                smaller = await self._get(item.fallback_url, folder / f"{n}.small.jpg", item)
                if smaller.size <= UPLOAD_PHOTO_LIMIT:
                    result, kind = smaller, "photo"
        # The player's still (best effort: None when missing, failed or not one Telegram takes).
        thumb = None
        if kind == "video" and item.thumbnail_url:
            thumb_dest = folder / f"{n}.thumb.jpg"
            thumb = await thumbnails.fetch(self.guarded, item.thumbnail_url, thumb_dest)
        duration = item.duration
        if kind == "video" and duration is None:
            # The source did not say (Bluesky's view has no length): the file's header does.
            duration = (await asyncio.to_thread(probe_mp4, result.path)).duration
        return OutMedia(
            kind, result.path, "upload", item.width, item.height, duration,
            filename=dest.name, thumbnail=thumb,
        )  # fmt: skip

    async def _animation(self, item: MediaItem, folder: Path, n: int) -> OutMedia:
        """An animation of frames (pixiv's ugoira): its archive, with its host's headers and
        under the upload cap (the smaller archive when the big one is over it), as an MP4."""
        archive, dest = folder / f"{n}.zip", folder / f"{n}.mp4"
        try:
            try:
                await self._get(item.url, archive, item)
            except TooLarge:
                if not item.fallback_url:
                    raise
                await self._get(item.fallback_url, archive, item)
            await ugoira.to_mp4(archive, item.frames, dest)
        except TransientFetch as exc:
            raise RetryLater(exc.reason) from exc
        except TooLarge:
            raise
        except FetchError as exc:
            raise Permanent(exc.reason) from exc
        finally:
            archive.unlink(missing_ok=True)
        if dest.stat().st_size > self.settings.upload_limit:
            dest.unlink(missing_ok=True)
            raise TooLarge("the animation's video is over the upload limit")
        # The frames' own size (the work's says the full size; the 600px zip is smaller).
        made = await asyncio.to_thread(probe_mp4, dest)
        return OutMedia(
            "gif", dest, "upload", made.width, made.height, item.duration, filename=dest.name
        )  # fmt: skip

    async def _get(
        self, url: str, dest: Path, item: MediaItem, limit: int | None = None
    ) -> DownloadResult:
        """One media file through the guard, with the headers its host insists on.

        TooLarge is raised as it is (the caller may step down); other failures
        become the task's outcome.
        """
        try:
            return await download(
                self.guarded, url, dest, max_bytes=limit or self.settings.upload_limit,
                headers=dict(item.headers) or None, floor=SpeedFloor.configured(self.settings),
            )  # fmt: skip
        except TooLarge:
            raise
        except TransientFetch as exc:
            raise RetryLater(exc.reason) from exc
        except FetchError as exc:
            raise Permanent(exc.reason) from exc

    async def _download_video(self, item: MediaItem, dest: Path, limit: int) -> DownloadResult:
        """The best variant that fits; a smaller one each time a download proves too large."""
        tried: list[Variant] = []
        while (pick := video_choice.step_down(item, limit, tried)) is not None:
            try:
                return await self._get(pick.variant.url, dest, item, limit)
            except TooLarge:
                log.info("variant too large, stepping down %s", kv(url=pick.variant.url))
                tried.append(pick.variant)
        raise TooLarge("no version of this video fits the upload limit")

    @staticmethod
    def _cache_entry(
        post: Post, payload: DeliverPayload, now: float, key: str
    ) -> CachedPost | None:
        """What the link cache keeps of a post sent whole; None if an item is missing."""
        items: list[CachedItem] = []
        for step in sorted(payload.sent, key=lambda s: s.step):
            items.extend(CachedItem(kind=i.kind, file_id=i.file_id) for i in step.items)
        if len(items) != len(post.media):
            return None
        return CachedPost(
            key=key, url=post.url, caption_parts=caption_parts(post), items=tuple(items),
            created_at=now,
        )  # fmt: skip

    def _caption(self, post: Post, settings: ChatSettings, lang: str, *, lead: bool = False) -> str:
        return build_caption(
            post,
            style=settings.caption_style,
            template=settings.caption_template,
            lang=lang,
            lead=lead,
        )

    @staticmethod
    def _long_texts(post: Post, settings: ChatSettings, lang: str, limit: int) -> list[str]:
        """The text messages that carry a long post's whole text ([] when the caption
        does, or the chat turned it off in /settings). A /format template counts as a
        full caption: its {text} shows the start, and the rest follows."""
        if not settings.long_text:
            return []
        style = "full" if settings.caption_template is not None else settings.caption_style
        if not needs_long_text(post, style=style, limit=limit, lang=lang):
            return []
        return long_messages(post)

    async def _say(
        self, ctx: TaskContext, payload: DeliverPayload, text: str, *, html: bool = False
    ) -> None:
        """One sentence in answer to the link, said as given (the post's own words)."""
        await self.outbox.say(payload.dest, text, html=html)

    async def _tell(self, ctx: TaskContext, payload: DeliverPayload, sentence: str) -> None:
        """One plain sentence of ours (a reason, `DOWN`), in the chat's language."""
        await self._say(ctx, payload, translate_reason(sentence, payload.dest.lang))


R18_HERE = N_(
    "This pixiv work is marked R-18, which this chat does not allow; "
    "an admin can allow it in /settings."
)
R18G_HERE = N_("This pixiv work is marked R-18G, which I send only in private chats.")
R18G_OFF = N_("This pixiv work is marked R-18G, which this chat does not allow.")


def rating_refusal(rating: int, settings: ChatSettings, chat_type: str) -> str | None:
    """The sentence a chat gets instead of a work of `rating` it does not allow; None
    when it may have it (`ChatSettings.allows_rating`). Pure."""
    if settings.allows_rating(chat_type, rating):
        return None
    if rating == R18:
        return R18_HERE
    return R18G_HERE if chat_type != "private" else R18G_OFF


def _by_url(item: MediaItem, upload_limit: int) -> OutMedia | None:
    """The item as a URL Telegram can fetch itself, or None when it should be uploaded."""
    if not by_url(item):
        return None
    if item.kind == "photo":
        return OutMedia("photo", item.url, "url", item.width, item.height)
    pick = video_choice.choose(item, upload_limit=upload_limit, url_limit=URL_OTHER_LIMIT)
    if pick is None or pick.path != "url":
        return None  # a better version fits the upload, or none fits (the upload says so)
    return OutMedia(item.kind, pick.variant.url, "url", item.width, item.height, item.duration)


def count_finished(metrics: Metrics, clock: Callable[[], float]) -> FinishedHook:
    """The worker's ending hook for the metrics: every run by kind and outcome, and a
    delivery that sent media by site, with the time from its link to its last album."""

    def finished(task: Task, outcome: str) -> None:
        site, latency = None, None
        if task.kind == DELIVER and outcome == "done":
            try:
                payload = DeliverPayload.from_task(task)
            except PayloadError:
                payload = None
            if payload is not None and payload.sent:  # an answer in words is no delivery
                native = site_named(payload.kind)
                site = native.name if native is not None else OTHER_SITE
                latency = clock() - task.created_at
        metrics.task_finished(task.kind, outcome, site=site, latency=latency)

    return finished
