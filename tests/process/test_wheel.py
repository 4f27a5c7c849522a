"""The schema and the compiled message catalogues ship inside the wheel: a store opens and
the bot speaks German from an installed copy, not the checkout, without Babel; and the
stand-ins that `xbot demo` runs against ship beside the package."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent

pytestmark = pytest.mark.slow

PROBE = """
import asyncio, sys, pathlib
sys.modules["babel"] = None  # the catalogues are compiled already: Babel is not needed to run
import xbot, xbot.storage.migrations as m
from xbot.i18n import LANGUAGES, mo_path, translator
for lang in LANGUAGES:
    if lang != "en":
        assert str(mo_path(lang)).startswith(sys.argv[1]) and mo_path(lang).is_file(), lang
assert translator("de").gettext("Close") == "Schließen"
from xbot.storage.db import open_store
here = pathlib.Path(xbot.__file__).resolve()
assert str(here).startswith(sys.argv[1]), f"xbot imported from {here}, not the wheel"
assert str(m.migrations_dir()).startswith(sys.argv[1]), m.migrations_dir()
# `xbot demo` runs from an installed copy: the stand-ins ride in the wheel beside xbot.
import xbot.demo, standins.harness
assert str(pathlib.Path(standins.harness.__file__).resolve()).startswith(sys.argv[1])
async def main():
    pool = await open_store(pathlib.Path(sys.argv[2]))
    print(await pool.run(lambda c: c.pragma("user_version")), m.latest_version())
    await pool.close()
asyncio.run(main())
"""


def test_wheel_carries_migrations(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist)],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    (wheel,) = dist.glob("xbot-*.whl")

    # A fresh venv holding only the wheel; its dependencies are borrowed from the
    # test environment through a .pth line (which does not run the checkout's
    # editable hook), so the test needs no network and no second install.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    vpy = venv / "bin" / "python"
    site = subprocess.run(
        [str(vpy), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", site, str(wheel)],
        check=True,
        capture_output=True,
    )
    Path(site, "borrowed_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    out = subprocess.run(
        [str(vpy), "-c", PROBE, site, str(tmp_path / "db" / "x.sqlite3")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    version, latest = out.stdout.split()
    assert version == latest
    assert int(latest) >= 2
