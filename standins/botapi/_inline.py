"""Inline mode as the Bot API stand-in knows it: ``inline_query`` updates and
``answerInlineQuery`` with Telegram's validation.

Telegram sends inline queries only to a bot with inline mode on (BotFather
``/setinline``; ``getMe().supports_inline_queries``). An answer must come
within about 10 s and only once; it holds at most 50 results, each with an
``id`` of 1-64 bytes unique in the answer and the fields its ``type`` needs;
cached results name ``file_id``s Telegram knows; the optional ``button``
carries a ``start_parameter`` of 1-64 ``A-Za-z0-9_-``. The wording of the
errors is Telegram's (as bots report it: ``RESULT_ID_DUPLICATE``,
``RESULTS_TOO_MUCH``, "query is too old ...", "can't parse inline query
result: ...").

`check_results` is pure; `InlineMode` owns the queries and their answers, under the
state's lock.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import attrs

from standins.botapi._state import BotApiState, api_method
from standins.botapi._updates import UpdateFeed
from standins.botapi._wire import (
    CAPTION_LIMIT,
    JSON,
    QUERY_TOO_OLD,
    TEXT_EMPTY,
    TEXT_LIMIT,
    WRONG_FILE_ID,
    ApiError,
    as_json,
    bad_request,
    parse_markup,
    text_of,
    user,
)

MAX_RESULTS = 50
RESULT_ID_LIMIT = 64
ANSWER_WINDOW = 10.0
RESULTS_TOO_MUCH = "Bad Request: RESULTS_TOO_MUCH"
RESULT_ID_DUPLICATE = "Bad Request: RESULT_ID_DUPLICATE"
RESULT_ID_INVALID = "Bad Request: RESULT_ID_INVALID"
START_PARAM_INVALID = "Bad Request: START_PARAM_INVALID"
_START_PARAM_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_PARSE = "Bad Request: can't parse inline query result: "

# type -> the fields Telegram requires beside id (Bot API, InlineQueryResult*).
REQUIRED: dict[str, tuple[str, ...]] = {
    "article": ("title", "input_message_content"),
    "photo": ("photo_url", "thumbnail_url"),
    "gif": ("gif_url", "thumbnail_url"),
    "mpeg4_gif": ("mpeg4_url", "thumbnail_url"),
    "video": ("video_url", "mime_type", "thumbnail_url", "title"),
    "audio": ("audio_url", "title"),
    "voice": ("voice_url", "title"),
    "document": ("title", "document_url", "mime_type"),
    "location": ("latitude", "longitude", "title"),
    "venue": ("latitude", "longitude", "title", "address"),
    "contact": ("phone_number", "first_name"),
    "game": ("game_short_name",),
}
# Cached results name a file by its id: type -> (file_id field, other required fields).
CACHED: dict[str, tuple[str, tuple[str, ...]]] = {
    "photo": ("photo_file_id", ()),
    "gif": ("gif_file_id", ()),
    "mpeg4_gif": ("mpeg4_file_id", ()),
    "video": ("video_file_id", ("title",)),
    "document": ("document_file_id", ("title",)),
    "sticker": ("sticker_file_id", ()),
    "audio": ("audio_file_id", ()),
    "voice": ("voice_file_id", ("title",)),
}
# What kind of stored file each cached type may name.
_CACHED_KINDS = {
    "photo": ("photo",),
    "gif": ("animation",),
    "mpeg4_gif": ("animation", "video"),
    "video": ("video",),
    "document": ("document", "photo", "video", "animation"),
}
_MIME = {"video": ("text/html", "video/mp4"), "document": ("application/pdf", "application/zip")}
_URL_FIELDS = ("photo_url", "gif_url", "mpeg4_url", "video_url", "thumbnail_url", "document_url")


@attrs.frozen
class InlineAnswer:
    """One answerInlineQuery Telegram accepted.

    Attributes:
        latency: seconds from the query's update to its answer.
        results: the results as sent (decoded JSON).
    """

    query_id: str
    user_id: int
    query: str
    results: list[JSON]
    button: JSON | None
    cache_time: int | None
    is_personal: bool
    next_offset: str
    latency: float


def _parse_error(what: str) -> ApiError:
    return bad_request(_PARSE + what)


def check_result(result: Any, file_kind: Callable[[str], str | None]) -> str:
    """Telegram's checks of one result; returns its id. `file_kind` names a file_id's kind."""
    if not isinstance(result, dict):
        raise _parse_error("expected an Object")
    if "type" not in result:
        raise _parse_error('Can\'t find field "type"')
    if "id" not in result:
        raise _parse_error('Can\'t find field "id"')
    kind = str(result["type"])
    rid = str(result["id"])
    if not 1 <= len(rid.encode()) <= RESULT_ID_LIMIT:
        raise bad_request(RESULT_ID_INVALID)
    cached = CACHED[kind][0] if kind in CACHED and CACHED[kind][0] in result else None
    if cached is not None:
        for field in CACHED[kind][1]:
            if field not in result:
                raise _parse_error(f'Can\'t find field "{field}"')
        stored = file_kind(str(result[cached]))
        if stored is None or stored not in _CACHED_KINDS.get(kind, (stored,)):
            raise bad_request(WRONG_FILE_ID)
    elif kind in REQUIRED:
        for field in REQUIRED[kind]:
            if field not in result:
                raise _parse_error(f'Can\'t find field "{field}"')
    else:
        raise _parse_error(f'Unsupported inline query result type "{kind}"')
    for field in _URL_FIELDS:
        if field in result and not re.match(r"^https?://[^/\s]+", str(result[field])):
            raise bad_request("Bad Request: wrong HTTP URL specified")
    if cached is None and kind in _MIME and str(result.get("mime_type")) not in _MIME[kind]:
        raise _parse_error(f'Unsupported MIME type "{result.get("mime_type")}"')
    text_of(result, "caption", "caption_entities", CAPTION_LIMIT)
    content = result.get("input_message_content")
    if content is not None:
        if not isinstance(content, dict):
            raise _parse_error("input_message_content is not an Object")
        if "message_text" in content:
            text, _ = text_of(content, "message_text", "entities", TEXT_LIMIT)
            if not text.strip():
                raise bad_request(TEXT_EMPTY)
    parse_markup(result)
    return rid


def check_results(results: Any, file_kind: Callable[[str], str | None]) -> list[JSON]:
    """The whole answer's results: a list, at most 50, ids unique."""
    if not isinstance(results, list):
        raise bad_request("Bad Request: can't parse inline query results JSON object")
    if len(results) > MAX_RESULTS:
        raise bad_request(RESULTS_TOO_MUCH)
    seen: set[str] = set()
    for result in results:
        rid = check_result(result, file_kind)
        if rid in seen:
            raise bad_request(RESULT_ID_DUPLICATE)
        seen.add(rid)
    return list(results)


def check_button(raw: Any) -> JSON | None:
    if raw is None:
        return None
    button = as_json(raw, "inline query results button")
    if not isinstance(button, dict) or not str(button.get("text", "")).strip():
        raise bad_request("Bad Request: can't parse inline query results button JSON object")
    has_start = "start_parameter" in button
    if has_start == ("web_app" in button):
        raise bad_request("Bad Request: can't parse inline query results button JSON object")
    if has_start and not _START_PARAM_RE.match(str(button["start_parameter"])):
        raise bad_request(START_PARAM_INVALID)
    return button


class InlineMode:
    """Inline queries and their answers.

    Attributes:
        inline_answer_window: seconds after a query within which it may be answered.
    """

    def __init__(self, state: BotApiState, feed: UpdateFeed) -> None:
        self._state = state
        self._feed = feed
        self._inline_queries: dict[str, tuple[float, JSON]] = {}
        self._inline_answers: dict[str, InlineAnswer] = {}
        self.inline_answer_window = ANSWER_WINDOW

    def set_inline_mode(self, on: bool = True) -> None:
        """What BotFather's ``/setinline`` switches (``getMe().supports_inline_queries``)."""
        with self._state.lock:
            self._state.bot_user["supports_inline_queries"] = on

    def inline_query(
        self,
        user_id: int,
        query: str,
        *,
        chat_type: str = "sender",
        offset: str = "",
        first_name: str | None = None,
        language_code: str = "en",
    ) -> JSON:
        """A user types ``@bot <query>`` (in a chat of `chat_type`, their Telegram in
        `language_code`); returns the update."""
        with self._state.lock:
            if not self._state.bot_user.get("supports_inline_queries"):
                raise RuntimeError("Telegram sends no inline queries to a bot without inline mode")
            query_id = str(self._state.rng.randrange(10**17, 10**18))
            inline: JSON = {
                "id": query_id,
                "from": user(user_id, first_name, language_code=language_code),
                "query": query[:256],
                "offset": offset,
                "chat_type": chat_type,
            }
            self._inline_queries[query_id] = (time.monotonic(), inline)
            return self._feed.inject_update({"inline_query": inline})

    def inline_answer(self, query_id: str) -> InlineAnswer | None:
        with self._state.lock:
            return self._inline_answers.get(query_id)

    @property
    def inline_answers(self) -> list[InlineAnswer]:
        with self._state.lock:
            return list(self._inline_answers.values())

    def _file_kind(self, file_id: str) -> str | None:
        info = self._state.files.get(file_id)
        return info.kind if info is not None else None

    @api_method("answerInlineQuery")
    async def answer_inline_query(self, params: JSON, files: dict[str, Any]) -> Any:
        query_id = str(params.get("inline_query_id", ""))
        results = check_results(as_json(params.get("results", "[]"), "results"), self._file_kind)
        button = check_button(params.get("button"))
        offset = str(params.get("next_offset") or "")
        if len(offset.encode()) > 64:
            raise bad_request("Bad Request: NEXT_OFFSET_INVALID")
        with self._state.lock:
            entry = self._inline_queries.get(query_id)
            now = time.monotonic()
            if (
                entry is None
                or now - entry[0] > self.inline_answer_window
                or query_id in self._inline_answers
            ):
                raise bad_request(QUERY_TOO_OLD)
            asked, inline = entry
            cache_time = params.get("cache_time")
            self._inline_answers[query_id] = InlineAnswer(
                query_id=query_id,
                user_id=int(inline["from"]["id"]),
                query=str(inline["query"]),
                results=results,
                button=button,
                cache_time=None if cache_time is None else int(cache_time),
                is_personal=bool(params.get("is_personal")),
                next_offset=offset,
                latency=now - asked,
            )
        return True
