"""write_atomically: whole or not at all, private, nothing left behind (the power cut's half
is in tests/process/test_power_model.py)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from xbot.storage.files import write_atomically


@pytest.mark.parametrize(
    ("before", "data"),
    [(None, b"new"), (b"old and longer", b"new"), (b"old", b"")],
    ids=["created", "replaced", "emptied"],
)
def test_the_file_holds_the_new_bytes_privately_and_no_temp_is_left(
    tmp_path: Path, before: bytes | None, data: bytes
) -> None:
    target = tmp_path / "record.json"
    if before is not None:
        target.write_bytes(before)
        target.chmod(0o644)
    write_atomically(target, data)
    assert target.read_bytes() == data
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["record.json"]


def test_a_failure_leaves_the_old_file_and_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "record.json"
    target.mkdir()  # a rename over a folder fails
    with pytest.raises(OSError):
        write_atomically(target, b"new")
    assert target.is_dir()
    assert [p.name for p in tmp_path.iterdir()] == ["record.json"]
