"""The SSRF guard at ``socket.connect``, for the libraries that open their own sockets.

yt-dlp (in a thread of the bot) and gallery-dl (in a process of its own) do
their own name lookups, redirects and connections; no hook of theirs sees the
address a request actually goes to. Python's audit hooks (PEP 578) do: the
event ``socket.connect`` carries ``(socket, address)`` for every connection
the interpreter makes, and a hook that raises refuses it before the kernel
is asked. By then the libraries have resolved the name themselves
(``socket.create_connection``, urllib3 and yt-dlp's own helper all call
``getaddrinfo`` and connect to the numeric result), so the address checked
is the address used: each redirect hop, an embed on another host and a name
that resolves differently the second time (DNS rebinding) are all judged by
`xbot.media.addresses.is_allowed_ip`, like the bot's own fetches.

- **In the bot** (`guarded`): the hook acts only in a thread that is inside
  ``with guarded(watch)``, the yt-dlp job's thread; every other thread (the
  event loop, SQLite, PTB) is untouched. yt-dlp is kept to that one thread
  (one fragment at a time, no external downloader; `xbot.sources.ytdlp` (its options)).
- **In a child** (``python -m xbot.media.connguard [--allow-private] MODULE
  ARGS``): the hook acts in every thread of the process, then `MODULE` runs
  as ``__main__`` (gallery-dl: it is never imported into the bot's process).
  A refused connection ends the process at once with `REFUSED_STATUS` and
  `REFUSED_MARKER` on stderr, so no library can catch the refusal and go on.

A connection by name (``connect(("host", 80))``, which resolves again inside
``connect``), over anything but IPv4/IPv6 (a unix socket) or to a refused
address is refused. Audit hooks cannot be removed, so the hook is installed
once per process and is a no-op outside a guarded thread. What Python does
not see is not covered: a child program (ffmpeg fetching a stream) or C code
with its own sockets. The options keep yt-dlp from starting either, and in a
guarded thread of the bot a child program whose arguments hold a URL
(``scheme://``) is refused as well (``subprocess.Popen``): ffmpeg may merge the
files the thread downloaded, never fetch an address itself.

Standard library only: the gallery-dl child imports this at every start.
"""

from __future__ import annotations

import contextlib
import os
import re
import runpy
import socket
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any

from xbot.media.addresses import IPAddress, is_allowed_ip, parse_ip

__all__ = [
    "REFUSED_MARKER",
    "REFUSED_STATUS",
    "ConnectRefused",
    "Policy",
    "Watch",
    "address_allowed",
    "child_command",
    "child_fetches",
    "guarded",
    "install",
    "main",
    "policy_for",
]

# gallery-dl's own statuses are bit flags from 1 to 128; the marker line makes it certain.
REFUSED_STATUS = 99
REFUSED_MARKER = "xbot-connguard: refused a connection to a private or local address"

# address, port -> whether a connection there is allowed
Policy = Callable[[IPAddress, int], bool]

_EVENTS = frozenset({"socket.connect", "socket.sendto", "subprocess.Popen"})
_URL_IN_ARG = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


class ConnectRefused(ConnectionRefusedError):
    """A guarded thread tried to connect where the guard does not allow.

    A ``ConnectionRefusedError``: code that tries the next address of a name
    goes on to the next (each is judged), and libraries that catch ``OSError``
    see a failed connection, never a success. The caller reads `Watch.refused`
    to tell the refusal from a network error.
    """


def policy_for(allow_private: bool) -> Policy:
    """The guard's policy: `is_allowed_ip`, whatever the port."""
    return lambda ip, _port: is_allowed_ip(ip, allow_private)


class Watch:
    """One guarded stretch of a thread: its policy, and what it refused.

    Attributes:
        policy: whether an address and port may be connected to (`policy_for`;
            tests let one local port stand for a public host).
        refused: the addresses refused so far, as ``host:port`` strings.
        sockets: the sockets it let connect, while they live: the owner may shut
            them down from another thread (a transfer given up as too slow), which
            wakes a read blocked on them.
    """

    def __init__(self, allow_private: bool, *, policy: Policy | None = None) -> None:
        self.policy = policy if policy is not None else policy_for(allow_private)
        self.refused: list[str] = []
        self.sockets: weakref.WeakSet[socket.socket] = weakref.WeakSet()
        self.closed = False

    def shut_down(self) -> None:
        """Shut down every socket it let connect (both ways): a thread reading one wakes.

        From then on the stretch connects nowhere: a library that retries after the
        broken read would otherwise open a fresh socket that nobody shuts. Call it
        again to catch a socket whose connect was under way the first time.
        """
        self.closed = True
        for sock in list(self.sockets):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


class _Process:
    """This process's side of the guard (class attributes: one per process)."""

    watch: Watch | None = None  # set in a guarded child: every thread is guarded
    installed = False
    lock = threading.Lock()


_local = threading.local()


def address_allowed(family: int, address: object, policy: Policy) -> bool:
    """Whether a connect to `address` (as ``socket.connect`` takes it) is allowed. Pure."""
    if family not in (socket.AF_INET, socket.AF_INET6):
        return False
    if not isinstance(address, tuple) or len(address) < 2 or not isinstance(address[0], str):
        return False
    ip = parse_ip(address[0])  # a name is refused: connect() would resolve it again
    return ip is not None and isinstance(address[1], int) and policy(ip, address[1])


def _where(address: object) -> str:
    if isinstance(address, tuple) and len(address) >= 2:
        return f"{address[0]}:{address[1]}"
    return repr(address)


def child_fetches(argv: object) -> bool:
    """Whether a child program's arguments name a URL it would fetch itself. Pure."""
    args = [argv] if isinstance(argv, str | bytes) else argv
    if not isinstance(args, list | tuple):
        return False
    for arg in args:
        text = arg.decode(errors="replace") if isinstance(arg, bytes) else str(arg)
        if _URL_IN_ARG.search(text):
            return True
    return False


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if event not in _EVENTS:
        return
    watch: Watch | None = _Process.watch or getattr(_local, "watch", None)
    if watch is None:
        return
    if event == "subprocess.Popen":
        # (executable, args, cwd, env). Only the bot's guarded threads: a guarded
        # child process (gallery-dl) runs its own programs on its own files.
        if watch is not _Process.watch and child_fetches(args[1]):
            watch.refused.append("a child program given a URL")
            raise ConnectRefused("refused by the SSRF guard: a child program given a URL")
        return
    sock, address = args[0], args[-1]
    if watch.closed and event == "socket.connect":
        # Given up by its owner, not a refusal of the address: no BlockedAddress follows.
        raise ConnectionAbortedError("the transfer was given up")
    if event == "socket.sendto" and getattr(sock, "type", None) == socket.SOCK_STREAM:
        return  # sendto on a connected stream socket ignores the address
    if address_allowed(getattr(sock, "family", -1), address, watch.policy):
        if event == "socket.connect" and isinstance(sock, socket.socket):
            watch.sockets.add(sock)
        return
    watch.refused.append(_where(address))
    if watch is _Process.watch:
        # Unbuffered, then gone: nothing in the child may catch this and go on.
        os.write(2, f"\n{REFUSED_MARKER}: {_where(address)}\n".encode())
        os._exit(REFUSED_STATUS)
    raise ConnectRefused(f"refused by the SSRF guard: {_where(address)}")


def install() -> None:
    """Add the audit hook to this process, once (it cannot be removed; it idles unguarded)."""
    with _Process.lock:
        if not _Process.installed:
            sys.addaudithook(_hook)
            _Process.installed = True


@contextlib.contextmanager
def guarded(watch: Watch) -> Iterator[Watch]:
    """Check every connection this thread makes inside the block; `watch` keeps the refusals."""
    install()
    previous = getattr(_local, "watch", None)
    _local.watch = watch
    try:
        yield watch
    finally:
        _local.watch = previous


def child_command(python: str, module: str, allow_private: bool) -> list[str]:
    """The start of a command that runs `module` in a guarded child (arguments follow).

    ``-P``: the child's working directory (a temp folder) is not put on its import path.
    """
    flags = ["--allow-private"] if allow_private else []
    return [python, "-P", "-m", __name__, *flags, module]


def main(argv: list[str]) -> None:
    """``[--allow-private] MODULE ARGS...``: guard this whole process, then run MODULE."""
    allow_private = bool(argv) and argv[0] == "--allow-private"
    if allow_private:
        argv = argv[1:]
    if not argv:
        sys.exit("usage: python -m xbot.media.connguard [--allow-private] MODULE [ARGS...]")
    _Process.watch = Watch(allow_private)
    install()
    sys.argv = list(argv)
    runpy.run_module(argv[0], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
