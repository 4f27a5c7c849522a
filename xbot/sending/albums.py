"""How a post's media become Telegram sends: single items and albums, in post order.

Pure functions, no I/O. Telegram's rules (Bot API):

- ``sendMediaGroup`` takes 2-10 items; photos and videos may mix in one group.
- GIFs (``sendAnimation``) cannot be in a media group at all.
- One item alone goes by ``sendPhoto`` / ``sendVideo`` / ``sendAnimation``.
- Documents (photos sent as files, for their original quality) group only
  with documents, and audio (a video's sound alone) only with audio.

So a post is split around its GIFs into runs of photos and videos; a run of
one is a single send, a longer run becomes albums balanced so that none is
left with a single item (11 items: 6 + 5, not 10 + 1).

The caption goes on the first item of the first step, so it shows once, under
the first thing the chat sees; the sender attaches it there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, TypeVar

import attrs

from xbot.media.models import MediaKind

__all__ = [
    "MAX_GROUP",
    "PlanKind",
    "SendMethod",
    "SendStep",
    "one_send",
    "plan_albums",
    "plan_sends",
]

T = TypeVar("T")

SendMethod = Literal["photo", "video", "animation", "document", "audio", "media_group"]
PlanKind = MediaKind | Literal["document", "audio"]

MAX_GROUP = 10  # sendMediaGroup's upper bound

_SINGLE: dict[PlanKind, SendMethod] = {
    "photo": "photo",
    "video": "video",
    "gif": "animation",
    "document": "document",
    "audio": "audio",
}
# Which kinds may share an album: photos with videos, documents with documents, audio
# with audio.
_ALBUM_CLASS: dict[PlanKind, str] = {
    "photo": "visual",
    "video": "visual",
    "document": "file",
    "audio": "audio",
}


@attrs.frozen
class SendStep:
    """One Telegram call of a post's delivery.

    Attributes:
        method: ``photo``, ``video``, ``animation`` (one item) or ``media_group`` (2-10).
        items: indices into the post's media, in post order.
    """

    method: SendMethod
    items: tuple[int, ...]


def plan_albums(items: Sequence[T], size: int = MAX_GROUP) -> list[list[T]]:
    """``items`` in order, in as few chunks of at most ``size`` as possible, balanced.

    Chunk sizes differ by at most one (larger first), so no chunk is a lone
    item unless ``items`` is: 11 -> 6 + 5, 21 -> 7 + 7 + 7, 20 -> 10 + 10.
    """
    if size < 3:
        # With chunks of two, an odd count always leaves one item alone.
        raise ValueError(f"album size must be at least 3, got {size}")
    count = len(items)
    if count == 0:
        return []
    chunks = -(-count // size)  # ceiling division
    base, extra = divmod(count, chunks)
    out: list[list[T]] = []
    start = 0
    for n in range(chunks):
        end = start + base + (1 if n < extra else 0)
        out.append(list(items[start:end]))
        start = end
    return out


def plan_sends(kinds: Sequence[PlanKind]) -> list[SendStep]:
    """The Telegram calls that send media of these kinds, in post order.

    GIFs are sent alone where they stand; the photos and videos between
    them go as a single send (one item) or as balanced albums, and so do
    runs of documents.
    """
    steps: list[SendStep] = []
    run: list[int] = []

    def flush() -> None:
        if len(run) == 1:
            steps.append(SendStep(_SINGLE[kinds[run[0]]], (run[0],)))
        else:
            steps.extend(SendStep("media_group", tuple(chunk)) for chunk in plan_albums(run))
        run.clear()

    for index, kind in enumerate(kinds):
        if kind == "gif":
            flush()
            steps.append(SendStep("animation", (index,)))
            continue
        if run and _ALBUM_CLASS[kinds[run[0]]] != _ALBUM_CLASS[kind]:
            flush()
        run.append(index)
    flush()
    return steps


def one_send(kinds: Sequence[PlanKind]) -> bool:
    """These items (at most 10) go as one message or one album: photos and videos
    together, or documents only; never a GIF beside anything."""
    return len(plan_sends(kinds)) == 1
