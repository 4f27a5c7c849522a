"""`BotApiServer`: the Bot API stand-in's one public class, a thin face over its parts.

It builds the state (`_state`) and each part of the API around it, puts them behind
HTTP (`_dispatch`), and hands each public method to the part that owns it.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Iterable
from typing import Any

from standins._http import HttpServer, Request, Response, ServerBase, serve_forever_main
from standins.botapi._bot import BotInfo
from standins.botapi._builders import UpdateBuilders
from standins.botapi._chats import ChatInfo, ChatRegistry
from standins.botapi._copies import CopiesAndForwards
from standins.botapi._dispatch import Dispatcher, is_multipart
from standins.botapi._edits import Edits
from standins.botapi._files import FileStore, StoredFile
from standins.botapi._inline import InlineAnswer, InlineMode
from standins.botapi._messages import Messages
from standins.botapi._outage import OutageSwitch
from standins.botapi._privacy import PrivacyMode
from standins.botapi._referee import Referee
from standins.botapi._state import BotApiState, bot_user, method_table
from standins.botapi._topics import ForumTopics
from standins.botapi._updates import UpdateFeed
from standins.botapi._wire import JSON, UPLOAD_LIMIT, Call, EarlyRequest

# Shaped like a real token (PTB and Telegram check the shape); it opens nothing.
DEFAULT_TOKEN = "123456789:AAHstandInTokenForLocalTests_0123456"  # noqa: S105


def retry_after_seconds(value: object) -> float:
    """PTB's `RetryAfter.retry_after` as seconds, whether it is an int or a timedelta."""
    seconds = getattr(value, "total_seconds", None)
    if callable(seconds):
        return float(seconds())
    if isinstance(value, int | float):
        return float(value)
    raise TypeError(f"not a retry_after: {value!r}")


class BotApiServer(ServerBase):
    """The Bot API stand-in. See the package docstring.

    Attributes:
        token: the token it accepts (``<bot id>:<secret>``).
        bot_user: the User dict of the bot (its id is the token's number).
        callback_answers: callback query id -> the answerCallbackQuery parameters.
    """

    def __init__(
        self,
        token: str = DEFAULT_TOKEN,
        *,
        allow_url_fetch_from_loopback: bool = False,
        url_fetch_timeout: float = 10.0,
        upload_limit: int = UPLOAD_LIMIT,
        bot_username: str = "xbot_standin_bot",
        bot_first_name: str = "XBot",
        enforce_not_before: bool = True,
        early_tolerance: float = 0.05,
        callback_answer_window: float = 15.0,
        max_records: int = 200_000,
        seed: int | None = None,
        privacy_mode: bool = False,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.token = token
        me = bot_user(token, bot_first_name, bot_username, privacy_mode=privacy_mode)
        files = FileStore(
            allow_loopback=allow_url_fetch_from_loopback,
            fetch_timeout=url_fetch_timeout,
            upload_limit=upload_limit,
        )
        state = BotApiState(me, ChatRegistry(me), files, random.Random(seed), max_records)
        self._state = state
        self._http = HttpServer(
            self._handle,
            host=host,
            port=port,
            name="botapi-standin",
            max_body=upload_limit + 1024 * 1024,
            on_stop=files.aclose,
            # Uploads up to 2000 MB (local-server mode) are never held in memory.
            stream_body=is_multipart,
        )
        self._outages = OutageSwitch(self._http)
        self._referee = Referee(
            state, enforce_not_before=enforce_not_before, early_tolerance=early_tolerance
        )
        self._feed = UpdateFeed(state, self._http.call, self.confirmed)
        self._topics = ForumTopics(state)
        self._privacy = PrivacyMode(state)
        self._inline = InlineMode(state, self._feed)
        self._messages = Messages(
            state, self._topics, callback_answer_window=callback_answer_window
        )
        self._builders = UpdateBuilders(state, self._feed, self._topics, self._privacy)
        methods = method_table(
            BotInfo(state),
            self._messages,
            Edits(state),
            CopiesAndForwards(state, self._topics),
            self._topics,
            self._inline,
            self._feed,
        )
        self._dispatch = Dispatcher(
            state, token, methods, self._referee, self._outages, on_call=self.recorded
        )
        # What tests do, each owned by one part and handed out as it is (the part's
        # docstring says it); the rest of the face, below, reads the state.
        self.inject_update = self._feed.inject_update
        self.user_message = self._builders.user_message
        self.callback_query = self._builders.callback_query
        self.bot_added = self._builders.bot_added
        self.create_topic = self._topics.create_topic
        self.close_topic = self._topics.close_topic
        self.delete_topic = self._topics.delete_topic
        self.topic = self._topics.topic
        self.set_privacy_mode = self._privacy.set_privacy_mode
        self.add_group_bot = self._privacy.add_group_bot
        self.other_bot_message = self._privacy.other_bot_message
        self.set_inline_mode = self._inline.set_inline_mode
        self.inline_query = self._inline.inline_query
        self.inline_answer = self._inline.inline_answer
        self.fail_next = self._referee.fail_next
        self.set_rate_limit_storm = self._referee.set_rate_limit_storm
        self.set_telegram_limits = self._referee.set_telegram_limits
        self.set_latency = self._referee.set_latency
        self.set_5xx = self._referee.set_5xx
        self.set_outage = self._outages.set

    async def _handle(self, request: Request) -> Response:
        return await self._dispatch.handle(request)

    # ------------------------------------------------------------------ hooks

    def recorded(self, call: Call) -> None:
        """Each call, as it is recorded: on the server's loop, before its answer goes out.

        Nothing here; a subclass acts at that moment (kills the bot, arms a fault).
        """

    def confirmed(self, offset: int) -> None:
        """Each ``offset`` a getUpdates confirms, before its answer goes out (see `recorded`)."""

    # ------------------------------------------------------------------ settings

    @property
    def bot_user(self) -> JSON:
        return self._state.bot_user

    @property
    def bot_user_short(self) -> JSON:
        return self._state.bot_user_short

    @property
    def callback_answers(self) -> dict[str, JSON]:
        return self._state.callback_answers

    @property
    def callback_answer_window(self) -> float:
        return self._messages.callback_answer_window

    @callback_answer_window.setter
    def callback_answer_window(self, value: float) -> None:
        self._messages.callback_answer_window = value

    @property
    def inline_answer_window(self) -> float:
        return self._inline.inline_answer_window

    @inline_answer_window.setter
    def inline_answer_window(self, value: float) -> None:
        self._inline.inline_answer_window = value

    @property
    def enforce_not_before(self) -> bool:
        return self._referee.enforce_not_before

    @enforce_not_before.setter
    def enforce_not_before(self, value: bool) -> None:
        self._referee.enforce_not_before = value

    @property
    def early_tolerance(self) -> float:
        return self._referee.early_tolerance

    @early_tolerance.setter
    def early_tolerance(self, value: float) -> None:
        self._referee.early_tolerance = value

    @property
    def allow_url_fetch_from_loopback(self) -> bool:
        return self._state.files.allow_loopback

    @allow_url_fetch_from_loopback.setter
    def allow_url_fetch_from_loopback(self, value: bool) -> None:
        self._state.files.allow_loopback = value

    @property
    def url_fetch_timeout(self) -> float:
        return self._state.files.fetch_timeout

    @url_fetch_timeout.setter
    def url_fetch_timeout(self, value: float) -> None:
        self._state.files.fetch_timeout = value

    # ------------------------------------------------------------------ records

    @property
    def calls(self) -> list[Call]:
        with self._state.lock:
            return list(self._state.calls)

    def calls_for(self, method: str, chat_id: int | None = None) -> list[Call]:
        with self._state.lock:
            return [
                c
                for c in self._state.calls
                if c.method == method and (chat_id is None or c.chat_id == chat_id)
            ]

    @property
    def early_requests(self) -> list[EarlyRequest]:
        return self._referee.early_requests

    async def wait_for(
        self,
        predicate: Callable[[], object],
        timeout: float = 5.0,  # noqa: ASYNC109 - a bound for tests to read, not a cancel scope
    ) -> None:
        """Wait until `predicate()` is true, checking every few ms; TimeoutError after `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            with self._state.lock:
                if predicate():
                    return
            if time.monotonic() >= deadline:
                raise TimeoutError(f"condition not met within {timeout}s")
            await asyncio.sleep(0.005)

    def sent_messages(self, chat_id: int, *, include_deleted: bool = False) -> list[JSON]:
        """The bot's messages in `chat_id`, oldest first, as they are now (edits applied)."""
        state = self._state
        with state.lock:
            return [
                state.messages[key]
                for key in state.sent_order
                if key[0] == chat_id
                and key in state.messages
                and (include_deleted or key not in state.deleted)
            ]

    def message(self, chat_id: int, message_id: int) -> JSON | None:
        with self._state.lock:
            return self._state.messages.get((chat_id, message_id))

    @property
    def held_polls(self) -> int:
        """getUpdates requests being held open right now."""
        return self._feed.held_polls

    @property
    def pending_updates(self) -> int:
        """Updates not confirmed yet: a getUpdates with a higher ``offset`` drops them."""
        return self._feed.pending_updates

    # ------------------------------------------------------------------ files

    def file_info(self, file_id: str) -> StoredFile | None:
        return self._state.files.get(file_id)

    def file_bytes(self, file_id: str) -> bytes:
        info = self._state.files.get(file_id)
        if info is None:
            raise KeyError(file_id)
        return info.path.read_bytes()

    def invalidate_file_id(self, file_id: str) -> None:
        """Make `file_id` (and the other sizes of its photo) unusable, like an expired one."""
        self._state.files.invalidate(file_id)

    # ------------------------------------------------------------------ chats

    def add_chat(
        self,
        chat_id: int,
        type: str = "supergroup",
        title: str | None = None,
        *,
        username: str | None = None,
        admins: Iterable[int] = (),
        cannot_post: Iterable[int] = (),
        creator: int | None = None,
        bot_is_admin: bool = True,
        bot_can_post: bool = True,
        linked_chat_id: int | None = None,
        members: dict[int, str] | None = None,
    ) -> ChatInfo:
        """Register a chat for getChat/getChatMember/sending (type: group, supergroup, channel).

        In a channel, `members` with status "member" are its subscribers and `cannot_post`
        names administrators without ``can_post_messages``."""
        chat = ChatInfo(
            id=chat_id,
            type=type,
            title=title,
            username=username.lstrip("@") if username else None,
            admins=list(admins),
            cannot_post=list(cannot_post),
            creator=creator,
            bot_is_admin=bot_is_admin,
            bot_can_post=bot_can_post,
            linked_chat_id=linked_chat_id,
            members=dict(members or {}),
        )
        with self._state.lock:
            return self._state.chats.add(chat)

    def chat(self, chat_id: int) -> ChatInfo | None:
        with self._state.lock:
            return self._state.chats.get(chat_id)

    def block_bot(self, chat_id: int, blocked: bool = True) -> None:
        """The user blocked the bot (private) or the bot was removed (group, channel)."""
        with self._state.lock:
            chat = self._state.chats.get(chat_id)
            if chat is None:
                raise KeyError(chat_id)
            chat.bot_blocked = blocked

    def delete_message(self, chat_id: int, message_id: int) -> None:
        """Someone (the sender, an admin, an anti-spam bot) deleted a message meanwhile."""
        with self._state.lock:
            self._state.deleted.add((chat_id, message_id))

    # ------------------------------------------------------------------ forum topics

    def add_forum(self, chat_id: int, title: str | None = None, **kwargs: Any) -> ChatInfo:
        """A supergroup with topics (`add_chat` arguments otherwise)."""
        with self._state.lock:
            return self._topics.make_forum(self.add_chat(chat_id, "supergroup", title, **kwargs))

    # ------------------------------------------------------------------ privacy mode

    @property
    def privacy_mode(self) -> bool:
        return self._privacy.privacy_mode

    @property
    def withheld(self) -> list[JSON]:
        """Messages users sent in groups that privacy mode kept from the bot, in order."""
        return self._privacy.withheld

    # ------------------------------------------------------------------ inline mode

    @property
    def inline_answers(self) -> list[InlineAnswer]:
        return self._inline.inline_answers

    # ------------------------------------------------------------------ outages

    @property
    def outage(self) -> str | None:
        """The outage mode in force, if any."""
        return self._outages.mode

    @property
    def outage_hits(self) -> int:
        """Calls an outage answered (502, reset, hang, hang_after) since the start."""
        return self._outages.hits


def main(argv: list[str] | None = None) -> None:
    """``python -m standins.botapi [--port N] [--token T] [--allow-loopback-urls]``."""
    import argparse

    parser = argparse.ArgumentParser(description="Local Telegram Bot API stand-in")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--token", default=DEFAULT_TOKEN)
    parser.add_argument("--allow-loopback-urls", action="store_true")
    args = parser.parse_args(argv)
    server = BotApiServer(
        args.token, port=args.port, allow_url_fetch_from_loopback=args.allow_loopback_urls
    )
    serve_forever_main(server, "botapi-standin")
