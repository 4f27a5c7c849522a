"""Stored times across restarts: where the bot's time line is, and the start-up rebase.

Every time in the database (due times, lease expiries, holds, creation and
update times, record expiries, cache ages) is on the bot's time line
(`xbot.clock.TimeLine`), which a running process never moves. The
``time_line`` row says where it was anchored (boot, monotonic reading, value)
and, at each sweep and each step noticed, how far it was ahead of the wall
clock (``offset``) and how far it had got (``seen``).

At start-up, under the instance lock and before any worker runs, `resume`
works out where the old line is now, and `rebase` shifts every stored time
onto the wall clock by the difference, in one transaction; the new process's
line then starts at the wall clock. Where the old line is now (`resume_line`,
pure, its table of cases in tests/test_time_line.py):

- **Same boot** (a crash, a restart, a deploy): exactly known. The monotonic
  clock is the boot's, shared by every process, so the line is its anchor plus
  the monotonic seconds since, however the wall clock stepped meanwhile: a task
  due in 30 s at the stop is due 30 s after it, less the downtime.
- **Another boot**: the real time that passed is unknown. The bot assumes the
  wall clock is right and that the wall-clock time since the last sweep really
  passed, with the offset the last process knew of taken off; but never that
  the line went back: if the wall clock is behind the latest time written, the
  clock went back while the bot was down, and the line resumes at that latest
  time (no downtime assumed), so nothing waits longer than its own delay.

Then `clamp` makes that a bound whatever the rows say (an older database, a
crash between a step and its mark): no pending task is due, and no chat is
held, further than `LONGEST_DELAY` from now (the queue never writes one
further: `xbot.storage.queue`); nothing was created or updated after now.

Other processes (``xbot queue``, ``xbot doctor``) read the line with `line_now`.
"""

from __future__ import annotations

import math
from typing import Final

import apsw
import attrs

from xbot.clock import Clocks, Reading, TimeLine, read
from xbot.storage.chat_state import records_from_json, records_to_json
from xbot.storage.db import DbPool

# The longest any task is made to wait, from the moment its due time or its chat's
# hold is written: backoff (600 s cap), an outage look (120 s), a Telegram
# retry_after (held at most this long; asked again then). The queue enforces it.
LONGEST_DELAY: Final = 3600.0
# A rebase smaller than this is not worth rewriting the tables for.
REBASE_TOLERANCE: Final = 1.0


@attrs.frozen
class Anchor:
    """The ``time_line`` row.

    Attributes:
        boot_id: the boot it was anchored in ("" when unknown: never the same boot).
        mono: the monotonic reading at the anchor.
        line: the line's value at that reading.
        seen: the latest value of the line known to have been reached.
        offset: how far the line was ahead of the wall clock at `seen`.
    """

    boot_id: str
    mono: float
    line: float
    seen: float
    offset: float


def resume_line(
    anchor: Anchor | None, boot_id: str, now: Reading, latest: float | None = None
) -> float:
    """Where the stored line is now (see the module's rules); ``latest``: the latest time stored."""
    same_boot = (
        anchor is not None and anchor.boot_id != "" and anchor.boot_id == boot_id
    ) and now.mono >= anchor.mono
    if anchor is not None and same_boot:
        line = anchor.line + (now.mono - anchor.mono)
    else:
        line = now.wall + (anchor.offset if anchor is not None else 0.0)
    stored = (latest, anchor.seen if anchor is not None else None)
    floor = max((t for t in stored if t is not None and math.isfinite(t)), default=None)
    return line if floor is None else max(line, floor)


def clamp_due(due: float, now: float, longest: float = LONGEST_DELAY) -> float:
    """A stored due time, never further than ``longest`` from ``now``."""
    return min(due, now + longest)


def _anchor(conn: apsw.Connection) -> Anchor | None:
    rows = conn.execute("SELECT boot_id, mono, line, seen, offset FROM time_line").fetchall()
    if not rows:
        return None
    boot, mono, line, seen, offset = rows[0]
    return Anchor(str(boot), float(mono), float(line), float(seen), float(offset))  # type: ignore[arg-type]


# The latest time anything was written, over every table that records one (a
# scalar max() is NULL if any argument is: each is coalesced; -1 is "none").
_LATEST_SQL: Final = """
SELECT max(
    coalesce((SELECT max(updated_at) FROM tasks), -1),
    coalesce((SELECT max(updated_at) FROM chat_state), -1),
    coalesce((SELECT max(created_at) FROM link_cache), -1))
"""


def _latest(conn: apsw.Connection) -> float | None:
    value = conn.execute(_LATEST_SQL).fetchall()[0][0]
    return None if value is None or float(value) < 0 else float(value)


_SHIFT_SQL: Final = (
    "UPDATE tasks SET run_after = run_after + :s, created_at = created_at + :s,"
    " updated_at = updated_at + :s, lease_expires = lease_expires + :s",
    "UPDATE chat_holds SET not_before = not_before + :s",
    "UPDATE chat_state SET updated_at = updated_at + :s",
    "UPDATE link_cache SET created_at = created_at + :s",
)
_CLAMP_SQL: Final = (
    "UPDATE tasks SET run_after = :far WHERE state = 'pending' AND run_after > :far",
    "UPDATE chat_holds SET not_before = :far WHERE not_before > :far",
    "UPDATE tasks SET created_at = :now WHERE created_at > :now",
    "UPDATE tasks SET updated_at = :now WHERE updated_at > :now",
    "UPDATE chat_state SET updated_at = :now WHERE updated_at > :now",
    "UPDATE link_cache SET created_at = :now WHERE created_at > :now",
)


def _shift_records(conn: apsw.Connection, shift: float) -> None:
    """Each short-lived record's expiry moves with the line (they live in a JSON column)."""
    rows = conn.execute("SELECT chat_id, records FROM chat_state WHERE records != '{}'").fetchall()
    for chat_id, text in rows:
        records = records_from_json(text if isinstance(text, str | bytes) else None)
        moved = {k: attrs.evolve(r, expires_at=r.expires_at + shift) for k, r in records.items()}
        conn.execute(
            "UPDATE chat_state SET records = ? WHERE chat_id = ?", (records_to_json(moved), chat_id)
        )


def rebase(conn: apsw.Connection, shift: float, now: float) -> int:
    """Every stored time plus ``shift``, then `clamp`ed at ``now``; returns the rows clamped.

    Inside the caller's transaction: all of it lands, or none.
    """
    if shift:
        for sql in _SHIFT_SQL:
            conn.execute(sql, {"s": shift})
        _shift_records(conn, shift)
    clamped = 0
    for sql in _CLAMP_SQL:
        conn.execute(sql, {"far": clamp_due(math.inf, now), "now": now})
        clamped += conn.changes()
    # The lanes (each chat's head, xbot.storage.queue's claim) follow: their triggers keep
    # them right after every row an UPDATE rewrites (tests/test_time_line.py, the order).
    return clamped


_MARK_SQL: Final = """
INSERT INTO time_line (id, boot_id, mono, line, seen, offset)
VALUES (1, :boot, :mono, :line, :seen, :offset)
ON CONFLICT (id) DO UPDATE SET boot_id = excluded.boot_id, mono = excluded.mono,
    line = excluded.line, seen = excluded.seen, offset = excluded.offset
"""


def _write_anchor(conn: apsw.Connection, line: TimeLine) -> None:
    params = {
        "boot": line.clocks.boot_id(),
        "mono": line.anchor,
        "line": line.start,
        "seen": line.now(),
        "offset": line.offset(),
    }
    conn.execute(_MARK_SQL, params)


@attrs.frozen
class Resumed:
    """What the start-up did: the new line, the shift applied, the rows clamped."""

    line: TimeLine
    shift: float
    clamped: int


def _resume(conn: apsw.Connection, clocks: Clocks) -> Resumed:
    reading = read(clocks)
    old = resume_line(_anchor(conn), clocks.boot_id(), reading, _latest(conn))
    shift = reading.wall - old
    if abs(shift) < REBASE_TOLERANCE:
        shift = 0.0
    clamped = rebase(conn, shift, reading.wall)
    line = TimeLine(clocks, reading.wall, reading.mono)
    _write_anchor(conn, line)
    return Resumed(line, shift, clamped)


async def resume(pool: DbPool, clocks: Clocks) -> Resumed:
    """At start-up, under the instance lock: rebase what is stored onto the wall clock.

    One transaction: the shift, the clamp, the lanes and the new anchor.
    """
    return await pool.write(lambda conn: _resume(conn, clocks))


def _mark(conn: apsw.Connection, line: TimeLine) -> None:
    conn.execute(
        "UPDATE time_line SET seen = :seen, offset = :offset WHERE id = 1",
        {"seen": line.now(), "offset": line.offset()},
    )


async def mark(pool: DbPool, line: TimeLine) -> None:
    """How far the line has got and how far it is from the wall clock (each sweep, each step)."""
    await pool.write(lambda conn: _mark(conn, line))


def stored_offset(conn: apsw.Connection) -> float:
    """How far the line was ahead of the wall clock at its last mark (0: no step seen)."""
    anchor = _anchor(conn) if _has_table(conn) else None
    return 0.0 if anchor is None else anchor.offset


def line_now(conn: apsw.Connection, clocks: Clocks) -> float:
    """The stored line's now, for a process that does not own it (``xbot queue``, doctor)."""
    anchor = _anchor(conn) if _has_table(conn) else None
    return resume_line(anchor, clocks.boot_id(), read(clocks))


def _has_table(conn: apsw.Connection) -> bool:
    rows = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'time_line'"
    ).fetchall()
    return bool(rows)
