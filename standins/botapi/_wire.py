"""The Bot API stand-in's wire format: request decoding, records, Telegram's object shapes.

Pure functions and values only: the state lives in `_state`, the I/O in `_dispatch`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import attrs

from standins._tgtext import EntityParseError, rendered_text, utf16_len

JSON = dict[str, Any]

# Telegram's own limits (see docs/reference): bytes, characters in UTF-16 units.
PHOTO_UPLOAD_LIMIT = 10 * 1024 * 1024
UPLOAD_LIMIT = 50 * 1024 * 1024
PHOTO_URL_LIMIT = 5 * 1024 * 1024
URL_LIMIT = 20 * 1024 * 1024
GETFILE_LIMIT = 20 * 1024 * 1024
CAPTION_LIMIT = 1024
TEXT_LIMIT = 4096
# A message keeps its first 100 entities; Telegram drops the rest without an error
# (tdlib/telegram-bot-api#820, rubenlagus/TelegramBots#854).
ENTITY_LIMIT = 100
CALLBACK_DATA_LIMIT = 64

# Well-known service accounts Telegram shows as `from` of anonymous posts.
GROUP_ANONYMOUS_BOT = {
    "id": 1087968824,
    "is_bot": True,
    "first_name": "Group",
    "username": "GroupAnonymousBot",
}
CHANNEL_BOT = {"id": 136817688, "is_bot": True, "first_name": "Channel", "username": "Channel_Bot"}

# Errors with Telegram's exact wording.
CHAT_NOT_FOUND = "Bad Request: chat not found"
WRONG_FILE_ID = "Bad Request: wrong file identifier/HTTP URL specified"
URL_FETCH_FAILED = "Bad Request: failed to get HTTP URL content"
URL_WRONG_TYPE = "Bad Request: wrong type of the web page content"
CAPTION_TOO_LONG = "Bad Request: message caption is too long"
TEXT_TOO_LONG = "Bad Request: message is too long"
TEXT_EMPTY = "Bad Request: message text is empty"
EDIT_NOT_FOUND = "Bad Request: message to edit not found"
NOT_MODIFIED = (
    "Bad Request: message is not modified: specified new message content and reply markup "
    "are exactly the same as a current content and reply markup of the message"
)
REPLY_NOT_FOUND = "Bad Request: message to be replied not found"
GROUP_SEND_FAILED = "Bad Request: group send failed"
QUERY_TOO_OLD = "Bad Request: query is too old and response timeout expired or query ID is invalid"

# Parameters Telegram reads as plain strings: never JSON-decode these ("123" stays text).
STRING_PARAMS = frozenset(
    {
        "text",
        "caption",
        "parse_mode",
        "callback_query_id",
        "inline_message_id",
        "url",
        "file_id",
        "photo",
        "video",
        "animation",
        "document",
        "audio",
        "voice",
        "sticker",
        "thumbnail",
        "cover",
        "action",
        "secret_token",
        "ip_address",
        "business_connection_id",
        "message_effect_id",
        "language_code",
        "title",
        "description",
        "short_description",
        "name",
        "emoji",
    }
)


class ApiError(Exception):
    """An error answer: HTTP `status` and Telegram's `description`."""

    def __init__(self, status: int, description: str, parameters: JSON | None = None) -> None:
        super().__init__(description)
        self.status = status
        self.description = description
        self.parameters = parameters

    def body(self) -> JSON:
        out: JSON = {"ok": False, "error_code": self.status, "description": self.description}
        if self.parameters:
            out["parameters"] = self.parameters
        return out


def bad_request(description: str) -> ApiError:
    return ApiError(400, description)


@attrs.frozen
class Upload:
    """A file part of a multipart request, as it landed on disk (never held in memory).

    Attributes:
        path: where its bytes are; `size` and `sha256` were computed as they arrived.
    """

    filename: str
    content_type: str
    path: Path
    size: int
    sha256: str

    def read(self) -> bytes:
        """The bytes, for the few checks that need them (a photo's header: at most 10 MB)."""
        return self.path.read_bytes()


@attrs.frozen
class Call:
    """One request the stand-in answered.

    Attributes:
        method: the Bot API method as sent (e.g. ``sendPhoto``).
        params: decoded parameters (JSON values decoded, strings as sent).
        files: uploaded parts: name -> (filename, size, sha256 hex).
        chat_id: the target chat, when the method has one (resolved to an int).
        at: `time.monotonic()` when the request arrived.
        status: the HTTP status answered.
        description: the error description, for non-2xx answers.
    """

    method: str
    params: JSON
    files: dict[str, tuple[str, int, str]]
    chat_id: int | None
    at: float
    status: int
    description: str | None = None


@attrs.frozen
class EarlyRequest:
    """A request for a chat that arrived before the `retry_after` of an earlier 429 ran out."""

    method: str
    chat_id: int
    at: float
    not_before: float


def decode_value(name: str, raw: str) -> Any:
    """Undo PTB's encoding: every value is `json.dumps`-ed except strings."""
    if name in STRING_PARAMS:
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def decode_params(content_type: str, body: bytes, query: dict[str, list[str]]) -> JSON:
    """Parameters of a Bot API request from its query string and a JSON or urlencoded body.

    A multipart body is read as it arrives instead (`_multipart.MultipartReader`),
    and its fields decoded by `form_params`.
    """
    params: JSON = {k: decode_value(k, v[-1]) for k, v in query.items()}
    ctype = content_type.split(";", 1)[0].strip().lower()
    if not body:
        return params
    if ctype == "application/json":
        try:
            data = json.loads(body)
        except ValueError:
            raise bad_request("Bad Request: can't parse JSON object") from None
        if not isinstance(data, dict):
            raise bad_request("Bad Request: can't parse JSON object")
        params.update(data)
    else:  # Telegram treats anything else as a urlencoded form, as PTB sends it.
        try:
            pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True)
        except UnicodeDecodeError:
            raise bad_request("Bad Request: request body is not UTF-8") from None
        params.update({k: decode_value(k, v) for k, v in pairs})
    return params


def form_params(fields: dict[str, str], query: dict[str, list[str]]) -> JSON:
    """Parameters of a multipart request: the query string's, then the form's fields."""
    params: JSON = {k: decode_value(k, v[-1]) for k, v in query.items()}
    params.update({k: decode_value(k, v) for k, v in fields.items()})
    return params


def as_int(value: Any, what: str) -> int:
    if isinstance(value, bool):
        raise bad_request(f"Bad Request: invalid {what} specified")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            pass
    raise bad_request(f"Bad Request: invalid {what} specified")


def as_json(value: Any, what: str) -> Any:
    """Values that PTB sends as JSON arrive decoded; a string here means it did not parse."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            raise bad_request(f"Bad Request: can't parse {what} JSON object") from None
    return value


def user(
    user_id: int,
    first_name: str | None = None,
    username: str | None = None,
    language_code: str = "en",
) -> JSON:
    return {
        "id": user_id,
        "is_bot": False,
        "first_name": first_name or f"User{user_id}",
        "username": username or f"user{user_id}",
        "language_code": language_code,
    }


def admin_rights(*, channel: bool, can_post: bool, can_be_edited: bool) -> JSON:
    rights: JSON = {
        "can_be_edited": can_be_edited,
        "is_anonymous": False,
        "can_manage_chat": True,
        "can_delete_messages": True,
        "can_manage_video_chats": True,
        "can_restrict_members": True,
        "can_promote_members": False,
        "can_change_info": True,
        "can_invite_users": True,
        "can_post_stories": True,
        "can_edit_stories": True,
        "can_delete_stories": True,
    }
    if channel:
        rights.update(can_post_messages=can_post, can_edit_messages=True)
    else:
        rights.update(can_pin_messages=True, can_manage_topics=False)
    return rights


def parse_markup(params: JSON) -> JSON | None:
    """`reply_markup` as Telegram echoes it: inline keyboards only, callback_data 1-64 bytes."""
    raw = params.get("reply_markup")
    if raw is None:
        return None
    markup = as_json(raw, "reply keyboard")
    if not isinstance(markup, dict):
        raise bad_request("Bad Request: can't parse reply keyboard markup JSON object")
    rows = markup.get("inline_keyboard")
    if rows is None:
        return None  # reply keyboards are not echoed back in the Message
    for row in rows:
        for button in row:
            data = button.get("callback_data")
            if data is not None and not 1 <= len(str(data).encode()) <= CALLBACK_DATA_LIMIT:
                raise bad_request("Bad Request: BUTTON_DATA_INVALID")
            if not button.get("text"):
                raise bad_request("Bad Request: text buttons are unallowed in the inline keyboard")
    return {"inline_keyboard": rows}


def text_of(params: JSON, key: str, entities_key: str, limit: int) -> tuple[str, list[JSON]]:
    """`params[key]` after `parse_mode`, with its entities; Telegram's errors past `limit`."""
    raw = params.get(key)
    text = "" if raw is None else str(raw)
    try:
        plain, entities = rendered_text(text, params.get("parse_mode"))
    except EntityParseError as exc:
        raise bad_request(exc.description) from None
    if params.get(entities_key) is not None and not params.get("parse_mode"):
        given = as_json(params[entities_key], "entities")
        entities = list(given) if isinstance(given, list) else []
    if utf16_len(plain) > limit:
        raise bad_request(CAPTION_TOO_LONG if key == "caption" else TEXT_TOO_LONG)
    entities = sorted(entities, key=lambda e: (e["offset"], -e["length"]))[:ENTITY_LIMIT]
    return plain, entities
