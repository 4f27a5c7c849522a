"""The operator's commands behind `xbot queue|cache|backup|doctor|migrate`.

Each takes the settings and an output stream and returns the exit status:
0 done, 1 the thing asked about is not there or not in a state that allows
it, 2 (raised as `StoreError`/`ConfigError`, printed by `xbot.cli` as one
line) the database or the configuration cannot be used.

They work on the live database next to a running bot: every operation is
one short transaction, and none of them migrates. A database that is not
at this xbot's schema version is refused with what to do (``xbot migrate``
or an upgrade), so a newer CLI never changes the schema under an older bot.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import BinaryIO, Final, TextIO, TypeVar

from xbot.clock import SystemClocks
from xbot.config import Settings
from xbot.durations import say_span
from xbot.errors import StoreError
from xbot.storage import db, migrations
from xbot.storage.backup import backup, backup_to_stream
from xbot.storage.db import DbPool, prepare_store
from xbot.storage.link_cache import LinkCache, link_key
from xbot.storage.queue import STATES, Task, TaskQueue, lost_lease_budget
from xbot.storage.time_line import line_now
from xbot.tasks.payloads import payload_identity

COLUMN: Final = "compact"  # ages in the listings: one unit, so a column stays narrow

T = TypeVar("T")

EXIT_OK = 0
EXIT_NO = 1

OPERATOR_DOC = "docs/deployment.md, 'Operator commands'"

_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", re.IGNORECASE)
_UNIT = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str) -> float:
    """``90``, ``90s``, ``30m``, ``12h``, ``7d``, ``2w`` → seconds. Raises ValueError."""
    match = _DURATION.fullmatch(text)
    if match is None:
        raise ValueError(f"{text!r} is not a duration (e.g. 90s, 30m, 12h, 7d)")
    return float(match.group(1)) * _UNIT[match.group(2).lower()]


# --- the database, as an operator opens it ---------------------------------------------------


def check_owner(path: Path, euid: int | None = None) -> None:
    """Refuse root on a database that belongs to the service's (dynamic) user.

    SQLite creates the ``-wal`` and ``-shm`` files beside the database when it
    opens it; made by root they would belong to root, and the bot, running as
    its own user, could no longer open its database.
    """
    uid = os.geteuid() if euid is None else euid
    folder = path.parent
    try:
        owner = folder.stat().st_uid
    except OSError:
        return  # not there: the callers say so in their own words
    if uid == 0 and owner != 0:
        raise StoreError(
            f"{folder} belongs to uid {owner} (the service's user) but this runs as root, "
            "which would leave root-owned files there and lock the bot out; run it as the "
            f"service's user: `sudo xbotctl ...` ({OPERATOR_DOC})"
        )


def schema_version(path: Path) -> int:
    """The database's schema version, read without creating or changing anything."""
    if not path.is_file():
        raise StoreError(
            f"there is no database at {path} (is XBOT_DATA_DIR right? `xbot run` creates it)"
        )
    return db.schema_version(path)


def require_current(path: Path) -> None:
    """The database must be at exactly this xbot's schema version."""
    version = schema_version(path)
    latest = migrations.latest_version()
    if version > latest:
        raise migrations.too_new(version, latest, path, advice="use that version's `xbot`")
    if version < latest:
        raise StoreError(
            f"the database {path} is at schema version {version}, this xbot at {latest}: "
            "restart the bot (it migrates on start) or run `xbot migrate` first"
        )


async def with_pool(settings: Settings, fn: Callable[[DbPool], Awaitable[T]]) -> T:
    """Open the existing, current database (never create, never migrate), run `fn`, close."""
    path = settings.db_path
    check_owner(path)
    require_current(path)
    pool = DbPool(path, size=1)
    await asyncio.to_thread(pool.open)
    try:
        return await fn(pool)
    finally:
        await pool.close()


def _run(settings: Settings, fn: Callable[[DbPool], Awaitable[T]]) -> T:
    return asyncio.run(with_pool(settings, fn))


# --- queue ------------------------------------------------------------------------------------


async def _line(pool: DbPool, now: float | None) -> float:
    """``now`` on the bot's time line (a running bot's, even after a step), unless given."""
    if now is not None:
        return now
    return await pool.read(partial(line_now, clocks=SystemClocks()))


async def _on_line(pool: DbPool, now: float | None, fn: Callable[[float], Awaitable[T]]) -> T:
    return await fn(await _line(pool, now))


def queue_stats(settings: Settings, out: TextIO, *, now: float | None = None) -> int:
    stats = _run(settings, lambda pool: _on_line(pool, now, TaskQueue(pool).stats))
    for state in STATES:
        out.write(f"{state:<8} {stats.counts_by_state.get(state, 0)}\n")
    oldest = stats.oldest_pending_age
    out.write(
        f"oldest pending: {'none' if oldest is None else say_span(oldest, COLUMN) + ' overdue'}\n"
    )
    out.write(f"chats on hold (Telegram 429): {stats.held_chats}\n")
    return EXIT_OK


def _describe(task: Task) -> str:
    ident = payload_identity(task.payload)
    return ident.get("url") or ident.get("key") or ""


def _one_line(text: str | None, width: int) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def queue_list(
    settings: Settings,
    out: TextIO,
    *,
    state: str | None = None,
    chat_id: int | None = None,
    limit: int = 50,
    now: float | None = None,
) -> int:
    async def listing(pool: DbPool) -> tuple[float, list[Task]]:
        return await _line(pool, now), await TaskQueue(pool).list(state, chat_id, limit)

    at, tasks = _run(settings, listing)
    if not tasks:
        out.write("no tasks\n")
        return EXIT_OK
    # "lost": lost leases in a row without progress (process deaths, expiries), which
    # are not attempts: the task is buried at lost_lease_budget(max_attempts).
    out.write(f"{'id':>8}  {'state':<7}  {'chat':>15}  {'kind':<8}  try  lost  {'age':>5}  what\n")
    for t in tasks:
        what = _describe(t)
        if t.last_error and t.state in ("dead", "pending"):
            what = f"{what}  [{_one_line(t.last_error, 60)}]"
        out.write(
            f"{t.id:>8}  {t.state:<7}  {t.chat_id:>15}  {_one_line(t.kind, 8):<8}  "
            f"{t.attempts}/{t.max_attempts}  {t.lost_leases:>4}  "
            f"{say_span(at - t.created_at, COLUMN):>5}  "
            f"{_one_line(what, 100)}\n"
        )
    if len(tasks) == limit:
        out.write(f"(the newest {limit}; --limit N shows more)\n")
    return EXIT_OK


def queue_show(settings: Settings, out: TextIO, task_id: int, *, now: float | None = None) -> int:
    async def getting(pool: DbPool) -> tuple[float, Task | None]:
        return await _line(pool, now), await TaskQueue(pool).get(task_id)

    at, task = _run(settings, getting)
    if task is None:
        out.write(f"no task {task_id}\n")
        return EXIT_NO
    fields: list[tuple[str, object]] = [
        ("id", task.id),
        ("kind", task.kind),
        ("state", task.state),
        ("chat", task.chat_id),
        ("attempts", f"{task.attempts} of {task.max_attempts}"),
        (
            "lost leases",
            f"{task.lost_leases} in a row without progress "
            f"(buried at {lost_lease_budget(task.max_attempts)}; not attempts)",
        ),
        (
            "ambiguous",
            f"{task.ambiguous_sends} sends timed out and may have reached the chat "
            "(a duplicate after one is explained)",
        ),
        ("created", f"{say_span(at - task.created_at, COLUMN)} ago"),
        ("updated", f"{say_span(at - task.updated_at, COLUMN)} ago"),
        ("run after", _relative(task.run_after, at)),
        ("dedup key", task.dedup_key or "-"),
        ("leased until", "-" if task.lease_expires is None else _relative(task.lease_expires, at)),
        ("last error", task.last_error or "-"),
    ]
    for name, value in fields:
        # Continuation lines line up under the value (a last error can span lines).
        text = str(value).replace("\n", "\n" + " " * 14)
        out.write(f"{name + ':':<14}{text}\n")
    try:
        payload = json.dumps(json.loads(task.payload), indent=2, ensure_ascii=False)
    except ValueError:
        payload = task.payload  # shown as stored: it is what the worker could not read
    out.write(f"payload:\n{payload}\n")
    return EXIT_OK


def _relative(when: float, now: float) -> str:
    delta = when - now
    return f"in {say_span(delta, COLUMN)}" if delta > 0 else f"{say_span(-delta, 'compact')} ago"


def queue_retry(settings: Settings, out: TextIO, task_id: int, *, now: float | None = None) -> int:
    async def _retry(pool: DbPool) -> tuple[bool, Task | None]:
        queue = TaskQueue(pool)
        at = await _line(pool, now)
        return await queue.retry(task_id, at), await queue.get(task_id)

    done, task = _run(settings, _retry)
    if done:
        out.write(f"task {task_id} is pending again, with fresh attempts\n")
        return EXIT_OK
    if task is None:
        out.write(f"no task {task_id}\n")
    elif task.state != "dead":
        out.write(f"task {task_id} is {task.state}, not dead: only dead tasks are retried\n")
    else:
        out.write(
            f"task {task_id} was not retried: a live task with the same dedup key "
            f"({task.dedup_key}) already does this job\n"
        )
    return EXIT_NO


def queue_purge_dead(
    settings: Settings, out: TextIO, *, older_than: float | None = None, now: float | None = None
) -> int:
    async def purging(pool: DbPool) -> int:
        return await TaskQueue(pool).purge_dead(await _line(pool, now), older_than)

    n = _run(settings, purging)
    scope = "" if older_than is None else f" older than {say_span(older_than, COLUMN)}"
    out.write(f"purged {n} dead task{'' if n == 1 else 's'}{scope}\n")
    return EXIT_OK


# --- link cache -------------------------------------------------------------------------------


def cache_stats(settings: Settings, out: TextIO) -> int:
    entries = _run(settings, lambda pool: LinkCache(pool).count())
    days = settings.cache_ttl / 86400
    out.write(f"entries  {entries}\n")
    out.write(f"ttl      {days:g} days (XBOT_CACHE_TTL_DAYS)\n")
    out.write("(hits and misses are counted by the running bot: /stats in Telegram)\n")
    return EXIT_OK


def cache_clear(settings: Settings, out: TextIO, link: str | None = None) -> int:
    if link is None:
        n = _run(settings, lambda pool: LinkCache(pool).clear())
        out.write(f"cleared {n} cache entr{'y' if n == 1 else 'ies'}\n")
        return EXIT_OK
    key = link_key(link)
    gone = _run(settings, lambda pool: LinkCache(pool).forget(key))
    if gone:
        out.write(f"forgot {key}: the next request fetches it afresh\n")
        return EXIT_OK
    out.write(f"no cache entry for {key}\n")
    return EXIT_NO


# --- backup and migrate -----------------------------------------------------------------------


def run_backup(
    settings: Settings,
    out: TextIO,
    dest: str,
    *,
    force: bool = False,
    binary_out: BinaryIO | None = None,
) -> int:
    """``dest`` of ``-`` writes the copy to standard output (and the report to stderr)."""
    path = settings.db_path
    check_owner(path)
    if dest == "-":
        stream = binary_out if binary_out is not None else sys.stdout.buffer
        result = backup_to_stream(path, stream)
        report: TextIO = sys.stderr if binary_out is None else out
    else:
        result = backup(path, Path(dest), force=force)
        report = out
    report.write(
        f"backed up {path} to {result.path}: {result.size / 1024 / 1024:.1f} MB, "
        f"schema version {result.schema_version}, {result.tasks} tasks, integrity ok, "
        f"{result.seconds:.1f} s\n"
    )
    return EXIT_OK


def migrate(settings: Settings, out: TextIO, *, check: bool = False) -> int:
    path = settings.db_path
    latest = migrations.latest_version()
    check_owner(path)
    if check:
        if not path.exists():
            out.write(f"no database at {path} yet: `xbot run` creates it at version {latest}\n")
            return EXIT_NO
        version = schema_version(path)
        if version > latest:
            raise migrations.too_new(version, latest, path)
        if version == latest:
            out.write(f"up to date: {path} is at schema version {version}\n")
            return EXIT_OK
        names = [m.name for m in migrations.load_migrations()[version:]]
        out.write(
            f"{len(names)} migration(s) pending for {path} (version {version} → {latest}): "
            f"{', '.join(names)}\n"
        )
        return EXIT_NO
    before = schema_version(path) if path.exists() else None
    version = prepare_store(path)
    if before == version:
        out.write(f"already up to date: {path} is at schema version {version}\n")
    else:
        start = "a new database" if before is None else f"version {before}"
        out.write(f"migrated {path} from {start} to schema version {version}\n")
    return EXIT_OK
