"""Sending to Telegram: one module calls the Bot API's send methods, and
translates `telegram.error` into xbot's tree exactly once (`classify`, whose
table lives in `xbot.sending.bot_errors`).

What goes out is described by `OutMedia` values; the media can be a
`file_id`, a URL (Telegram fetches it) or a local file (uploaded). One item
goes by sendPhoto/sendVideo/sendAnimation/sendDocument, more by
sendMediaGroup. The pacing that keeps us inside Telegram's published limits
is in `xbot.sending.pacing`; a 429 becomes `RateLimited(retry_after)` here and the
worker holds the chat through the queue.

The one way out: every Bot API call the bot makes while it runs (media, texts,
notices, prompts, status messages, edits, deletes, chat actions, button and inline
answers, chat look-ups) goes through a `Sender` method, so each is paced, held by a
chat's 429 (`Pacer.hold`) and held by Telegram's unreachability
(`xbot.sending.telegram_health`: refused at once while held, one probe at a time).
Only getUpdates (`xbot.receiving.polling`) and the start-up's calls (getMe,
deleteWebhook or setWebhook, setMyCommands: `xbot.runtime`) go around it; Telegram's
health hears how those went all the same (`TelegramHealth.observed`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

import attrs
import telegram
from telegram import (
    InputFile,
    InputMediaAnimation,
    InputMediaAudio,
    InputMediaDocument,
    InputMediaPhoto,
    InputMediaVideo,
    Message,
    ReplyParameters,
)
from telegram.constants import ParseMode
from telegram.error import (
    BadRequest,
    Forbidden,
    TelegramError,
)

from xbot.errors import (
    ChatUnavailable,
    RateLimited,
    RetryLater,
    TelegramUnreachable,
    XbotError,
)
from xbot.logs import kv
from xbot.media import thumbnail as thumbnails
from xbot.sending import topics
from xbot.sending.bot_errors import classify, is_ambiguous, retry_after_seconds
from xbot.sending.destination import Destination
from xbot.sending.flights import Flights
from xbot.sending.pacing import Pacer
from xbot.sending.sent import OutKind, SentItem
from xbot.sending.telegram_health import TelegramHealth

__all__ = [
    "LONG_CALL",
    "OutKind",
    "OutMedia",
    "Sender",
    "SentItem",
    "classify",
    "file_id_of",
    "retry_after_seconds",
    "write_timeout_for",
]

log = logging.getLogger(__name__)
T = TypeVar("T")

# Telegram refuses a flooded chat (429) at once; a call to the chat that has
# been out this long is doing its work, and a chat action may go beside it.
LONG_CALL = 0.5


@attrs.frozen
class OutMedia:
    """One item to send.

    Attributes:
        kind: how Telegram should show it.
        source: a file_id or URL (str), or a local file (Path) to upload.
        by: ``file_id``, ``url`` or ``upload`` — how `source` is meant.
        thumbnail: a still for an uploaded video or audio (a local JPEG); sent only
            when it meets Telegram's rule (`xbot.media.thumbnail`), else left out.
        title, performer: an audio's, as the player shows them (from the site).
    """

    kind: OutKind
    source: str | Path
    by: Literal["file_id", "url", "upload"]
    width: int | None = None
    height: int | None = None
    duration: float | None = None
    filename: str = "media"
    thumbnail: Path | None = None
    title: str | None = None
    performer: str | None = None

    @property
    def size(self) -> int:
        return self.source.stat().st_size if isinstance(self.source, Path) else 0


def file_id_of(message: Message, kind: OutKind) -> str:
    """The file_id Telegram gave the media of a sent message."""
    if message.photo:
        return message.photo[-1].file_id
    if message.video:
        return message.video.file_id
    if message.animation:
        return message.animation.file_id
    if message.document:
        return message.document.file_id
    if message.audio:
        return message.audio.file_id
    raise RetryLater(f"Telegram's answer had no {kind} in it")


def _input(item: OutMedia, files: contextlib.ExitStack, *, attach: bool) -> str | InputFile:
    """A file_id or URL as it is; a local file as an open handle, never its bytes.

    ``read_file_handle=False`` keeps PTB from reading the file into memory: the
    request class streams it from disk (`xbot.sending.upload_request`), so the
    temp file is the only copy. `files` closes the handle after the call.
    ``attach`` for `InputMedia*` items, whose media must be an ``attach://`` part.
    """
    if isinstance(item.source, Path):
        handle = files.enter_context(item.source.open("rb"))
        return InputFile(handle, filename=item.filename, attach=attach, read_file_handle=False)
    return item.source


def _thumbnail(item: OutMedia) -> InputFile | None:
    """The video's still, when Telegram will use it: only beside an uploaded video
    (it ignores one sent with a URL or file_id) and only if it is a JPEG within
    200 kB and 320 x 320. A named InputFile with ``attach=True``, so it gets its
    own ``attach://`` part inside InputMediaVideo too, as ``image/jpeg``. Its bytes
    are held (read once to check that rule, so at most 200 kB), unlike the media's."""
    if item.thumbnail is None or item.kind not in ("video", "audio") or item.by != "upload":
        return None
    data = thumbnails.read_acceptable(item.thumbnail)
    if data is None:
        log.debug("thumbnail left out: not a JPEG within Telegram's limits")
        return None
    return InputFile(data, filename=thumbnails.FILENAME, attach=True)


def _duration(item: OutMedia) -> int | None:
    return int(item.duration) if item.duration else None


def _media_fields(item: OutMedia, caption: str | None, spoiler: bool) -> dict[str, Any]:
    """What a single send and an album item of this kind both carry, besides the media."""
    fields: dict[str, Any] = {
        "caption": caption,
        "parse_mode": ParseMode.HTML if caption else None,
        "filename": item.filename if isinstance(item.source, Path) else None,
    }
    if item.kind in ("video", "gif"):
        fields.update(width=item.width, height=item.height, duration=_duration(item))
    if item.kind == "video":
        fields.update(supports_streaming=True, thumbnail=_thumbnail(item))
    if item.kind == "audio":
        fields.update(
            duration=_duration(item),
            title=item.title or None,
            performer=item.performer or None,
            thumbnail=_thumbnail(item),
        )
    if item.kind not in ("document", "audio"):
        fields["has_spoiler"] = spoiler or None
    return fields


# The Bot API method of one item alone, by its kind.
_SEND_METHOD: dict[str, str] = {
    "photo": "send_photo",
    "video": "send_video",
    "gif": "send_animation",
    "document": "send_document",
    "audio": "send_audio",
}
_ALBUM_ITEM = {
    "photo": InputMediaPhoto,
    "video": InputMediaVideo,
    "gif": InputMediaAnimation,
    "document": InputMediaDocument,
    "audio": InputMediaAudio,
}


def _input_media(
    item: OutMedia, caption: str | None, spoiler: bool, files: contextlib.ExitStack
) -> InputMediaPhoto | InputMediaVideo | InputMediaAnimation | InputMediaDocument | InputMediaAudio:
    media_type: Any = _ALBUM_ITEM[item.kind]
    media = _input(item, files, attach=True)
    return media_type(media, **_media_fields(item, caption, spoiler))  # type: ignore[no-any-return]


def _where(dest: Destination) -> dict[str, Any]:
    """Where a new message goes, as the send methods take it: the topic (never for
    General) and the message it answers (sent even if that one was deleted)."""
    fields: dict[str, Any] = dict(dest.thread_kwargs())
    if dest.reply_to:
        fields["reply_parameters"] = ReplyParameters(
            dest.reply_to, allow_sending_without_reply=True
        )
    return fields


def write_timeout_for(size: int) -> float:
    """The time to send an upload's whole body: ~1 MB/s plus a floor (PTB's 20 s would
    cut a local server's 2 GB upload short); the request class enforces it per body."""
    return max(20.0, size / (1024 * 1024) * 1.0 + 20.0)


@attrs.define
class Sender:
    """Sends to one bot: every Bot API call of the bot's work goes through here.

    Attributes:
        bot: the PTB bot.
        pacer: keeps us inside Telegram's per-chat and global limits.
        health: Telegram's reachability, the hold of every call while it is down.
        read_timeout: how long a media send by URL or file_id waits for its answer (an
            upload waits at least as long as its upload may take); tests scale it down.
        on_sent: told how each item of a message or album Telegram accepted went
            (``file_id``, ``url`` or ``upload``): the metrics count there.
    """

    bot: telegram.Bot
    pacer: Pacer = attrs.field(factory=Pacer)
    health: TelegramHealth = attrs.field(factory=TelegramHealth)
    read_timeout: float = 30.0
    on_sent: Callable[[Sequence[str]], None] | None = None
    # One Bot API call per chat at a time: a 429 for a chat is known before
    # the next call to it goes (a chat action racing a send was the one
    # request the soak saw arrive inside a retry_after).
    _lines: Flights = attrs.field(factory=Flights, init=False)
    _out_since: dict[int, float] = attrs.field(factory=dict, init=False)

    @contextlib.asynccontextmanager
    async def _out(self) -> AsyncIterator[None]:
        """Around one Bot API call: Telegram's hold first (`TelegramUnreachable(held=True)`
        while it stands, unless this call is the probe), and its bookkeeping after:
        any answer from Telegram, an error included, says it is there."""
        with self.health.admitted():
            try:
                yield
            except TelegramError as exc:
                if isinstance(classify(exc), TelegramUnreachable):
                    self.health.failed(_short(exc))
                else:
                    self.health.answered()
                raise
            except BaseException:
                self.health.released()  # cancelled, or our own error: no word either way
                raise
            self.health.answered()

    @contextlib.asynccontextmanager
    async def _line(self, chat_id: int) -> AsyncIterator[None]:
        """The chat's turn; refused as `RateLimited` if the call before drew a 429, and
        as `TelegramUnreachable` while Telegram's hold stands."""
        async with self._lines.hold(chat_id):
            left = self.pacer.held(chat_id, self.pacer.clock())
            if left > 0:
                raise RateLimited(left)
            self._out_since[chat_id] = self.pacer.clock()
            try:
                async with self._out():
                    yield
            finally:
                del self._out_since[chat_id]

    async def send_media(
        self,
        dest: Destination,
        items: Sequence[OutMedia],
        *,
        caption: str | None,
        spoiler: bool = False,
        reply_markup: telegram.InlineKeyboardMarkup | None = None,
    ) -> list[tuple[SentItem, int]]:
        """Send one message (one item) or one album; returns (item, message_id) in order.

        `reply_markup`: buttons under a single item (an album cannot carry any)."""
        assert 1 <= len(items) <= 10
        assert reply_markup is None or len(items) == 1
        # Telegram gives one text for a bad URL and a bad file_id: the mix decides.
        by = next((b for b in ("url", "file_id") if any(i.by == b for i in items)), "upload")
        chat_id = dest.chat_id
        size = sum(i.size for i in items)
        write_timeout = write_timeout_for(size)
        # Telegram answers an upload once it has taken it all in: as long as the upload,
        # at least. A URL or file_id send waits the plain `read_timeout`.
        timeouts = (
            write_timeout,
            max(self.read_timeout, write_timeout) if size else self.read_timeout,
        )
        # Only what Telegram accepts is spent of its limits; a refusal frees the slot.
        group = dest.paced_as_group
        self.health.check()  # held: refused before the pacer makes it wait
        async with self.pacer.sending(chat_id, group=group, messages=len(items)) as slot:
            try:
                async with self._line(chat_id):
                    sent = await self._in_topic(
                        dest,
                        lambda d: self._send_media(
                            d,
                            items,
                            caption,
                            spoiler=spoiler,
                            timeouts=timeouts,
                            reply_markup=reply_markup,
                        ),
                    )
            except TelegramError as exc:
                slot.maybe_delivered = is_ambiguous(exc)  # no answer: it may be sent
                raise self._translate(exc, chat_id, by=by) from exc
        if self.on_sent is not None:
            self.on_sent([i.by for i in items])
        return sent

    async def _in_topic(self, dest: Destination, send: Callable[[Destination], Awaitable[T]]) -> T:
        """`send` to `dest`; to General once if its topic was closed or deleted meanwhile."""
        try:
            return await send(dest)
        except BadRequest as exc:
            general = topics.fallback(dest, exc.message)
            if general is None:
                raise
            log.info(
                "topic gone, answering in General %s",
                kv(chat=dest.chat_id, topic=dest.topic_id, error=exc.message),
            )
            return await send(general)

    async def _send_media(
        self,
        dest: Destination,
        items: Sequence[OutMedia],
        caption: str | None,
        *,
        spoiler: bool,
        timeouts: tuple[float, float],
        reply_markup: telegram.InlineKeyboardMarkup | None = None,
    ) -> list[tuple[SentItem, int]]:
        """The call itself, on the chat's line (`send_media` translates its errors).

        `timeouts`: (write, read) for this send."""
        with contextlib.ExitStack() as files:  # the uploads' handles, closed after the call
            return await self._send_open(
                dest,
                items,
                caption,
                files,
                spoiler=spoiler,
                timeouts=timeouts,
                reply_markup=reply_markup,
            )

    async def _send_open(
        self,
        dest: Destination,
        items: Sequence[OutMedia],
        caption: str | None,
        files: contextlib.ExitStack,
        *,
        spoiler: bool,
        timeouts: tuple[float, float],
        reply_markup: telegram.InlineKeyboardMarkup | None = None,
    ) -> list[tuple[SentItem, int]]:
        if len(items) == 1:
            message = await self._send_one(
                dest,
                items[0],
                caption,
                files,
                spoiler=spoiler,
                timeouts=timeouts,
                reply_markup=reply_markup,
            )
            return [
                (
                    SentItem(items[0].kind, file_id_of(message, items[0].kind)),
                    message.message_id,
                )
            ]
        # Albums never hold GIFs (the album planner sends those alone).
        medias = [
            cast(
                "InputMediaPhoto | InputMediaVideo | InputMediaDocument | InputMediaAudio",
                _input_media(item, caption if i == 0 else None, spoiler, files),
            )
            for i, item in enumerate(items)
        ]
        messages = await self.bot.send_media_group(
            dest.chat_id,
            medias,
            **_where(dest),
            write_timeout=timeouts[0],
            read_timeout=timeouts[1],
        )
        return [
            (SentItem(item.kind, file_id_of(msg, item.kind)), msg.message_id)
            for item, msg in zip(items, messages, strict=False)
        ]

    async def _send_one(
        self,
        dest: Destination,
        item: OutMedia,
        caption: str | None,
        files: contextlib.ExitStack,
        *,
        spoiler: bool,
        timeouts: tuple[float, float],
        reply_markup: telegram.InlineKeyboardMarkup | None = None,
    ) -> Message:
        fields = _media_fields(item, caption, spoiler)
        fields.update(_where(dest), write_timeout=timeouts[0], read_timeout=timeouts[1])
        if reply_markup is not None:
            fields["reply_markup"] = reply_markup
        send: Callable[..., Awaitable[Message]] = getattr(self.bot, _SEND_METHOD[item.kind])
        message: Message = await send(dest.chat_id, _input(item, files, attach=False), **fields)
        return message

    async def send_text(
        self,
        dest: Destination,
        text: str,
        *,
        html: bool = True,
        reply_markup: telegram.InlineKeyboardMarkup | None = None,
    ) -> Message:
        chat_id = dest.chat_id
        group = dest.paced_as_group
        self.health.check()
        async with self.pacer.sending(chat_id, group=group, messages=1) as slot:
            try:
                async with self._line(chat_id):
                    return await self._in_topic(
                        dest,
                        lambda d: self._send_message(d, text, html=html, reply_markup=reply_markup),
                    )
            except TelegramError as exc:
                slot.maybe_delivered = is_ambiguous(exc)  # no answer: it may be sent
                raise self._translate(exc, chat_id) from exc

    async def _send_message(
        self,
        dest: Destination,
        text: str,
        *,
        html: bool,
        reply_markup: telegram.InlineKeyboardMarkup | None,
    ) -> Message:
        return await self.bot.send_message(
            dest.chat_id,
            text,
            parse_mode=ParseMode.HTML if html else None,
            link_preview_options=telegram.LinkPreviewOptions(is_disabled=True),
            reply_markup=reply_markup,
            **_where(dest),
        )

    async def edit_text(
        self,
        chat_id: int,
        message_id: int,
        text: str,
        *,
        html: bool = True,
        reply_markup: telegram.InlineKeyboardMarkup | None = None,
    ) -> None:
        """Edit a message the bot sent. "Not modified" counts as done; other refusals raise ours."""
        try:
            async with self._line(chat_id):
                await self.bot.edit_message_text(
                    text,
                    chat_id=chat_id,
                    message_id=message_id,
                    parse_mode=ParseMode.HTML if html else None,
                    reply_markup=reply_markup,
                    link_preview_options=telegram.LinkPreviewOptions(is_disabled=True),
                )
        except TelegramError as exc:
            if "not modified" in exc.message.lower():
                return
            raise self._translate(exc, chat_id) from exc

    async def delete(self, chat_id: int, message_id: int) -> bool:
        """Best effort: a message already gone, or one we may not delete, is not an error."""
        try:
            async with self._line(chat_id):
                return bool(await self.bot.delete_message(chat_id, message_id))
        except (RateLimited, TelegramUnreachable):
            return False  # held (a 429, Telegram down): the message stays, as for any refusal
        except TelegramError as exc:
            log.debug(
                "delete failed chat=%s message=%s error=%s",
                chat_id, message_id, type(classify(exc)).__name__,
            )  # fmt: skip
            return False

    async def answer_callback(self, query_id: str, text: str | None = None) -> None:
        """Answer a button press (the spinner stops). Not a message: no pace, no chat line."""
        try:
            async with self._out():
                await self.bot.answer_callback_query(query_id, text)
        except TelegramError as exc:
            raise classify(exc) from exc

    async def answer_inline(
        self,
        query_id: str,
        results: Sequence[telegram.InlineQueryResult],
        *,
        cache_time: int,
        is_personal: bool,
        button: telegram.InlineQueryResultsButton | None,
        by: str = "",
    ) -> None:
        """Answer an inline query (once, within Telegram's window). Not a message either.

        `by` is ``file_id`` for cached results, so a stale one is `StaleFileId`.
        """
        try:
            async with self._out():
                await self.bot.answer_inline_query(
                    query_id, results, cache_time=cache_time, is_personal=is_personal, button=button
                )
        except TelegramError as exc:
            raise classify(exc, by=by) from exc

    async def get_chat(self, target: int | str) -> telegram.ChatFullInfo:
        """A chat by id or ``@name``; unknown or closed to us is `ChatUnavailable`."""
        try:
            async with self._out():
                return await self.bot.get_chat(target)
        except Forbidden as exc:
            raise ChatUnavailable(exc.message) from exc
        except TelegramError as exc:
            raise classify(exc) from exc

    async def get_chat_administrators(self, chat_id: int) -> tuple[telegram.ChatMember, ...]:
        try:
            async with self._out():
                return tuple(await self.bot.get_chat_administrators(chat_id))
        except TelegramError as exc:
            raise classify(exc) from exc

    async def get_chat_member(self, chat_id: int, user_id: int) -> telegram.ChatMember:
        try:
            async with self._out():
                return await self.bot.get_chat_member(chat_id, user_id)
        except TelegramError as exc:
            raise classify(exc) from exc

    async def chat_action(self, dest: Destination, action: str) -> None:
        """Best effort: a failed chat action must never fail the work it decorates.

        Skipped while Telegram holds the chat (a 429): a courtesy must not be
        the request that arrives before retry_after. Shown in the topic the work is for.
        """
        chat_id = dest.chat_id
        now = self.pacer.clock()
        if self.pacer.held(chat_id, now) > 0 or self.health.held_until is not None:
            return  # a courtesy is never Telegram's probe either
        out_since = self._out_since.get(chat_id)
        try:
            if out_since is not None and now - out_since >= LONG_CALL:
                # A call long out is Telegram at work (fetching a URL, taking an
                # upload), not a refusal on its way: show it, beside that call.
                async with self._out():
                    await self._send_chat_action(dest, action)
            elif not self._lines.busy(chat_id):
                async with self._line(chat_id):
                    await self._send_chat_action(dest, action)
            # else: a call just went out and its answer may be a 429: wait for the next turn
        except (RateLimited, TelegramUnreachable):
            return
        except TelegramError as exc:
            error = self._translate(exc, chat_id)
            log.debug("chat action failed chat=%s error=%s", chat_id, type(error).__name__)

    async def _send_chat_action(self, dest: Destination, action: str) -> None:
        if dest.topic_id is None:  # General takes no thread id
            await self.bot.send_chat_action(dest.chat_id, action)
        else:
            await self.bot.send_chat_action(dest.chat_id, action, message_thread_id=dest.topic_id)

    def _translate(self, exc: TelegramError, chat_id: int, *, by: str = "") -> XbotError:
        """`classify`, and a 429 remembered for the chat (see `Pacer.hold`)."""
        error = classify(exc, by=by)
        if isinstance(error, RateLimited):
            self.pacer.hold(chat_id, self.pacer.clock() + error.retry_after)
        return error


def _short(exc: TelegramError) -> str:
    """The error for a log line: PTB's message without nginx's page in it."""
    message = exc.message.split(". Parsing the server response", 1)[0]
    return f"{type(exc).__name__}: {message[:120]}"
