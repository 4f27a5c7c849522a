"""Webhook mode: each POST from Telegram is answered only once its update's work is durable.

Why not PTB's `Updater.start_webhook`: its handler puts the update in an in-memory
queue and answers 200 at once, and Telegram never sends an acknowledged update
again, so a crash before the handlers ran lost it (docs/benchmarks.md, "Webhook
mode"). Here the answer waits for `Application.process_update`: the handlers
have queued the work in SQLite (or judged that none is needed), just as the
durable poller (`xbot.receiving.polling`) confirms an offset only after its batch
was handled. An update whose work could not be stored (the database locked or the
disk full: `StoreError`, see `xbot.receiving.intake`) gets a 500, and Telegram
sends it again; its handler's dedup key (message and link) keeps a redelivery from
queueing the same work twice.

Why tornado: it is what the optional ``webhooks`` extra installs already (PTB's
own server runs on it), a complete HTTP/1.1 server on the asyncio loop (keep-alive,
chunked bodies, a body size refused before the body is read), with a public API;
PTB's `telegram.ext._utils.webhookhandler` is private and has the very
answer-before-handling this module exists to avoid, and a hand-written asyncio
server would re-implement the HTTP parsing tornado gets right.

What the listener answers:

    403  no ``X-Telegram-Bot-Api-Secret-Token`` or a wrong one (compared in constant
         time); nothing is parsed or queued
    404  another path; 405 another method (tornado)
    413  a body over `MAX_BODY` (tornado, before reading it)
    503  `max_connections` requests already in progress, or the bot is stopping:
         Telegram tries again later
    400  a body that is no update (Telegram never sends one; a retry cannot fix it)
    500  the update's work could not be stored: Telegram sends it again
    200  handled: the work is in the queue, or needed none

`max_connections` is also what setWebhook tells Telegram (its default 40, 1-100), so
Telegram itself never opens more.

What an unauthenticated client can hold: a connection gets `IDLE_TIMEOUT` for a
request's headers (and for the next request on a kept-alive connection) and
`BODY_TIMEOUT` for its body, then it is closed, so one byte every few seconds
(slow-loris) keeps nothing open; and at most `MAX_UNAUTHENTICATED` connections
that have not yet shown the secret are open at once, beyond which a new one is
closed as soon as it is accepted (it costs no handler, no buffer).

Once only: Telegram sends an update again whenever it got no 2xx (a 500, a crash,
an answer lost on its way). Each update answered 200 is marked in the database
first (`xbot.storage.webhook_updates`), and a marked update is answered 200 again
without running its handlers, even once its task is done; the handlers' dedup key
(message and link) covers the rest: a redelivery of an update whose work is queued
but whose mark is not (a crash between the two writes) finds its task still queued.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
from telegram import Update
from telegram.ext import Application
from tornado.httpserver import HTTPServer
from tornado.iostream import IOStream
from tornado.netutil import bind_sockets
from tornado.web import Application as TornadoApplication
from tornado.web import RequestHandler, stream_request_body

from xbot.errors import StoreError
from xbot.logs import kv
from xbot.receiving.intake import redeliverable
from xbot.storage.webhook_updates import AnsweredUpdates

log = logging.getLogger(__name__)

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"  # noqa: S105 - a header name
# An update is a few KB (a message of 4096 characters, its entities, a replied-to
# message); 1 MiB leaves room and refuses a flood before it is read.
MAX_BODY = 1024 * 1024
# Telegram's setWebhook max_connections: default 40, at most 100.
DEFAULT_MAX_CONNECTIONS = 40
MAX_CONNECTIONS = 100
_REFUSED_LOG_EVERY = 100  # 403s are logged at the first and then every 100th
# Telegram sends an update of a few KB at once; a client that trickles is closed.
IDLE_TIMEOUT = 10.0
BODY_TIMEOUT = 10.0
# Connections that have not shown the secret yet, at once: above Telegram's own
# 100 (each of its connections is one of these until its first request).
MAX_UNAUTHENTICATED = 128
STOP_GRACE = 10.0  # how long a stop waits for the updates in progress

Answer = Callable[[int, str], Awaitable[None]]  # sends (status, text) as the HTTP answer


@attrs.define
class WebhookListener:
    """The HTTP listener for Telegram's webhook POSTs, on the running asyncio loop.

    Attributes:
        application: PTB's Application whose handlers take each update.
        answered: the updates already answered 200 (a redelivery is not handled again).
        path: the URL path Telegram posts to ("/" + the webhook URL's path).
        secret_token: what Telegram sends in ``X-Telegram-Bot-Api-Secret-Token``.
        max_connections: requests handled at once; more get a 503.
        port: where it listens once started (0 asks the kernel for a free one).
        idle_timeout, body_timeout: how long a request's headers and its body may take.
        max_unauthenticated: open connections that have not shown the secret, at most.
        in_progress: requests being handled now.
        closed_at_cap: connections closed because `max_unauthenticated` were open.
    """

    application: Application[Any, Any, Any, Any, Any, Any]
    answered: AnsweredUpdates
    path: str
    secret_token: str = attrs.field(repr=False)
    listen: str = "127.0.0.1"
    port: int = 0
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    clock: Callable[[], float] = time.time  # wall clock: when an update was answered
    idle_timeout: float = IDLE_TIMEOUT
    body_timeout: float = BODY_TIMEOUT
    max_unauthenticated: int = MAX_UNAUTHENTICATED
    in_progress: int = attrs.field(default=0, init=False)
    refused: int = attrs.field(default=0, init=False)
    closed_at_cap: int = attrs.field(default=0, init=False)
    _unauthenticated: set[IOStream] = attrs.field(factory=set, init=False)
    _server: HTTPServer | None = attrs.field(default=None, init=False)
    _accepting: bool = attrs.field(default=False, init=False)
    _idle: asyncio.Event = attrs.field(factory=asyncio.Event, init=False)

    @property
    def running(self) -> bool:
        return self._server is not None and self._accepting

    async def start(self) -> None:
        """Listen (raises OSError if the address is taken)."""
        app = TornadoApplication([(self.path, _UpdateHandler, {"listener": self})])
        # tornado's own limit above ours: up to it the handler answers 413 itself
        # (tornado would only drop the connection); past it, tornado drops it.
        server = _CappedServer(
            app,
            max_body_size=2 * MAX_BODY,
            max_buffer_size=2 * MAX_BODY,
            idle_connection_timeout=self.idle_timeout,
            body_timeout=self.body_timeout,
        )
        server.admit = self.admit
        sockets = bind_sockets(self.port, self.listen)
        server.add_sockets(sockets)
        self.port = sockets[0].getsockname()[1]
        self._server = server
        self._accepting = True
        self._idle.set()

    async def stop(self, grace: float = STOP_GRACE) -> None:
        """Take no new update; let those in progress finish (their answers go out: they
        are durable); then close every connection."""
        self._accepting = False
        server, self._server = self._server, None
        if server is None:
            return
        server.stop()  # no new connections; open ones get 503 from `receive`
        try:
            await asyncio.wait_for(self._idle.wait(), grace)
        except TimeoutError:
            log.warning("webhook stops with updates in progress %s", kv(left=self.in_progress))
        await server.close_all_connections()

    @property
    def unauthenticated(self) -> int:
        """Open connections that have not shown the secret yet."""
        return sum(1 for s in self._unauthenticated if not s.closed())

    def admit(self, stream: IOStream) -> bool:
        """Whether a new connection may stay: fewer than `max_unauthenticated` are open."""
        self._unauthenticated = {s for s in self._unauthenticated if not s.closed()}
        if len(self._unauthenticated) >= self.max_unauthenticated:
            self.closed_at_cap += 1
            if self.closed_at_cap % _REFUSED_LOG_EVERY == 1:
                log.warning(
                    "webhook closed a connection %s",
                    kv(reason="too many without the secret", closed=self.closed_at_cap),
                )
            return False
        self._unauthenticated.add(stream)
        return True

    def vouch(self, stream: object) -> None:  # the request's connection's stream
        """The connection showed the secret: it no longer counts against the cap."""
        self._unauthenticated.discard(stream)

    def authentic(self, secret: str | None) -> bool:
        """Whether a request carries the secret (compared in constant time); a 403 if not."""
        if secret is not None and hmac.compare_digest(
            secret.encode("utf-8", "replace"), self.secret_token.encode()
        ):
            return True
        self.refused += 1
        if self.refused % _REFUSED_LOG_EVERY == 1:
            log.warning("webhook refused a request %s", kv(reason="secret", refused=self.refused))
        return False

    async def receive(self, body: bytes, answer: Answer) -> None:
        """Answer one authentic POST; an update in progress holds its slot until its
        answer is sent, so a stop waits for that answer too."""
        if not self._accepting:
            await answer(503, "stopping")
            return
        if self.in_progress >= self.max_connections:
            await answer(503, "busy")
            return
        self.in_progress += 1
        self._idle.clear()
        try:
            status, text = await self._handle(body)
            await answer(status, text)
        finally:
            self.in_progress -= 1
            if self.in_progress == 0:
                self._idle.set()

    async def _handle(self, body: bytes) -> tuple[int, str]:
        try:
            data = json.loads(body)
            update = Update.de_json(data, self.application.bot) if isinstance(data, dict) else None
        except (ValueError, TypeError, KeyError) as exc:
            log.warning("webhook body is no update %s", kv(error=type(exc).__name__))
            return 400, "not an update"
        if update is None:
            return 400, "not an update"
        try:
            if await self.answered.answered(update.update_id):
                return 200, "ok, already handled"
            with redeliverable() as intake:
                await self.application.process_update(update)
            if intake.failure is not None:
                raise intake.failure
            # Marked before the 200: a redelivery after it finds the mark.
            await self.answered.mark(update.update_id, self.clock())
        except StoreError as exc:
            log.warning(
                "webhook update not stored %s", kv(update=update.update_id, error=exc, answer=500)
            )
            return 500, "not stored; send it again"
        return 200, "ok"


class _CappedServer(HTTPServer):
    """tornado's HTTP server, asking the listener before it serves a new connection."""

    admit: Callable[[IOStream], bool] = staticmethod(lambda stream: True)

    def handle_stream(self, stream: IOStream, address: tuple[Any, ...]) -> None:
        if not self.admit(stream):
            stream.close()
            return
        super().handle_stream(stream, address)


@stream_request_body
class _UpdateHandler(RequestHandler):
    """tornado's side: the secret and the size are checked on the headers, so a refused
    request's body is read only to be dropped (answering before it is read would reset
    the connection under a client still sending), then the body goes to the listener."""

    def initialize(self, listener: WebhookListener) -> None:
        self.listener = listener
        self.body = bytearray()
        self.answered = False
        self.refusal: tuple[int, str] | None = None

    def prepare(self) -> None:
        if self.request.method != "POST":
            return  # tornado answers 405
        if not self.listener.authentic(self.request.headers.get(SECRET_HEADER)):
            self.refusal = (403, "forbidden")
            return
        self.listener.vouch(getattr(self.request.connection, "stream", None))
        if int(self.request.headers.get("Content-Length") or 0) > MAX_BODY:
            self.refusal = (413, "too large")

    def data_received(self, chunk: bytes) -> None:
        if self.refusal is not None:
            return  # dropped, never parsed
        if len(self.body) + len(chunk) > MAX_BODY:  # a chunked body has no Content-Length
            self.refusal = (413, "too large")
            self.body.clear()
        else:
            self.body += chunk

    async def post(self) -> None:
        if self.refusal is not None:
            await self._send(*self.refusal)
            return
        await self.listener.receive(bytes(self.body), self._send)

    async def _send(self, status: int, text: str) -> None:
        done = self._answer(status, text)
        if done is not None:
            await done  # the answer is on its way to Telegram

    def _answer(self, status: int, text: str) -> Awaitable[None] | None:
        if self.answered:
            return None
        self.answered = True
        self.set_status(status)
        if status == 503:
            self.set_header("Retry-After", "1")
        self.set_header("Content-Type", "text/plain; charset=utf-8")
        return self.finish(text + "\n")
