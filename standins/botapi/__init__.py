"""A local stand-in for the Telegram Bot API, faithful to what PTB 22 sends and expects.

Start it, point PTB at it, and drive the conversation from the test::

    async with BotApiServer() as srv:
        bot = telegram.Bot(srv.token, base_url=f"{srv.url}/bot",
                           base_file_url=f"{srv.url}/file/bot")
        srv.user_message(42, "https://x.com/alice/status/1")
        await srv.wait_for(lambda: srv.sent_messages(42), timeout=5)

What it does like Telegram: the request forms PTB uses
(urlencoded, multipart with ``attach://`` parts; a multipart body is taken as it
arrives, its files to disk with their SHA-256, so 2000 MB uploads in local-server
mode, ``upload_limit=2000 * 2**20``, need no memory; an upload the client abandons
is recorded with status 499), the response shapes
(Message, PhotoSize, Video, ChatMember...), Telegram's error texts and
statuses, its limits (caption 1024 and text 4096 UTF-16 units after entity
parsing, albums of 2-10, photo URLs 5 MB, other URLs 20 MB), fetching media
by URL itself (and, like the real one, failing on loopback/private hosts
unless `allow_url_fetch_from_loopback`), long polling held open until an
update arrives, and 429s with `retry_after`. Forum topics (`add_forum`,
`create_topic`, `close_topic`, `delete_topic`; where each message lands, in
`_topics`) and inline mode (`set_inline_mode`, `inline_query`,
`inline_answer`; answerInlineQuery's checks and window, in `_inline`). Privacy
mode (``privacy_mode=True``, `set_privacy_mode`): getMe's ``can_read_all_group_messages``
and the group messages Telegram then gives the bot (`_privacy`; what it kept
back is in `withheld`; `add_group_bot` and `other_bot_message` for groups of several
bots).

What it adds for tests: every call recorded (`calls`, `calls_for`,
`sent_messages`), update builders (`user_message`, `callback_query`, `bot_added`;
in `_builders`), fault injection (`fail_next`, `set_rate_limit_storm`,
`set_latency`, `set_5xx`; in `_referee`), outages (`set_outage`: Telegram unreachable as a
502 page, a reset, a hang, a hang after the send went through, a refused
connection; for every method or all but getUpdates; in `_outage`) and a
referee for rate limits (`_referee` too): after each 429 it notes the chat's "not before" and
records in `early_requests` any request for that chat that comes sooner (and,
like Telegram, answers it with another 429).

How it is built: one state (`_state.BotApiState`: the bot, chats, messages, files,
callback queries, the record of calls) handed to the parts of the API, each a plain
class owning its own part: `_messages` (the sends), `_edits`, `_copies`, `_topics`,
`_inline`, `_privacy`, `_bot` (getMe, commands, chat info), `_updates` (getUpdates,
webhooks), `_builders` (what users do), `_referee` (faults, rate limits), `_outage`;
`_dispatch` puts them behind HTTP and `BotApiServer` (`_server`) is the face.

It runs on its own thread and loop, so it serves while the code under test
blocks, and it can be started from sync code: ``with BotApiServer() as srv``
or ``python -m standins.botapi --port N``.
"""

from __future__ import annotations

from standins.botapi._chats import ChatInfo
from standins.botapi._dispatch import CLIENT_CLOSED
from standins.botapi._files import StoredFile
from standins.botapi._inline import InlineAnswer
from standins.botapi._limits import COUNTED_METHODS, Admission, TelegramLimits, ideal_makespan
from standins.botapi._multipart import MultipartReader
from standins.botapi._outage import MAX_HANG_S, OUTAGE_MODES
from standins.botapi._referee import SEND_METHODS
from standins.botapi._server import DEFAULT_TOKEN, BotApiServer, main, retry_after_seconds
from standins.botapi._topics import Topic, topic_of
from standins.botapi._wire import (
    ApiError,
    Call,
    EarlyRequest,
    decode_params,
    form_params,
    text_of,
)

__all__ = [
    "CLIENT_CLOSED",
    "COUNTED_METHODS",
    "DEFAULT_TOKEN",
    "MAX_HANG_S",
    "OUTAGE_MODES",
    "SEND_METHODS",
    "Admission",
    "ApiError",
    "BotApiServer",
    "Call",
    "ChatInfo",
    "EarlyRequest",
    "InlineAnswer",
    "MultipartReader",
    "StoredFile",
    "TelegramLimits",
    "Topic",
    "decode_params",
    "form_params",
    "ideal_makespan",
    "main",
    "retry_after_seconds",
    "text_of",
    "topic_of",
]
