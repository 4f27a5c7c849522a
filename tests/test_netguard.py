"""The SSRF guard: the policy table, the URL pre-flight, and the connect-time check in httpx."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

import httpcore
import httpx
import pytest

from xbot.errors import BlockedAddress, UnsupportedLink
from xbot.media import netguard
from xbot.media.netguard import (
    GuardedBackend,
    check_url,
    guarded_transport,
    is_allowed_ip,
    make_client,
    resolve_and_check,
    system_resolver,
)

PUBLIC_IP = "93.184.216.34"  # a globally routable address; tests dial it on 127.0.0.1
TIMEOUT = httpx.Timeout(5.0)

# -- the policy ---------------------------------------------------------------

REFUSED = [
    ("127.0.0.1", "loopback"),
    ("127.255.255.254", "loopback-range"),
    ("::1", "v6-loopback"),
    ("::ffff:127.0.0.1", "v4-mapped-loopback"),
    ("::ffff:10.0.0.1", "v4-mapped-private"),
    ("0.0.0.0", "unspecified"),
    ("::", "v6-unspecified"),
    ("10.1.2.3", "rfc1918-10"),
    ("172.16.0.1", "rfc1918-172"),
    ("192.168.1.1", "rfc1918-192"),
    ("169.254.169.254", "cloud-metadata"),
    ("100.64.0.1", "cgnat"),
    ("fc00::1", "ula"),
    ("fd12:3456::1", "ula-fd"),
    ("fe80::1", "v6-link-local"),
    ("224.0.0.1", "multicast"),
    ("239.255.255.250", "multicast-ssdp"),
    ("ff02::1", "v6-multicast"),
    ("255.255.255.255", "broadcast"),
    ("240.0.0.1", "reserved"),
    ("198.51.100.7", "test-net"),
    ("2002:7f00:1::", "6to4-loopback"),
    ("2002:a00:1::", "6to4-private"),
    ("2001:0:4136:e378:8000:63bf:80ff:fffe", "teredo"),
    ("64:ff9b::7f00:1", "nat64-loopback"),
    ("::7f00:1", "v4-compatible-loopback"),
]

ALLOWED = [
    ("8.8.8.8", "public-v4"),
    (PUBLIC_IP, "public-v4-2"),
    ("2606:4700::1111", "public-v6"),
    ("::ffff:8.8.8.8", "v4-mapped-public"),
    ("2002:808:808::", "6to4-public"),
    ("64:ff9b::808:808", "nat64-public"),
]


@pytest.mark.parametrize(("address", "why"), REFUSED, ids=[w for _, w in REFUSED])
def test_policy_refuses_non_global(address: str, why: str) -> None:
    assert not is_allowed_ip(ipaddress.ip_address(address), allow_private=False)


@pytest.mark.parametrize(("address", "why"), ALLOWED, ids=[w for _, w in ALLOWED])
def test_policy_allows_global_unicast(address: str, why: str) -> None:
    assert is_allowed_ip(ipaddress.ip_address(address), allow_private=False)


@pytest.mark.parametrize(
    ("address", "allowed"),
    [
        ("127.0.0.1", True),
        ("::1", True),
        ("::ffff:127.0.0.1", True),
        ("10.1.2.3", True),
        ("fe80::1", True),
        ("169.254.169.254", True),
        ("8.8.8.8", True),
        ("224.0.0.1", False),
        ("ff02::1", False),
        ("0.0.0.0", False),
        ("::", False),
    ],
    ids=[
        "loopback",
        "v6-loopback",
        "mapped-loopback",
        "private",
        "link-local",
        "metadata",
        "public",
        "multicast",
        "v6-multicast",
        "unspecified",
        "v6-unspecified",
    ],
)
def test_policy_with_private_networks_allowed(address: str, allowed: bool) -> None:
    assert is_allowed_ip(ipaddress.ip_address(address), allow_private=True) is allowed


# -- the pre-flight -----------------------------------------------------------

LOOPBACK_HOSTS = [
    ("127.0.0.1", "dotted"),
    ("127.1", "short"),
    ("localhost", "localhost"),
    ("2130706433", "decimal"),
    ("0x7f000001", "hex"),
    ("017700000001", "octal"),
    ("[::1]", "v6"),
    ("[::ffff:127.0.0.1]", "v4-mapped"),
    ("0.0.0.0", "unspecified"),
]

BLOCKED_HOSTS = [
    *LOOPBACK_HOSTS,
    ("LOCALHOST.", "localhost-fqdn-upper"),
    ("api.localhost", "localhost-subdomain"),
    ("10.0.0.1", "rfc1918-10"),
    ("172.16.5.4", "rfc1918-172"),
    ("192.168.0.1", "rfc1918-192"),
    ("169.254.169.254", "metadata"),
    ("100.64.0.1", "cgnat"),
    ("[fc00::1]", "ula"),
    ("[fe80::1]", "link-local"),
    ("224.0.0.1", "multicast"),
]


@pytest.mark.parametrize(("host", "why"), BLOCKED_HOSTS, ids=[w for _, w in BLOCKED_HOSTS])
def test_check_url_blocks_local_literals(host: str, why: str) -> None:
    with pytest.raises(BlockedAddress):
        check_url(f"http://{host}:8080/x", allow_private=False)


@pytest.mark.parametrize(
    "url",
    [
        "ftp://example.com/a",
        "file:///etc/passwd",
        "gopher://example.com/",
        "http:///nohost",
        "http://user:pw@example.com/",
        "http://example.com@127.0.0.1/",
        "http://evil.com\\@127.0.0.1/",
        "http://exa mple.com/",
        "http://example.com/\x00",
        "not a url",
    ],
    ids=[
        "ftp",
        "file",
        "gopher",
        "no-host",
        "userinfo",
        "userinfo-at-loopback",
        "backslash-userinfo",
        "space",
        "nul",
        "garbage",
    ],
)
def test_check_url_rejects_unsupported(url: str) -> None:
    with pytest.raises(UnsupportedLink):
        check_url(url, allow_private=False)


@pytest.mark.parametrize(
    "url",
    [
        "https://x.com/alice/status/1",
        "http://8.8.8.8/a.mp4",
        "https://[2606:4700::1111]/",
        "https://video.twimg.com/ext_tw_video/1/pu/vid/720x1280/a.mp4?tag=12",
        "https://cafe.be/",
    ],
    ids=["x", "public-literal", "public-v6", "twimg", "hexish-name"],
)
def test_check_url_passes_public(url: str) -> None:
    check_url(url, allow_private=False)


def test_check_url_allow_private_passes_loopback() -> None:
    check_url("http://127.0.0.1:8080/a", allow_private=True)


@pytest.mark.parametrize(("host", "why"), LOOPBACK_HOSTS, ids=[w for _, w in LOOPBACK_HOSTS])
async def test_resolve_and_check_refuses_loopback_spellings(host: str, why: str) -> None:
    # The real resolver: every spelling glibc accepts for 127.0.0.1 is caught after resolution.
    with pytest.raises(BlockedAddress):
        await resolve_and_check(host, 80, allow_private=False)


async def test_resolve_and_check_resolves_loopback_when_allowed() -> None:
    assert await resolve_and_check("127.1", 80, allow_private=True) == ["127.0.0.1"]


def fake_resolver(table: dict[str, list[str]]) -> netguard.Resolver:
    """Names from `table`; anything else through the real resolver (literals, localhost)."""

    async def resolve(host: str, port: int) -> list[str]:
        if host in table:
            return list(table[host])
        return await system_resolver(host, port)

    return resolve


async def test_resolve_and_check_refuses_if_any_address_is_local() -> None:
    resolver = fake_resolver({"mixed.example": [PUBLIC_IP, "127.0.0.1"]})
    with pytest.raises(BlockedAddress):
        await resolve_and_check("mixed.example", 80, allow_private=False, resolver=resolver)


async def test_resolve_and_check_returns_public_addresses() -> None:
    resolver = fake_resolver({"public.example": [PUBLIC_IP, "2606:4700::1111"]})
    got = await resolve_and_check("public.example", 443, allow_private=False, resolver=resolver)
    assert got == [PUBLIC_IP, "2606:4700::1111"]


async def test_resolve_and_check_unknown_name_is_unsupported() -> None:
    async def nxdomain(host: str, port: int) -> list[str]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    with pytest.raises(UnsupportedLink):
        await resolve_and_check("nope.example", 80, allow_private=False, resolver=nxdomain)


# -- the connect-time guard, with real local servers ---------------------------


class Server:
    """A one-route HTTP/1.1 server on 127.0.0.1 that records what reached it."""

    def __init__(self, respond: Callable[[str], bytes]) -> None:
        self.respond = respond
        self.paths: list[str] = []
        self.port = 0
        self._server: asyncio.Server | None = None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            path = head.split(b" ", 2)[1].decode()
            self.paths.append(path)
            writer.write(self.respond(path))
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def __aenter__(self) -> Server:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()


def ok(body: bytes = b"hello") -> Callable[[str], bytes]:
    head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    return lambda path: head.encode() + body


def redirect(location: str) -> Callable[[str], bytes]:
    head = f"HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\n\r\n"
    return lambda path: head.encode()


@pytest.fixture
async def target() -> AsyncIterator[Server]:
    async with Server(ok(b"secret")) as server:
        yield server


class Dialer(httpcore.AsyncNetworkBackend):
    """The inner backend: dials PUBLIC_IP on 127.0.0.1 and records every host it was asked for."""

    def __init__(self) -> None:
        self.dialed: list[str] = []
        self._real = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        self.dialed.append(host)
        real_host = "127.0.0.1" if host == PUBLIC_IP else host
        return await self._real.connect_tcp(real_host, port, timeout=timeout)

    async def sleep(self, seconds: float) -> None:
        await self._real.sleep(seconds)


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1", "localhost", "2130706433", "0x7f000001", "127.1", "[::ffff:127.0.0.1]"],
    ids=["dotted", "localhost", "decimal", "hex", "short", "v4-mapped"],
)
async def test_client_refuses_loopback_and_nothing_arrives(target: Server, host: str) -> None:
    async with make_client(allow_private=False, timeout=TIMEOUT, user_agent="t") as client:
        with pytest.raises(BlockedAddress):
            await client.get(f"http://{host}:{target.port}/secret")
    assert target.paths == []


async def test_client_with_private_allowed_reaches_local_server(target: Server) -> None:
    async with make_client(allow_private=True, timeout=TIMEOUT, user_agent="t") as client:
        response = await client.get(f"http://127.0.0.1:{target.port}/secret")
    assert response.content == b"secret"
    assert target.paths == ["/secret"]


@pytest.mark.parametrize(
    "location_host",
    ["internal.example", "127.0.0.1", "localhost", "2130706433", "[::ffff:127.0.0.1]"],
    ids=["name-to-loopback", "dotted", "localhost", "decimal", "v4-mapped"],
)
async def test_redirect_to_loopback_is_refused(target: Server, location_host: str) -> None:
    location = f"http://{location_host}:{target.port}/secret"
    async with Server(redirect(location)) as public:
        dialer = Dialer()
        resolver = fake_resolver({"public.example": [PUBLIC_IP], "internal.example": ["127.0.0.1"]})
        client = make_client(
            allow_private=False, timeout=TIMEOUT, user_agent="t", resolver=resolver, inner=dialer
        )
        async with client:
            with pytest.raises(BlockedAddress):
                await client.get(f"http://public.example:{public.port}/start")
    assert public.paths == ["/start"]  # the first hop was allowed and answered
    assert target.paths == []  # the redirect target never saw a request
    assert dialed_only_checked(dialer.dialed)


def dialed_only_checked(dialed: list[str]) -> bool:
    return dialed == [PUBLIC_IP]


async def test_redirect_between_public_hosts_is_followed(target: Server) -> None:
    async with Server(redirect(f"http://other.example:{target.port}/secret")) as public:
        resolver = fake_resolver({"public.example": [PUBLIC_IP], "other.example": [PUBLIC_IP]})
        client = make_client(
            allow_private=False, timeout=TIMEOUT, user_agent="t", resolver=resolver, inner=Dialer()
        )
        async with client:
            response = await client.get(f"http://public.example:{public.port}/start")
    assert response.content == b"secret"


async def test_connects_to_the_checked_address_not_the_name(target: Server) -> None:
    # DNS rebinding: the second answer for the name would be loopback. The guard
    # resolves once per connection and dials the address it checked.
    answers = [[PUBLIC_IP], ["127.0.0.1"]]

    async def rebinding(host: str, port: int) -> list[str]:
        return answers.pop(0)

    dialer = Dialer()
    client = make_client(
        allow_private=False, timeout=TIMEOUT, user_agent="t", resolver=rebinding, inner=dialer
    )
    async with client:
        response = await client.get(f"http://rebind.example:{target.port}/secret")
    assert response.status_code == 200
    assert dialer.dialed == [PUBLIC_IP]
    assert answers == [["127.0.0.1"]]  # looked up exactly once


class TlsRecorder(httpcore.AsyncNetworkStream):
    def __init__(self, seen: dict[str, Any]) -> None:
        self.seen = seen

    async def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.AsyncNetworkStream:
        self.seen["server_hostname"] = server_hostname
        raise httpcore.ConnectError("stop here")

    async def aclose(self) -> None:
        pass


async def test_tls_verifies_the_original_host_name() -> None:
    seen: dict[str, Any] = {}

    class Recording(httpcore.AsyncNetworkBackend):
        async def connect_tcp(self, host: str, port: int, **kw: Any) -> httpcore.AsyncNetworkStream:
            seen["host"] = host
            return TlsRecorder(seen)

    resolver = fake_resolver({"media.example": [PUBLIC_IP]})
    client = make_client(
        allow_private=False, timeout=TIMEOUT, user_agent="t", resolver=resolver, inner=Recording()
    )
    async with client:
        with pytest.raises(httpx.ConnectError):
            await client.get("https://media.example/a.mp4")
    assert seen == {"host": PUBLIC_IP, "server_hostname": "media.example"}


async def test_unresolvable_name_is_a_connect_error() -> None:
    async def nxdomain(host: str, port: int) -> list[str]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    client = make_client(allow_private=False, timeout=TIMEOUT, user_agent="t", resolver=nxdomain)
    async with client:
        with pytest.raises(httpx.ConnectError):
            await client.get("http://nope.example/")


async def test_client_sends_user_agent_and_does_not_trust_env(target: Server) -> None:
    client = make_client(allow_private=True, timeout=TIMEOUT, user_agent="xbot-test/1")
    assert client.headers["User-Agent"] == "xbot-test/1"
    assert client.trust_env is False
    assert client.follow_redirects is True
    assert client.max_redirects == 5
    await client.aclose()


# -- the private attribute the guard relies on --------------------------------


def test_guard_is_installed_on_the_pool() -> None:
    # Fails loudly if httpx/httpcore move the attribute the guard replaces.
    transport = guarded_transport(allow_private=False)
    backend = transport._pool._network_backend  # type: ignore[attr-defined]
    assert isinstance(backend, GuardedBackend)
    assert backend.allow_private is False


def test_guarded_transport_refuses_when_internals_move(monkeypatch: pytest.MonkeyPatch) -> None:
    class Moved(httpx.AsyncHTTPTransport):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            del self._pool

    monkeypatch.setattr(netguard.httpx, "AsyncHTTPTransport", Moved)
    with pytest.raises(RuntimeError, match="internals moved"):
        guarded_transport(allow_private=False)


def test_guarded_transport_refuses_proxy() -> None:
    with pytest.raises(ValueError, match="proxy"):
        guarded_transport(allow_private=False, proxy="http://127.0.0.1:3128")
