"""What the Bot API stand-in does as Telegram: chats, messages, updates, files.

`TelegramModel` holds the state and implements the methods (``_m_<method>``,
each taking the decoded parameters and uploaded parts); `BotApiServer` in
`botapi.py` puts it behind HTTP and adds the test instrumentation. State is
guarded by one re-entrant lock, because tests drive it from their own thread
while the server runs on its loop; the lock is never held across an await.

Beside it, each a mixin of `TelegramModel`: `_botapi_updates` (getUpdates, webhooks),
`_botapi_edits` (edits, deletions), `_botapi_copies` (copies, forwards),
`_botapi_topics` (forum topics, where a message lands), `_botapi_inline` (inline mode).
"""

from __future__ import annotations

import json
import random
import re
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from standins._botapi_chats import ChatInfo, ChatRegistry
from standins._botapi_copies import CopiesAndForwards
from standins._botapi_edits import Edits
from standins._botapi_files import FileStore, StoredFile, media_content
from standins._botapi_inline import InlineMode
from standins._botapi_privacy import PrivacyMode
from standins._botapi_topics import ForumTopics
from standins._botapi_updates import UpdateFeed
from standins._botapi_wire import (
    CAPTION_LIMIT,
    GETFILE_LIMIT,
    JSON,
    QUERY_TOO_OLD,
    REPLY_NOT_FOUND,
    TEXT_EMPTY,
    TEXT_LIMIT,
    UPLOAD_LIMIT,
    URL_FETCH_FAILED,
    URL_WRONG_TYPE,
    ApiError,
    Upload,
    as_int,
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

MethodFn = Callable[[JSON, dict[str, Upload]], Awaitable[Any]]


class TelegramModel(UpdateFeed, Edits, CopiesAndForwards, ForumTopics, InlineMode, PrivacyMode):
    """Telegram's side of the conversation, without HTTP (the update feed, edits,
    copies and forwards, forum topics, inline mode and privacy mode in their own mixins).

    Attributes:
        token: the token it accepts (``<bot id>:<secret>``).
        bot_user: the User dict of the bot (its id is the token's number).
        callback_answers: callback query id -> the answerCallbackQuery parameters.
    """

    def __init__(
        self,
        token: str,
        *,
        allow_url_fetch_from_loopback: bool = False,
        url_fetch_timeout: float = 10.0,
        upload_limit: int = UPLOAD_LIMIT,
        bot_username: str = "xbot_standin_bot",
        bot_first_name: str = "XBot",
        callback_answer_window: float = 15.0,
        max_records: int = 200_000,
        seed: int | None = None,
        privacy_mode: bool = False,
    ) -> None:
        self.token = token
        self.bot_user: JSON = {
            "id": int(token.split(":", 1)[0]),
            "is_bot": True,
            "first_name": bot_first_name,
            "username": bot_username,
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
            "can_connect_to_business": False,
            "has_main_web_app": False,
        }
        self.callback_answer_window = callback_answer_window
        self._lock = threading.RLock()
        self._rng = random.Random(seed)
        self._chats = ChatRegistry(self.bot_user)
        self._files = FileStore(
            allow_loopback=allow_url_fetch_from_loopback,
            fetch_timeout=url_fetch_timeout,
            upload_limit=upload_limit,
        )
        self._next_message_id: dict[int, int] = {}
        self._messages: dict[tuple[int, int], JSON] = {}
        self._sent_order: deque[tuple[int, int]] = deque(maxlen=max_records)
        self._deleted: set[tuple[int, int]] = set()
        self._commands: dict[str, list[JSON]] = {}
        self._callbacks: dict[str, tuple[float, JSON]] = {}
        self.callback_answers: dict[str, JSON] = {}
        self._init_updates()
        self._init_topics()
        self._init_inline()
        self._init_privacy(privacy_mode)

    @property
    def allow_url_fetch_from_loopback(self) -> bool:
        return self._files.allow_loopback

    @allow_url_fetch_from_loopback.setter
    def allow_url_fetch_from_loopback(self, value: bool) -> None:
        self._files.allow_loopback = value

    @property
    def url_fetch_timeout(self) -> float:
        return self._files.fetch_timeout

    @url_fetch_timeout.setter
    def url_fetch_timeout(self, value: float) -> None:
        self._files.fetch_timeout = value

    def method_table(self) -> dict[str, tuple[str, MethodFn]]:
        """lower-case method name -> (canonical name, implementation)."""
        return {
            name[3:].lower(): (name[3:], getattr(self, name))
            for name in dir(type(self))
            if name.startswith("_m_")
        }

    # ------------------------------------------------------------------ inspection

    def sent_messages(self, chat_id: int, *, include_deleted: bool = False) -> list[JSON]:
        """The bot's messages in `chat_id`, oldest first, as they are now (edits applied)."""
        with self._lock:
            return [
                self._messages[key]
                for key in self._sent_order
                if key[0] == chat_id
                and key in self._messages
                and (include_deleted or key not in self._deleted)
            ]

    def message(self, chat_id: int, message_id: int) -> JSON | None:
        with self._lock:
            return self._messages.get((chat_id, message_id))

    def file_info(self, file_id: str) -> StoredFile | None:
        return self._files.get(file_id)

    def file_bytes(self, file_id: str) -> bytes:
        info = self._files.get(file_id)
        if info is None:
            raise KeyError(file_id)
        return info.path.read_bytes()

    def invalidate_file_id(self, file_id: str) -> None:
        """Make `file_id` (and the other sizes of its photo) unusable, like an expired one."""
        self._files.invalidate(file_id)

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
        with self._lock:
            return self._chats.add(chat)

    def chat(self, chat_id: int) -> ChatInfo | None:
        with self._lock:
            return self._chats.get(chat_id)

    def block_bot(self, chat_id: int, blocked: bool = True) -> None:
        """The user blocked the bot (private) or the bot was removed (group, channel)."""
        with self._lock:
            chat = self._chats.get(chat_id)
            if chat is None:
                raise KeyError(chat_id)
            chat.bot_blocked = blocked

    # ------------------------------------------------------------------ bot

    async def _m_getMe(self, params: JSON, files: dict[str, Upload]) -> Any:
        return self.bot_user

    async def _m_setMyCommands(self, params: JSON, files: dict[str, Upload]) -> Any:
        commands = as_json(params.get("commands", "[]"), "commands")
        if not isinstance(commands, list) or len(commands) > 100:
            raise bad_request("Bad Request: can't parse commands JSON object")
        for cmd in commands:
            name = str(cmd.get("command", ""))
            if not re.fullmatch(r"[a-z0-9_]{1,32}", name):
                raise bad_request("Bad Request: BOT_COMMAND_INVALID")
            if not 1 <= len(str(cmd.get("description", ""))) <= 256:
                raise bad_request("Bad Request: command description must be non-empty")
        key = _commands_key(params)
        with self._lock:
            self._commands[key] = [
                {"command": c["command"], "description": c["description"]} for c in commands
            ]
        return True

    async def _m_getMyCommands(self, params: JSON, files: dict[str, Upload]) -> Any:
        with self._lock:
            return list(self._commands.get(_commands_key(params), []))

    async def _m_deleteMyCommands(self, params: JSON, files: dict[str, Upload]) -> Any:
        with self._lock:
            self._commands.pop(_commands_key(params), None)
        return True

    # ------------------------------------------------------------------ messages

    def _take_message_id(self, chat_id: int) -> int:
        n = self._next_message_id.get(chat_id, 1)
        self._next_message_id[chat_id] = n + 1
        return n

    def _remember(self, msg: JSON) -> None:
        self._messages[(msg["chat"]["id"], msg["message_id"])] = msg

    def _new_message(
        self,
        chat: ChatInfo,
        content: JSON,
        *,
        reply: JSON | None = None,
        markup: JSON | None = None,
        extra: JSON | None = None,
    ) -> JSON:
        msg: JSON = {
            "message_id": self._take_message_id(chat.id),
            "date": int(time.time()),
            "chat": chat.as_message_chat(),
        }
        if chat.type == "channel":
            msg["sender_chat"] = chat.as_message_chat()
        else:
            msg["from"] = self.bot_user_short
        msg.update(content)
        if extra:
            msg.update(extra)
        if reply is not None:
            msg["reply_to_message"] = without_reply(reply)
        if markup is not None:
            msg["reply_markup"] = markup
        self._remember(msg)
        self._sent_order.append((chat.id, msg["message_id"]))
        if chat.type != "private":
            self._bot_posted(chat.id)
        return msg

    @property
    def bot_user_short(self) -> JSON:
        return {k: self.bot_user[k] for k in ("id", "is_bot", "first_name", "username")}

    def _reply_target(self, chat: ChatInfo, params: JSON) -> JSON | None:
        reply_params = params.get("reply_parameters")
        if reply_params is not None:
            rp = as_json(reply_params, "reply parameters")
            if not isinstance(rp, dict) or "message_id" not in rp:
                raise bad_request("Bad Request: can't parse reply parameters JSON object")
            target_chat = self._chats.resolve_id(rp.get("chat_id", chat.id))
            message_id = as_int(rp["message_id"], "message_id")
            allow = bool(rp.get("allow_sending_without_reply"))
        elif params.get("reply_to_message_id") is not None:
            target_chat = chat.id
            message_id = as_int(params["reply_to_message_id"], "reply_to_message_id")
            allow = bool(params.get("allow_sending_without_reply"))
        else:
            return None
        key = (target_chat if target_chat is not None else chat.id, message_id)
        found = self._messages.get(key)
        if found is None or key in self._deleted:
            if allow:
                return None
            raise bad_request(REPLY_NOT_FOUND)
        return found

    async def _m_sendMessage(self, params: JSON, files: dict[str, Upload]) -> Any:
        with self._lock:
            chat = self._chats.require(params)
        text, entities = text_of(params, "text", "entities", TEXT_LIMIT)
        if not text.strip():
            raise bad_request(TEXT_EMPTY)
        markup = parse_markup(params)
        with self._lock:
            reply, where = self._placement(chat, params)
            content: JSON = {"text": text, **where}
            if entities:
                content["entities"] = entities
            if params.get("link_preview_options") is not None:
                content["link_preview_options"] = as_json(
                    params["link_preview_options"], "link preview options"
                )
            return self._new_message(chat, content, reply=reply, markup=markup)

    async def _send_media(self, kind: str, params: JSON, files: dict[str, Upload]) -> JSON:
        with self._lock:
            chat = self._chats.require(params)
        caption, caption_entities = text_of(params, "caption", "caption_entities", CAPTION_LIMIT)
        markup = parse_markup(params)
        stored = await self._files.resolve(kind, params.get(kind), files.get(kind), files, params)
        with self._lock:
            reply, where = self._placement(chat, params)
            content = media_content(kind, stored, params) | where
            if caption:
                content["caption"] = caption
            if caption_entities:
                content["caption_entities"] = caption_entities
            if params.get("has_spoiler"):
                content["has_media_spoiler"] = True
            if params.get("show_caption_above_media"):
                content["show_caption_above_media"] = True
            return self._new_message(chat, content, reply=reply, markup=markup)

    async def _m_sendPhoto(self, params: JSON, files: dict[str, Upload]) -> Any:
        return await self._send_media("photo", params, files)

    async def _m_sendVideo(self, params: JSON, files: dict[str, Upload]) -> Any:
        return await self._send_media("video", params, files)

    async def _m_sendAnimation(self, params: JSON, files: dict[str, Upload]) -> Any:
        return await self._send_media("animation", params, files)

    async def _m_sendDocument(self, params: JSON, files: dict[str, Upload]) -> Any:
        return await self._send_media("document", params, files)

    async def _m_sendAudio(self, params: JSON, files: dict[str, Upload]) -> Any:
        return await self._send_media("audio", params, files)

    async def _m_sendMediaGroup(self, params: JSON, files: dict[str, Upload]) -> Any:
        """Albums. Over 10 items uses Telegram's own (odd) wording; fewer than 2 is ours.

        A URL an item cannot be fetched from fails the whole album with
        ``failed to send message #N with the error message "..."``, as Telegram does.
        """
        with self._lock:
            chat = self._chats.require(params)
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
                    await self._files.resolve(item["type"], item.get("media"), None, files, item)
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
        group_id = str(self._rng.getrandbits(60))
        with self._lock:
            reply, where = self._placement(chat, params)
            out = []
            for item, info, (caption, entities) in zip(media, stored, texts, strict=True):
                content = media_content(item["type"], info, item) | where
                content["media_group_id"] = group_id
                if caption:
                    content["caption"] = caption
                if entities:
                    content["caption_entities"] = entities
                out.append(self._new_message(chat, content, reply=reply))
            return out

    async def _m_sendChatAction(self, params: JSON, files: dict[str, Upload]) -> Any:
        with self._lock:
            self._check_thread(self._chats.require(params), params)
        if params.get("action") not in _CHAT_ACTIONS:
            raise bad_request("Bad Request: wrong parameter action in request")
        return True

    async def _m_answerCallbackQuery(self, params: JSON, files: dict[str, Upload]) -> Any:
        query_id = str(params.get("callback_query_id", ""))
        with self._lock:
            entry = self._callbacks.get(query_id)
            too_old = entry is None or time.monotonic() - entry[0] > self.callback_answer_window
            if too_old or query_id in self.callback_answers:
                raise bad_request(QUERY_TOO_OLD)
            self.callback_answers[query_id] = dict(params)
        return True

    # ------------------------------------------------------------------ chat info

    async def _m_getChat(self, params: JSON, files: dict[str, Upload]) -> Any:
        with self._lock:
            return self._chats.require(params, posting=False).full_info()

    async def _m_getChatMember(self, params: JSON, files: dict[str, Upload]) -> Any:
        with self._lock:
            chat = self._chats.require(params, posting=False)
            return self._chats.member(chat, as_int(params.get("user_id"), "user_id"))

    async def _m_getChatAdministrators(self, params: JSON, files: dict[str, Upload]) -> Any:
        with self._lock:
            return self._chats.administrators(self._chats.require(params, posting=False))

    # ------------------------------------------------------------------ files

    async def _m_getFile(self, params: JSON, files: dict[str, Upload]) -> Any:
        file_id = str(params.get("file_id", ""))
        info = self._files.get(file_id)
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


def without_reply(msg: JSON) -> JSON:
    """Telegram nests one level of reply only."""
    return {k: v for k, v in msg.items() if k != "reply_to_message"}


def _commands_key(params: JSON) -> str:
    scope = params.get("scope")
    scope_key = json.dumps(as_json(scope, "scope"), sort_keys=True) if scope else "default"
    return f"{scope_key}|{params.get('language_code', '')}"
