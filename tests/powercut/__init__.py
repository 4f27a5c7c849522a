"""A power cut for a child process: only what it synced under one folder survives.

`Disk(root, shadow)` is the disk beneath ``root``. `Disk.env()` is what the
child needs in its environment (``LD_PRELOAD`` of the shim built from
``powercut.c`` beside this file, and the two folders); the shim keeps each
file's content as of its last fsync in the shadow folder. `Disk.power_on()`
takes the first snapshot (everything on the real disk now counts as synced);
`Disk.cut()`, called once the child is dead, puts every file back as the disk
would have it after the power came back: its content as of its last sync,
empty if it was created and never synced. Names are on the disk at once (as in
Jepsen's LazyFS). What the model leaves out: docs/reliability.md.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

SOURCE = Path(__file__).with_name("powercut.c")
# Warnings are errors; a path longer than PATH_MAX is cut short, on purpose.
FLAGS = ("-O2", "-Wall", "-Werror", "-Wno-format-truncation", "-shared", "-fPIC")


def build(into: Path) -> Path:
    """Compile the shim into ``into`` (a C compiler is part of the test toolchain: .ci/run)."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise RuntimeError("the power-cut model needs a C compiler (cc): see .ci/run")
    into.mkdir(parents=True, exist_ok=True)
    lib = into / "powercut.so"
    subprocess.run(
        [compiler, *FLAGS, "-o", str(lib), str(SOURCE), "-ldl", "-lpthread"],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return lib


class Disk:
    """The disk beneath ``root`` as the shim records it in ``shadow``."""

    def __init__(self, lib: Path, root: Path, shadow: Path, *, sync_delay_ms: int = 0) -> None:
        self.lib = lib
        self.root = root.resolve()
        self.shadow = shadow
        self.sync_delay_ms = sync_delay_ms  # every sync takes this long: a busy disk

    def env(self) -> dict[str, str]:
        return {
            "LD_PRELOAD": str(self.lib),
            "POWERCUT_ROOT": str(self.root),
            "POWERCUT_SHADOW": str(self.shadow.resolve()),
            "POWERCUT_SYNC_DELAY_MS": str(self.sync_delay_ms),
        }

    def power_on(self) -> None:
        """Whatever is under ``root`` now is what the disk holds (the state after a boot)."""
        self.root.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(self.shadow, ignore_errors=True)
        self.shadow.mkdir(parents=True)
        for path in self._files():
            kept = self.shadow / path.relative_to(self.root)
            kept.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, kept)

    def cut(self) -> list[str]:
        """The power failed (the child must be dead): unsynced data is gone. Powers on again.

        Returns the files the cut changed (relative to ``root``), for the test's own checks.
        """
        changed: list[str] = []
        for path in self._files():
            kept = self.shadow / path.relative_to(self.root)
            synced = kept.read_bytes() if kept.is_file() else b""
            if path.read_bytes() != synced:
                changed.append(str(path.relative_to(self.root)))
                if synced:
                    shutil.copyfile(kept, path)  # in place: the inode and its mode stay
                else:
                    os.truncate(path, 0)
        self.power_on()
        return changed

    def _files(self) -> list[Path]:
        return sorted(p for p in self.root.rglob("*") if p.is_file() and not p.is_symlink())
