"""What users do, as the updates Telegram would send: the Bot API stand-in's update builders.

`user_message` (a text, a captioned photo, a reply, a post in a topic, on behalf
of a chat), `callback_query` (a button pressed) and `bot_added` (my_chat_member):
each builds the update as Telegram shapes it, keeps the message where the state
can find it (replies, edits, copies) and queues the update for getUpdates.

`UpdateBuilders` keeps nothing of its own: it writes the state, under its lock, and
hands each update to the feed.
"""

from __future__ import annotations

import time

from standins._mediabytes import tiny_jpeg
from standins._tgtext import auto_entities
from standins.botapi._chats import ChatInfo
from standins.botapi._privacy import PrivacyMode
from standins.botapi._state import BotApiState, without_reply
from standins.botapi._topics import ForumTopics
from standins.botapi._updates import UpdateFeed
from standins.botapi._wire import CHANNEL_BOT, GROUP_ANONYMOUS_BOT, JSON, user


class UpdateBuilders:
    """Updates from users, built and queued."""

    def __init__(
        self, state: BotApiState, feed: UpdateFeed, topics: ForumTopics, privacy: PrivacyMode
    ) -> None:
        self._state = state
        self._feed = feed
        self._topics = topics
        self._privacy = privacy

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
        message from the bot (`_privacy`) it is recorded in `withheld` and the
        update returned has no ``update_id``.
        """
        with self._state.lock:
            chat = self._state.chats.get(chat_id)
            if chat is None:
                assert chat_type != "private", "a private chat has a positive id"
                chat = self._state.chats.add(ChatInfo(id=chat_id, type=chat_type))
            date = int(time.time())
            msg: JSON = {
                "message_id": self._state.take_message_id(chat_id),
                "date": date,
                "chat": chat.as_message_chat(),
            }
            if chat.type == "channel":
                msg["sender_chat"] = chat.as_message_chat()
            elif sender_chat is not None:
                sender = self._state.chats.get(sender_chat)
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
                photo = self._state.files.store("photo", tiny_jpeg(), "photo.jpg", "image/jpeg")
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
                replied = self._state.messages.get((chat_id, reply_to))
                if replied is not None:
                    msg["reply_to_message"] = without_reply(replied)
            self._topics.place_user_message(chat, msg, topic_id, replied)
            self._state.remember(msg)
            kind = "channel_post" if chat.type == "channel" else "message"
            if not self._privacy.delivered_to_bot(chat, msg):
                # Privacy mode: the message is in the chat (a reply can name it), not in
                # the bot's updates.
                self._privacy.withhold(msg)
                return {kind: msg}
            return self._feed.inject_update({kind: msg})

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
        with self._state.lock:
            uid = user_id if user_id is not None else (chat_id if chat_id > 0 else 1001)
            query_id = str(self._state.rng.getrandbits(62))
            stored = self._state.live(chat_id, message_id)
            if stored is None:
                chat = self._state.chats.get(chat_id)
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
            self._state.callbacks[query_id] = (time.monotonic(), query)
            return self._feed.inject_update({"callback_query": query})

    def bot_added(
        self,
        chat_id: int,
        user_id: int,
        *,
        chat_type: str = "supergroup",
        language_code: str = "en",
    ) -> JSON:
        """User `user_id` adds the bot to chat `chat_id`: the my_chat_member update."""
        with self._state.lock:
            chat = self._state.chats.get(chat_id) or self._state.chats.add(
                ChatInfo(id=chat_id, type=chat_type)
            )
            me = self._state.bot_user_short
            change: JSON = {
                "chat": chat.as_message_chat(),
                "from": user(user_id, language_code=language_code),
                "date": int(time.time()),
                "old_chat_member": {"status": "left", "user": me},
                "new_chat_member": {"status": "member", "user": me},
            }
            return self._feed.inject_update({"my_chat_member": change})
