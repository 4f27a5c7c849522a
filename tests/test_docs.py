"""The README and docs/deployment.md are checked against the code: every setting and
every command is documented, and the configuration table is the one the code renders."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from xbot.cli import build_parser
from xbot.config import SETTINGS_DOC, settings_table

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
DEPLOYMENT = (ROOT / "docs" / "deployment.md").read_text()
CHANGELOG = (ROOT / "CHANGELOG.md").read_text()
OPS = README.split("<!-- ops sections below -->", 1)[-1]


def _section(text: str, title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.MULTILINE | re.DOTALL)
    assert match, f"no section {title!r}"
    return match.group(1)


def _commands() -> list[str]:
    found: list[str] = []

    def walk(parser: argparse.ArgumentParser, prefix: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    if not any(isinstance(a, argparse._SubParsersAction) for a in child._actions):
                        found.append(f"{prefix}{name}")
                    walk(child, f"{prefix}{name} ")

    walk(build_parser(), "xbot ")
    return found


def test_the_ops_sections_sit_below_the_marker() -> None:
    assert "<!-- ops sections below -->" in README
    for title in ("Deploying on a VPS", "Operator commands", "Configuration", "Backups"):
        assert f"\n## {title}\n" in OPS


def test_readme_configuration_table_is_the_codes() -> None:
    assert settings_table() in _section(README, "Configuration")


def test_every_setting_the_code_reads_is_documented() -> None:
    """Any XBOT_* name in the package's source must be in SETTINGS_DOC (and so in the
    README's table and the example environment file)."""
    named: set[str] = set()
    for path in (ROOT / "xbot").rglob("*.py"):
        named |= set(re.findall(r"\bXBOT_[A-Z][A-Z0-9_]*[A-Z0-9]\b", path.read_text()))
    assert named - set(SETTINGS_DOC) == set()


@pytest.mark.parametrize("command", _commands())
def test_every_command_is_documented(command: str) -> None:
    assert command in _section(README, "Operator commands")
    assert command in DEPLOYMENT


@pytest.mark.parametrize(
    "topic",
    ["silent in a group", "429", "video arrives as a file", "database is locked"],
)
def test_troubleshooting_covers(topic: str) -> None:
    assert topic in _section(README, "Troubleshooting")
    assert topic in _section(DEPLOYMENT, "Troubleshooting")


@pytest.mark.parametrize(
    "needle",
    [
        "@BotFather",
        "/setprivacy",
        "setMyCommands",
        "python3 -m venv /opt/xbot/venv",
        "/etc/xbot/xbot.env",
        "systemctl enable --now xbot",
        "journalctl -u xbot",
        "xbotctl doctor",
        "Migrations run on start",
        "An older xbot refuses a newer database",
        "**Restore**",
        "telegram-bot-api",
        "--local",
        "XBOT_UPLOAD_LIMIT_MB=2000",
        "XBOT_BOT_API_URL=http://127.0.0.1:8081/bot",
    ],
)
def test_deployment_walks_through(needle: str) -> None:
    assert needle in DEPLOYMENT


def test_changelog_keeps_an_unreleased_section() -> None:
    assert "Keep a Changelog" in CHANGELOG
    assert "## [Unreleased]" in CHANGELOG


# A path as the docs write one: repo-relative, not inside /opt/xbot/... or /etc/xbot/...
_REPO_PATH = re.compile(
    r"(?<![\w/.~-])((?:xbot|tests|bench|migrations_sql|systemd|docs)/[\w/.-]*\w)"
)


@pytest.mark.parametrize(
    "doc", ["README.md", "docs/deployment.md", "docs/reliability.md", "docs/benchmarks.md",
            "docs/large-media.md", "bench/README.md"],
)  # fmt: skip
def test_every_file_the_docs_point_to_is_there(doc: str) -> None:
    """'Where to look' stays true when a module moves: a path that is gone fails here."""
    named = {m.group(1) for m in _REPO_PATH.finditer((ROOT / doc).read_text())}
    assert sorted(p for p in named if not (ROOT / p).exists()) == []


def test_the_path_pattern_finds_the_readmes_table() -> None:
    named = {m.group(1) for m in _REPO_PATH.finditer(README)}
    assert {"xbot/app.py", "xbot/media/netguard.py", "migrations_sql/0002_chat_lanes.sql"} <= named
