"""The operator commands (``XBOT_ADMIN_IDS`` only, never in the public menu): /stats,
/clear_cache, /debug and /dead. `xbot.handlers.commands` lists them in the one command
table and checks who may run them.
"""

from __future__ import annotations

import time

from telegram import InlineKeyboardButton, InlineKeyboardMarkup, Update

from xbot import versions
from xbot.durations import say_span
from xbot.errors import FetchError
from xbot.handlers.answers import reply, rest_of
from xbot.links import Link, classify
from xbot.sending.telegram_health import TelegramHealth
from xbot.services import XContext
from xbot.sources import PostSource, SourceRouter
from xbot.sources.x import SourceChain
from xbot.storage.link_cache import entry_keys
from xbot.storage.queue import Task
from xbot.tasks.callback_data import Action, CallbackData, encode
from xbot.tasks.payloads import payload_identity

__all__ = ["DEAD_SHOWN", "cmd_clear_cache", "cmd_dead", "cmd_debug", "cmd_stats", "dead_view"]

DEAD_SHOWN = 10


def _age(seconds: float | None) -> str:
    return "none" if seconds is None else say_span(seconds)


async def cmd_stats(update: Update, context: XContext) -> None:
    message = update.effective_message
    if message is None:
        return
    services = context.services
    now = services.clock()
    stats = await services.queue.stats(now)
    cache = await services.cache.stats()
    counts = stats.counts_by_state
    by_state = ", ".join(f"{state} {n}" for state, n in counts.items())
    lines = [
        versions.installed().one_line(),
        f"Uptime: {_age(now - services.started_at)}",
        f"Tasks: {by_state}",
        f"Oldest pending: {_age(stats.oldest_pending_age)}",
        f"Dead letters: {stats.dead} (/dead lists them)",
        f"Chats on hold (rate limit): {stats.held_chats}",
        f"Link cache: {cache.entries} entries, hit rate {cache.hit_rate:.0%} "
        f"({cache.hits} hits, {cache.misses} misses)",
        f"Workers: {services.settings.workers}, running {services.workers.in_flight}",
        _telegram_line(services.sender.health),
    ]
    x_chain = services.sources.by_kind.get("x")
    if isinstance(x_chain, SourceChain):
        lines += ["X sources:", *(f"  {r.line()}" for r in x_chain.report())]
    if services.canary is not None and services.canary.results:
        lines += [
            "Canary (ok, down, broken: answers in a changed shape):",
            *services.canary.lines(),
        ]
    await reply(context, message, "\n".join(lines))


def _telegram_line(health: TelegramHealth) -> str:
    """Whether Telegram answers the bot, and since when it does not (and whether every
    send is held: a failed getUpdates alone holds nothing)."""
    if health.reachable or health.down_since is None:
        return f"Telegram: reachable ({health.outages} outages since the start)"
    since = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(health.down_since))
    held = ": every send held" if health.held_until is not None else ""
    return (
        f"Telegram: unreachable since {since} ({_age(time.time() - health.down_since)}; "
        f"{health.last_error}){held}"
    )


async def cmd_clear_cache(update: Update, context: XContext) -> None:
    message = update.effective_message
    if message is None:
        return
    services = context.services
    arg = rest_of(message)
    if not arg:
        removed = await services.cache.clear()
        await reply(context, message, f"Link cache cleared: {removed} entries removed.")
        return
    link = classify(arg, allow_private=services.settings.allow_private_networks)
    if link is None:
        await reply(context, message, "That is not a link I know. Usage: /clear_cache [link]")
        return
    link = (await _resolved(services.sources, link))[0]  # forgotten under its DID, as stored
    if await services.cache.forget(link.key):
        await reply(context, message, f"Removed {link.url} from the link cache.")
    else:
        await reply(context, message, f"{link.url} was not in the link cache.")


async def _resolved(router: SourceRouter, link: Link) -> tuple[Link, str | None]:
    """`link` under the key the delivery stores it by (a Bluesky handle becomes its
    DID), and what went wrong when it could not be resolved (then `link` as given)."""
    try:
        return await router.resolve(link), None
    except FetchError as exc:
        return link, f"{type(exc).__name__}: {exc.reason}"


async def cmd_debug(update: Update, context: XContext) -> None:
    message = update.effective_message
    if message is None:
        return
    services = context.services
    arg = rest_of(message)
    link = classify(arg, allow_private=services.settings.allow_private_networks) if arg else None
    if link is None:
        await reply(context, message, "Usage: /debug <link to a post>")
        return
    lines = [f"Link: {link.url}"]
    router = services.sources
    source = router.source_for(link)
    link, problem = await _resolved(router, link)
    if problem is not None:
        lines.append(f"Resolve: {problem}")
        source = None  # its fetch would only resolve again and fail the same way
    lines.append(f"Kind: {link.kind}, key: {link.key}")
    now, ttl = services.clock(), services.settings.cache_ttl
    for key in entry_keys(link.key):
        cached = await services.cache.get(key, now, ttl)
        if cached is not None:
            lines.append(f"Cache: {len(cached.items)} items by file_id ({key})")
    if not any(line.startswith("Cache:") for line in lines):
        lines.append("Cache: no entry")
    if source is not None:
        lines += await _debug_post(source, link)
    elif not router.serves(link):
        lines.append("No post source serves this kind: the fetcher for other sites decides.")
    await reply(context, message, "\n".join(lines)[:4000])


async def _debug_post(source: PostSource, link: Link) -> list[str]:
    """What the link's source sees (no media is downloaded or sent)."""
    try:
        post = await source.fetch(link)
    except FetchError as exc:
        return [f"Source: {source.name}", f"Fetcher: {type(exc).__name__}: {exc.reason}"]
    lines = [f"Source: {source.name} (post from {post.source})"]
    if post.title:
        lines.append(f"Title: {post.title}")
    lines += [
        f"Author: {post.author_name} (@{post.author_handle})",
        f"Text: {len(post.text)} characters; sensitive: {'yes' if post.sensitive else 'no'}",
    ]
    if post.quote is not None:
        lines.append(f"Quotes: {post.quote.author_name} (@{post.quote.author_handle}) "
                     f"{post.quote.url}")  # fmt: skip
    own = "" if post.own_media is None else f", {post.own_media} its own"
    lines.append(f"Media: {len(post.media)} item(s){own}")
    for n, item in enumerate(post.media, 1):
        size = f", {item.size} bytes" if item.size else ""
        shape = f", {item.width}x{item.height}" if item.width and item.height else ""
        lines.append(f"  {n}. {item.kind}{shape}{size}, {len(item.variants)} variant(s)")
        lines.append(f"     {item.url}")
    return lines


def dead_view(tasks: list[Task]) -> tuple[str, InlineKeyboardMarkup | None]:
    """The /dead message: the newest dead letters, each with a retry button."""
    if not tasks:
        return "No dead letters.", None
    lines = [f"The last {len(tasks)} dead letter(s), newest first:"]
    buttons = []
    for task in tasks:
        what = payload_identity(task.payload).get("url", "")
        error = (task.last_error or "").splitlines()[0][:120] if task.last_error else ""
        lines.append(f"#{task.id} {task.kind} chat {task.chat_id} {what}\n   {error}")
        data = encode(CallbackData(Action.RETRY, (task.id,)))
        buttons.append(InlineKeyboardButton(f"Retry #{task.id}", callback_data=data))
    rows = [buttons[i : i + 2] for i in range(0, len(buttons), 2)]
    return "\n".join(lines)[:4000], InlineKeyboardMarkup(rows)


async def cmd_dead(update: Update, context: XContext) -> None:
    message = update.effective_message
    if message is None:
        return
    tasks = await context.services.queue.list(state="dead", limit=DEAD_SHOWN)
    text, markup = dead_view(tasks)
    await reply(context, message, text, markup=markup)
