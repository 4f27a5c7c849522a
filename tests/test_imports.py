"""Every module of the package imports on its own, whichever is first.

An import cycle can hide behind the order the application happens to import
things in, and show only when a test, a tool or ``python -m`` starts from
another module (a package ``__init__`` that imports its submodules is the
usual way in). Each module is imported here in a fresh ``xbot``, in a child
process so that the test run's own modules are not disturbed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "xbot"

PROBE = """
import importlib, sys
failed = []
for name in sys.argv[1:]:
    for loaded in [m for m in sys.modules if m == "xbot" or m.startswith("xbot.")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception as exc:
        failed.append(f"{name}: {type(exc).__name__}: {exc}")
print("\\n".join(failed))
"""


def _modules() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__main__":
            continue  # runs the CLI when imported
        found.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


def test_the_walk_finds_the_modules() -> None:
    assert {"xbot", "xbot.app", "xbot.handlers.messages", "xbot.media.netguard"} <= set(_modules())


def test_every_module_imports_on_its_own() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *_modules()],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert done.stdout.strip() == "", done.stdout
