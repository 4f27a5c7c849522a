"""What users do, as the updates Telegram would send: the Bot API stand-in's update builders.

`user_message` (a text, a captioned photo, a reply, a post in a topic, on behalf
of a chat), `callback_query` (a button pressed) and `bot_added` (my_chat_member):
each builds the update as Telegram shapes it, keeps the message where the model
can find it (replies, edits, copies) and queues the update for getUpdates.

`UpdateBuilders` is a mixin of `BotApiServer`; every method runs under the model's lock.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from standins._botapi_model import without_reply
from standins._botapi_wire import CHANNEL_BOT, GROUP_ANONYMOUS_BOT, JSON, user
from standins._mediabytes import tiny_jpeg
from standins._tgtext import auto_entities

if TYPE_CHECKING:
    from standins._botapi_chats import ChatInfo, ChatRegistry
    from standins._botapi_files import FileStore


class UpdateBuilders:
    """Updates from users, built and queued (a mixin of `BotApiServer`)."""

    if TYPE_CHECKING:
        _lock: threading.RLock
        _rng: random.Random
        _chats: ChatRegistry
        _files: FileStore
        _messages: dict[tuple[int, int], JSON]
        _deleted: set[tuple[int, int]]
        _callbacks: dict[str, tuple[float, JSON]]
        bot_user: JSON

        def _take_message_id(self, chat_id: int) -> int: ...
        def _remember(self, msg: JSON) -> None: ...
        def _place_user_message(
            self, chat: ChatInfo, msg: JSON, topic_id: int | None, reply_to: JSON | None
        ) -> None: ...
        def inject_update(self, update: JSON) -> JSON: ...
        def _delivered_to_bot(self, chat: ChatInfo, msg: JSON) -> bool: ...
        def _withhold(self, msg: JSON) -> None: ...

        add_chat: Callable[..., ChatInfo]

    def user_message(
        self,
        chat_id: int,
        text: str,
        *,
        user_id: int | None = None,
        chat_type: str = "private",
        entities: list[JSON] | None = None,
        reply_to: int | None = None,
        caption: bool = False,
        sender_chat: int | None = None,
        first_name: str | None = None,
        username: str | None = None,
        language_code: str = "en",
        topic_id: int | None = None,
    ) -> JSON:
        """A user (or, in a channel, the channel) posts `text`; returns the update.

        `topic_id` posts in that forum topic (`add_forum`, `create_topic`); a
        reply lands in its target's topic, as on Telegram.

        `entities=None` attaches what Telegram would: `url` for http(s) links and
        `bot_command`, with UTF-16 offsets. `caption=True` sends a photo with
        `text` as its caption. `sender_chat` posts on behalf of a chat: the group
        itself (anonymous admin) or a channel. In a group whose privacy mode keeps the
        message from the bot (`_botapi_privacy`) it is recorded in `withheld` and the
        update returned has no ``update_id``.
        """
        with self._lock:
            chat = self._chats.get(chat_id)
            if chat is None:
                chat = (
                    self._chats.get(chat_id)
                    if chat_type == "private"
                    else self.add_chat(chat_id, chat_type)
                )
                assert chat is not None
            date = int(time.time())
            msg: JSON = {
                "message_id": self._take_message_id(chat_id),
                "date": date,
                "chat": chat.as_message_chat(),
            }
            if chat.type == "channel":
                msg["sender_chat"] = chat.as_message_chat()
            elif sender_chat is not None:
                sender = self._chats.get(sender_chat)
                sender_dict = (
                    sender.as_message_chat()
                    if sender
                    else {"id": sender_chat, "type": "channel", "title": f"Chat {sender_chat}"}
                )
                msg["from"] = GROUP_ANONYMOUS_BOT if sender_chat == chat_id else CHANNEL_BOT
                msg["sender_chat"] = sender_dict
            else:
                uid = user_id if user_id is not None else (chat_id if chat_id > 0 else 1001)
                msg["from"] = user(uid, first_name, username, language_code)
            found = entities if entities is not None else auto_entities(text)
            if caption:
                photo = self._files.store("photo", tiny_jpeg(), "photo.jpg", "image/jpeg")
                msg["photo"] = list(photo.photo_sizes)
                msg["caption"] = text
                if found:
                    msg["caption_entities"] = found
            else:
                msg["text"] = text
                if found:
                    msg["entities"] = found
            replied = None
            if reply_to is not None:
                replied = self._messages.get((chat_id, reply_to))
                if replied is not None:
                    msg["reply_to_message"] = without_reply(replied)
            self._place_user_message(chat, msg, topic_id, replied)
            self._remember(msg)
            kind = "channel_post" if chat.type == "channel" else "message"
            if not self._delivered_to_bot(chat, msg):
                # Privacy mode: the message is in the chat (a reply can name it), not in
                # the bot's updates.
                self._withhold(msg)
                return {kind: msg}
            return self.inject_update({kind: msg})

    def callback_query(
        self,
        chat_id: int,
        message_id: int,
        data: str,
        user_id: int | None = None,
        *,
        first_name: str | None = None,
        language_code: str = "en",
    ) -> JSON:
        """A user presses an inline button with `data` under message `message_id`."""
        with self._lock:
            uid = user_id if user_id is not None else (chat_id if chat_id > 0 else 1001)
            query_id = str(self._rng.getrandbits(62))
            stored = self._messages.get((chat_id, message_id))
            if stored is None or (chat_id, message_id) in self._deleted:
                chat = self._chats.get(chat_id)
                chat_dict = chat.as_message_chat() if chat else {"id": chat_id, "type": "group"}
                message: JSON = {"chat": chat_dict, "message_id": message_id, "date": 0}
            else:
                message = stored
            query: JSON = {
                "id": query_id,
                "from": user(uid, first_name, language_code=language_code),
                "message": message,
                "chat_instance": str((abs(chat_id) * 7919 + 17) % 10**18),
                "data": data,
            }
            self._callbacks[query_id] = (time.monotonic(), query)
            return self.inject_update({"callback_query": query})

    def bot_added(
        self,
        chat_id: int,
        user_id: int,
        *,
        chat_type: str = "supergroup",
        language_code: str = "en",
    ) -> JSON:
        """User `user_id` adds the bot to chat `chat_id`: the my_chat_member update."""
        with self._lock:
            chat = self._chats.get(chat_id) or self.add_chat(chat_id, chat_type)
            me = {k: self.bot_user[k] for k in ("id", "is_bot", "first_name", "username")}
            change: JSON = {
                "chat": chat.as_message_chat(),
                "from": user(user_id, language_code=language_code),
                "date": int(time.time()),
                "old_chat_member": {"status": "left", "user": me},
                "new_chat_member": {"status": "member", "user": me},
            }
            return self.inject_update({"my_chat_member": change})
