"""Settings: every problem one line naming the setting; defaults; the TOML file."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from xbot.config import (
    DEFAULT_BOT_API_URL,
    SETTINGS,
    SETTINGS_DOC,
    Settings,
    check_settings,
    load_settings,
    token_problem,
    unknown_names,
)
from xbot.errors import ConfigError

TOKEN = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw_"
LOCAL = {"XBOT_BOT_API_URL": "http://127.0.0.1:8081/bot"}


def test_defaults() -> None:
    s = load_settings({"XBOT_DATA_DIR": "/srv/xbot"})
    assert s.bot_api_url == DEFAULT_BOT_API_URL
    assert s.workers == 4
    assert s.upload_limit == 50 * 1024 * 1024
    assert s.db_path == Path("/srv/xbot/xbot.sqlite3")
    assert s.cache_ttl == 7 * 86400
    assert not s.allow_private_networks


@pytest.mark.parametrize(
    ("env", "field", "value"),
    [
        ({"XBOT_WORKERS": " 8 "}, "workers", 8),
        ({"XBOT_ADMIN_IDS": "1, 2,,-100"}, "admin_ids", frozenset({1, 2, -100})),
        ({"XBOT_ALLOW_PRIVATE_NETWORKS": "yes"}, "allow_private_networks", True),
        ({"XBOT_LOG_LEVEL": "debug"}, "log_level", "DEBUG"),
        ({"XBOT_YTDLP_SITES": "ALL"}, "ytdlp_sites", "all"),
        ({"XBOT_UPLOAD_LIMIT_MB": "2000", **LOCAL}, "upload_limit_mb", 2000),
        ({"XBOT_BOT_API_URL": "http://h:1/bot/"}, "bot_api_url", "http://h:1/bot"),
        ({"XBOT_BOT_API_URL": "http://h/x{token}/y"}, "bot_api_url", "http://h/x{token}/y"),
        ({"XBOT_CACHE_TTL_DAYS": "2"}, "cache_ttl", 2 * 86400.0),
        ({"XBOT_TOKEN": f" {TOKEN}\n"}, "token", TOKEN),
        ({"XBOT_YTDLP_COOKIES": ""}, "ytdlp_cookies", None),
    ],
    ids=[
        "workers",
        "ids",
        "bool",
        "level",
        "sites",
        "local-upload",
        "trailing-slash",
        "token-placeholder",
        "ttl",
        "token-stripped",
        "no-cookies",
    ],
)
def test_values(env: dict[str, str], field: str, value: object) -> None:
    assert getattr(load_settings(env), field) == value


@pytest.mark.parametrize(
    ("env", "setting"),
    [
        ({"XBOT_WORKERS": "many"}, "XBOT_WORKERS"),
        ({"XBOT_WORKERS": "0"}, "XBOT_WORKERS"),
        ({"XBOT_ADMIN_IDS": "@alice"}, "XBOT_ADMIN_IDS"),
        ({"XBOT_ALLOWED_CHAT_IDS": "1;2"}, "XBOT_ALLOWED_CHAT_IDS"),
        ({"XBOT_ALLOW_PRIVATE_NETWORKS": "maybe"}, "XBOT_ALLOW_PRIVATE_NETWORKS"),
        ({"XBOT_LOG_LEVEL": "LOUD"}, "XBOT_LOG_LEVEL"),
        ({"XBOT_YTDLP_SITES": "some"}, "XBOT_YTDLP_SITES"),
        ({"XBOT_BOT_API_URL": "ftp://x/bot"}, "XBOT_BOT_API_URL"),
        ({"XBOT_BOT_API_URL": "http://127.0.0.1:8081"}, "XBOT_BOT_API_URL"),
        ({"XBOT_BOT_API_FILE_URL": "http://127.0.0.1:8081/bot"}, "XBOT_BOT_API_FILE_URL"),
        ({"XBOT_X_API_URL": "https://"}, "XBOT_X_API_URL"),
        ({"XBOT_UPLOAD_LIMIT_MB": "2001", **LOCAL}, "XBOT_UPLOAD_LIMIT_MB"),
        ({"XBOT_UPLOAD_LIMIT_MB": "2000"}, "XBOT_UPLOAD_LIMIT_MB"),
        ({"XBOT_CAPTION_EDIT_TTL": "5"}, "XBOT_CAPTION_EDIT_TTL"),
        ({"XBOT_CACHE_TTL_DAYS": "-1"}, "XBOT_CACHE_TTL_DAYS"),
        ({"XBOT_DATA_DIR": "data"}, "XBOT_DATA_DIR"),
        ({"XBOT_CONFIG": "/nonexistent/xbot.toml"}, "XBOT_CONFIG"),
    ],
    ids=[
        "workers-word",
        "workers-zero",
        "admin-handle",
        "chats-semicolon",
        "bool",
        "level",
        "sites",
        "scheme",
        "api-without-bot",
        "file-url-tail",
        "no-host",
        "upload-over-2000",
        "upload-over-cloud",
        "caption-ttl",
        "cache-ttl",
        "relative-data-dir",
        "missing-toml",
    ],
)
def test_each_problem_is_one_line_naming_the_setting(env: dict[str, str], setting: str) -> None:
    settings, problems = check_settings(env)
    assert settings is None
    assert len(problems) == 1
    assert problems[0].startswith(f"{setting}: ")
    assert "\n" not in problems[0]
    with pytest.raises(ConfigError, match=f"^{setting}: "):
        load_settings(env)


def test_all_problems_are_listed_and_the_error_counts_them() -> None:
    env = {"XBOT_WORKERS": "x", "XBOT_LOG_LEVEL": "LOUD", "XBOT_ADMIN_IDS": "bob"}
    _, problems = check_settings(env)
    assert [p.split(":")[0] for p in problems] == [
        "XBOT_ADMIN_IDS",
        "XBOT_WORKERS",
        "XBOT_LOG_LEVEL",
    ]
    with pytest.raises(ConfigError, match=r"and 2 more problems: run `xbot doctor`"):
        load_settings(env)


def test_data_dir_order(tmp_path: Path) -> None:
    state = {"STATE_DIRECTORY": "/var/lib/xbot:/var/lib/other"}
    assert load_settings(state).data_dir == Path("/var/lib/xbot")
    assert load_settings({**state, "XBOT_DATA_DIR": str(tmp_path)}).data_dir == tmp_path
    assert load_settings({}).data_dir.is_absolute()


def test_toml_file_and_the_environment_wins(tmp_path: Path) -> None:
    toml = tmp_path / "xbot.toml"
    toml.write_text(
        "XBOT_WORKERS = 2\nXBOT_ADMIN_IDS = [1, 2]\nXBOT_ALLOW_PRIVATE_NETWORKS = true\n"
    )
    s = load_settings({"XBOT_CONFIG": str(toml), "XBOT_WORKERS": "3"})
    assert (s.workers, s.admin_ids, s.allow_private_networks) == (3, frozenset({1, 2}), True)
    toml.write_text("XBOT_WORKRES = 2\n")
    with pytest.raises(ConfigError, match=r"^XBOT_CONFIG: unknown setting 'XBOT_WORKRES'"):
        load_settings({"XBOT_CONFIG": str(toml)})
    toml.write_text("XBOT_WORKERS = \n")
    with pytest.raises(ConfigError, match=r"^XBOT_CONFIG: cannot read"):
        load_settings({"XBOT_CONFIG": str(toml)})


@pytest.mark.parametrize(
    ("token", "hint"),
    [
        (TOKEN, None),
        ("", "not set"),
        (f'"{TOKEN}"', "quotes"),
        (f"{TOKEN[:20]} {TOKEN[20:]}", "spaces"),
        (TOKEN.replace(":", ""), "no colon"),
        ("123456789:short", "does not look like a bot token"),
    ],
    ids=["good", "empty", "quoted", "space", "no-colon", "short"],
)
def test_token_shape(token: str, hint: str | None) -> None:
    problem = token_problem(token)
    if hint is None:
        assert problem is None
        return
    assert problem is not None
    assert problem.startswith("XBOT_TOKEN: ")
    assert hint in problem
    if token:
        assert token not in problem
        assert TOKEN[10:] not in problem


@given(st.from_regex(r"[ \"']?[0-9]{3,12}[:;]?[A-Za-z0-9_\- ]{0,70}[\"']?", fullmatch=True))
def test_token_problem_never_shows_the_token(token: str) -> None:
    # Near-misses of the shape; the leading digits never occur in the message itself.
    problem = token_problem(token)
    assert problem is None or token.strip(" \"'")[:3] not in problem


def test_unknown_names_suggest_the_setting() -> None:
    env = {"XBOT_WORKER": "8", "XBOT_TOKEN": TOKEN, "XBOT_SOMETHING": "1", "PATH": "/bin"}
    assert unknown_names(env) == [
        "XBOT_SOMETHING: not a setting xbot reads",
        "XBOT_WORKER: not a setting xbot reads (did you mean XBOT_WORKERS?)",
    ]


def test_every_documented_setting_has_a_meaning_and_a_default() -> None:
    for name, (meaning, default) in SETTINGS_DOC.items():
        assert name.startswith("XBOT_")
        assert meaning
        assert default
        assert "|" not in meaning + default  # they go into a Markdown table


def test_the_class_defaults_are_an_empty_environment() -> None:
    """Each setting's default is declared once (`setting`): `Settings()` and an empty
    environment read through `check_settings` agree field by field."""
    assert load_settings({}) == Settings()


def test_every_field_is_a_declared_setting() -> None:
    declared = [s.name for s in SETTINGS]
    assert len(declared) == len(set(declared))
    assert len(attrs.fields(Settings)) == len(declared) - 2  # XBOT_CONFIG, XBOT_WEBHOOK_SECRET


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"STATE_DIRECTORY": "/var/lib/xbot:/var/lib/other"}, Path("/var/lib/xbot")),
        ({"STATE_DIRECTORY": "/var/lib/xbot", "XBOT_DATA_DIR": ""}, Path("/var/lib/xbot")),
        ({"STATE_DIRECTORY": "/var/lib/xbot", "XBOT_DATA_DIR": "/srv/x"}, Path("/srv/x")),
    ],
    ids=["systemd", "empty-means-unset", "explicit-wins"],
)
def test_the_data_dir_default_follows_systemd(env: dict[str, str], expected: Path) -> None:
    assert load_settings(env).data_dir == expected


@pytest.mark.parametrize(
    ("raw", "value"),
    [("", ""), ("31415926_AbC-d.e", "31415926_AbC-d.e"),
     ("PHPSESSID=31415926_abc", "31415926_abc"), ("  31415926_abc\n", "31415926_abc")],
    ids=["unset", "as-copied", "with-the-cookie-name", "stray-whitespace"],
)  # fmt: skip
def test_the_pixiv_session(raw: str, value: str) -> None:
    settings, problems = check_settings({"XBOT_PIXIV_SESSION": raw})
    assert problems == []
    assert settings is not None
    assert settings.pixiv_session == value
    assert value not in repr(settings) or not value, "a login is kept out of repr"


@pytest.mark.parametrize(
    "raw",
    ["3141_abc; other=1", "3141_abc\r\nX-Evil: 1", "3141 abc"],
    ids=["a-second-cookie", "a-header-injection", "a-space"],
)
def test_a_session_that_could_break_the_cookie_header_is_refused_unshown(raw: str) -> None:
    _, problems = check_settings({"XBOT_PIXIV_SESSION": raw})
    (problem,) = problems
    assert problem.startswith("XBOT_PIXIV_SESSION: does not look like a pixiv PHPSESSID")
    assert "3141" not in problem
