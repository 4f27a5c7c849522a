"""The outbox: how a delivery's media leave, are recorded and are followed up.

One implementation, used by deliveries of every site (fresh media, or file_ids from
the link cache) and by forwards to a channel (`Outbox.send_file_ids`). Like every
Bot API call, its sends go through the `Sender`, the one way out (paced, held by a
chat's 429 and by Telegram's unreachability):

- **plan** the sends of a post's items (`xbot.sending.albums.plan_sends`: balanced
  albums of at most 10, GIFs alone, documents only with documents);
- **send** each step through the `Sender` to the payload's `Destination`;
- **record** each step under the task's lease right after Telegram confirmed
  it (`TaskContext.stage_payload`), written before the next one goes out
  (`TaskContext.flush`), so a crash resumes with the next step and never
  resends one;
- **hold** one flight per cache key (`Flights`) and **look up / remember**
  the link cache: both sit in front of the sources; the second asker of a key
  waits, then reads the entry the first wrote (in the same transaction as its
  last record);
- **follow** a long post's media with its whole text (`send_texts`: text messages
  in reply to the first media message, each recorded like a step);
- **announce** once per task after the last step (`on_delivered`: the
  forward prompt), recorded in the payload so a retry does not run it twice.
"""

from __future__ import annotations

import contextlib
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Collection,
    Hashable,
    Mapping,
    Sequence,
)

import attrs
from telegram import InlineKeyboardMarkup, Message

from xbot.sending.albums import plan_sends
from xbot.sending.destination import Destination
from xbot.sending.flights import Flights
from xbot.sending.sender import OutMedia, Sender
from xbot.sending.sent import SentItem
from xbot.storage.link_cache import DEFAULT_TTL, CachedPost, LinkCache
from xbot.tasks.payloads import DeliverPayload, SentStep
from xbot.tasks.worker import TaskContext

__all__ = ["Delivered", "OnDelivered", "Outbox", "Sent", "send_file_ids"]


@attrs.frozen
class Delivered:
    """What a finished delivery sent, for whoever acts on it next (the forward prompt).

    Attributes:
        dest: where it went (the chat, topic and the link message it answered).
        items: every media item sent, in post order, by file_id.
        caption_parts: ``author_name``, ``author_handle``, ``text`` (unescaped).
    """

    dest: Destination
    key: str
    url: str
    caption_parts: Mapping[str, str]
    items: tuple[SentItem, ...]
    user_id: int | None = None


@attrs.frozen
class Sent:
    """What Telegram confirmed of one send step: the items by file_id, in order, and the
    message ids it gave them (a long post's text answers the first)."""

    items: list[SentItem]
    message_ids: tuple[int, ...]

    @property
    def first_id(self) -> int | None:
        return self.message_ids[0] if self.message_ids else None


OnDelivered = Callable[[TaskContext, Delivered], Awaitable[None]]
# A step Telegram confirmed: its index, the items, and its first message's id.
Record = Callable[[int, list[SentItem], int | None], Awaitable[None]]


@attrs.define
class Outbox:
    """Sends, records and announces deliveries; wired once by the app.

    Attributes:
        sender: the bot's sender.
        cache: the link cache (canonical key → file_ids and caption parts).
        ttl: how long a cache entry answers.
        on_delivered: runs once after every album of a post was delivered.
        flights: one piece of work in flight per cache key.
    """

    sender: Sender
    cache: LinkCache
    ttl: float = DEFAULT_TTL
    on_delivered: OnDelivered | None = None
    flights: Flights = attrs.field(factory=Flights)

    async def lookup(self, key: str, now: float) -> CachedPost | None:
        """The live cache entry of ``key`` (read inside its flight), or None."""
        return await self.cache.get(key, now, self.ttl)

    async def remember(self, ctx: TaskContext, *entries: CachedPost | None) -> None:
        """Write the staged record and these cache entries in one fenced transaction,
        before the flight ends: whoever waits for the key reads the entry next."""
        await ctx.flush(effects=tuple(self.cache.put_op(e) for e in entries if e is not None))

    async def forget(self, *keys: str) -> None:
        """Drop entries whose file_ids Telegram refused (then fetch afresh)."""
        for key in dict.fromkeys(keys):
            await self.cache.invalidate(key)

    def hold(self, key: Hashable) -> contextlib.AbstractAsyncContextManager[None]:
        """The key's flight: the cache is read, and the post fetched, inside it."""
        return self.flights.hold(key)

    @contextlib.asynccontextmanager
    async def hold_also(self, key: Hashable, held: Hashable) -> AsyncIterator[None]:
        """A second key's flight beside the one held (two spellings, one download)."""
        if key == held:
            yield
            return
        async with self.flights.hold(key):
            yield

    async def say(self, dest: Destination, text: str, *, html: bool = False) -> Message:
        """One sentence in answer to the link; the message Telegram confirmed."""
        return await self.sender.send_text(dest, text, html=html)

    async def send_texts(
        self, ctx: TaskContext, payload: DeliverPayload, texts: Sequence[str]
    ) -> DeliverPayload:
        """A long post's whole text (HTML, `xbot.sending.caption_long`), as text messages.

        Each answers the payload's `text_anchor` (the first media message; for a post
        without media, the first of these texts becomes it). Each is recorded under the
        lease once Telegram confirmed it, and the record is written before the next goes
        out, as for album steps: a retry sends only the ones not yet confirmed.
        """
        anchor = payload.text_anchor
        for index, text in enumerate(texts):
            if index < payload.texts_sent:
                continue
            await ctx.flush()  # the message before is recorded before this one goes out
            dest = payload.dest if anchor is None else payload.dest.replying_to(anchor)
            message = await self.sender.send_text(dest, text, html=True)
            anchor = message.message_id if anchor is None else anchor
            payload = attrs.evolve(payload, texts_sent=index + 1, text_anchor=anchor)
            ctx.stage_payload(payload.to_json())
        return payload

    async def send_file_ids(
        self,
        ctx: TaskContext,
        dest: Destination,
        items: Sequence[SentItem],
        *,
        caption: str | None,
        spoiler: bool,
        done: Collection[int],
        record: Record,
    ) -> None:
        """`send_file_ids` through this outbox's sender (a delivery from the link cache)."""
        await send_file_ids(
            self.sender,
            ctx,
            dest,
            items,
            caption=caption,
            spoiler=spoiler,
            done=done,
            record=record,
        )

    async def send_step(
        self,
        dest: Destination,
        items: Sequence[OutMedia],
        *,
        caption: str | None,
        spoiler: bool,
        reply_markup: InlineKeyboardMarkup | None = None,
    ) -> Sent:
        """One message or one album; what Telegram confirmed, in order. `reply_markup`:
        buttons under a single message."""
        sent = await self.sender.send_media(
            dest, items, caption=caption, spoiler=spoiler, reply_markup=reply_markup
        )
        return Sent([item for item, _ in sent], tuple(mid for _, mid in sent))

    @staticmethod
    def record(
        ctx: TaskContext,
        payload: DeliverPayload,
        index: int,
        sent: Sequence[SentItem],
        *,
        skipped: int = 0,
        message_id: int | None = None,
    ) -> DeliverPayload:
        """Telegram confirmed step ``index``: stage the record (written before the next).

        `message_id`: the step's first message; step 0's is what a long post's text answers.
        """
        anchor = payload.text_anchor
        if index == 0 and anchor is None:
            anchor = message_id
        updated = attrs.evolve(
            payload,
            sent=(*payload.sent, SentStep(index, tuple(sent))),
            skipped=payload.skipped + skipped,
            text_anchor=anchor,
        )
        ctx.stage_payload(updated.to_json())
        return updated

    async def announce(
        self,
        ctx: TaskContext,
        payload: DeliverPayload,
        url: str,
        caption_parts: Mapping[str, str],
    ) -> None:
        """Run `on_delivered` once per task, after every album went out."""
        if self.on_delivered is None or payload.announced or not payload.sent:
            return
        delivered = Delivered(
            dest=payload.dest,
            key=payload.key,
            url=url,
            caption_parts=dict(caption_parts),
            items=payload.items_sent(),
            user_id=payload.user_id,
        )
        await self.on_delivered(ctx, delivered)  # flushes before it sends anything
        ctx.stage_payload(attrs.evolve(payload, announced=True).to_json())


async def send_file_ids(
    sender: Sender,
    ctx: TaskContext,
    dest: Destination,
    items: Sequence[SentItem],
    *,
    caption: str | None,
    spoiler: bool,
    done: Collection[int],
    record: Record,
) -> None:
    """Send items Telegram already has, step by step as planned, skipping ``done``.

    The caption goes on the first step; `record` is told each step right after
    Telegram confirmed it, and whatever it staged is written before the next
    step goes out. (A delivery from the link cache, and a forward to a channel: a
    function of the sender alone, so the forward needs no outbox.)
    """
    steps = plan_sends([i.kind for i in items])
    for index, step in enumerate(steps):
        if index in done:
            continue
        await ctx.flush()  # the step before is recorded before this one goes out
        out = [OutMedia(items[i].kind, items[i].file_id, "file_id") for i in step.items]
        sent = await sender.send_media(
            dest, out, caption=caption if index == 0 else None, spoiler=spoiler
        )
        await record(index, [item for item, _ in sent], sent[0][1] if sent else None)
