"""The SSRF guard: what comes from users may not reach loopback, private or link-local hosts.

Links people paste, the media URLs inside fetched posts and every redirect
hop are untrusted. A check of the URL alone is not enough (a name can
resolve to 127.0.0.1, or resolve differently the second time), so the sound
check sits where the socket is opened: `GuardedBackend.connect_tcp` resolves
the host once, refuses if *any* address is not allowed, and connects to the
address it checked. httpx opens every hop of a redirect chain through it, so
a redirect to loopback is refused like a direct link. TLS still verifies the
original host name: httpcore calls ``start_tls(server_hostname=origin host)``
on the stream we return (``httpcore/_async/connection.py``).

`check_url` and `resolve_and_check` are the pre-flight for code that opens
its own sockets (yt-dlp, gallery-dl): an early, clear refusal. What holds
there is `xbot.media.connguard`, which checks each address those libraries
actually connect to, with the same policy (`xbot.media.addresses`).

The endpoints the operator configures (``XBOT_X_API_URL``, the Bot API) are
trusted as given and do not go through this module.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import httpcore
import httpx

from xbot.errors import BlockedAddress, UnsupportedLink
from xbot.i18n import N_, reason_template
from xbot.media.addresses import IPAddress, is_allowed_ip, parse_ip
from xbot.tls import client_context

# host, port -> the addresses the name resolves to (strings, as getaddrinfo gives them)
Resolver = Callable[[str, int], Awaitable[list[str]]]

NO_HOST = reason_template(N_("I could not find the host {host}."))
BLOCKED_REASON = N_("That link points to a private or local network address, which I do not fetch.")


def _numeric_v4(host: str) -> ipaddress.IPv4Address | None:
    """The address of the forms inet_aton accepts besides dotted quads: 127.1, 2130706433, 0x7f…."""
    if not host or not all(c in "0123456789abcdefxABCDEFX." for c in host):
        return None
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except OSError:
        return None


def _is_localhost_name(host: str) -> bool:
    # RFC 6761: localhost and everything under it is loopback, whatever DNS says.
    name = host.rstrip(".").lower()
    return name == "localhost" or name.endswith(".localhost")


def check_url(url: str, allow_private: bool) -> None:
    """Refuse a URL before any network work: wrong scheme, no host, user info, a blocked literal.

    Raises:
        UnsupportedLink: not an http(s) URL we would fetch.
        BlockedAddress: the host is a literal (in any spelling) or a name for a refused address.
    """
    # Parsers disagree about backslashes, spaces and control characters; that
    # disagreement is how "http://evil.com\\@127.0.0.1/" tricks reach loopback.
    if any(c == "\\" or ord(c) <= 0x20 or ord(c) == 0x7F for c in url):
        raise UnsupportedLink(N_("That link is malformed."))
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise UnsupportedLink(N_("That link is malformed.")) from exc
    if parsed.scheme not in ("http", "https"):
        raise UnsupportedLink(N_("I only fetch http and https links."))
    if not parsed.host:
        raise UnsupportedLink(N_("That link has no host."))
    if parsed.userinfo:
        raise UnsupportedLink(N_("I do not fetch links that carry a user name or password."))
    if allow_private:
        return
    host = parsed.host
    literal: IPAddress | None = parse_ip(host) or _numeric_v4(host)
    if literal is not None:
        if not is_allowed_ip(literal, allow_private):
            raise BlockedAddress(BLOCKED_REASON)
    elif _is_localhost_name(host):
        raise BlockedAddress(BLOCKED_REASON)


async def system_resolver(host: str, port: int) -> list[str]:
    """Resolve with the event loop's getaddrinfo (in a thread; no blocking of the loop)."""
    infos = await asyncio.get_running_loop().getaddrinfo(
        host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
    )
    addresses: list[str] = []
    for _family, _type, _proto, _canon, sockaddr in infos:
        address = str(sockaddr[0])
        if address not in addresses:
            addresses.append(address)
    return addresses


async def resolve_and_check(
    host: str, port: int, allow_private: bool, *, resolver: Resolver = system_resolver
) -> list[str]:
    """Resolve `host` once and return its addresses, refusing if any of them is not allowed.

    Refusing on *any* (not only the first) closes the trick of a name that
    lists a public address next to 127.0.0.1. IP literals are judged without
    a lookup.

    Raises:
        BlockedAddress: some address (or the name itself, ``localhost``) is refused.
        UnsupportedLink: the name does not resolve.
    """
    host = host.strip("[]")
    if not allow_private and _is_localhost_name(host):
        raise BlockedAddress(BLOCKED_REASON)
    literal = parse_ip(host)
    if literal is not None:
        addresses = [str(literal)]
    else:
        try:
            addresses = await resolver(host, port)
        except (OSError, UnicodeError) as exc:
            raise UnsupportedLink(NO_HOST.format(host=repr(host))) from exc
    if not addresses:
        raise UnsupportedLink(NO_HOST.format(host=repr(host)))
    for address in addresses:
        ip = parse_ip(address)
        if ip is None or not is_allowed_ip(ip, allow_private):
            raise BlockedAddress(BLOCKED_REASON)
    return addresses


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """An httpcore network backend that only connects to addresses the guard allows.

    `resolver` and `inner` are seams: tests inject a resolver that names a
    public address and an inner backend that dials it on 127.0.0.1, so the
    real policy can be shown refusing a redirect while every server is local.

    A refusal raises `BlockedAddress` itself: httpx re-raises exceptions it
    does not know unchanged, and a `ConnectError` would be retried as transient.
    """

    def __init__(
        self,
        allow_private: bool,
        *,
        resolver: Resolver = system_resolver,
        inner: httpcore.AsyncNetworkBackend | None = None,
    ) -> None:
        self.allow_private = allow_private
        self._resolver = resolver
        self._inner = inner if inner is not None else httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface names it
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            async with asyncio.timeout(timeout):
                addresses = await resolve_and_check(
                    host, port, self.allow_private, resolver=self._resolver
                )
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(f"resolving {host} timed out") from exc
        except UnsupportedLink as exc:
            raise httpcore.ConnectError(exc.reason) from exc
        last: Exception | None = None
        for address in addresses:
            remaining = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            try:
                # The checked address, never the name: a second lookup could answer differently.
                return await self._inner.connect_tcp(
                    address,
                    port,
                    timeout=remaining,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = exc
        assert last is not None  # resolve_and_check never returns an empty list
        raise last

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface names it
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise BlockedAddress(BLOCKED_REASON)

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def guarded_transport(
    allow_private: bool,
    *,
    resolver: Resolver = system_resolver,
    inner: httpcore.AsyncNetworkBackend | None = None,
    **kwargs: Any,
) -> httpx.AsyncHTTPTransport:
    """An httpx transport whose every connection goes through `GuardedBackend`.

    httpx has no public way to set the network backend, so this replaces the
    pool's private ``_network_backend`` (httpx is pinned <0.29 for this). If
    the attribute ever moves, this raises instead of handing out an
    unguarded transport.
    """
    if "proxy" in kwargs or "uds" in kwargs:
        raise ValueError("a guarded transport connects directly; no proxy or unix socket")
    kwargs.setdefault("verify", client_context(trust_env=False))
    transport = httpx.AsyncHTTPTransport(**kwargs)
    pool = getattr(transport, "_pool", None)
    if not isinstance(pool, httpcore.AsyncConnectionPool) or not isinstance(
        getattr(pool, "_network_backend", None), httpcore.AsyncNetworkBackend
    ):
        raise RuntimeError("httpx internals moved: cannot install the SSRF guard")
    pool._network_backend = GuardedBackend(allow_private, resolver=resolver, inner=inner)
    return transport


def make_client(
    *,
    allow_private: bool,
    timeout: httpx.Timeout,
    user_agent: str,
    resolver: Resolver = system_resolver,
    inner: httpcore.AsyncNetworkBackend | None = None,
) -> httpx.AsyncClient:
    """The client for everything user-derived: guarded, at most 5 redirects, no env proxies."""
    return httpx.AsyncClient(
        transport=guarded_transport(allow_private, resolver=resolver, inner=inner),
        follow_redirects=True,
        max_redirects=5,
        trust_env=False,
        timeout=timeout,
        headers={"User-Agent": user_agent},
    )
