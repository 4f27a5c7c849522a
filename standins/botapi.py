"""A local stand-in for the Telegram Bot API, faithful to what PTB 22 sends and expects.

Start it, point PTB at it, and drive the conversation from the test::

    async with BotApiServer() as srv:
        bot = telegram.Bot(srv.token, base_url=f"{srv.url}/bot",
                           base_file_url=f"{srv.url}/file/bot")
        srv.user_message(42, "https://x.com/alice/status/1")
        await srv.wait_for(lambda: srv.sent_messages(42), timeout=5)

What it does like Telegram (`_botapi_model`): the request forms PTB uses
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
`_botapi_topics`) and inline mode (`set_inline_mode`, `inline_query`,
`inline_answer`; answerInlineQuery's checks and window, in `_botapi_inline`). Privacy
mode (``privacy_mode=True``, `set_privacy_mode`): getMe's ``can_read_all_group_messages``
and the group messages Telegram then gives the bot (`_botapi_privacy`; what it kept
back is in `withheld`; `add_group_bot` and `other_bot_message` for groups of several
bots).

What it adds for tests (here): every call recorded (`calls`, `calls_for`,
`sent_messages`), update builders (`user_message`, `callback_query`, `bot_added`;
in `_botapi_builders`), fault injection (`fail_next`, `set_rate_limit_storm`,
`set_latency`, `set_5xx`), outages (`set_outage`: Telegram unreachable as a
502 page, a reset, a hang, a hang after the send went through, a refused
connection; for every method or all but getUpdates; in `_botapi_outage`) and a
referee for rate limits: after each 429 it notes the chat's "not before" and
records in `early_requests` any request for that chat that comes sooner (and,
like Telegram, answers it with another 429).

It runs on its own thread and loop, so it serves while the code under test
blocks, and it can be started from sync code: ``with BotApiServer() as srv``
or ``python -m standins.botapi --port N``.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path

import attrs

from standins._botapi_builders import UpdateBuilders
from standins._botapi_chats import ChatInfo
from standins._botapi_files import StoredFile
from standins._botapi_limits import COUNTED_METHODS, Admission, TelegramLimits
from standins._botapi_model import MethodFn, TelegramModel
from standins._botapi_outage import (
    FILE_DOWNLOAD,
    MAX_HANG_S,
    OUTAGE_MODES,
    OutageSwitch,
    nginx_502,
)
from standins._botapi_wire import (
    JSON,
    UPLOAD_LIMIT,
    ApiError,
    Call,
    EarlyRequest,
    Upload,
    decode_params,
    form_params,
)
from standins._http import (
    STREAM_CHUNK,
    HttpServer,
    Request,
    Response,
    ServerBase,
    serve_forever_main,
)
from standins._multipart import MultipartReader

__all__ = [
    "DEFAULT_TOKEN",
    "MAX_HANG_S",
    "OUTAGE_MODES",
    "SEND_METHODS",
    "ApiError",
    "BotApiServer",
    "Call",
    "ChatInfo",
    "EarlyRequest",
    "StoredFile",
    "TelegramLimits",
    "main",
    "retry_after_seconds",
]

# Shaped like a real token (PTB and Telegram check the shape); it opens nothing.
DEFAULT_TOKEN = "123456789:AAHstandInTokenForLocalTests_0123456"  # noqa: S105
_TOKEN_RE = re.compile(r"^[0-9]{1,20}:[A-Za-z0-9_-]{30,}$")
_METHOD_PATH_RE = re.compile(r"^/bot([^/]*)/([A-Za-z]+)$")
_FILE_PATH_RE = re.compile(r"^/file/bot([^/]*)/(.+)$")

# The methods a rate-limit storm hits by default: those that post messages (the ones
# the flood limits count, and copyMessages, which they do not) or change them.
SEND_METHODS = COUNTED_METHODS | {
    "copyMessages",
    "editMessageText",
    "editMessageCaption",
    "editMessageReplyMarkup",
}
CLIENT_CLOSED = 499  # nginx's status for a request the client abandoned (no answer goes out)


def retry_after_seconds(value: object) -> float:
    """PTB's `RetryAfter.retry_after` as seconds, whether it is an int or a timedelta."""
    seconds = getattr(value, "total_seconds", None)
    if callable(seconds):
        return float(seconds())
    if isinstance(value, int | float):
        return float(value)
    raise TypeError(f"not a retry_after: {value!r}")


@attrs.define
class _FailRule:
    method: str
    status: int
    description: str
    retry_after: int | None
    remaining: int
    chat_id: int | None
    skip: int = 0


@attrs.frozen
class _Storm:
    probability: float
    retry_after_range: tuple[int, int]
    methods: frozenset[str]


class BotApiServer(UpdateBuilders, TelegramModel, ServerBase):
    """The Bot API stand-in. See the module docstring.

    Attributes:
        enforce_not_before: answer a request that comes before its chat's 429
            ran out with another 429 (Telegram does); it is recorded either way.
        early_tolerance: seconds of slack before a request counts as early.
    """

    def __init__(
        self,
        token: str = DEFAULT_TOKEN,
        *,
        allow_url_fetch_from_loopback: bool = False,
        url_fetch_timeout: float = 10.0,
        upload_limit: int = UPLOAD_LIMIT,
        bot_username: str = "xbot_standin_bot",
        bot_first_name: str = "XBot",
        enforce_not_before: bool = True,
        early_tolerance: float = 0.05,
        callback_answer_window: float = 15.0,
        max_records: int = 200_000,
        seed: int | None = None,
        privacy_mode: bool = False,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        super().__init__(
            token,
            allow_url_fetch_from_loopback=allow_url_fetch_from_loopback,
            url_fetch_timeout=url_fetch_timeout,
            upload_limit=upload_limit,
            bot_username=bot_username,
            bot_first_name=bot_first_name,
            callback_answer_window=callback_answer_window,
            max_records=max_records,
            seed=seed,
            privacy_mode=privacy_mode,
        )
        self.enforce_not_before = enforce_not_before
        self.early_tolerance = early_tolerance
        self._calls: deque[Call] = deque(maxlen=max_records)
        self._early: list[EarlyRequest] = []
        self._not_before: dict[int, float] = {}
        self._faults: list[_FailRule] = []
        self._storm: _Storm | None = None
        self._limits: TelegramLimits | None = None
        self._latency = 0.0
        self._p5xx = 0.0
        self._methods_5xx: frozenset[str] | None = None
        self._methods = self.method_table()
        self._http = HttpServer(
            self._handle,
            host=host,
            port=port,
            name="botapi-standin",
            max_body=upload_limit + 1024 * 1024,
            on_stop=self._files.aclose,
            # Uploads up to 2000 MB (local-server mode) are never held in memory.
            stream_body=_is_multipart,
        )
        self._outages = OutageSwitch(self._http)

    def _call_soon(self, fn: Callable[[], None]) -> None:
        self._http.call(fn)

    # ------------------------------------------------------------------ records

    @property
    def calls(self) -> list[Call]:
        with self._lock:
            return list(self._calls)

    def calls_for(self, method: str, chat_id: int | None = None) -> list[Call]:
        with self._lock:
            return [
                c
                for c in self._calls
                if c.method == method and (chat_id is None or c.chat_id == chat_id)
            ]

    @property
    def early_requests(self) -> list[EarlyRequest]:
        with self._lock:
            return list(self._early)

    async def wait_for(
        self,
        predicate: Callable[[], object],
        timeout: float = 5.0,  # noqa: ASYNC109 - a bound for tests to read, not a cancel scope
    ) -> None:
        """Wait until `predicate()` is true, checking every few ms; TimeoutError after `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                if predicate():
                    return
            if time.monotonic() >= deadline:
                raise TimeoutError(f"condition not met within {timeout}s")
            await asyncio.sleep(0.005)

    # ------------------------------------------------------------------ faults

    def fail_next(
        self,
        method: str,
        status: int,
        description: str,
        *,
        retry_after: int | None = None,
        count: int = 1,
        chat_id: int | None = None,
        skip: int = 0,
    ) -> None:
        """Answer the next `count` calls of `method` (for `chat_id`, if given) with this error,
        after letting `skip` of them through.

        A 429 without `retry_after` gets 1 s, since Telegram always says how long.
        """
        if status == 429 and retry_after is None:
            retry_after = 1
        with self._lock:
            self._faults.append(
                _FailRule(method, status, description, retry_after, count, chat_id, skip)
            )

    def set_rate_limit_storm(
        self,
        probability: float,
        retry_after_range: tuple[int, int] = (1, 3),
        methods: Iterable[str] = SEND_METHODS,
        seed: int | None = None,
    ) -> None:
        """Answer each call of `methods` with a 429 with this probability (0 turns it off)."""
        with self._lock:
            if seed is not None:
                self._rng.seed(seed)
            self._storm = (
                _Storm(probability, retry_after_range, frozenset(methods))
                if probability > 0
                else None
            )

    def set_telegram_limits(self, limits: TelegramLimits | None) -> None:
        """Enforce Telegram's flood limits (`_botapi_limits`): 429 past them; None turns off."""
        with self._lock:
            self._limits = limits

    def set_latency(self, seconds: float) -> None:
        with self._lock:
            self._latency = max(0.0, seconds)

    def set_5xx(self, probability: float, methods: Iterable[str] | None = None) -> None:
        """Answer 502 from the "front end" with this probability (by default not getUpdates)."""
        with self._lock:
            self._p5xx = probability
            self._methods_5xx = frozenset(methods) if methods is not None else None

    def set_outage(
        self,
        mode: str | None,
        *,
        methods: str | Iterable[str] = "send",
        count: int | None = None,
    ) -> None:
        """Make Telegram unreachable (`_botapi_outage` says each mode); None ends it.

        `methods`: ``"send"`` (every method but getUpdates; downloads served), ``"all"``,
        or method names. `count`: only the next `count` calls in scope. ``"refuse"``
        closes the port (``methods="all"`` only); blocks a few ms while it does.
        """
        self._outages.set(mode, methods=methods, count=count)

    @property
    def outage(self) -> str | None:
        """The outage mode in force, if any."""
        return self._outages.mode

    @property
    def outage_hits(self) -> int:
        """Calls an outage answered (502, reset, hang, hang_after) since the start."""
        return self._outages.hits

    # ------------------------------------------------------------------ HTTP

    async def _handle(self, request: Request) -> Response:
        if request.path.startswith("/file/"):
            name = FILE_DOWNLOAD
        else:
            m = _METHOD_PATH_RE.match(request.path)
            entry = self._methods.get(m.group(2).lower()) if m else None
            name = entry[0] if entry else ""
        taken = self._outages.take(name)
        if taken is None:
            return await self._answer(request)
        mode, generation = taken
        if mode == "hang_after":
            await self._answer(request)  # the method runs: the message is in the chat
            self._record_outage(name, request, mode, 0)
            await self._outages.hang(generation)
            return Response(504, b"", close=True)  # the client has long given up
        self._record_outage(name, request, mode, 502 if mode == "502" else 0)
        return await self._outages.answer(mode, generation)

    def _record_outage(self, method: str, request: Request, mode: str, status: int) -> None:
        try:
            # A multipart body is not read here (the server drains it): its query alone.
            params = decode_params(request.header("content-type"), request.body, request.query)
        except ApiError:
            params = {}
        with self._lock:
            chat_id = self._chats.resolve_id(params.get("chat_id"))
        self._record(
            method, params, {}, chat_id=chat_id, at=time.monotonic(), status=status,
            description=f"outage:{mode}",
        )  # fmt: skip

    async def _answer(self, request: Request) -> Response:
        at = time.monotonic()
        if request.path.startswith("/file/"):
            return self._serve_file(request)
        m = _METHOD_PATH_RE.match(request.path)
        if m is None:
            return _json_response(ApiError(404, "Not Found").body(), 404)
        token, method_name = m.groups()
        if not _TOKEN_RE.match(token):
            return _json_response(ApiError(404, "Not Found").body(), 404)
        if token != self.token:
            return _json_response(ApiError(401, "Unauthorized").body(), 401)
        entry = self._methods.get(method_name.lower())
        canonical = entry[0] if entry else method_name
        with self._files.incoming() as folder:  # uploaded parts not stored are removed after
            return await self._run_method(request, entry, canonical, at, folder)

    async def _run_method(
        self,
        request: Request,
        entry: tuple[str, MethodFn] | None,
        canonical: str,
        at: float,
        folder: Path,
    ) -> Response:
        params: JSON = {}
        files: dict[str, Upload] = {}
        chat_id: int | None = None
        try:
            if request.stream is not None:  # multipart: the parts go to disk as they arrive
                reader = MultipartReader(request.header("content-type"), folder)
                try:
                    async for chunk in request.stream:
                        reader.feed(chunk)
                except (ConnectionError, asyncio.IncompleteReadError):
                    reader.abandon()
                    self._cut_short(canonical, form_params(reader.fields, request.query), at)
                    raise
                except ApiError:
                    reader.abandon()
                    raise
                fields, files = reader.finish()
                params = form_params(fields, request.query)
            else:
                params = decode_params(request.header("content-type"), request.body, request.query)
            if entry is None:
                raise ApiError(404, "Not Found")
            with self._lock:
                chat_id = self._chats.resolve_id(params.get("chat_id"))
                latency = self._latency
            if latency:
                await asyncio.sleep(latency)
            raw = self._gate(canonical, chat_id, at)
            if raw is not None:
                self._record(
                    canonical,
                    params,
                    files,
                    chat_id=chat_id,
                    at=at,
                    status=raw.status,
                    description="Bad Gateway",
                )
                return raw
            admitted = self._admit(canonical, chat_id, params, at)
            try:
                result = await entry[1](params, files)
            except ApiError:
                self._give_back(admitted)
                raise
            body: JSON = {"ok": True, "result": result}
            status = 200
            description = None
        except ApiError as exc:
            status, body, description = exc.status, exc.body(), exc.description
            if status == 429 and chat_id is not None:
                retry = (exc.parameters or {}).get("retry_after", 1)
                with self._lock:
                    self._not_before[chat_id] = max(
                        self._not_before.get(chat_id, 0.0), time.monotonic() + retry
                    )
        self._record(
            canonical,
            params,
            files,
            chat_id=chat_id,
            at=at,
            status=status,
            description=description,
        )
        return _json_response(body, status)

    def _record(
        self,
        method: str,
        params: JSON,
        files: dict[str, Upload],
        *,
        chat_id: int | None,
        at: float,
        status: int,
        description: str | None,
    ) -> None:
        summary = {name: (up.filename, up.size, up.sha256) for name, up in files.items()}
        with self._lock:
            self._calls.append(Call(method, params, summary, chat_id, at, status, description))

    def _cut_short(self, method: str, params: JSON, at: float) -> None:
        """An upload the client abandoned (its task cancelled): recorded, then dropped."""
        with self._lock:
            try:
                chat_id = self._chats.resolve_id(params.get("chat_id"))
            except ApiError:
                chat_id = None
        self._record(
            method, params, {}, chat_id=chat_id, at=at,
            status=CLIENT_CLOSED, description="upload cut short",
        )  # fmt: skip

    def _gate(self, method: str, chat_id: int | None, at: float) -> Response | None:
        """Rate-limit referee and injected faults, before the method runs."""
        with self._lock:
            if chat_id is not None and method != "getUpdates":
                not_before = self._not_before.get(chat_id, 0.0)
                if at < not_before - self.early_tolerance:
                    self._early.append(EarlyRequest(method, chat_id, at, not_before))
                    if self.enforce_not_before:
                        wait = max(1, math.ceil(not_before - at))
                        raise _too_many(wait)
            for rule in self._faults:
                if rule.method == method and rule.chat_id in (None, chat_id):
                    if rule.skip > 0:
                        rule.skip -= 1
                        continue
                    rule.remaining -= 1
                    if rule.remaining <= 0:
                        self._faults.remove(rule)
                    params = {"retry_after": rule.retry_after} if rule.retry_after else None
                    raise ApiError(rule.status, rule.description, params)
            storm = self._storm
            if storm and method in storm.methods and self._rng.random() < storm.probability:
                raise _too_many(self._rng.randint(*storm.retry_after_range))
            in_scope = (
                method != "getUpdates" if self._methods_5xx is None else method in self._methods_5xx
            )
            if self._p5xx and in_scope and self._rng.random() < self._p5xx:
                return nginx_502()
        return None

    def _admit(self, method: str, chat_id: int | None, params: JSON, at: float) -> Admission | None:
        """Telegram's limits, when enforced: a 429 past them, else the send counted."""
        with self._lock:
            limits = self._limits
            if limits is None:
                return None
            got = limits.admit(method, chat_id, _items(method, params), at)
        if isinstance(got, int):
            raise _too_many(got)
        return got

    def _give_back(self, admitted: Admission | None) -> None:
        with self._lock:
            if admitted is not None and self._limits is not None:
                self._limits.give_back(admitted)

    def _serve_file(self, request: Request) -> Response:
        m = _FILE_PATH_RE.match(request.path)
        if m is None or m.group(1) != self.token:
            return _json_response(ApiError(404, "Not Found").body(), 404)
        info = self._files.by_path(m.group(2))
        if info is None:
            return _json_response(ApiError(404, "Not Found").body(), 404)
        return Response(
            200,
            _file_chunks(info.path),
            {"content-type": "application/octet-stream", "content-length": str(info.size)},
        )


async def _file_chunks(path: Path) -> AsyncIterator[bytes]:
    """A stored file as the file URL serves it: read in pieces, never whole."""
    with path.open("rb") as f:
        while chunk := f.read(STREAM_CHUNK):
            yield chunk


def _is_multipart(headers: dict[str, str]) -> bool:
    return headers.get("content-type", "").lower().startswith("multipart/form-data")


def _items(method: str, params: JSON) -> int:
    """Messages a send posts: an album's items, else one."""
    if method != "sendMediaGroup":
        return 1
    media = params.get("media")
    if isinstance(media, str):
        try:
            media = json.loads(media)
        except ValueError:
            return 1
    return max(1, len(media)) if isinstance(media, list) else 1


def _too_many(retry_after: int) -> ApiError:
    return ApiError(
        429,
        f"Too Many Requests: retry after {retry_after}",
        {"retry_after": retry_after},
    )


def _json_response(body: JSON, status: int) -> Response:
    return Response(
        status,
        json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode(),
        {"content-type": "application/json"},
    )


def main(argv: list[str] | None = None) -> None:
    """``python -m standins.botapi [--port N] [--token T] [--allow-loopback-urls]``."""
    import argparse

    parser = argparse.ArgumentParser(description="Local Telegram Bot API stand-in")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--token", default=DEFAULT_TOKEN)
    parser.add_argument("--allow-loopback-urls", action="store_true")
    args = parser.parse_args(argv)
    server = BotApiServer(
        args.token, port=args.port, allow_url_fetch_from_loopback=args.allow_loopback_urls
    )
    serve_forever_main(server, "botapi-standin")


if __name__ == "__main__":
    main()
