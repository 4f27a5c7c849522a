"""Settings, read from the environment (and optionally a TOML file with the same names).

The variable names are a contract (see README, "Configuration"): tests and
deployments rely on them. `SETTINGS_DOC` is the one table of them; the README's
table is checked against it by a test.
"""

from __future__ import annotations

import difflib
import ipaddress
import os
import re
import tomllib
import urllib.parse
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

import attrs
import platformdirs

from xbot.errors import ConfigError

T = TypeVar("T")

DEFAULT_BOT_API_URL = "https://api.telegram.org/bot"
DEFAULT_BOT_API_FILE_URL = "https://api.telegram.org/file/bot"
DEFAULT_BSKY_API_URL = "https://public.api.bsky.app"
DEFAULT_BSKY_PLC_URL = "https://plc.directory"
DEFAULT_PIXIV_API_URL = "https://www.pixiv.net"
DEFAULT_X_API_URL = "https://api.fxtwitter.com"
DEFAULT_VX_API_URL = "https://api.vxtwitter.com"
DEFAULT_X_SYNDICATION_URL = "https://cdn.syndication.twimg.com"

# name -> (meaning, default as shown to people). The README's configuration table
# and systemd/xbot.env.example are checked against this by tests/test_docs.py.
SETTINGS_DOC: dict[str, tuple[str, str]] = {
    "XBOT_TOKEN": ("bot token from @BotFather", "required for `run`"),
    "XBOT_BOT_API_URL": (
        "Bot API base URL (PTB `base_url`, ends in `/bot`), e.g. a local Bot API server",
        DEFAULT_BOT_API_URL,
    ),
    "XBOT_BOT_API_FILE_URL": (
        "Bot API file base URL (PTB `base_file_url`, ends in `/file/bot`)",
        DEFAULT_BOT_API_FILE_URL,
    ),
    "XBOT_X_API_URL": ("fxtwitter-compatible API base", DEFAULT_X_API_URL),
    "XBOT_VX_API_URL": (
        "vxtwitter-compatible API base, asked when the first source fails transiently; "
        "empty disables",
        DEFAULT_VX_API_URL,
    ),
    "XBOT_X_SYNDICATION_URL": (
        "X's syndication endpoint base (`/tweet-result`), the third source; empty disables",
        DEFAULT_X_SYNDICATION_URL,
    ),
    "XBOT_DATA_DIR": (
        "where the database and temp files live",
        "`$STATE_DIRECTORY` under systemd, else the platformdirs user data dir",
    ),
    "XBOT_ADMIN_IDS": ("comma-separated user ids allowed admin commands (`/stats`)", "empty"),
    "XBOT_ALLOWED_CHAT_IDS": (
        "if set, only these chats/users (comma-separated ids) are served",
        "empty (everyone)",
    ),
    "XBOT_WORKERS": ("concurrent workers (1-64)", "4"),
    "XBOT_UPLOAD_LIMIT_MB": (
        "largest file the bot uploads, in MB (50 on the cloud Bot API, "
        "up to 2000 on a local Bot API server)",
        "50",
    ),
    "XBOT_YTDLP_SITES": (
        "`known`: every yt-dlp extractor but the generic one; `all`: the generic one too",
        "known",
    ),
    "XBOT_GALLERYDL_CONFIG": (
        "path of a gallery-dl configuration file (JSON) handed to gallery-dl for image posts "
        "from other sites: cookies, credentials, extra instances of sites it knows "
        "(Mastodon, *booru, …)",
        "none",
    ),
    "XBOT_BSKY_API_URL": ("Bluesky AppView base (public, no login)", DEFAULT_BSKY_API_URL),
    "XBOT_BSKY_PLC_URL": (
        "DID directory where a Bluesky author's PDS (their video files) is looked up",
        DEFAULT_BSKY_PLC_URL,
    ),
    "XBOT_PIXIV_API_URL": ("pixiv base for its `/ajax/illust` API", DEFAULT_PIXIV_API_URL),
    "XBOT_ALLOW_PRIVATE_NETWORKS": (
        "`1` lets media come from loopback/private addresses (tests, demo)",
        "off",
    ),
    "XBOT_LOG_LEVEL": ("logging level: DEBUG, INFO, WARNING, ERROR", "INFO"),
    "XBOT_CAPTION_EDIT_TTL": ("seconds a caption-edit prompt stays open (60-2592000)", "86400"),
    "XBOT_CACHE_TTL_DAYS": ("days a link-cache entry is kept (1-365)", "7"),
    "XBOT_WEBHOOK_SECRET": (
        "webhook mode only: the secret Telegram sends with every update "
        "(1-256 of A-Z a-z 0-9 _ -); `xbot run --secret-token-env` names another variable",
        "none",
    ),
    "XBOT_METRICS_ADDR": (
        "`host:port` of the operator's HTTP listener: `GET /metrics` (Prometheus), `GET /livez` "
        "and `GET /readyz` (200 or 503, one line); a host other than loopback needs "
        "`XBOT_METRICS_PUBLIC=1`",
        "empty (no listener)",
    ),
    "XBOT_METRICS_PUBLIC": (
        "`1` lets `XBOT_METRICS_ADDR` listen on a non-loopback address (put a firewall or a "
        "proxy with authentication in front: the metrics are not secret, but not for everyone)",
        "off",
    ),
    "XBOT_ALERT_AFTER_S": (
        "seconds a condition (every X source down, Telegram unreachable) lasts before the admins "
        "(`XBOT_ADMIN_IDS`) get an alert in their private chat (1-86400)",
        "300",
    ),
    "XBOT_CONFIG": ("optional TOML file with any of these names (the environment wins)", "none"),
    "XBOT_TEST_TIME_SCALE": (
        "tests only: multiplies the waits between tries to reach Telegram at start-up and "
        "while polling (0.001-1), so a test of a long outage takes seconds",
        "1",
    ),
}

# A bot token as @BotFather hands it out: the bot's numeric id, a colon, 35 URL-safe
# characters (accept a few more, Telegram has not promised the length).
TOKEN_SHAPE = re.compile(r"[0-9]{3,20}:[A-Za-z0-9_-]{30,64}")
# The cloud Bot API refuses uploads over 50 MB; only a local server takes up to 2000.
CLOUD_UPLOAD_LIMIT_MB = 50
CLOUD_API_HOST = "api.telegram.org"

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
    vx_api_url: str = DEFAULT_VX_API_URL  # "" disables the source
    x_syndication_url: str = DEFAULT_X_SYNDICATION_URL  # "" disables the source
    data_dir: Path = attrs.field(factory=lambda: Path(platformdirs.user_data_dir("xbot")))
    admin_ids: frozenset[int] = frozenset()
    allowed_chat_ids: frozenset[int] = frozenset()
    workers: int = 4
    upload_limit_mb: int = 50
    ytdlp_sites: str = "known"
    gallerydl_config: Path | None = None
    bsky_api_url: str = DEFAULT_BSKY_API_URL
    bsky_plc_url: str = DEFAULT_BSKY_PLC_URL
    pixiv_api_url: str = DEFAULT_PIXIV_API_URL
    allow_private_networks: bool = False
    log_level: str = "INFO"
    caption_edit_ttl: float = 86400.0
    cache_ttl: float = 7 * 86400.0
    metrics_addr: tuple[str, int] | None = None  # None: no listener
    alert_after: float = 300.0
    time_scale: float = 1.0  # tests only (XBOT_TEST_TIME_SCALE): shorter reconnect waits

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


def _scale(raw: str) -> float:
    name = "XBOT_TEST_TIME_SCALE"
    try:
        value = float(raw.strip() or "1")
    except ValueError:
        raise ConfigError(f"{name}: {raw!r} is not a number") from None
    if not 0.001 <= value <= 1.0:
        raise ConfigError(f"{name}: {value} is out of range (0.001..1)")
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
    parts = urllib.parse.urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{name}: {value!r} is not an http(s) URL")
    return value.rstrip("/")


def _optional_url(name: str, raw: str) -> str:
    """An http(s) URL, or "" when the operator emptied the variable (the source is off)."""
    return "" if not raw.strip() else _url(name, raw)


_LOOPBACK_NAMES = ("localhost", "localhost.localdomain")


def _listen_addr(name: str, raw: str, public: bool) -> tuple[str, int] | None:
    """``host:port`` (``[::1]:9100`` for IPv6) as (host, port); None when empty.

    A host other than loopback is refused unless `public`: metrics and health
    answers name the bot's sources and load, which is nobody else's business.
    """
    value = raw.strip()
    if not value:
        return None
    host, sep, port_text = value.rpartition(":")
    if not sep or not host:
        raise ConfigError(f"{name}: {value!r} is not host:port (e.g. 127.0.0.1:9464)")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    port = _int(name, port_text, 0, 65535)
    if not public and not _is_loopback(host):
        raise ConfigError(
            f"{name}: {host!r} is not a loopback address; set XBOT_METRICS_PUBLIC=1 to listen "
            "there (and keep strangers out with a firewall or a proxy)"
        )
    return host, port


def _is_loopback(host: str) -> bool:
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name other than localhost may resolve anywhere


def default_data_dir(env: Mapping[str, str]) -> Path:
    """Explicit setting, then systemd's `$STATE_DIRECTORY` (first entry), then platformdirs."""
    if env.get("XBOT_DATA_DIR"):
        return Path(env["XBOT_DATA_DIR"]).expanduser()
    if env.get("STATE_DIRECTORY"):
        return Path(env["STATE_DIRECTORY"].split(":")[0])
    return Path(platformdirs.user_data_dir("xbot"))


def _data_dir(env: Mapping[str, str]) -> Path:
    path = default_data_dir(env)
    if not path.is_absolute():
        # Under systemd the working directory is / (read-only): say so now, not at open.
        raise ConfigError(f"XBOT_DATA_DIR: {str(path)!r} must be an absolute path")
    return path


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


def token_problem(token: str) -> str | None:
    """What is wrong with the token's shape, naming the setting but never showing the token."""
    if not token:
        return "XBOT_TOKEN: not set (get one from @BotFather in Telegram)"
    if TOKEN_SHAPE.fullmatch(token):
        return None
    hint = ""
    if token != token.strip() or any(c.isspace() for c in token):
        hint = " (it contains spaces)"
    elif token[:1] in "\"'" or token[-1:] in "\"'":
        hint = " (it is wrapped in quotes)"
    elif ":" not in token:
        hint = " (there is no colon)"
    return (
        f"XBOT_TOKEN: does not look like a bot token{hint}: expected the bot's numeric id, "
        "a colon and about 35 letters, digits, - or _, exactly as @BotFather shows it"
    )


def unknown_names(env: Mapping[str, str]) -> list[str]:
    """``XBOT_*`` names in the environment that are no setting (a typo is silently ignored
    otherwise), each with a suggestion when one is close."""
    out = []
    for name in sorted(env):
        if not name.startswith("XBOT_") or name in SETTINGS_DOC:
            continue
        close = difflib.get_close_matches(name, SETTINGS_DOC, n=1, cutoff=0.8)
        hint = f" (did you mean {close[0]}?)" if close else ""
        out.append(f"{name}: not a setting xbot reads{hint}")
    return out


def _merged(env: Mapping[str, str]) -> dict[str, str]:
    merged: dict[str, str] = {}
    if env.get("XBOT_CONFIG"):
        merged.update(_read_toml(env["XBOT_CONFIG"]))
    merged.update({k: v for k, v in env.items() if k.startswith("XBOT_") or k == "STATE_DIRECTORY"})
    return merged


def _optional_file(name: str, merged: Mapping[str, str]) -> Path | None:
    """A file the operator names, which must exist when named (doctor checks its content)."""
    raw = merged.get(name, "").strip()
    if not raw:
        return None
    path = Path(raw).expanduser()
    if not path.is_absolute():
        raise ConfigError(f"{name}: {raw!r} must be an absolute path")
    if not path.is_file():
        raise ConfigError(f"{name}: no such file: {path}")
    return path


def _api_url(name: str, raw: str, tail: str) -> str:
    value = _url(name, raw)
    # PTB appends the token to this URL (or fills in "{token}"): without the tail
    # every call goes to ".../123:abc/getMe" and fails with a confusing 404.
    if "{token}" not in value and not value.endswith(tail):
        raise ConfigError(f"{name}: {value!r} must end with {tail} (the token is appended to it)")
    return value


def check_settings(env: Mapping[str, str] | None = None) -> tuple[Settings | None, list[str]]:
    """Every problem of the configuration, one line each naming the setting.

    Returns the settings (None when any problem was found) and the problems.
    """
    environ = dict(os.environ if env is None else env)
    problems: list[str] = []
    try:
        merged = _merged(environ)
    except ConfigError as exc:
        return None, [str(exc)]

    def get(name: str, default: str) -> str:
        return merged.get(name, default)

    def field(parse: Callable[[], T], fallback: T) -> T:
        try:
            return parse()
        except ConfigError as exc:
            problems.append(str(exc))
            return fallback

    def level() -> str:
        value = get("XBOT_LOG_LEVEL", "INFO").strip().upper() or "INFO"
        if value not in _LOG_LEVELS:
            raise ConfigError(f"XBOT_LOG_LEVEL: {value!r} is not one of {', '.join(_LOG_LEVELS)}")
        return value

    def sites() -> str:
        value = get("XBOT_YTDLP_SITES", "known").strip().lower() or "known"
        if value not in ("known", "all"):
            raise ConfigError(f"XBOT_YTDLP_SITES: {value!r} must be 'known' or 'all'")
        return value

    bot_api_url = field(
        lambda: _api_url("XBOT_BOT_API_URL", get("XBOT_BOT_API_URL", DEFAULT_BOT_API_URL), "/bot"),
        DEFAULT_BOT_API_URL,
    )
    upload_limit_mb = field(
        lambda: _int("XBOT_UPLOAD_LIMIT_MB", get("XBOT_UPLOAD_LIMIT_MB", "50"), 1, 2000), 50
    )
    if (
        upload_limit_mb > CLOUD_UPLOAD_LIMIT_MB
        and urllib.parse.urlsplit(bot_api_url).hostname == CLOUD_API_HOST
    ):
        problems.append(
            f"XBOT_UPLOAD_LIMIT_MB: {upload_limit_mb} needs a local Bot API server "
            f"(set XBOT_BOT_API_URL); the cloud Bot API takes at most {CLOUD_UPLOAD_LIMIT_MB}"
        )
    settings = Settings(
        token=get("XBOT_TOKEN", "").strip(),
        bot_api_url=bot_api_url,
        bot_api_file_url=field(
            lambda: _api_url(
                "XBOT_BOT_API_FILE_URL",
                get("XBOT_BOT_API_FILE_URL", DEFAULT_BOT_API_FILE_URL),
                "/file/bot",
            ),
            DEFAULT_BOT_API_FILE_URL,
        ),
        x_api_url=field(
            lambda: _url("XBOT_X_API_URL", get("XBOT_X_API_URL", DEFAULT_X_API_URL)),
            DEFAULT_X_API_URL,
        ),
        vx_api_url=field(
            lambda: _optional_url("XBOT_VX_API_URL", get("XBOT_VX_API_URL", DEFAULT_VX_API_URL)),
            DEFAULT_VX_API_URL,
        ),
        x_syndication_url=field(
            lambda: _optional_url(
                "XBOT_X_SYNDICATION_URL",
                get("XBOT_X_SYNDICATION_URL", DEFAULT_X_SYNDICATION_URL),
            ),
            DEFAULT_X_SYNDICATION_URL,
        ),
        data_dir=field(lambda: _data_dir(merged), default_data_dir({})),
        admin_ids=field(lambda: _ids("XBOT_ADMIN_IDS", get("XBOT_ADMIN_IDS", "")), frozenset()),
        allowed_chat_ids=field(
            lambda: _ids("XBOT_ALLOWED_CHAT_IDS", get("XBOT_ALLOWED_CHAT_IDS", "")), frozenset()
        ),
        workers=field(lambda: _int("XBOT_WORKERS", get("XBOT_WORKERS", "4"), 1, 64), 4),
        upload_limit_mb=upload_limit_mb,
        ytdlp_sites=field(sites, "known"),
        gallerydl_config=field(lambda: _optional_file("XBOT_GALLERYDL_CONFIG", merged), None),
        bsky_api_url=field(
            lambda: _url("XBOT_BSKY_API_URL", get("XBOT_BSKY_API_URL", DEFAULT_BSKY_API_URL)),
            DEFAULT_BSKY_API_URL,
        ),
        bsky_plc_url=field(
            lambda: _url("XBOT_BSKY_PLC_URL", get("XBOT_BSKY_PLC_URL", DEFAULT_BSKY_PLC_URL)),
            DEFAULT_BSKY_PLC_URL,
        ),
        pixiv_api_url=field(
            lambda: _url("XBOT_PIXIV_API_URL", get("XBOT_PIXIV_API_URL", DEFAULT_PIXIV_API_URL)),
            DEFAULT_PIXIV_API_URL,
        ),
        allow_private_networks=field(
            lambda: _bool("XBOT_ALLOW_PRIVATE_NETWORKS", get("XBOT_ALLOW_PRIVATE_NETWORKS", "0")),
            False,
        ),
        log_level=field(level, "INFO"),
        caption_edit_ttl=float(
            field(
                lambda: _int(
                    "XBOT_CAPTION_EDIT_TTL", get("XBOT_CAPTION_EDIT_TTL", "86400"), 60, 30 * 86400
                ),
                86400,
            )
        ),
        cache_ttl=86400.0
        * field(lambda: _int("XBOT_CACHE_TTL_DAYS", get("XBOT_CACHE_TTL_DAYS", "7"), 1, 365), 7),
        metrics_addr=field(
            lambda: _listen_addr(
                "XBOT_METRICS_ADDR",
                get("XBOT_METRICS_ADDR", ""),
                _bool("XBOT_METRICS_PUBLIC", get("XBOT_METRICS_PUBLIC", "0")),
            ),
            None,
        ),
        alert_after=float(
            field(
                lambda: _int("XBOT_ALERT_AFTER_S", get("XBOT_ALERT_AFTER_S", "300"), 1, 86400),
                300,
            )
        ),
        time_scale=field(lambda: _scale(get("XBOT_TEST_TIME_SCALE", "1")), 1.0),
    )
    return (None if problems else settings), problems


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    """Read and validate the settings. Raises `ConfigError` with one line on a bad value
    (the first problem, and how many more `xbot doctor` would list).

    The environment wins over the TOML file named by `XBOT_CONFIG`.
    """
    settings, problems = check_settings(env)
    if settings is None:
        more = len(problems) - 1
        suffix = f" (and {more} more problem{'s' if more > 1 else ''}: run `xbot doctor`)"
        raise ConfigError(problems[0] + (suffix if more else ""))
    return settings


# Telegram delivers webhooks only to these ports of an HTTPS URL.
WEBHOOK_PORTS = (443, 80, 88, 8443)
_SECRET_TOKEN = re.compile(r"[A-Za-z0-9_-]{1,256}")
DEFAULT_WEBHOOK_SECRET_ENV = "XBOT_WEBHOOK_SECRET"  # noqa: S105 - a variable name, not a secret


@attrs.frozen
class WebhookConfig:
    """`xbot run --webhook`: where Telegram posts updates and where we listen for them.

    Attributes:
        url: the public HTTPS URL given to Telegram (``setWebhook``).
        listen: the address the bot's HTTP server binds (a reverse proxy in front
            terminates TLS; 127.0.0.1 by default).
        port: the port it binds.
        secret_token: the value Telegram sends in ``X-Telegram-Bot-Api-Secret-Token``;
            requests without it are refused.
    """

    url: str
    listen: str
    port: int
    secret_token: str = attrs.field(repr=False)

    @property
    def url_path(self) -> str:
        return urllib.parse.urlsplit(self.url).path.lstrip("/")


def webhook_config(
    url: str, listen: str, port: int, secret_env: str, env: Mapping[str, str]
) -> WebhookConfig:
    """Validate the webhook options; `ConfigError` names the option or variable at fault."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "https" or not parts.hostname:
        raise ConfigError(f"--webhook: {url!r} must be an https:// URL (Telegram posts only there)")
    try:
        url_port = parts.port or 443
    except ValueError:
        raise ConfigError(f"--webhook: {url!r} has an invalid port") from None
    if url_port not in WEBHOOK_PORTS:
        allowed = ", ".join(map(str, WEBHOOK_PORTS))
        raise ConfigError(f"--webhook: port {url_port} is not one Telegram posts to ({allowed})")
    if not 1 <= port <= 65535:
        raise ConfigError(f"--port: {port} is out of range (1..65535)")
    secret = env.get(secret_env, "")
    if not secret:
        raise ConfigError(
            f"{secret_env}: not set; webhook mode needs a secret token (1-256 of A-Z a-z 0-9 _ -) "
            "so that only Telegram can post updates"
        )
    if not _SECRET_TOKEN.fullmatch(secret):
        raise ConfigError(f"{secret_env}: must be 1-256 characters of A-Z a-z 0-9 _ -")
    return WebhookConfig(url=url, listen=listen, port=port, secret_token=secret)


def settings_table() -> str:
    """The README's configuration table, rendered from `SETTINGS_DOC` (a test keeps the
    README equal to it, so a setting cannot go undocumented)."""
    rows = ["| variable | meaning | default |", "| --- | --- | --- |"]
    for name, (meaning, default) in SETTINGS_DOC.items():
        shown = (
            default
            if default.startswith(("`", "required", "empty", "none", "off"))
            else (f"`{default}`")
        )
        rows.append(f"| `{name}` | {meaning} | {shown} |")
    return "\n".join(rows) + "\n"
