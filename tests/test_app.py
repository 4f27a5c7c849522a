"""The composition root: every part built whole by its constructor, and wired right."""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

import xbot.app
from xbot.app import build_front
from xbot.config import load_settings

APP = Path(xbot.app.__file__)


def test_the_composition_root_builds_every_part_whole() -> None:
    """No late-binding lambda (a cycle hidden, not broken), no attribute set on a part
    after it was built and no listener added to one (wiring by mutation): collaborators
    go to constructors. (PTB's handlers are registered on its application, its way.)"""
    found = []
    for node in ast.walk(ast.parse(APP.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Lambda):
            found.append(f"line {node.lineno}: a lambda")
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        found += [
            f"line {t.lineno}: sets .{t.attr}" for t in targets if isinstance(t, ast.Attribute)
        ]
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_listener":
            found.append(f"line {node.lineno}: adds a listener")
    assert found == []


async def test_telegram_back_rings_the_workers_doorbell(tmp_path: Path) -> None:
    """Workers napping through Telegram's hold start at once when sends may go again."""
    settings = load_settings({"XBOT_TOKEN": "1:a", "XBOT_DATA_DIR": str(tmp_path)})
    front = build_front(settings, counting=False)
    front.health.failed("NetworkError: Bad Gateway (502)")
    napping = asyncio.create_task(front.doorbell.wait(60.0))
    await asyncio.sleep(0)  # the worker is napping now
    front.health.answered()
    await asyncio.wait_for(napping, 5.0)
    await front.application.shutdown()
