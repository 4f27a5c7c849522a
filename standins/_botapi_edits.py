"""Edits and deletions in the Bot API stand-in: editMessageText/Caption/ReplyMarkup, deleteMessage.

A bot edits only its own messages, still there; an edit that changes nothing
fails with "message is not modified", as on Telegram; a text message has no
caption to edit and a media message no text.

`Edits` is a mixin of `TelegramModel`; every method runs under the model's lock.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from standins._botapi_wire import (
    CAPTION_LIMIT,
    EDIT_NOT_FOUND,
    JSON,
    NOT_MODIFIED,
    TEXT_EMPTY,
    TEXT_LIMIT,
    Upload,
    as_int,
    bad_request,
    parse_markup,
    text_of,
)

if TYPE_CHECKING:
    from standins._botapi_chats import ChatInfo, ChatRegistry


class Edits:
    """Changes to messages already sent (a mixin of `TelegramModel`)."""

    if TYPE_CHECKING:
        _lock: threading.RLock
        _chats: ChatRegistry
        _messages: dict[tuple[int, int], JSON]
        _deleted: set[tuple[int, int]]
        bot_user: JSON

        def _remember(self, msg: JSON) -> None: ...

    def _own_message(self, params: JSON) -> tuple[ChatInfo, JSON]:
        chat = self._chats.require(params, posting=False)
        if params.get("message_id") is None:
            raise bad_request("Bad Request: message identifier is not specified")
        key = (chat.id, as_int(params["message_id"], "message_id"))
        msg = self._messages.get(key)
        if msg is None or key in self._deleted:
            raise bad_request(EDIT_NOT_FOUND)
        if "from" in msg and msg["from"]["id"] != self.bot_user["id"]:
            raise bad_request("Bad Request: message can't be edited")
        return chat, msg

    def _apply_edit(self, msg: JSON, changes: JSON, markup: JSON | None) -> JSON:
        new = dict(msg)
        for key, value in changes.items():
            if value in (None, [], ""):
                new.pop(key, None)
            else:
                new[key] = value
        if markup is None:
            new.pop("reply_markup", None)
        else:
            new["reply_markup"] = markup
        if new == msg:
            raise bad_request(NOT_MODIFIED)
        new["edit_date"] = int(time.time())
        self._remember(new)
        return new

    async def _m_editMessageText(self, params: JSON, files: dict[str, Upload]) -> Any:
        text, entities = text_of(params, "text", "entities", TEXT_LIMIT)
        if not text.strip():
            raise bad_request(TEXT_EMPTY)
        markup = parse_markup(params)
        with self._lock:
            _, msg = self._own_message(params)
            if "text" not in msg:
                raise bad_request("Bad Request: there is no text in the message to edit")
            return self._apply_edit(msg, {"text": text, "entities": entities}, markup)

    async def _m_editMessageCaption(self, params: JSON, files: dict[str, Upload]) -> Any:
        caption, entities = text_of(params, "caption", "caption_entities", CAPTION_LIMIT)
        markup = parse_markup(params)
        with self._lock:
            _, msg = self._own_message(params)
            if "text" in msg:
                raise bad_request("Bad Request: there is no caption in the message to edit")
            return self._apply_edit(msg, {"caption": caption, "caption_entities": entities}, markup)

    async def _m_editMessageReplyMarkup(self, params: JSON, files: dict[str, Upload]) -> Any:
        markup = parse_markup(params)
        with self._lock:
            _, msg = self._own_message(params)
            return self._apply_edit(msg, {}, markup)

    async def _m_deleteMessage(self, params: JSON, files: dict[str, Upload]) -> Any:
        with self._lock:
            chat = self._chats.require(params, posting=False)
            key = (chat.id, as_int(params.get("message_id"), "message_id"))
            if key not in self._messages or key in self._deleted:
                raise bad_request("Bad Request: message to delete not found")
            self._deleted.add(key)
        return True
