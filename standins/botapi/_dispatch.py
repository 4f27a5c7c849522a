"""The Bot API stand-in's HTTP face: a request in, the method run, the answer out.

``/bot<token>/<method>`` runs the method (parameters from the query string and a JSON,
urlencoded or multipart body; multipart parts go to disk as they arrive, and an upload
the client abandons is recorded with status 499), ``/file/bot<token>/<path>`` serves a
stored file in pieces. Outages (`_outage`) and the referee (`_referee`) come first.
Every request answered is recorded in the state's `calls`.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from standins._http import STREAM_CHUNK, Request, Response
from standins.botapi._multipart import MultipartReader
from standins.botapi._outage import FILE_DOWNLOAD, OutageSwitch
from standins.botapi._referee import Referee
from standins.botapi._state import BotApiState, MethodFn
from standins.botapi._wire import JSON, ApiError, Call, Upload, decode_params, form_params

_TOKEN_RE = re.compile(r"^[0-9]{1,20}:[A-Za-z0-9_-]{30,}$")
_METHOD_PATH_RE = re.compile(r"^/bot([^/]*)/([A-Za-z]+)$")
_FILE_PATH_RE = re.compile(r"^/file/bot([^/]*)/(.+)$")
CLIENT_CLOSED = 499  # nginx's status for a request the client abandoned (no answer goes out)


def is_multipart(headers: dict[str, str]) -> bool:
    return headers.get("content-type", "").lower().startswith("multipart/form-data")


class Dispatcher:
    """Routes each request to its method through the outage switch and the referee.

    `on_call` is told each call as it is recorded, before its answer goes out.
    """

    def __init__(
        self,
        state: BotApiState,
        token: str,
        methods: dict[str, tuple[str, MethodFn]],
        referee: Referee,
        outages: OutageSwitch,
        *,
        on_call: Callable[[Call], None],
    ) -> None:
        self._state = state
        self._on_call = on_call
        self._token = token
        self._methods = methods
        self._referee = referee
        self._outages = outages

    async def handle(self, request: Request) -> Response:
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
        with self._state.lock:
            chat_id = self._state.chats.resolve_id(params.get("chat_id"))
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
        if token != self._token:
            return _json_response(ApiError(401, "Unauthorized").body(), 401)
        entry = self._methods.get(method_name.lower())
        canonical = entry[0] if entry else method_name
        with self._state.files.incoming() as folder:  # parts not stored are removed after
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
            with self._state.lock:
                chat_id = self._state.chats.resolve_id(params.get("chat_id"))
            latency = self._referee.latency
            if latency:
                await asyncio.sleep(latency)
            raw = self._referee.gate(canonical, chat_id, at)
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
            admitted = self._referee.admit(canonical, chat_id, params, at)
            try:
                result = await entry[1](params, files)
            except ApiError:
                self._referee.give_back(admitted)
                raise
            body: JSON = {"ok": True, "result": result}
            status = 200
            description = None
        except ApiError as exc:
            status, body, description = exc.status, exc.body(), exc.description
            if status == 429 and chat_id is not None:
                self._referee.refused(chat_id, (exc.parameters or {}).get("retry_after", 1))
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
        call = Call(method, params, summary, chat_id, at, status, description)
        with self._state.lock:
            self._state.calls.append(call)
        self._on_call(call)

    def _cut_short(self, method: str, params: JSON, at: float) -> None:
        """An upload the client abandoned (its task cancelled): recorded, then dropped."""
        with self._state.lock:
            try:
                chat_id = self._state.chats.resolve_id(params.get("chat_id"))
            except ApiError:
                chat_id = None
        self._record(
            method, params, {}, chat_id=chat_id, at=at,
            status=CLIENT_CLOSED, description="upload cut short",
        )  # fmt: skip

    def _serve_file(self, request: Request) -> Response:
        m = _FILE_PATH_RE.match(request.path)
        if m is None or m.group(1) != self._token:
            return _json_response(ApiError(404, "Not Found").body(), 404)
        info = self._state.files.by_path(m.group(2))
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


def _json_response(body: JSON, status: int) -> Response:
    return Response(
        status,
        json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode(),
        {"content-type": "application/json"},
    )
