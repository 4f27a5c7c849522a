"""Messages the bot posts through the Bot API stand-in: sendMessage, the media sends,
albums (sendMediaGroup), chat actions, answers to button presses, getFile.

Each send checks what Telegram checks (text and caption limits after entity parsing,
the reply target and the topic, the album's shape), resolves its media through the
file store (uploads, ``file_id``s, URLs Telegram fetches itself) and posts the message
into the state. Where it lands is the topics' rule (`ForumTopics.placement`).
"""

from __future__ import annotations

import time
from typing import Any

from standins.botapi._files import StoredFile, media_content
from standins.botapi._state import BotApiState, api_method
from standins.botapi._topics import ForumTopics
from standins.botapi._wire import (
    CAPTION_LIMIT,
    GETFILE_LIMIT,
    JSON,
    QUERY_TOO_OLD,
    TEXT_EMPTY,
    TEXT_LIMIT,
    URL_FETCH_FAILED,
    URL_WRONG_TYPE,
    ApiError,
    Upload,
    as_json,
    bad_request,
    parse_markup,
    text_of,
)

_CHAT_ACTIONS = frozenset(
    {
        "typing",
        "upload_photo",
        "record_video",
        "upload_video",
        "record_voice",
        "upload_voice",
        "upload_document",
        "choose_sticker",
        "find_location",
        "record_video_note",
        "upload_video_note",
    }
)


class Messages:
    """The bot's sends, its chat actions and its answers to callback queries.

    Attributes:
        callback_answer_window: seconds after a press within which it may be answered.
    """

    def __init__(
        self, state: BotApiState, topics: ForumTopics, *, callback_answer_window: float
    ) -> None:
        self._state = state
        self._topics = topics
        self.callback_answer_window = callback_answer_window

    @api_method("sendMessage")
    async def send_message(self, params: JSON, files: dict[str, Upload]) -> Any:
        with self._state.lock:
            chat = self._state.chats.require(params)
        text, entities = text_of(params, "text", "entities", TEXT_LIMIT)
        if not text.strip():
            raise bad_request(TEXT_EMPTY)
        markup = parse_markup(params)
        with self._state.lock:
            reply, where = self._topics.placement(chat, params)
            content: JSON = {"text": text, **where}
            if entities:
                content["entities"] = entities
            if params.get("link_preview_options") is not None:
                content["link_preview_options"] = as_json(
                    params["link_preview_options"], "link preview options"
                )
            return self._state.new_message(chat, content, reply=reply, markup=markup)

    async def _send_media(self, kind: str, params: JSON, files: dict[str, Upload]) -> JSON:
        with self._state.lock:
            chat = self._state.chats.require(params)
        caption, caption_entities = text_of(params, "caption", "caption_entities", CAPTION_LIMIT)
        markup = parse_markup(params)
        stored = await self._state.files.resolve(
            kind, params.get(kind), files.get(kind), files, params
        )
        with self._state.lock:
            reply, where = self._topics.placement(chat, params)
            content = media_content(kind, stored, params) | where
            if caption:
                content["caption"] = caption
            if caption_entities:
                content["caption_entities"] = caption_entities
            if params.get("has_spoiler"):
                content["has_media_spoiler"] = True
            if params.get("show_caption_above_media"):
                content["show_caption_above_media"] = True
            return self._state.new_message(chat, content, reply=reply, markup=markup)

    @api_method("sendPhoto")
    async def send_photo(self, params: JSON, files: dict[str, Upload]) -> Any:
        return await self._send_media("photo", params, files)

    @api_method("sendVideo")
    async def send_video(self, params: JSON, files: dict[str, Upload]) -> Any:
        return await self._send_media("video", params, files)

    @api_method("sendAnimation")
    async def send_animation(self, params: JSON, files: dict[str, Upload]) -> Any:
        return await self._send_media("animation", params, files)

    @api_method("sendDocument")
    async def send_document(self, params: JSON, files: dict[str, Upload]) -> Any:
        return await self._send_media("document", params, files)

    @api_method("sendAudio")
    async def send_audio(self, params: JSON, files: dict[str, Upload]) -> Any:
        return await self._send_media("audio", params, files)

    @api_method("sendMediaGroup")
    async def send_media_group(self, params: JSON, files: dict[str, Upload]) -> Any:
        """Albums. Over 10 items uses Telegram's own (odd) wording; fewer than 2 is ours.

        A URL an item cannot be fetched from fails the whole album with
        ``failed to send message #N with the error message "..."``, as Telegram does.
        """
        with self._state.lock:
            chat = self._state.chats.require(params)
        media = as_json(params.get("media"), "media")
        if not isinstance(media, list) or not media:
            raise bad_request("Bad Request: media to send are not specified")
        if len(media) > 10:
            raise bad_request("Bad Request: too much messages to send as an album")
        if len(media) < 2:
            raise bad_request("Bad Request: media group must include 2-10 items")
        for item in media:
            # An InputFile sent without attach=True arrives as a part named "media" and
            # items without a "media" field: Telegram refuses the album with these words.
            if not isinstance(item, dict) or "media" not in item:
                raise bad_request("Bad Request: can't parse InputMedia: media not found")
            if not isinstance(item["media"], str):
                raise bad_request(
                    'Bad Request: can\'t parse InputMedia: Field "media" must be of type String'
                )
        kinds = [str(item.get("type", "")) for item in media]
        for kind in kinds:
            if kind not in ("photo", "video", "document", "audio"):
                raise bad_request(
                    f'Bad Request: can\'t parse InputMedia: type "{kind}" '
                    "can't be used in sendMediaGroup"
                )
        for special in ("document", "audio"):
            if special in kinds and any(k != special for k in kinds):
                raise bad_request(f"Bad Request: {special} can't be mixed with other media types")
        texts = [text_of(item, "caption", "caption_entities", CAPTION_LIMIT) for item in media]
        stored: list[StoredFile] = []
        for index, item in enumerate(media):
            try:
                stored.append(
                    await self._state.files.resolve(
                        item["type"], item.get("media"), None, files, item
                    )
                )
            except ApiError as exc:
                if exc.description in (URL_FETCH_FAILED, URL_WRONG_TYPE):
                    inner = exc.description.removeprefix("Bad Request: ")
                    inner = inner[0].upper() + inner[1:]
                    raise bad_request(
                        f"Bad Request: failed to send message #{index + 1} "
                        f'with the error message "{inner}"'
                    ) from None
                raise
        group_id = str(self._state.rng.getrandbits(60))
        with self._state.lock:
            reply, where = self._topics.placement(chat, params)
            out = []
            for item, info, (caption, entities) in zip(media, stored, texts, strict=True):
                content = media_content(item["type"], info, item) | where
                content["media_group_id"] = group_id
                if caption:
                    content["caption"] = caption
                if entities:
                    content["caption_entities"] = entities
                out.append(self._state.new_message(chat, content, reply=reply))
            return out

    @api_method("sendChatAction")
    async def send_chat_action(self, params: JSON, files: dict[str, Upload]) -> Any:
        with self._state.lock:
            self._topics.check_thread(self._state.chats.require(params), params)
        if params.get("action") not in _CHAT_ACTIONS:
            raise bad_request("Bad Request: wrong parameter action in request")
        return True

    @api_method("answerCallbackQuery")
    async def answer_callback_query(self, params: JSON, files: dict[str, Upload]) -> Any:
        query_id = str(params.get("callback_query_id", ""))
        with self._state.lock:
            entry = self._state.callbacks.get(query_id)
            too_old = entry is None or time.monotonic() - entry[0] > self.callback_answer_window
            if too_old or query_id in self._state.callback_answers:
                raise bad_request(QUERY_TOO_OLD)
            self._state.callback_answers[query_id] = dict(params)
        return True

    @api_method("getFile")
    async def get_file(self, params: JSON, files: dict[str, Upload]) -> Any:
        file_id = str(params.get("file_id", ""))
        info = self._state.files.get(file_id)
        if info is None:
            raise bad_request("Bad Request: invalid file_id")
        if info.size > GETFILE_LIMIT:
            raise bad_request("Bad Request: file is too big")
        return {
            "file_id": file_id,
            "file_unique_id": info.file_unique_id,
            "file_size": info.size,
            "file_path": info.file_path,
        }
