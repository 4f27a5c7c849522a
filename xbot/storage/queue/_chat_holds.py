"""Chat holds (Telegram's ``retry_after``): no task of a held chat starts before its hold ends.

The claim (`_lease`) skips held chats; these write the
``chat_holds`` table (one row per held chat, a handful at most).
"""

from __future__ import annotations

import apsw


def hold_chat(conn: apsw.Connection, chat_id: int, until: float) -> float:
    rows = conn.execute(
        "INSERT INTO chat_holds (chat_id, not_before) VALUES (?, ?)"
        " ON CONFLICT (chat_id) DO UPDATE SET not_before = max(not_before, excluded.not_before)"
        " RETURNING not_before",
        (chat_id, until),
    ).fetchall()
    return float(rows[0][0])  # type: ignore[arg-type]


def release_expired_holds(conn: apsw.Connection, now: float) -> int:
    # One row per held chat, a handful at most: the scan is fine.
    rows = conn.execute("DELETE FROM chat_holds WHERE not_before <= ? RETURNING 1", (now,))
    return len(rows.fetchall())


def move_chat(conn: apsw.Connection, old_chat_id: int, new_chat_id: int) -> int:
    """A group became a supergroup: its tasks and its hold follow it (rare: a scan is fine)."""
    moved = conn.execute(
        "UPDATE tasks SET chat_id = ? WHERE chat_id = ? RETURNING 1", (new_chat_id, old_chat_id)
    ).fetchall()
    hold = conn.execute(
        "DELETE FROM chat_holds WHERE chat_id = ? RETURNING not_before", (old_chat_id,)
    ).fetchall()
    if hold:
        hold_chat(conn, new_chat_id, float(hold[0][0]))  # type: ignore[arg-type]
    return len(moved)
