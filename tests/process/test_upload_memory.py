"""Large uploads in constant memory (issue 25): the real `xbot run` uploads files many
times larger than the bound through the Bot API stand-in in local-server mode, and its
peak resident memory grows by no more than a fixed few MB, whatever the file's size.

The scenario is bench/upload_bench.py's (which runs it at 50, 300 and 1500 MB); here the
files are 100-160 MB so `make test` stays quick. The stand-in takes each body as it
arrives and records its SHA-256: the file must arrive whole.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

MB = 1024 * 1024
# The bound for one upload in flight: a chunk or two of the body (1 MB each), the
# download's buffers, and room for the allocator. Before the uploads were streamed,
# each one cost about three times its file (docs/benchmarks.md, "Uploads").
BOUND_MB = 16


def load_bench() -> Any:
    name = "xbot_upload_bench"
    if name not in sys.modules:
        path = Path(__file__).resolve().parents[2] / "bench" / "upload_bench.py"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


SHAPES = [("video", 160 * MB), ("album", 150 * MB), ("document", 100 * MB)]


def test_large_uploads_do_not_grow_the_bots_memory_with_their_size(tmp_path: Path) -> None:
    """sendVideo of 160 MB, sendMediaGroup of 3 x 50 MB, sendDocument of 100 MB: one bot."""
    bench = load_bench()
    with bench.stage(tmp_path) as stage:
        if not bench.reset_peak(stage.proc.pid):
            pytest.skip("/proc/PID/clear_refs is not writable here: no peak to measure")
        got = [stage.measure(shape, size, within=120.0) for shape, size in SHAPES]
        log = stage.log()
    report = "; ".join(
        f"{u.shape} {u.size // MB} MB: {u.base_kb // 1024} -> {u.peak_kb // 1024} MB"
        f" (+{u.growth_mb:.1f}) in {u.seconds:.1f} s"
        for u in got
    )
    assert all(u.whole for u in got), f"a file did not arrive whole (digest mismatch): {report}"
    assert all(u.growth_mb < BOUND_MB for u in got), report
    assert "Traceback" not in log
