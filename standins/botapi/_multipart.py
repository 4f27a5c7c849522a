"""multipart/form-data read as it arrives, never held whole: the Bot API stand-in's uploads.

A local Bot API server takes files up to 2000 MB; the stand-in must take them
the same way without needing that much memory, or a test of the bot's memory
would measure the stand-in. So file parts go to disk as their bytes arrive,
with their size and SHA-256 computed on the way (what `Call.files` records and
a test compares with what it sent); plain fields stay in memory, bounded.

The part headers go through the standard library's parser; the bodies are cut
at the boundary directly (``email`` parses a 20 MB upload in over a second).
"""

from __future__ import annotations

import email.parser
import email.policy
import hashlib
from email.message import Message as EmailMessage
from pathlib import Path
from typing import IO

from standins.botapi._wire import ApiError, Upload, bad_request

__all__ = ["MultipartReader"]

MAX_FIELD = 1024 * 1024  # a caption or an album's media JSON is far smaller
MAX_HEAD = 16 * 1024
_HEADER_PARSER = email.parser.BytesParser(policy=email.policy.HTTP)
_BAD = "Bad Request: can't parse multipart body"


def _boundary(content_type: str) -> bytes:
    holder = EmailMessage()
    holder["content-type"] = content_type
    boundary = holder.get_param("boundary")
    if not isinstance(boundary, str) or not boundary:
        raise bad_request("Bad Request: multipart boundary is not specified")
    return boundary.encode("latin-1")


class _FilePart:
    def __init__(self, name: str, filename: str, content_type: str, path: Path) -> None:
        self.name, self.filename, self.content_type, self.path = name, filename, content_type, path
        self.size = 0
        self.digest = hashlib.sha256()
        self.out: IO[bytes] = path.open("wb")

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.size += len(data)
        self.digest.update(data)
        self.out.write(data)

    def close(self) -> Upload:
        self.out.close()
        return Upload(
            filename=self.filename,
            content_type=self.content_type,
            path=self.path,
            size=self.size,
            sha256=self.digest.hexdigest(),
        )


class _FieldPart:
    def __init__(self, name: str) -> None:
        self.name = name
        self.data = bytearray()

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.data += data
        if len(self.data) > MAX_FIELD:
            raise ApiError(413, "Request Entity Too Large")


class MultipartReader:
    """Feed it the body in pieces of any size; `finish` returns (fields, files).

    File parts are written to `folder` (one file each); the caller removes what
    it does not keep.

    Attributes:
        received: bytes fed so far.
        fields: the plain fields complete so far (name -> text).
    """

    def __init__(self, content_type: str, folder: Path) -> None:
        self._dash = b"--" + _boundary(content_type)
        self._delimiter = b"\r\n" + self._dash
        self._folder = folder
        self._buf = bytearray()
        self._state = "preamble"
        self._part: _FilePart | _FieldPart | None = None
        self._count = 0
        self.received = 0
        self.fields: dict[str, str] = {}
        self.files: dict[str, Upload] = {}

    def feed(self, chunk: bytes) -> None:
        self.received += len(chunk)
        self._buf += chunk
        while self._step():
            pass

    def finish(self) -> tuple[dict[str, str], dict[str, Upload]]:
        if self._state != "end":
            self.abandon()
            raise bad_request(_BAD)
        return self.fields, self.files

    def abandon(self) -> None:
        """Close the part being written (its file stays for the caller to remove)."""
        if isinstance(self._part, _FilePart):
            self._part.out.close()
        self._part = None

    def _step(self) -> bool:
        """One move of the state machine; False when it needs more bytes."""
        buf = self._buf
        if self._state == "preamble":
            at = buf.find(self._dash)
            if at < 0:
                del buf[: max(0, len(buf) - len(self._dash))]
                return False
            del buf[: at + len(self._dash)]
            self._state = "after"
            return True
        if self._state == "after":  # just past a boundary: "--" ends, CRLF starts a part
            if len(buf) < 2:
                return False
            mark = bytes(buf[:2])
            del buf[:2]
            if mark == b"--":
                self._state = "end"
            elif mark == b"\r\n":
                self._state = "head"
            else:
                raise bad_request(_BAD)
            return True
        if self._state == "head":
            at = buf.find(b"\r\n\r\n")
            if at < 0:
                if len(buf) > MAX_HEAD:
                    raise bad_request(_BAD)
                return False
            self._open(bytes(buf[: at + 4]))
            del buf[: at + 4]
            self._state = "body"
            return True
        if self._state == "body":
            assert self._part is not None
            at = buf.find(self._delimiter)
            if at < 0:
                # Keep what could be the start of a delimiter split across two pieces.
                keep = len(self._delimiter) - 1
                if len(buf) > keep:
                    self._write(len(buf) - keep)
                return False
            self._write(at)
            del buf[: len(self._delimiter)]
            self._close_part()
            self._state = "after"
            return True
        buf.clear()  # the epilogue after the closing boundary means nothing
        return False

    def _write(self, n: int) -> None:
        """The first `n` bytes of the buffer to the open part, without copying them."""
        assert self._part is not None
        with memoryview(self._buf) as view, view[:n] as piece:
            self._part.write(piece)
        del self._buf[:n]

    def _open(self, head: bytes) -> None:
        headers = _HEADER_PARSER.parsebytes(head, headersonly=True)
        name = headers.get_param("name", header="content-disposition")
        if not isinstance(name, str):
            name = ""  # kept nowhere, like the old parser
        filename = headers.get_filename()
        if filename is None:
            self._part = _FieldPart(name)
        else:
            self._count += 1
            path = self._folder / f"part-{self._count}"
            self._part = _FilePart(name, filename, headers.get_content_type(), path)

    def _close_part(self) -> None:
        part, self._part = self._part, None
        if isinstance(part, _FilePart):
            upload = part.close()
            if part.name:
                self.files[part.name] = upload
        elif part is not None and part.name:
            self.fields[part.name] = part.data.decode("utf-8", errors="replace")
