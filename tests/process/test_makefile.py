"""The Makefile finds an interpreter without a word of noise, then says what it does.

A pyenv shim for a Python that is not installed exists on PATH and answers
"pyenv: python3.13: command not found"; the probe must take that as a quiet no.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
MAKE = shutil.which("make")
pytestmark = pytest.mark.skipif(MAKE is None, reason="make is not installed")

SHIM = """#!/bin/sh
echo "pyenv: $(basename "$0"): command not found" >&2
echo >&2
echo "The $(basename "$0") command exists in these Python versions:" >&2
echo "  3.13.1" >&2
exit 127
"""


def _fake_path(tmp_path: Path, *, with_python: bool) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("python3.13", "python3.12", "python3.11"):
        shim = bin_dir / name
        shim.write_text(SHIM)
        shim.chmod(0o755)
    if with_python:
        (bin_dir / "python3").symlink_to(sys.executable)
    return bin_dir


def _make(tmp_path: Path, bin_dir: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    assert MAKE is not None
    venv = tmp_path / "venv"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHON", "MAKEFLAGS", "MAKELEVEL")}
    env["PATH"] = str(bin_dir)
    return subprocess.run(
        [MAKE, "--no-print-directory", *flags, f"VENV={venv}", f"{venv}/.installed"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_shims_are_skipped_silently(tmp_path: Path) -> None:
    proc = _make(tmp_path, _fake_path(tmp_path, with_python=True), "-n")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert "pyenv" not in proc.stdout
    first = proc.stdout.splitlines()[0:2]
    assert any("make: setting up" in line and "with python3 " in line for line in first), first


def test_no_python_is_one_clear_line(tmp_path: Path) -> None:
    proc = _make(tmp_path, _fake_path(tmp_path, with_python=False))
    assert proc.returncode == 2
    assert "pyenv" not in proc.stdout + proc.stderr
    assert proc.stderr.splitlines()[0] == "make: Python 3.11 or newer is needed"
