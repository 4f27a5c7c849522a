"""Files the Bot API stand-in holds: uploads, media it fetched by URL, file_ids, photo sizes.

Fetching by URL behaves like Telegram's servers: bounded in size (photos 5 MB,
the rest 20 MB) and time, redirects followed, the content type checked per
kind, and hosts on loopback/private networks unreachable unless the switch
says otherwise (Telegram's fetchers live on the public internet).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import ipaddress
import os
import secrets
import shutil
import tempfile
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import httpx

from standins._mediabytes import image_size
from standins.botapi._wire import (
    JSON,
    PHOTO_UPLOAD_LIMIT,
    PHOTO_URL_LIMIT,
    URL_FETCH_FAILED,
    URL_LIMIT,
    URL_WRONG_TYPE,
    WRONG_FILE_ID,
    ApiError,
    Upload,
    bad_request,
)

# What Telegram accepts at a URL, per kind (Bot API: sendDocument by URL only GIF, PDF, ZIP).
URL_TYPES = {
    "photo": ("image/jpeg", "image/png", "image/webp", "image/gif", "image/bmp"),
    "video": ("video/mp4",),
    "animation": ("video/mp4", "image/gif"),
    "document": ("application/pdf", "application/zip", "image/gif"),
}
_FILE_ID_PREFIX = {
    "photo": "AgACAgIAAxkBAA",
    "video": "BAACAgIAAxkBAA",
    "animation": "CgACAgIAAxkBAA",
    "document": "BQACAgIAAxkBAA",
    "audio": "CQACAgIAAxkBAA",
}
_PHOTO_STEPS = (90, 320, 800, 1280)  # Telegram's thumbnail sizes s, m, x, y
_PHOTO_MAX_SIDE = 2560
_MAX_REDIRECTS = 5


@attrs.frozen
class StoredFile:
    """A file the stand-in holds, reachable by its `file_id` (and its photo sizes' ids).

    Attributes:
        kind: photo, video, animation or document.
        size: bytes; `sha256`: hex digest of them.
        source: ``upload`` or ``url``.
        photo_sizes: for photos, Telegram's PhotoSize dicts, largest (the original) last.
    """

    file_id: str
    file_unique_id: str
    kind: str
    size: int
    sha256: str
    filename: str
    mime_type: str
    path: Path
    source: str
    width: int = 0
    height: int = 0
    duration: int = 0
    photo_sizes: tuple[JSON, ...] = ()
    performer: str = ""
    title: str = ""
    thumbnail: JSON | None = None

    @property
    def file_path(self) -> str:
        """The `file_path` getFile reports (and the file URL serves)."""
        folder = {"photo": "photos", "video": "videos", "animation": "animations"}.get(
            self.kind, "documents"
        )
        suffix = Path(self.filename).suffix or ".bin"
        return f"{folder}/file_{self.file_unique_id}{suffix}"


def int_or(value: Any, default: int) -> int:
    if isinstance(value, bool) or value is None:
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def kind_compatible(stored: str, wanted: str) -> bool:
    if stored == wanted:
        return True
    # Telegram sends an animation's file_id as a document and a document GIF as an animation.
    return {stored, wanted} == {"animation", "document"}


def media_content(kind: str, info: StoredFile, params: JSON) -> JSON:
    """The Message fields for a media message of `kind` carrying `info`."""
    if kind == "photo":
        return {"photo": list(info.photo_sizes)}
    base: JSON = {
        "file_id": info.file_id,
        "file_unique_id": info.file_unique_id,
        "file_size": info.size,
        "file_name": info.filename,
        "mime_type": info.mime_type,
    }
    if kind == "document" and info.kind != "animation":
        return {"document": base}
    if kind == "audio":
        return {"audio": audio_fields(info, base)}
    media = {
        **base,
        "width": int_or(params.get("width"), info.width),
        "height": int_or(params.get("height"), info.height),
        "duration": int_or(params.get("duration"), info.duration),
    }
    if kind == "animation" or info.kind == "animation":
        # Telegram shows an animation as both, for clients that predate animations.
        return {"animation": media, "document": base}
    return {"video": media}


def audio_fields(info: StoredFile, base: JSON) -> JSON:
    """Telegram's Audio: ``duration`` always; performer, title and the thumbnail (a
    PhotoSize) as they were sent with the upload, kept with the file like Telegram does."""
    audio: JSON = {**base, "duration": info.duration}
    if info.performer:
        audio["performer"] = info.performer
    if info.title:
        audio["title"] = info.title
    if info.thumbnail is not None:
        audio["thumbnail"] = info.thumbnail
    return audio


def _audio_thumbnail(files: dict[str, Upload], params: JSON) -> JSON | None:
    """An audio upload's thumbnail part (``attach://<part>``, or a part named thumbnail)
    as a PhotoSize; Telegram takes a JPEG of at most 320 x 320."""
    value = params.get("thumbnail")
    name = value.removeprefix("attach://") if isinstance(value, str) else "thumbnail"
    part = files.get(name)
    if part is None:
        return None
    sniffed = image_size(part.read())
    if sniffed is None or sniffed[0] != "jpeg" or max(sniffed[1], sniffed[2]) > 320:
        return None
    return {
        "file_id": _FILE_ID_PREFIX["photo"] + secrets.token_urlsafe(40),
        "file_unique_id": "AQAD" + secrets.token_urlsafe(9)[:12],
        "file_size": part.size,
        "width": sniffed[1],
        "height": sniffed[2],
    }


class FileStore:
    """file_id -> StoredFile, bytes in a private temp dir removed when the store is collected."""

    def __init__(
        self,
        *,
        allow_loopback: bool,
        fetch_timeout: float,
        upload_limit: int,
    ) -> None:
        self.allow_loopback = allow_loopback
        self.fetch_timeout = fetch_timeout
        self.upload_limit = upload_limit
        self._lock = threading.RLock()
        self._files: dict[str, StoredFile] = {}
        self._invalid: set[str] = set()
        self._dir = Path(tempfile.mkdtemp(prefix="botapi-standin-"))
        weakref.finalize(self, shutil.rmtree, self._dir, True)
        self._client: httpx.AsyncClient | None = None

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def get(self, file_id: str) -> StoredFile | None:
        """The file, unless unknown or invalidated."""
        with self._lock:
            if file_id in self._invalid:
                return None
            return self._files.get(file_id)

    def by_path(self, file_path: str) -> StoredFile | None:
        with self._lock:
            return next((f for f in self._files.values() if f.file_path == file_path), None)

    def invalidate(self, file_id: str) -> None:
        with self._lock:
            info = self._files.get(file_id)
            self._invalid.add(file_id)
            if info is not None:
                self._invalid |= {s["file_id"] for s in info.photo_sizes} | {info.file_id}

    async def resolve(
        self,
        kind: str,
        value: Any,
        part: Upload | None,
        files: dict[str, Upload],
        params: JSON,
    ) -> StoredFile:
        """A media parameter: an upload, an ``attach://`` part, a URL or a file_id."""
        if part is None and isinstance(value, str) and value.startswith("attach://"):
            part = files.get(value.removeprefix("attach://"))
            if part is None:
                raise bad_request(WRONG_FILE_ID)
        if part is not None:
            stored = self._store_upload(kind, part, params)
            if kind == "audio":
                stored = attrs.evolve(
                    stored,
                    performer=str(params.get("performer") or ""),
                    title=str(params.get("title") or ""),
                    thumbnail=_audio_thumbnail(files, params),
                )
                with self._lock:
                    self._files[stored.file_id] = stored
            return stored
        if not isinstance(value, str) or not value:
            raise bad_request(f"Bad Request: there is no {kind} in the request")
        if value.lower().startswith(("http://", "https://")):
            data, ctype = await self._fetch(value, kind)
            if ctype not in URL_TYPES.get(kind, ()):
                raise bad_request(URL_WRONG_TYPE)
            name = value.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1] or kind
            return self.store_checked(
                kind, data, filename=name, mime=ctype, source="url", params=params
            )
        info = self.get(value)
        if info is None:
            raise bad_request(WRONG_FILE_ID)
        if not kind_compatible(info.kind, kind):
            raise bad_request(
                f"Bad Request: can't use file of type {info.kind.title()} as {kind.title()}"
            )
        return info

    @contextlib.contextmanager
    def incoming(self) -> Iterator[Path]:
        """A folder for one request's uploaded parts; what was not stored goes with it."""
        folder = Path(tempfile.mkdtemp(prefix="incoming-", dir=self._dir))
        try:
            yield folder
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def _store_upload(self, kind: str, part: Upload, params: JSON) -> StoredFile:
        size = part.size
        if kind == "photo" and size > PHOTO_UPLOAD_LIMIT:
            raise bad_request("Bad Request: PHOTO_SAVE_FILE_INVALID")
        if size > self.upload_limit:
            raise ApiError(413, "Request Entity Too Large")
        return self.store_checked(
            kind,
            part,
            filename=part.filename,
            mime=part.content_type,
            source="upload",
            params=params,
        )

    def store_checked(
        self,
        kind: str,
        data: bytes | Upload,
        *,
        filename: str,
        mime: str,
        source: str,
        params: JSON,
    ) -> StoredFile:
        """Store after Telegram's checks: non-empty, photos decodable and of sane shape."""
        if not (data.size if isinstance(data, Upload) else data):
            raise bad_request("Bad Request: file must be non-empty")
        if kind == "document" and mime == "image/gif":
            kind = "animation"
        if kind == "photo":
            sniffed = image_size(data.read() if isinstance(data, Upload) else data)
            if sniffed is None:
                raise bad_request("Bad Request: IMAGE_PROCESS_FAILED")
            _, w, h = sniffed
            if w + h > 10000 or max(w, h) > 20 * min(w, h):
                raise bad_request("Bad Request: PHOTO_INVALID_DIMENSIONS")
        return self.store(kind, data, filename, mime, source=source, params=params)

    def store(
        self,
        kind: str,
        data: bytes | Upload,
        filename: str,
        mime: str,
        *,
        source: str = "upload",
        params: JSON | None = None,
    ) -> StoredFile:
        """Store `data` as a new file with fresh ids; no checks.

        An `Upload` is moved into place, not copied: its digest was taken as it arrived.
        """
        params = params or {}
        file_id = _FILE_ID_PREFIX[kind] + secrets.token_urlsafe(40)
        unique = ("AQAD" if kind == "photo" else "AgAD") + secrets.token_urlsafe(9)[:12]
        path = self._dir / unique
        if isinstance(data, Upload):
            os.replace(data.path, path)
            size, digest = data.size, data.sha256
        else:
            path.write_bytes(data)
            size, digest = len(data), hashlib.sha256(data).hexdigest()
        w = h = 0
        sizes: tuple[JSON, ...] = ()
        if kind == "photo":
            head = data if isinstance(data, bytes) else path.read_bytes()  # 10 MB at most
            _, w, h = image_size(head) or ("", 1, 1)
            sizes = _photo_sizes(file_id, unique, w, h, size)
        info = StoredFile(
            file_id=file_id,
            file_unique_id=unique,
            kind=kind,
            size=size,
            sha256=digest,
            filename=filename,
            mime_type=mime,
            path=path,
            source=source,
            width=int_or(params.get("width"), w),
            height=int_or(params.get("height"), h),
            duration=int_or(params.get("duration"), 0),
            photo_sizes=sizes,
        )
        with self._lock:
            self._files[file_id] = info
            for step in sizes:
                self._files[step["file_id"]] = info
        return info

    async def _fetch(self, url: str, kind: str) -> tuple[bytes, str]:
        """GET `url` like Telegram's fetchers; any failure is "failed to get HTTP URL content"."""
        limit = PHOTO_URL_LIMIT if kind == "photo" else URL_LIMIT
        if self._client is None:
            self._client = httpx.AsyncClient(
                trust_env=False,
                follow_redirects=False,
                timeout=httpx.Timeout(self.fetch_timeout),
                headers={"User-Agent": "TelegramBot (like TwitterBot)"},
            )
        try:
            async with asyncio.timeout(self.fetch_timeout):
                for _ in range(_MAX_REDIRECTS + 1):
                    parsed = httpx.URL(url)
                    if parsed.scheme not in ("http", "https") or not parsed.host:
                        raise bad_request(WRONG_FILE_ID)
                    default_port = 443 if parsed.scheme == "https" else 80
                    await self._check_host(parsed.host, parsed.port or default_port)
                    async with self._client.stream("GET", url) as response:
                        if response.is_redirect:
                            url = str(parsed.join(response.headers.get("location", "")))
                            continue
                        if response.status_code != 200:
                            raise bad_request(URL_FETCH_FAILED)
                        length = response.headers.get("content-length", "")
                        if length.isdigit() and int(length) > limit:
                            raise bad_request(URL_FETCH_FAILED)
                        buf = bytearray()
                        async for chunk in response.aiter_bytes():
                            buf += chunk
                            if len(buf) > limit:
                                raise bad_request(URL_FETCH_FAILED)
                        ctype = response.headers.get("content-type", "")
                        return bytes(buf), ctype.split(";", 1)[0].strip().lower()
                raise bad_request(URL_FETCH_FAILED)  # too many redirects
        except (httpx.HTTPError, TimeoutError, OSError):
            raise bad_request(URL_FETCH_FAILED) from None

    async def _check_host(self, host: str, port: int) -> None:
        if self.allow_loopback:
            return
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(host, port)
        except OSError:
            raise bad_request(URL_FETCH_FAILED) from None
        for info in infos:
            ip = ipaddress.ip_address(info[4][0])
            if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
                ip = ip.ipv4_mapped
            if not ip.is_global or ip.is_multicast:
                # Telegram's fetchers live on the public internet: they cannot reach these.
                raise bad_request(URL_FETCH_FAILED)


def _photo_sizes(file_id: str, unique: str, w: int, h: int, size: int) -> tuple[JSON, ...]:
    """Telegram's ladder of sizes; the largest is the original (same bytes, same size)."""
    longest = max(w, h)
    out: list[JSON] = []
    for step in _PHOTO_STEPS:
        if longest > step:
            scale = step / longest
            sw, sh = max(1, round(w * scale)), max(1, round(h * scale))
            out.append(
                {
                    "file_id": _FILE_ID_PREFIX["photo"] + secrets.token_urlsafe(40),
                    "file_unique_id": "AQAD" + secrets.token_urlsafe(9)[:12],
                    "file_size": max(1, size * sw * sh // max(1, w * h)),
                    "width": sw,
                    "height": sh,
                }
            )
    if longest > _PHOTO_MAX_SIDE:
        scale = _PHOTO_MAX_SIDE / longest
        w, h = max(1, round(w * scale)), max(1, round(h * scale))
    out.append(
        {"file_id": file_id, "file_unique_id": unique, "file_size": size, "width": w, "height": h}
    )
    return tuple(out)
