"""Webhook updates already answered 200, so that a redelivery is answered, not handled again.

The ``webhook_updates`` table (migration 0008): the listener (`xbot.receiving.webhook`)
marks an update once its handlers queued the work and before it answers 200; an
update Telegram sends again (a lost answer, its own timeout) is then found here
and answered 200 at once. One short write per update; the sweep prunes by age.
"""

from __future__ import annotations

import apsw
import attrs

from xbot.storage.db import DbPool

KEEP = 2 * 86400.0  # Telegram keeps an unconfirmed update for at most 24 hours


def _answered(conn: apsw.Connection, update_id: int) -> bool:
    rows = conn.execute(
        "SELECT 1 FROM webhook_updates WHERE update_id = ?", (update_id,)
    ).fetchall()
    return bool(rows)


def _mark(conn: apsw.Connection, update_id: int, now: float) -> None:
    conn.execute(
        "INSERT INTO webhook_updates (update_id, answered_at) VALUES (?, ?)"
        " ON CONFLICT (update_id) DO NOTHING",
        (update_id, now),
    )


def _prune(conn: apsw.Connection, before: float) -> int:
    rows = conn.execute(
        "DELETE FROM webhook_updates WHERE answered_at < ? RETURNING 1", (before,)
    ).fetchall()
    return len(rows)


@attrs.define
class AnsweredUpdates:
    """The update ids the webhook listener has confirmed to Telegram.

    Attributes:
        pool: the database.
    """

    pool: DbPool

    async def answered(self, update_id: int) -> bool:
        return await self.pool.read(lambda conn: _answered(conn, update_id))

    async def mark(self, update_id: int, now: float) -> None:
        await self.pool.write(lambda conn: _mark(conn, update_id, now))

    async def prune(self, now: float, older_than: float = KEEP) -> int:
        """Forget updates answered more than `older_than` seconds ago; how many went."""
        return await self.pool.write(lambda conn: _prune(conn, now - older_than))
