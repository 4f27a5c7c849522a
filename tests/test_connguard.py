"""The connect-time guard: the pure check, and real connects from guarded and unguarded threads.

yt-dlp through it is in tests/test_ytdlp_job.py, gallery-dl's child in tests/test_gallerydl.py.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from xbot.media import connguard
from xbot.media.connguard import ConnectRefused, Watch, address_allowed, policy_for

V4, V6, UNIX = socket.AF_INET, socket.AF_INET6, socket.AF_UNIX

CASES: list[tuple[str, int, object, bool, bool]] = [
    ("public-v4", V4, ("93.184.216.34", 443), False, True),
    ("loopback-v4", V4, ("127.0.0.1", 80), False, False),
    ("loopback-v4-allowed", V4, ("127.0.0.1", 80), True, True),
    ("metadata-link-local", V4, ("169.254.169.254", 80), False, False),
    ("rfc1918", V4, ("10.1.2.3", 80), False, False),
    ("public-v6", V6, ("2606:2800:220:1:248:1893:25c8:1946", 443, 0, 0), False, True),
    ("loopback-v6", V6, ("::1", 80, 0, 0), False, False),
    ("v4-mapped-loopback", V6, ("::ffff:127.0.0.1", 80, 0, 0), False, False),
    ("link-local-v6-with-zone", V6, ("fe80::1%lo", 80, 0, 1), False, False),
    # connect() would resolve a name again: the address checked must be the one used.
    ("a-name", V4, ("example.com", 80), False, False),
    ("a-name-even-allowed", V4, ("localhost", 80), True, False),
    ("unix-socket", UNIX, "/run/xbot.sock", True, False),
    ("multicast-allowed-still-refused", V4, ("224.0.0.1", 80), True, False),
    ("junk-address", V4, ("127.0.0.1",), True, False),
]


@pytest.mark.parametrize(
    ("family", "address", "allow_private", "allowed"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_address_allowed(family: int, address: object, allow_private: bool, allowed: bool) -> None:
    assert address_allowed(family, address, policy_for(allow_private)) is allowed


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    server = socket.create_server(("127.0.0.1", 0))
    server.setblocking(False)
    try:
        yield server
    finally:
        server.close()


def nothing_pending(server: socket.socket) -> bool:
    try:
        conn, _ = server.accept()
    except BlockingIOError:
        return True
    conn.close()
    return False


def connect(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        pass


def test_a_guarded_thread_cannot_reach_loopback(listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    watch = Watch(allow_private=False)
    with connguard.guarded(watch), pytest.raises(ConnectRefused):
        connect(port)
    assert watch.refused == [f"127.0.0.1:{port}"]
    assert nothing_pending(listener), "refused before the kernel was asked"
    connect(port)  # the block is over: this thread is its own again
    assert not nothing_pending(listener)


def test_allow_private_lets_loopback_through(listener: socket.socket) -> None:
    watch = Watch(allow_private=True)
    with connguard.guarded(watch):
        connect(listener.getsockname()[1])
    assert watch.refused == []
    assert not nothing_pending(listener)


def test_a_watch_shut_down_connects_nowhere_again(listener: socket.socket) -> None:
    """A library that retries after its read was broken must not open a fresh socket
    that nobody shuts; that is no refusal of the address (no `BlockedAddress`)."""
    watch = Watch(allow_private=True)
    with connguard.guarded(watch):
        connect(listener.getsockname()[1])
        assert not nothing_pending(listener)
        watch.shut_down()
        with pytest.raises(ConnectionAbortedError):
            connect(listener.getsockname()[1])
    assert watch.refused == []
    assert nothing_pending(listener)


def test_only_the_guarded_thread_is_guarded(listener: socket.socket) -> None:
    """The event loop, SQLite and PTB run beside yt-dlp's thread and must not notice it."""
    port = listener.getsockname()[1]
    inside, done = threading.Event(), threading.Event()
    outcome: list[BaseException | None] = []

    def guarded_thread() -> None:
        with connguard.guarded(Watch(allow_private=False)):
            inside.set()
            done.wait(10)
            try:
                connect(port)
            except ConnectRefused as exc:
                outcome.append(exc)
            else:
                outcome.append(None)

    thread = threading.Thread(target=guarded_thread)
    thread.start()
    try:
        assert inside.wait(10)
        connect(port)  # this thread, while the other is inside its block
        assert not nothing_pending(listener)
    finally:
        done.set()
        thread.join(10)
    assert len(outcome) == 1
    assert isinstance(outcome[0], ConnectRefused)
    assert nothing_pending(listener)


def test_every_address_of_a_name_is_judged(
    listener: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A name that lists a public address and then 127.0.0.1: the public one fails to
    connect (nothing listens there in a test), the loopback one is refused, not tried."""
    port = listener.getsockname()[1]
    real = socket.getaddrinfo

    def two_answers(host: str, *args: object, **kwargs: object) -> list[tuple[object, ...]]:
        if host == "both.test":
            return [
                (V4, socket.SOCK_STREAM, 6, "", ("192.0.2.1", port)),  # TEST-NET: not global
                (V4, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port)),
            ]
        return real(host, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "getaddrinfo", two_answers)
    watch = Watch(allow_private=False)
    with connguard.guarded(watch), pytest.raises(ConnectRefused):
        socket.create_connection(("both.test", port), timeout=5).close()
    assert watch.refused == [f"192.0.2.1:{port}", f"127.0.0.1:{port}"]
    assert nothing_pending(listener)
