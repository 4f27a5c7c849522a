"""The one rule for a forum topic that is gone: answer in General, once.

A topic can be closed or deleted between the link and the answer (Telegram
then refuses the send: "message thread not found", ``TOPIC_CLOSED``). The
answer is not lost and not retried into the same refusal: it goes once more,
to General, without the quote (a reply lands in its target's topic, which is
the closed one; in a deleted topic the target is gone anyway). A send that
already went to General is not moved again, so the rule cannot loop.
"""

from __future__ import annotations

from typing import Final

from xbot.sending.destination import Destination

__all__ = ["TOPIC_GONE", "fallback"]

# Telegram's texts (lower-cased substrings) for a topic that cannot take the message.
TOPIC_GONE: Final = ("message thread not found", "topic_closed", "topic_deleted")


def fallback(dest: Destination, error: str) -> Destination | None:
    """Where to send again after Telegram refused `dest` with `error`, or None: not a
    refusal about the topic, or `dest` is General already (no topic, no quote)."""
    if dest.topic_id is None and dest.reply_to is None:
        return None
    text = error.lower()
    if not any(s in text for s in TOPIC_GONE):
        return None
    return dest.in_general().without_reply()
