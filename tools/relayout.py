#!/usr/bin/env python3
"""Group xbot's modules into folders that tell the architecture (issue 11).

Run it from the repository root, on a clean tree, once every branch is merged:

    python tools/relayout.py            # move, rewrite, report
    python tools/relayout.py --dry-run  # only say what it would do

What it does, in order:

1. ``git mv`` every entry of `MOVES` whose old path exists and whose new path
   does not (an entry whose old and new paths are equal stays on purpose);
2. gives every new package folder an ``__init__.py`` saying what the folder holds;
3. keeps ``Path(__file__).parent…`` pointing at the same place in each file it
   moved to another depth (``migrations.py`` finds ``migrations_sql/`` that way,
   tests find ``tests/data`` and ``tests/helpers``);
4. rewrites every reference in the tracked text files: ``from xbot import db``
   (split when the names now live in different packages), ``xbot.db`` anywhere
   (imports, logger names, monkeypatch targets, ``python -m xbot.cli``, the
   console script in pyproject.toml) and ``xbot/db.py`` paths (README, docs,
   pyproject's per-file ignores, comments);
5. writes the README's map of the folders (``## Where the code lives``);
6. sorts the imports it touched and formats them (ruff, when it is installed);
7. imports every module on its own (a cycle shows here, not in a test run), and
8. lists every module under ``xbot/`` and ``tests/`` that the table does not
   name: left where it is, to be added to the table (then run it again).

It is idempotent: a second run finds nothing to move and nothing to rewrite
(no new name is also an old one, which the script checks before it starts).
Logger names follow the modules (``logging.getLogger(__name__)``): the log
line ``INFO xbot.worker task …`` becomes ``INFO xbot.tasks.worker task …``.
"""

# ruff: noqa: E501 - the README's folder table below is markdown, one row a line

from __future__ import annotations

import argparse
import ast
import importlib.util
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

# old path -> new path. A folder ends in "/". Equal paths: stays there on purpose.
MOVES: list[tuple[str, str]] = [
    # --- the package's root: the composition root and what every layer shares
    ("xbot/__init__.py", "xbot/__init__.py"),
    ("xbot/app.py", "xbot/app.py"),
    ("xbot/config.py", "xbot/config.py"),
    ("xbot/errors.py", "xbot/errors.py"),
    ("xbot/logs.py", "xbot/logs.py"),
    ("xbot/services.py", "xbot/services.py"),
    ("xbot/__main__.py", "xbot/__main__.py"),
    ("xbot/i18n.py", "xbot/i18n.py"),
    # --- storage: the one SQLite file and everything kept in it
    ("xbot/db.py", "xbot/storage/db.py"),
    ("xbot/migrations.py", "xbot/storage/migrations.py"),
    ("xbot/group_commit.py", "xbot/storage/group_commit.py"),
    ("xbot/queue.py", "xbot/storage/queue.py"),
    ("xbot/state.py", "xbot/storage/state.py"),
    ("xbot/storage/chat_state.py", "xbot/storage/chat_state.py"),
    ("xbot/link_cache.py", "xbot/storage/link_cache.py"),
    ("xbot/backup.py", "xbot/storage/backup.py"),
    ("xbot/lost_leases.py", "xbot/storage/lost_leases.py"),
    # The queue's parts beside its claim/lease/fence core (issue 11: no module over ~500 lines).
    ("xbot/storage/task_rows.py", "xbot/storage/task_rows.py"),
    ("xbot/storage/dead_letters.py", "xbot/storage/dead_letters.py"),
    ("xbot/storage/lease_repair.py", "xbot/storage/lease_repair.py"),
    ("xbot/storage/chat_holds.py", "xbot/storage/chat_holds.py"),
    ("xbot/storage/queue_admin.py", "xbot/storage/queue_admin.py"),
    # The queue's synchronous door: only tests and their helper processes use it.
    ("xbot/queue_sync.py", "xbot/standins/queue_sync.py"),
    # --- sources: where a post comes from, each turned into the same Post. The
    # clients (``*_api``) beside the `PostSource`s the branches of issues 11-17 add.
    # Not links.py and media/models.py: payloads and the sender import them, and the
    # sources package's __init__ imports the sources (which import the sender): a cycle.
    ("xbot/links.py", "xbot/links.py"),
    # X post links and t.co beside links.py, at the root for the same reason (issue 11).
    ("xbot/links_x.py", "xbot/links_x.py"),
    ("xbot/media/models.py", "xbot/media/models.py"),
    ("xbot/media/x_api.py", "xbot/sources/x_api.py"),
    # The fxtwitter answer's parsing beside its client (issue 11: no module over ~500 lines).
    ("xbot/sources/x_status.py", "xbot/sources/x_status.py"),
    # sources/ytdlp.py is the PostSource (issue11-core): the library's boundary is the api.
    ("xbot/media/ytdlp.py", "xbot/sources/ytdlp_api.py"),
    ("xbot/sources/ytdlp_options.py", "xbot/sources/ytdlp_options.py"),
    ("xbot/sources/__init__.py", "xbot/sources/__init__.py"),
    ("xbot/sources/base.py", "xbot/sources/base.py"),
    ("xbot/sources/router.py", "xbot/sources/router.py"),
    ("xbot/sources/x.py", "xbot/sources/x.py"),
    ("xbot/sources/ytdlp.py", "xbot/sources/ytdlp.py"),
    ("xbot/sources/_http.py", "xbot/sources/_http.py"),
    ("xbot/sources/breaker.py", "xbot/sources/breaker.py"),
    ("xbot/sources/chain.py", "xbot/sources/chain.py"),
    ("xbot/sources/vx_api.py", "xbot/sources/vx_api.py"),
    ("xbot/sources/syndication.py", "xbot/sources/syndication.py"),
    ("xbot/sources/jsonget.py", "xbot/sources/jsonget.py"),
    ("xbot/sources/site_links.py", "xbot/sources/site_links.py"),
    ("xbot/sources/bsky.py", "xbot/sources/bsky.py"),
    ("xbot/sources/bsky_links.py", "xbot/sources/bsky_links.py"),
    ("xbot/sources/pixiv.py", "xbot/sources/pixiv.py"),
    ("xbot/sources/pixiv_links.py", "xbot/sources/pixiv_links.py"),
    # --- media: getting the bytes, safely (size cap, SSRF guard, temp files)
    ("xbot/media/__init__.py", "xbot/media/__init__.py"),
    ("xbot/media/download.py", "xbot/media/download.py"),
    ("xbot/media/netguard.py", "xbot/media/netguard.py"),
    ("xbot/media/tempfiles.py", "xbot/media/tempfiles.py"),
    ("xbot/media/mp4info.py", "xbot/media/mp4info.py"),
    ("xbot/media/thumbnail.py", "xbot/media/thumbnail.py"),
    # --- sending: what goes to Telegram, paced, planned and captioned
    ("xbot/sender.py", "xbot/sending/sender.py"),
    ("xbot/outbox.py", "xbot/sending/outbox.py"),
    ("xbot/albums.py", "xbot/sending/albums.py"),
    ("xbot/caption.py", "xbot/sending/caption.py"),
    # The /format templates and the link cache's caption record beside the caption
    # (issue 11: no module over ~500 lines).
    ("xbot/sending/caption_template.py", "xbot/sending/caption_template.py"),
    ("xbot/sending/caption_parts.py", "xbot/sending/caption_parts.py"),
    ("xbot/pacing.py", "xbot/sending/pacing.py"),
    ("xbot/progress.py", "xbot/sending/progress.py"),
    ("xbot/destination.py", "xbot/sending/destination.py"),
    ("xbot/bot_errors.py", "xbot/sending/bot_errors.py"),
    ("xbot/topics.py", "xbot/sending/topics.py"),
    ("xbot/media/video_choice.py", "xbot/sending/video_choice.py"),
    # --- tasks: the worker and the kinds of task it runs
    ("xbot/worker.py", "xbot/tasks/worker.py"),
    ("xbot/backoff.py", "xbot/tasks/backoff.py"),
    ("xbot/flights.py", "xbot/tasks/flights.py"),
    ("xbot/payloads.py", "xbot/tasks/payloads.py"),
    ("xbot/delivery.py", "xbot/tasks/delivery.py"),
    ("xbot/other_sites.py", "xbot/tasks/other_sites.py"),
    ("xbot/notices.py", "xbot/tasks/notices.py"),
    ("xbot/forwarding.py", "xbot/tasks/forwarding.py"),
    ("xbot/prompts.py", "xbot/tasks/prompts.py"),
    # --- handlers: Telegram updates in, durable tasks out
    ("xbot/polling.py", "xbot/handlers/polling.py"),
    ("xbot/callback_data.py", "xbot/handlers/callback_data.py"),
    ("xbot/settings_menu.py", "xbot/handlers/settings_menu.py"),
    ("xbot/handlers/__init__.py", "xbot/handlers/__init__.py"),
    ("xbot/handlers/auth.py", "xbot/handlers/auth.py"),
    ("xbot/handlers/callbacks.py", "xbot/handlers/callbacks.py"),
    ("xbot/handlers/caption_edit.py", "xbot/handlers/caption_edit.py"),
    ("xbot/handlers/commands.py", "xbot/handlers/commands.py"),
    ("xbot/handlers/messages.py", "xbot/handlers/messages.py"),
    ("xbot/handlers/inline.py", "xbot/handlers/inline.py"),
    ("xbot/inline_fetch.py", "xbot/handlers/inline_fetch.py"),
    ("xbot/inline_results.py", "xbot/handlers/inline_results.py"),
    ("xbot/handlers/answers.py", "xbot/handlers/answers.py"),
    ("xbot/handlers/operator.py", "xbot/handlers/operator.py"),
    ("xbot/handlers/language.py", "xbot/handlers/language.py"),
    # --- ops: the operator's side (the CLI, doctor, demo, systemd, one bot per dir)
    ("xbot/cli.py", "xbot/ops/cli.py"),
    ("xbot/opscli.py", "xbot/ops/opscli.py"),
    ("xbot/doctor.py", "xbot/ops/doctor.py"),
    ("xbot/demo.py", "xbot/ops/demo.py"),
    ("xbot/sdnotify.py", "xbot/ops/sdnotify.py"),
    ("xbot/instance.py", "xbot/ops/instance.py"),
    ("xbot/versions.py", "xbot/ops/versions.py"),
    # --- the local stand-ins (in the wheel: `xbot demo` runs against them)
    ("xbot/testing/", "xbot/standins/"),
    # --- tests: unit tests stay as tests/test_<module>.py; whole-bot and process
    # tests get folders. Basenames stay unique (pytest's default import mode).
    ("tests/test_e2e_x.py", "tests/e2e/test_e2e_x.py"),
    ("tests/test_e2e_x_posts.py", "tests/e2e/test_e2e_x_posts.py"),
    ("tests/test_e2e_bsky_pixiv.py", "tests/e2e/test_e2e_bsky_pixiv.py"),
    ("tests/test_sources_e2e.py", "tests/e2e/test_sources_e2e.py"),
    ("tests/test_thumbnail_e2e.py", "tests/e2e/test_thumbnail_e2e.py"),
    ("tests/test_hostile.py", "tests/e2e/test_hostile.py"),
    ("tests/test_security.py", "tests/e2e/test_security.py"),
    ("tests/test_process.py", "tests/process/test_process.py"),
    ("tests/test_queue_processes.py", "tests/process/test_queue_processes.py"),
    ("tests/test_soak_small.py", "tests/process/test_soak_small.py"),
    ("tests/test_cli_run.py", "tests/process/test_cli_run.py"),
    ("tests/test_sdnotify_app.py", "tests/process/test_sdnotify_app.py"),
    ("tests/test_wheel.py", "tests/process/test_wheel.py"),
    ("tests/test_systemd.py", "tests/process/test_systemd.py"),
    ("tests/test_crash_loop.py", "tests/process/test_crash_loop.py"),
    ("tests/test_makefile.py", "tests/process/test_makefile.py"),
    ("tests/test_standin_botapi.py", "tests/standins/test_standin_botapi.py"),
    ("tests/test_standin_fxapi.py", "tests/standins/test_standin_fxapi.py"),
    ("tests/test_standin_media.py", "tests/standins/test_standin_media.py"),
    ("tests/test_standin_tgtext.py", "tests/standins/test_standin_tgtext.py"),
    ("tests/test_standin_limits.py", "tests/standins/test_standin_limits.py"),
    ("tests/test_standin_xsources.py", "tests/standins/test_standin_xsources.py"),
    ("tests/test_standin_natives.py", "tests/standins/test_standin_natives.py"),
    ("tests/test_inline_standin.py", "tests/standins/test_inline_standin.py"),
    ("tests/test_topics_standin.py", "tests/standins/test_topics_standin.py"),
    ("tests/test_ytdlp_mp4info.py", "tests/test_mp4info.py"),
    ("tests/test_thumbnail_sender.py", "tests/test_sender_thumbnail.py"),
]

# The unit tests that stay tests/test_<module>.py (a new one is listed, to be placed).
UNIT_TESTS_STAY = """
    test_albums test_auth test_backoff test_backup test_callback_data test_callbacks
    test_caption test_cli test_commands test_config test_db test_demo test_docs
    test_doctor test_download test_forwarding test_link_cache test_links test_logs
    test_migration_chat test_migrations test_netguard test_other_sites test_pacing
    test_progress test_properties test_queue test_queue_stateful test_sdnotify
    test_sender_classify test_sender_lines test_settings_menu test_state test_tempfiles
    test_thumbnail test_webhook test_worker test_x_api test_ytdlp test_ytdlp_job test_relayout
    test_answers test_destination test_outbox test_payloads test_sources test_topics
    test_topics_fallback test_video_choice test_queue_lost test_sources_chain
    test_sources_parsers test_worker_outage test_inline test_inline_fetch test_inline_results
    test_inline_natives
    test_notices test_i18n test_versions test_bsky test_jsonget test_pixiv test_site_links test_imports
""".split()  # noqa: SIM905 - a word list reads better than 40 quoted names

# Each new folder's __init__.py: what the folder holds.
PACKAGES: dict[str, str] = {
    "xbot/storage": "Storage: the one SQLite file (connections, schema, the task queue, chat\n"
    "state, the link cache) and its online backup. `db` alone touches apsw's errors.",
    "xbot/sources": "Sources: where a post comes from (the X APIs, yt-dlp) and how a link names\n"
    "one; each source turns its answer into the same `Post`.",
    "xbot/sending": "Sending: what goes to Telegram (the sender, albums, captions), paced inside\n"
    "Telegram's limits, and the status message people see meanwhile.",
    "xbot/tasks": "Tasks: the worker that leases and runs them, and the kinds it runs (deliver a\n"
    "link, forward to a channel, a dead-letter notice).",
    "xbot/ops": "Ops: the operator's side. The `xbot` command, `doctor`, the offline demo,\n"
    "systemd's notify protocol and the one-bot-per-data-dir lock.",
    "xbot/standins": "",  # moved whole, with its own __init__.py
    "tests/e2e": "",  # tests: no __init__.py (pytest's default import mode)
    "tests/process": "",
    "tests/standins": "",
}

# The README's map of the folders, between these markers (replaced on every run).
README_BEGIN = "<!-- folders: written by tools/relayout.py -->"
README_END = "<!-- /folders -->"
README_FOLDERS = """## Where the code lives

| folder | what it holds |
| --- | --- |
| `xbot/` | `app.py`, the composition root (the one place that wires everything); what every layer shares: `config.py`, `errors.py` (the exception tree), `links.py` (a link's kind and key), `logs.py`, `services.py` |
| `xbot/storage/` | the one SQLite file: `db.py` (connections, the only place apsw's errors are caught), `migrations.py`, `queue.py`, `state.py`, `link_cache.py`, `backup.py` |
| `xbot/sources/` | where a post comes from: the clients (`x_api.py`, `ytdlp_api.py`) and the sources that turn their answers into a `Post` |
| `xbot/media/` | the `Post` and its media (`models.py`), and getting the bytes safely: `download.py`, `netguard.py` (SSRF), `tempfiles.py`, `mp4info.py`, `thumbnail.py` |
| `xbot/sending/` | what goes to Telegram: `sender.py`, `albums.py`, `caption.py`, `pacing.py`, `progress.py` |
| `xbot/tasks/` | `worker.py` (lease, heartbeat, the one ladder of outcomes) and the task kinds: `delivery.py`, `other_sites.py`, `forwarding.py`, `notices.py` |
| `xbot/handlers/` | Telegram updates in, durable tasks out: `polling.py`, `messages.py`, `commands.py`, `callbacks.py` |
| `xbot/ops/` | the operator's side: `cli.py` (`xbot`), `opscli.py`, `doctor.py`, `demo.py`, `sdnotify.py`, `instance.py` |
| `xbot/standins/` | the local Bot API, X API and media host that the tests, the soak and `xbot demo` run against |
| `tests/` | one `test_<module>.py` per module; `e2e/` the whole bot against the stand-ins, `process/` real processes (`xbot run`, the wheel, systemd), `standins/` the stand-ins' own tests; shared fixtures in `conftest.py` |
"""

SELF = Path("tools/relayout.py")
# Its own test: the names in there are examples of what the script rewrites.
OWN_TEST = Path("tests/test_relayout.py")
# Never rewritten: real API answers and frozen schema text are data, not references.
NOT_REWRITTEN = ("tests/data/", "migrations_sql/")
TEXT_SUFFIXES = {".py", ".md", ".toml", ".cfg", ".ini", ".txt", ".service", ".example", ".sh"}
TEXT_SUFFIXES |= {".po", ".pot"}  # their "#: xbot/..." source locations
TEXT_NAMES = {"Makefile", "run", "xbotctl"}


def sh(*args: str) -> str:
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout  # noqa: S603


def module_of(path: str) -> str:
    """``xbot/media/x_api.py`` -> ``xbot.media.x_api``; ``xbot/testing/`` -> ``xbot.testing``."""
    p = path.rstrip("/").removesuffix(".py").removesuffix("/__init__")
    return p.replace("/", ".")


def moving() -> list[tuple[str, str]]:
    return [(old, new) for old, new in MOVES if old != new]


def check_table() -> None:
    olds = [o for o, _ in MOVES]
    news = [n for _, n in MOVES]
    dupes = {p for p in olds if olds.count(p) > 1} | {p for p in news if news.count(p) > 1}
    if dupes:
        sys.exit(f"relayout: the table names these twice: {sorted(dupes)}")
    old_mods = {module_of(o) for o, n in moving() if o.endswith((".py", "/"))}
    new_mods = {module_of(n) for o, n in moving() if n.endswith((".py", "/"))}
    # A new name that is also an old one would be rewritten again by a second run.
    chained = old_mods & new_mods
    if chained:
        sys.exit(f"relayout: a new name is also an old one (not idempotent): {sorted(chained)}")
    names = [Path(n).name for n in news if n.startswith("tests/") and n.endswith(".py")]
    clash = {n for n in names if names.count(n) > 1}
    if clash:
        sys.exit(f"relayout: test files would share a basename: {sorted(clash)}")


# --- 1-3: moves ----------------------------------------------------------------------------


def depth(path: str) -> int:
    return len(Path(path.rstrip("/")).parts)


_FILE_PARENTS = re.compile(r"Path\(__file__\)(\.resolve\(\))?((?:\.parent)+)")


def keep_file_relative(path: Path, delta: int) -> bool:
    """``Path(__file__).parent`` chains in a file moved ``delta`` folders deeper."""
    text = path.read_text(encoding="utf-8")

    def fix(m: re.Match[str]) -> str:
        count = m.group(2).count(".parent") + delta
        if count < 1:
            raise SystemExit(f"relayout: {path}: {m.group(0)} would point above its folder")
        return f"Path(__file__){m.group(1) or ''}{'.parent' * count}"

    new = _FILE_PARENTS.sub(fix, text)
    if new != text:
        path.write_text(new, encoding="utf-8")
        return True
    return False


def move_all(dry: bool) -> tuple[list[str], list[str]]:
    moved: list[str] = []
    conflicts: list[str] = []
    for old, new in moving():
        src, dst = Path(old), Path(new)
        if not src.exists():
            continue  # already moved, or not written (yet)
        if dst.exists():
            conflicts.append(f"{old} and {new} both exist: left alone, merge them by hand")
            continue
        print(f"git mv {old} {new}")
        moved.append(old)
        if dry:
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        sh("git", "mv", old.rstrip("/"), new.rstrip("/"))
        delta = depth(new) - depth(old)
        if delta:
            files = [dst] if dst.is_file() else sorted(dst.rglob("*.py"))
            for f in files:
                if f.suffix == ".py" and keep_file_relative(f, delta):
                    print(f"  kept Path(__file__) pointing where it did in {f}")
    return moved, conflicts


def make_packages(dry: bool) -> None:
    for folder, doc in PACKAGES.items():
        init = Path(folder) / "__init__.py"
        if not doc or not Path(folder).is_dir() or init.exists():
            continue
        if Path(f"{folder}.py").exists():
            sys.exit(f"relayout: {folder}.py exists beside the new package {folder}/")
        print(f"create {init}")
        if not dry:
            init.write_text(f'"""{doc}"""\n', encoding="utf-8")
            sh("git", "add", str(init))


# --- 4: references ---------------------------------------------------------------------------


def module_map() -> dict[str, str]:
    return {
        module_of(o): module_of(n)
        for o, n in moving()
        if o.startswith("xbot/") and (o.endswith(".py") or o.endswith("/"))
    }


def renamed(module: str, mods: dict[str, str]) -> str:
    """The new dotted name of ``module`` (a moved module, or inside a moved package)."""
    for old in sorted(mods, key=len, reverse=True):
        if module == old or module.startswith(old + "."):
            return mods[old] + module[len(old) :]
    return module


def _import_line(indent: str, package: str, names: list[ast.alias]) -> str:
    listed = ", ".join(a.name if a.asname is None else f"{a.name} as {a.asname}" for a in names)
    return f"{indent}from {package} import {listed}"


def rewrite_from_imports(text: str, mods: dict[str, str], notes: list[str], where: str) -> str:
    """Imports of moved modules *by name from their package*: ``from xbot import db`` ->
    ``from xbot.storage import db``; ``from xbot import db, config`` is split in two.

    A statement whose module itself moved (``from xbot.db import connect``) is left to
    the dotted rewrite, which keeps its layout; so is one where nothing moved.
    """
    try:
        tree = ast.parse(text)
    except SyntaxError:
        notes.append(f"{where}: does not parse; its from-imports were not looked at")
        return text
    lines = text.splitlines(keepends=True)
    edits: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
            continue
        package = renamed(node.module, mods)
        groups: dict[str, list[ast.alias]] = {}
        local_names_kept = True
        for alias in node.names:
            full = f"{node.module}.{alias.name}"
            target = renamed(full, mods)
            if target == full or alias.name == "*":
                groups.setdefault(package, []).append(alias)
                continue
            new_package, _, new_name = target.rpartition(".")
            kept = alias
            if new_name != alias.name:  # the module itself was renamed: keep the local name
                kept = ast.alias(new_name, alias.asname or alias.name)
                local_names_kept = False
                notes.append(f"{where}:{node.lineno}: {full} now imported as {kept.asname}")
            groups.setdefault(new_package, []).append(kept)
        if list(groups) == [package] and local_names_kept:
            continue  # nothing moved, or only the module itself: the dotted rewrite does it
        start, end = node.lineno - 1, node.end_lineno or node.lineno
        first = lines[start]
        indent = first[: len(first) - len(first.lstrip())]
        tail = lines[end - 1][node.end_col_offset or 0 :]
        if node.col_offset != len(indent) or (tail.strip() and not tail.lstrip().startswith("#")):
            notes.append(f"{where}:{node.lineno}: an import shares its line; fix it by hand")
            continue
        if len(groups) == 1 and local_names_kept:
            # One new home for every name: change the module, keep the layout.
            (target_package,) = groups
            header = re.compile(rf"from\s+{re.escape(node.module)}\s+import")
            edits.append((start, start + 1, header.sub(f"from {target_package} import", first, 1)))
            continue
        segment = "".join(lines[start:end])
        if "#" in segment.split("import", 1)[1]:
            notes.append(f"{where}:{node.lineno}: a comment inside a split import was dropped")
        body = "\n".join(_import_line(indent, p, names) for p, names in groups.items())
        edits.append((start, end, body + tail))
    for start, end, body in sorted(edits, reverse=True):
        lines[start:end] = [body if body.endswith("\n") else body + "\n"]
    return "".join(lines)


def dotted_patterns(mods: dict[str, str]) -> list[tuple[re.Pattern[str], str]]:
    # xbot.db, xbot.db.connect, "xbot.db", -m xbot.cli, xbot.cli:main; never xbot.dbx or
    # a.xbot.db. Longest first, so xbot.media.x_api is not taken for xbot.media.
    return [
        (re.compile(rf"(?<![\w.]){re.escape(old)}(?![\w])"), new)
        for old, new in sorted(mods.items(), key=lambda kv: len(kv[0]), reverse=True)
    ]


def path_patterns() -> list[tuple[re.Pattern[str], str]]:
    pairs = [(o.rstrip("/"), n.rstrip("/")) for o, n in moving()]
    return [
        (re.compile(rf"(?<![\w.-]){re.escape(old)}(?![\w.-]*\w)"), new)
        for old, new in sorted(pairs, key=lambda kv: len(kv[0]), reverse=True)
    ]


def babel_patterns() -> list[tuple[re.Pattern[str], str]]:
    """babel.cfg's sections name paths relative to xbot/ (``[ignore: testing/**]``)."""
    pairs = [
        (o.removeprefix("xbot/").rstrip("/"), n.removeprefix("xbot/").rstrip("/"))
        for o, n in moving()
        if o.startswith("xbot/") and n.startswith("xbot/")
    ]
    return [
        (
            re.compile(rf"^(\[[^\]\n]*?[\s:]){re.escape(old)}(?=[/\]\s])", re.MULTILINE),
            rf"\g<1>{new}",
        )
        for old, new in sorted(pairs, key=lambda kv: len(kv[0]), reverse=True)
    ]


def tracked_text_files() -> Iterable[Path]:
    for name in sh("git", "ls-files", "-z").split("\0"):
        if not name or name.startswith(NOT_REWRITTEN) or Path(name) in (SELF, OWN_TEST):
            continue
        path = Path(name)
        if path.is_file() and (path.suffix in TEXT_SUFFIXES or path.name in TEXT_NAMES):
            yield path


def rewrite_all(dry: bool, notes: list[str]) -> list[Path]:
    mods = module_map()
    dotted = dotted_patterns(mods)
    paths = path_patterns()
    changed: list[Path] = []
    for path in tracked_text_files():
        text = path.read_text(encoding="utf-8")
        new = text
        if path.suffix == ".py":
            new = rewrite_from_imports(new, mods, notes, str(path))
        for pattern, repl in dotted:
            new = pattern.sub(repl, new)
        for pattern, repl in paths:
            new = pattern.sub(repl, new)
        if path.name == "babel.cfg":
            for pattern, repl in babel_patterns():
                new = pattern.sub(repl, new)
        if new != text:
            changed.append(path)
            print(f"rewrite {path}")
            if not dry:
                path.write_text(new, encoding="utf-8")
    return changed


# --- 5-6: tidy and report --------------------------------------------------------------------


def write_readme_folders(dry: bool) -> bool:
    """The README's folder map, before its ``## Status`` (or replaced where it already is)."""
    readme = Path("README.md")
    if not readme.is_file():
        return False
    text = readme.read_text(encoding="utf-8")
    block = f"{README_BEGIN}\n{README_FOLDERS}{README_END}\n"
    if README_BEGIN in text and README_END in text:
        head, rest = text.split(README_BEGIN, 1)
        new = head + block + rest.split(README_END, 1)[1].removeprefix("\n")
    elif "\n## Status\n" in text:
        new = text.replace("\n## Status\n", f"\n{block}\n## Status\n", 1)
    else:
        new = text.rstrip("\n") + f"\n\n{block}"
    if new == text:
        return False
    print("write the folder map into README.md")
    if not dry:
        readme.write_text(new, encoding="utf-8")
    return True


def ruff() -> list[str] | None:
    for candidate in (".venv/bin/ruff", shutil.which("ruff")):
        if candidate and Path(candidate).exists():
            return [candidate]
    if importlib.util.find_spec("ruff") is not None:
        return [sys.executable, "-m", "ruff"]
    return None


def tidy(files: list[Path]) -> None:
    py = [str(p) for p in files if p.suffix == ".py" and p.exists()]
    if not py:
        return
    cmd = ruff()
    if cmd is None:
        print("ruff not found: run `ruff check --select I --fix` and `ruff format` yourself")
        return
    # Our own ruff on our own files (S603: no untrusted input here).
    subprocess.run([*cmd, "check", "--quiet", "--select", "I", "--fix", *py], check=False)  # noqa: S603
    subprocess.run([*cmd, "format", "--quiet", *py], check=False)  # noqa: S603
    # Longer module names can push a string past the line limit; format does not wrap those.
    long = subprocess.run(  # noqa: S603
        [*cmd, "check", "--quiet", "--select", "E501", "--output-format", "concise", *py],
        check=False,
        capture_output=True,
        text=True,
    ).stdout.strip()
    if long:
        print(f"lines now too long, to wrap by hand:\n{long}")


_IMPORT_PROBE = """
import importlib, sys
for name in sys.argv[1:]:
    for loaded in [m for m in sys.modules if m == "xbot" or m.startswith("xbot.")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception as exc:
        print(f"  {name}: {type(exc).__name__}: {exc}")
"""


def check_imports() -> bool:
    """Each module imported alone, in a fresh ``xbot`` (as tests/test_imports.py does): a
    module moved into a package whose ``__init__`` imports its submodules can close a
    cycle that only shows when something else is imported first."""
    python = Path(".venv/bin/python")
    exe = str(python) if python.exists() else sys.executable
    deps = subprocess.run(  # noqa: S603 - our interpreter
        [exe, "-c", "import apsw, attrs, httpx, telegram"], capture_output=True, check=False
    )
    if deps.returncode:
        print(f"import check skipped: {exe} lacks xbot's dependencies (make .venv/.installed)")
        return True
    names = []
    for path in sorted(Path("xbot").rglob("*.py")):
        parts = path.with_suffix("").parts
        if "__pycache__" not in parts and parts[-1] != "__main__":
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    found = subprocess.run(  # noqa: S603 - our interpreter, our module names
        [exe, "-c", _IMPORT_PROBE, *names], capture_output=True, text=True, check=False
    )
    if found.returncode or found.stdout.strip():
        print(f"modules that do not import on their own:\n{found.stdout}{found.stderr}")
        return False
    return True


def not_in_table() -> list[str]:
    known: set[str] = set()
    folders: list[str] = []
    for old, new in MOVES:
        for p in (old, new):
            (folders.append(p) if p.endswith("/") else known.add(p))
    known |= {f"{folder}/__init__.py" for folder, doc in PACKAGES.items() if doc}
    found = []
    for root in ("xbot", "tests"):
        for path in sorted(Path(root).rglob("*.py")):
            name = path.as_posix()
            if "__pycache__" in name or name.startswith(("tests/helpers/", "tests/data/")):
                continue
            if name == "tests/conftest.py" or name in known or name.startswith(tuple(folders)):
                continue
            if path.parent == Path("tests") and path.stem in UNIT_TESTS_STAY:
                continue
            found.append(name)
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dry-run", action="store_true", help="change nothing, say what would be")
    ap.add_argument("--allow-dirty", action="store_true", help="run on uncommitted changes")
    args = ap.parse_args(argv)
    if not (Path("pyproject.toml").is_file() and Path("xbot").is_dir()):
        sys.exit("relayout: run it from the repository root")
    check_table()
    if not args.allow_dirty and sh("git", "status", "--porcelain", "--untracked-files=no"):
        sys.exit("relayout: the tree has uncommitted changes (commit them, or --allow-dirty)")
    notes: list[str] = []
    moved, conflicts = move_all(args.dry_run)
    make_packages(args.dry_run)
    changed = rewrite_all(args.dry_run, notes)
    if write_readme_folders(args.dry_run) and Path("README.md") not in changed:
        changed.append(Path("README.md"))
    if not args.dry_run:
        tidy(changed)
    print(f"\nmoved {len(moved)}, rewrote {len(changed)} files")
    for line in conflicts + notes:
        print(f"NOTE {line}")
    unknown = not_in_table()
    if unknown:
        print("\nnot in the table (left where they are; add them to MOVES and run again):")
        for name in unknown:
            print(f"  {name}")
    imports_ok = args.dry_run or check_imports()
    if not args.dry_run and (moved or changed):
        print("\nnext: ruff check xbot tests bench, mypy, pytest; then commit")
    return 1 if conflicts or not imports_ok else 0


if __name__ == "__main__":
    raise SystemExit(main())
