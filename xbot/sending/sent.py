"""What Telegram confirmed it holds: a media item, by the file_id it gave it.

The sender returns these; task payloads record them (`xbot.tasks.payloads`),
so a retry resends nothing and a cache hit or a forward sends by file_id.
"""

from __future__ import annotations

from typing import Final, Literal

import attrs

__all__ = ["OUT_KINDS", "OutKind", "SentItem"]

# How an item goes out: its Bot API method (sendPhoto, sendVideo, sendAnimation,
# sendDocument, sendAudio) and its kind in an album.
OutKind = Literal["photo", "video", "gif", "document", "audio"]
OUT_KINDS: Final = ("photo", "video", "gif", "document", "audio")


@attrs.frozen
class SentItem:
    """One media item Telegram confirmed, by the file_id it gave it."""

    kind: OutKind
    file_id: str
