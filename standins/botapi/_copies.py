"""Copies and forwards in the Bot API stand-in: copyMessage, copyMessages, forwardMessage.

A copy keeps the content (a new caption may replace the old) and drops the
origin; copies of an album keep it together under a new ``media_group_id``;
a forward keeps the content and says where it came from (``forward_origin``).
What Telegram cannot find in a batch it skips.

`CopiesAndForwards` works on the state's messages, under its lock; where a copy
lands is the topics' rule (`ForumTopics.placement`).
"""

from __future__ import annotations

from typing import Any

from standins.botapi._chats import ChatInfo
from standins.botapi._state import BotApiState, api_method
from standins.botapi._topics import ForumTopics
from standins.botapi._wire import (
    CAPTION_LIMIT,
    CHAT_NOT_FOUND,
    JSON,
    ApiError,
    Upload,
    as_int,
    as_json,
    bad_request,
    parse_markup,
    text_of,
)


class CopiesAndForwards:
    """Messages sent again from where they are."""

    def __init__(self, state: BotApiState, topics: ForumTopics) -> None:
        self._state = state
        self._topics = topics

    def _source_message(self, params: JSON, verb: str) -> JSON:
        chats = self._state.chats
        from_chat = chats.resolve_id(params.get("from_chat_id"))
        if from_chat is None or chats.get(from_chat) is None:
            raise bad_request(CHAT_NOT_FOUND)
        msg = self._state.live(from_chat, as_int(params.get("message_id"), "message_id"))
        if msg is None:
            raise bad_request(f"Bad Request: message to {verb} not found")
        return msg

    def _copy_into(self, chat: ChatInfo, src: JSON, params: JSON, group: str | None) -> JSON:
        content = {
            k: v
            for k, v in src.items()
            if k
            in (
                "text",
                "entities",
                "photo",
                "video",
                "animation",
                "document",
                "caption",
                "caption_entities",
                "show_caption_above_media",
                "has_media_spoiler",
            )
        }
        if "caption" in params and "text" not in src:
            caption, entities = text_of(params, "caption", "caption_entities", CAPTION_LIMIT)
            content.pop("caption", None)
            content.pop("caption_entities", None)
            if caption:
                content["caption"] = caption
            if entities:
                content["caption_entities"] = entities
        if group is not None:
            content["media_group_id"] = group
        reply, where = self._topics.placement(chat, params)
        content.update(where)
        return self._state.new_message(chat, content, reply=reply, markup=parse_markup(params))

    @api_method("copyMessage")
    async def copy_message(self, params: JSON, files: dict[str, Upload]) -> Any:
        with self._state.lock:
            chat = self._state.chats.require(params)
            src = self._source_message(params, "copy")
            msg = self._copy_into(chat, src, params, None)
            return {"message_id": msg["message_id"]}

    @api_method("copyMessages")
    async def copy_messages(self, params: JSON, files: dict[str, Upload]) -> Any:
        ids = as_json(params.get("message_ids"), "message identifiers")
        if not isinstance(ids, list) or not 1 <= len(ids) <= 100:
            raise bad_request("Bad Request: message identifiers are not specified")
        with self._state.lock:
            chat = self._state.chats.require(params)
            sources = []
            for mid in sorted(as_int(i, "message_id") for i in ids):
                try:
                    sources.append(self._source_message({**params, "message_id": mid}, "copy"))
                except ApiError:
                    continue  # Telegram skips what it cannot find
            if not sources:
                raise bad_request("Bad Request: there are no messages to copy")
            groups: dict[str, str] = {}
            out = []
            for src in sources:
                old = src.get("media_group_id")
                new = groups.setdefault(old, str(self._state.rng.getrandbits(60))) if old else None
                plain = {k: v for k, v in params.items() if k not in ("caption", "reply_markup")}
                out.append({"message_id": self._copy_into(chat, src, plain, new)["message_id"]})
            return out

    @api_method("forwardMessage")
    async def forward_message(self, params: JSON, files: dict[str, Upload]) -> Any:
        with self._state.lock:
            chat = self._state.chats.require(params)
            src = self._source_message(params, "forward")
            origin_chat = src["chat"]
            if origin_chat["type"] == "channel":
                origin: JSON = {
                    "type": "channel",
                    "date": src["date"],
                    "chat": origin_chat,
                    "message_id": src["message_id"],
                }
            elif "sender_chat" in src:
                origin = {"type": "chat", "date": src["date"], "sender_chat": src["sender_chat"]}
            else:
                origin = {"type": "user", "date": src["date"], "sender_user": src["from"]}
            content = {
                k: v
                for k, v in src.items()
                if k
                not in (
                    "message_id",
                    "date",
                    "chat",
                    "from",
                    "sender_chat",
                    "reply_to_message",
                    "reply_markup",
                    "edit_date",
                    "media_group_id",
                    "message_thread_id",
                    "is_topic_message",
                )
            }
            topic_reply, where = self._topics.placement(chat, params)
            content.update(where)
            return self._state.new_message(
                chat, content, reply=topic_reply, extra={"forward_origin": origin}
            )
