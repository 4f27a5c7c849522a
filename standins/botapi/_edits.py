"""Edits and deletions in the Bot API stand-in: editMessageText/Caption/ReplyMarkup, deleteMessage.

A bot edits only its own messages, still there; an edit that changes nothing
fails with "message is not modified", as on Telegram; a text message has no
caption to edit and a media message no text.

`Edits` works on the state's messages, under its lock.
"""

from __future__ import annotations

import time
from typing import Any

from standins.botapi._chats import ChatInfo
from standins.botapi._state import BotApiState, api_method
from standins.botapi._wire import (
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


class Edits:
    """Changes to messages already sent."""

    def __init__(self, state: BotApiState) -> None:
        self._state = state

    def _own_message(self, params: JSON) -> tuple[ChatInfo, JSON]:
        chat = self._state.chats.require(params, posting=False)
        if params.get("message_id") is None:
            raise bad_request("Bad Request: message identifier is not specified")
        msg = self._state.live(chat.id, as_int(params["message_id"], "message_id"))
        if msg is None:
            raise bad_request(EDIT_NOT_FOUND)
        if "from" in msg and msg["from"]["id"] != self._state.bot_id:
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
        self._state.remember(new)
        return new

    @api_method("editMessageText")
    async def edit_message_text(self, params: JSON, files: dict[str, Upload]) -> Any:
        text, entities = text_of(params, "text", "entities", TEXT_LIMIT)
        if not text.strip():
            raise bad_request(TEXT_EMPTY)
        markup = parse_markup(params)
        with self._state.lock:
            _, msg = self._own_message(params)
            if "text" not in msg:
                raise bad_request("Bad Request: there is no text in the message to edit")
            return self._apply_edit(msg, {"text": text, "entities": entities}, markup)

    @api_method("editMessageCaption")
    async def edit_message_caption(self, params: JSON, files: dict[str, Upload]) -> Any:
        caption, entities = text_of(params, "caption", "caption_entities", CAPTION_LIMIT)
        markup = parse_markup(params)
        with self._state.lock:
            _, msg = self._own_message(params)
            if "text" in msg:
                raise bad_request("Bad Request: there is no caption in the message to edit")
            return self._apply_edit(msg, {"caption": caption, "caption_entities": entities}, markup)

    @api_method("editMessageReplyMarkup")
    async def edit_message_reply_markup(self, params: JSON, files: dict[str, Upload]) -> Any:
        markup = parse_markup(params)
        with self._state.lock:
            _, msg = self._own_message(params)
            return self._apply_edit(msg, {}, markup)

    @api_method("deleteMessage")
    async def delete_message(self, params: JSON, files: dict[str, Upload]) -> Any:
        with self._state.lock:
            chat = self._state.chats.require(params, posting=False)
            message_id = as_int(params.get("message_id"), "message_id")
            if self._state.live(chat.id, message_id) is None:
                raise bad_request("Bad Request: message to delete not found")
            self._state.deleted.add((chat.id, message_id))
        return True
