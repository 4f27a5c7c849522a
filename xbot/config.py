"""Settings, read from the environment (and optionally a TOML file with the same names).

The variable names are a contract (see README, "Configuration"): tests and
deployments rely on them. `SETTINGS_DOC` is the one table of them; the README's
table is checked against it by a test.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path

import attrs
import platformdirs

from xbot.errors import ConfigError

DEFAULT_BOT_API_URL = "https://api.telegram.org/bot"
DEFAULT_BOT_API_FILE_URL = "https://api.telegram.org/file/bot"
DEFAULT_X_API_URL = "https://api.fxtwitter.com"

# name -> (meaning, default as shown to people)
SETTINGS_DOC: dict[str, tuple[str, str]] = {
    "XBOT_TOKEN": ("bot token from @BotFather", "required for `run`"),
    "XBOT_BOT_API_URL": ("Bot API base URL (PTB `base_url`)", DEFAULT_BOT_API_URL),
    "XBOT_BOT_API_FILE_URL": ("Bot API file base URL", DEFAULT_BOT_API_FILE_URL),
    "XBOT_X_API_URL": ("fxtwitter-compatible API base", DEFAULT_X_API_URL),
    "XBOT_DATA_DIR": (
        "where the database and temp files live",
        "`$STATE_DIRECTORY`, else the platformdirs user data dir",
    ),
    "XBOT_ADMIN_IDS": ("comma-separated user ids allowed admin commands", "empty"),
    "XBOT_ALLOWED_CHAT_IDS": ("if set, only these chats/users are served", "empty (everyone)"),
    "XBOT_WORKERS": ("concurrent workers", "4"),
    "XBOT_UPLOAD_LIMIT_MB": ("largest file the bot uploads (50 cloud, up to 2000 local)", "50"),
    "XBOT_YTDLP_SITES": ("`known` (no generic extractor) or `all`", "known"),
    "XBOT_ALLOW_PRIVATE_NETWORKS": ("`1` lets media come from private addresses", "off"),
    "XBOT_LOG_LEVEL": ("logging level", "INFO"),
    "XBOT_CAPTION_EDIT_TTL": ("seconds a caption-edit prompt stays open", "86400"),
    "XBOT_CACHE_TTL_DAYS": ("days a link-cache entry is kept", "7"),
    "XBOT_CONFIG": ("optional TOML file with any of these names", "none"),
}

_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


@attrs.frozen
class Settings:
    """Everything the bot reads from its environment, validated.

    Attributes:
        token: the bot token ("" when unset; `run` requires it).
        data_dir: the folder for the database and temp files.
        upload_limit: the largest upload, in bytes.
    """

    token: str = ""
    bot_api_url: str = DEFAULT_BOT_API_URL
    bot_api_file_url: str = DEFAULT_BOT_API_FILE_URL
    x_api_url: str = DEFAULT_X_API_URL
    data_dir: Path = attrs.field(factory=lambda: Path(platformdirs.user_data_dir("xbot")))
    admin_ids: frozenset[int] = frozenset()
    allowed_chat_ids: frozenset[int] = frozenset()
    workers: int = 4
    upload_limit_mb: int = 50
    ytdlp_sites: str = "known"
    allow_private_networks: bool = False
    log_level: str = "INFO"
    caption_edit_ttl: float = 86400.0
    cache_ttl: float = 7 * 86400.0

    @property
    def upload_limit(self) -> int:
        return self.upload_limit_mb * 1024 * 1024

    @property
    def db_path(self) -> Path:
        return self.data_dir / "xbot.sqlite3"

    @property
    def tmp_dir(self) -> Path:
        return self.data_dir / "tmp"

    def is_allowed_chat(self, chat_id: int, user_id: int | None = None) -> bool:
        if not self.allowed_chat_ids:
            return True
        return chat_id in self.allowed_chat_ids or (
            user_id is not None and user_id in self.allowed_chat_ids
        )


def _ids(name: str, raw: str) -> frozenset[int]:
    out: set[int] = set()
    for part in raw.replace(" ", "").split(","):
        if not part:
            continue
        try:
            out.add(int(part))
        except ValueError:
            raise ConfigError(
                f"{name}: {part!r} is not a numeric Telegram id (expected e.g. 12345,-100678)"
            ) from None
    return frozenset(out)


def _int(name: str, raw: str, lo: int, hi: int) -> int:
    try:
        value = int(raw.strip())
    except ValueError:
        raise ConfigError(f"{name}: {raw!r} is not a whole number") from None
    if not lo <= value <= hi:
        raise ConfigError(f"{name}: {value} is out of range ({lo}..{hi})")
    return value


def _bool(name: str, raw: str) -> bool:
    low = raw.strip().lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise ConfigError(f"{name}: {raw!r} is not a yes/no value (use 1 or 0)")


def _url(name: str, raw: str) -> str:
    value = raw.strip()
    if not value.startswith(("http://", "https://")):
        raise ConfigError(f"{name}: {value!r} is not an http(s) URL")
    return value.rstrip("/")


def default_data_dir(env: Mapping[str, str]) -> Path:
    """Explicit setting, then systemd's `$STATE_DIRECTORY` (first entry), then platformdirs."""
    if env.get("XBOT_DATA_DIR"):
        return Path(env["XBOT_DATA_DIR"]).expanduser()
    if env.get("STATE_DIRECTORY"):
        return Path(env["STATE_DIRECTORY"].split(":")[0])
    return Path(platformdirs.user_data_dir("xbot"))


def _read_toml(path: str) -> dict[str, str]:
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"XBOT_CONFIG: no such file: {path}") from None
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"XBOT_CONFIG: cannot read {path}: {exc}") from None
    out: dict[str, str] = {}
    for key, value in data.items():
        if key not in SETTINGS_DOC:
            raise ConfigError(f"XBOT_CONFIG: unknown setting {key!r} in {path}")
        if isinstance(value, bool):
            out[key] = "1" if value else "0"
        elif isinstance(value, list):
            out[key] = ",".join(str(v) for v in value)
        else:
            out[key] = str(value)
    return out


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    """Read and validate the settings. Raises `ConfigError` with one line on a bad value.

    The environment wins over the TOML file named by `XBOT_CONFIG`.
    """
    environ = dict(os.environ if env is None else env)
    merged: dict[str, str] = {}
    if environ.get("XBOT_CONFIG"):
        merged.update(_read_toml(environ["XBOT_CONFIG"]))
    merged.update(
        {k: v for k, v in environ.items() if k.startswith("XBOT_") or k == "STATE_DIRECTORY"}
    )

    level = merged.get("XBOT_LOG_LEVEL", "INFO").strip().upper() or "INFO"
    if level not in _LOG_LEVELS:
        raise ConfigError(f"XBOT_LOG_LEVEL: {level!r} is not one of {', '.join(_LOG_LEVELS)}")
    sites = merged.get("XBOT_YTDLP_SITES", "known").strip().lower() or "known"
    if sites not in ("known", "all"):
        raise ConfigError(f"XBOT_YTDLP_SITES: {sites!r} must be 'known' or 'all'")

    return Settings(
        token=merged.get("XBOT_TOKEN", "").strip(),
        bot_api_url=_url("XBOT_BOT_API_URL", merged.get("XBOT_BOT_API_URL", DEFAULT_BOT_API_URL)),
        bot_api_file_url=_url(
            "XBOT_BOT_API_FILE_URL", merged.get("XBOT_BOT_API_FILE_URL", DEFAULT_BOT_API_FILE_URL)
        ),
        x_api_url=_url("XBOT_X_API_URL", merged.get("XBOT_X_API_URL", DEFAULT_X_API_URL)),
        data_dir=default_data_dir(merged),
        admin_ids=_ids("XBOT_ADMIN_IDS", merged.get("XBOT_ADMIN_IDS", "")),
        allowed_chat_ids=_ids("XBOT_ALLOWED_CHAT_IDS", merged.get("XBOT_ALLOWED_CHAT_IDS", "")),
        workers=_int("XBOT_WORKERS", merged.get("XBOT_WORKERS", "4"), 1, 64),
        upload_limit_mb=_int(
            "XBOT_UPLOAD_LIMIT_MB", merged.get("XBOT_UPLOAD_LIMIT_MB", "50"), 1, 2000
        ),
        ytdlp_sites=sites,
        allow_private_networks=_bool(
            "XBOT_ALLOW_PRIVATE_NETWORKS", merged.get("XBOT_ALLOW_PRIVATE_NETWORKS", "0")
        ),
        log_level=level,
        caption_edit_ttl=float(
            _int(
                "XBOT_CAPTION_EDIT_TTL",
                merged.get("XBOT_CAPTION_EDIT_TTL", "86400"),
                60,
                30 * 86400,
            )
        ),
        cache_ttl=86400.0
        * _int("XBOT_CACHE_TTL_DAYS", merged.get("XBOT_CACHE_TTL_DAYS", "7"), 1, 365),
    )
