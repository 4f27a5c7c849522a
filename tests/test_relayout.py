"""tools/relayout.py, the layout script of issue 11: its table and its rewrites."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _load() -> Any:
    spec = importlib.util.spec_from_file_location("relayout", ROOT / "tools" / "relayout.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("relayout", module)
    spec.loader.exec_module(module)
    return module


relayout = _load()
MODS = relayout.module_map()


def rewrite(text: str) -> tuple[str, list[str]]:
    notes: list[str] = []
    out = relayout.rewrite_from_imports(text, MODS, notes, "t.py")
    for pattern, new in relayout.dotted_patterns(MODS) + relayout.path_patterns():
        out = pattern.sub(new, out)
    return out, notes


def test_the_table_is_idempotent_and_keeps_test_names_apart() -> None:
    relayout.check_table()  # exits on a chained or doubled name


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("from xbot import db\n", "from xbot.storage import db\n"),
        (
            "from xbot import __version__, migrations\n",
            "from xbot import __version__\nfrom xbot.storage import migrations\n",
        ),
        (
            "from xbot.media import netguard, ytdlp\n",
            "from xbot.media import netguard\nfrom xbot.sources import ytdlp_api as ytdlp\n",
        ),
        ("def f():\n    from xbot import opscli\n", "def f():\n    from xbot.ops import opscli\n"),
        (
            "from xbot.media.x_api import (\n    expand_tco,  # t.co\n    fetch,\n)\n",
            "from xbot.sources.x_api import (\n    expand_tco,  # t.co\n    fetch,\n)\n",
        ),
        ("from xbot.testing.harness import Harness\n",
         "from xbot.standins.harness import Harness\n"),
        ("from xbot import testing\n", "from xbot import standins as testing\n"),
        ("from xbot.config import Settings\n", "from xbot.config import Settings\n"),
        ("from xbot.handlers import messages\n", "from xbot.handlers import messages\n"),
    ],
    ids=["by-name", "split", "split-subpackage", "indented", "layout-kept", "moved-package",
         "renamed-package", "stays", "stays-subpackage"],
)  # fmt: skip
def test_from_imports(before: str, after: str) -> None:
    assert rewrite(before)[0] == after


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ('monkeypatch.setattr("xbot.db.time", t)',
         'monkeypatch.setattr("xbot.storage.db.time", t)'),
        ('[sys.executable, "-m", "xbot.cli", "run"]',
         '[sys.executable, "-m", "xbot.ops.cli", "run"]'),
        ('xbot = "xbot.cli:main"', 'xbot = "xbot.ops.cli:main"'),
        ('caplog.set_level("INFO", logger="xbot.worker")',
         'caplog.set_level("INFO", logger="xbot.tasks.worker")'),
        ("see `xbot/queue.py` (`_CLAIM_SQL`).", "see `xbot/storage/queue.py` (`_CLAIM_SQL`)."),
        ('"xbot/testing/**" = ["S104"]', '"xbot/standins/**" = ["S104"]'),
        ("tests/test_process.py::test_a", "tests/process/test_process.py::test_a"),
        ("tmp_path / 'xbot.sqlite3'", "tmp_path / 'xbot.sqlite3'"),
        ("xbot.queue_bench xbot.dbx a.xbot.db", "xbot.queue_bench xbot.dbx a.xbot.db"),
        ("/etc/xbot/xbot.env and /opt/xbot/src", "/etc/xbot/xbot.env and /opt/xbot/src"),
    ],
    ids=["monkeypatch-target", "dash-m", "console-script", "logger-name", "doc-path",
         "per-file-ignore", "test-node-id", "db-file-name", "look-alikes", "system-paths"],
)  # fmt: skip
def test_references(before: str, after: str) -> None:
    assert rewrite(before)[0] == after


def test_a_second_pass_changes_nothing() -> None:
    text = "from xbot import db, config\nimport xbot.testing.botapi\nsee xbot/worker.py\n"
    once, _ = rewrite(text)
    assert rewrite(once)[0] == once


def test_a_file_moved_deeper_still_finds_its_neighbours(tmp_path: Path) -> None:
    f = tmp_path / "m.py"
    f.write_text('A = Path(__file__).resolve().parent.parent / "migrations_sql"\n')
    assert relayout.keep_file_relative(f, 1)
    assert f.read_text() == 'A = Path(__file__).resolve().parent.parent.parent / "migrations_sql"\n'


def test_the_readme_gets_one_folder_map(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("README.md").write_text("# xbot\n\nWhere to look: …\n\n## Status\n\nSoon.\n")
    assert relayout.write_readme_folders(dry=False)
    once = Path("README.md").read_text()
    assert not relayout.write_readme_folders(dry=False), "a second run changes nothing"
    assert Path("README.md").read_text() == once
    assert once.count("## Where the code lives") == 1
    assert once.index("## Where the code lives") < once.index("## Status")


def test_babel_cfg_sections_follow_the_stand_ins() -> None:
    text = "# xbot/testing talks to tests\n[ignore: testing/**]\n\n[python: **.py]\n"
    for pattern, new in relayout.babel_patterns():
        text = pattern.sub(new, text)
    assert text == "# xbot/testing talks to tests\n[ignore: standins/**]\n\n[python: **.py]\n"
