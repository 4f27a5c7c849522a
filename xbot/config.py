"""Settings, read from the environment (and optionally a TOML file with the same names).

The variable names are a contract (see README, "Configuration"): tests and
deployments rely on them. Each is declared once, as a field of `Settings` (name,
meaning, default, how it is read); `SETTINGS` lists them all, and the README's
table and systemd/xbot.env.example are checked against it by tests.
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
from typing import Any, TypeVar, cast

import attrs
import platformdirs

from xbot.errors import ConfigError
from xbot.links import SITES, classify, site_named

T = TypeVar("T")

DEFAULT_BOT_API_URL = "https://api.telegram.org/bot"
DEFAULT_BOT_API_FILE_URL = "https://api.telegram.org/file/bot"
DEFAULT_BSKY_API_URL = "https://public.api.bsky.app"
DEFAULT_BSKY_PLC_URL = "https://plc.directory"
DEFAULT_PIXIV_API_URL = "https://www.pixiv.net"
DEFAULT_X_API_URL = "https://api.fxtwitter.com"
DEFAULT_VX_API_URL = "https://api.vxtwitter.com"
DEFAULT_X_SYNDICATION_URL = "https://cdn.syndication.twimg.com"
# The canary's post: public since 2014, one photo, an author everyone knows (the Oscars
# selfie); an operator may name others (XBOT_CANARY_POSTS).
DEFAULT_CANARY_POSTS = "https://x.com/TheEllenShow/status/440322224407314432"

# A bot token as @BotFather hands it out: the bot's numeric id, a colon, 35 URL-safe
# characters (accept a few more, Telegram has not promised the length).
TOKEN_SHAPE = re.compile(r"[0-9]{3,20}:[A-Za-z0-9_-]{30,64}")
# The cloud Bot API refuses uploads over 50 MB; only a local server takes up to 2000.
CLOUD_UPLOAD_LIMIT_MB = 50
CLOUD_API_HOST = "api.telegram.org"

_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


# --- how a value is read: (variable name, raw text) -> value, or one ConfigError line ----------


def _text(name: str, raw: str) -> str:
    return raw.strip()


# A PHPSESSID as pixiv sets it (``{user id}_{random}``): one cookie value, nothing that
# could end the Cookie header or start another.
_SESSION = re.compile(r"[A-Za-z0-9_.-]{1,256}")


def _session(name: str, raw: str) -> str:
    value = raw.strip().removeprefix("PHPSESSID=")
    if value and not _SESSION.fullmatch(value):
        # Never the value itself: it is a login.
        raise ConfigError(
            f"{name}: does not look like a pixiv PHPSESSID (letters, digits, _ . - only; "
            "copy the cookie's value from a signed-in browser)"
        )
    return value


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


def _canary_interval(name: str, raw: str) -> float:
    value = _int(name, raw or "0", 0, 86400)
    if 0 < value < 60:
        raise ConfigError(f"{name}: {value} is too often (0 turns it off; else 60..86400)")
    return float(value)


def _post_links(name: str, raw: str) -> tuple[str, ...]:
    """Links to posts of the sites the canary watches (`Site.canary`), comma-separated,
    as given."""
    out = []
    for part in (p.strip() for p in raw.split(",")):
        if not part:
            continue
        link = classify(part)
        site = site_named(link.kind) if link is not None else None
        if site is None or not site.canary:
            labels = [s.label for s in SITES if s.canary]
            named = " or ".join([", ".join(labels[:-1]), labels[-1]] if len(labels) > 1 else labels)
            raise ConfigError(f"{name}: {part!r} is not a link to an {named} post")
        out.append(part)
    return tuple(out)


def _whole(lo: int, hi: int, *, times: float = 1.0) -> Callable[[str, str], float]:
    """A whole number in ``lo..hi``, multiplied by ``times`` (days to seconds)."""
    return lambda name, raw: times * _int(name, raw, lo, hi)


def _count(lo: int, hi: int) -> Callable[[str, str], int]:
    return lambda name, raw: _int(name, raw, lo, hi)


def _number(lo: float, hi: float) -> Callable[[str, str], float]:
    def parse(name: str, raw: str) -> float:
        try:
            value = float(raw.strip())
        except ValueError:
            raise ConfigError(f"{name}: {raw!r} is not a number") from None
        if not lo <= value <= hi:
            raise ConfigError(f"{name}: {value:g} is out of range ({lo:g}..{hi:g})")
        return value

    return parse


def _scale(name: str, raw: str) -> float:
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


def _api_url(tail: str) -> Callable[[str, str], str]:
    def parse(name: str, raw: str) -> str:
        value = _url(name, raw)
        # PTB appends the token to this URL (or fills in "{token}"): without the tail
        # every call goes to ".../123:abc/getMe" and fails with a confusing 404.
        if "{token}" not in value and not value.endswith(tail):
            raise ConfigError(
                f"{name}: {value!r} must end with {tail} (the token is appended to it)"
            )
        return value

    return parse


def _one_of(*choices: str) -> Callable[[str, str], str]:
    """One of ``choices`` in any case; empty is the first."""

    def parse(name: str, raw: str) -> str:
        value = raw.strip().lower() or choices[0]
        if value not in choices:
            raise ConfigError(
                f"{name}: {value!r} must be " + " or ".join(f"'{c}'" for c in choices)
            )
        return value

    return parse


def _level(name: str, raw: str) -> str:
    value = raw.strip().upper() or "INFO"
    if value not in _LOG_LEVELS:
        raise ConfigError(f"{name}: {value!r} is not one of {', '.join(_LOG_LEVELS)}")
    return value


def _expand(name: str, raw: str) -> Path:
    """`raw` with a leading ``~`` or ``~user`` expanded; a home that cannot be found
    (an unknown user, no $HOME) is the setting's error, not a traceback."""
    try:
        return Path(raw).expanduser()
    except RuntimeError as exc:
        raise ConfigError(f"{name}: {raw!r}: {exc}") from None


def _data_dir(name: str, raw: str) -> Path:
    path = _expand(name, raw)
    if not path.is_absolute():
        # Under systemd the working directory is / (read-only): say so now, not at open.
        raise ConfigError(f"{name}: {str(path)!r} must be an absolute path")
    return path


def _test_file(name: str, raw: str) -> Path | None:
    """A file a test writes while the bot runs (it need not exist yet)."""
    return _expand(name, raw.strip()) if raw.strip() else None


def _optional_file(name: str, raw: str) -> Path | None:
    """A file the operator names, which must exist when named (doctor checks its content)."""
    if not raw.strip():
        return None
    path = _expand(name, raw.strip())
    if not path.is_absolute():
        raise ConfigError(f"{name}: {raw.strip()!r} must be an absolute path")
    if not path.is_file():
        raise ConfigError(f"{name}: no such file: {path}")
    return path


_LOOPBACK_NAMES = ("localhost", "localhost.localdomain")


def _listen_addr(name: str, raw: str) -> tuple[str, int] | None:
    """``host:port`` (``[::1]:9100`` for IPv6) as (host, port); None when empty.

    Whether the host may be other than loopback is `XBOT_METRICS_PUBLIC`'s to say
    (`check_settings`).
    """
    value = raw.strip()
    if not value:
        return None
    host, sep, port_text = value.rpartition(":")
    if not sep or not host:
        raise ConfigError(f"{name}: {value!r} is not host:port (e.g. 127.0.0.1:9464)")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    return host, _int(name, port_text, 0, 65535)


def _is_loopback(host: str) -> bool:
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name other than localhost may resolve anywhere


def default_data_dir(env: Mapping[str, str]) -> str:
    """Without `XBOT_DATA_DIR`: systemd's `$STATE_DIRECTORY` (first entry), else platformdirs."""
    if env.get("STATE_DIRECTORY"):
        return env["STATE_DIRECTORY"].split(":")[0]
    return platformdirs.user_data_dir("xbot")


# --- the settings, each declared once ----------------------------------------------------------


@attrs.frozen
class Setting:
    """One environment variable: its name, what it means, its default, how it is read.

    Attributes:
        name: the variable (a contract: README, "Configuration").
        meaning: the README's sentence for it.
        default: the value when unset, spelled as in the environment and read by
            ``parse`` like any other; or a function of the environment, for a default
            that depends on it (the data dir under systemd).
        parse: ``(name, raw) -> value``, raising a `ConfigError` line naming the
            setting; None for a variable read elsewhere (`XBOT_CONFIG`, the webhook
            secret), which is documented here all the same.
        shown: the default as the README shows it, when not ``default`` itself.
    """

    name: str
    meaning: str
    default: str | Callable[[Mapping[str, str]], str] = ""
    parse: Callable[[str, str], object] | None = None
    shown: str | None = None

    def raw(self, env: Mapping[str, str]) -> str:
        """The text to read: the variable's, else the default (a default that is a function
        of the environment also stands in for an empty variable)."""
        if callable(self.default):
            return env.get(self.name) or self.default(env)
        return env.get(self.name, self.default)

    def shown_default(self) -> str:
        text = self.shown if self.shown is not None else str(self.default)
        plain = text.startswith(("`", "required", "empty", "none", "off"))
        return text if plain else f"`{text}`"


_SETTING = "xbot.setting"


def setting(
    name: str,
    meaning: str,
    default: str | Callable[[Mapping[str, str]], str],
    parse: Callable[[str, str], T],
    *,
    shown: str | None = None,
    secret: bool = False,
) -> T:
    """A field of `Settings` read from the variable ``name``: the one declaration of it.

    The field's default is ``default`` read by ``parse``, so ``Settings()`` is what an
    empty environment gives.
    """
    declared = Setting(name, meaning, default, parse, shown)
    if callable(default):
        value: object = attrs.Factory(lambda: parse(name, default({})))
    else:
        value = parse(name, default)
    # A field specifier: attrs turns it into the class's ``T`` attribute.
    field = attrs.field(default=value, metadata={_SETTING: declared}, repr=not secret)
    return cast("T", field)


@attrs.frozen
class Settings:
    """Everything the bot reads from its environment, validated.

    Each field is declared with its variable (`setting`): that declaration is the
    setting's one place (name, meaning, default, how it is read); `check_settings`
    reads every field from it and the README's table is rendered from it
    (`settings_table`). Adding a setting is adding a field here.

    Attributes:
        token: the bot token ("" when unset; `run` requires it).
        data_dir: the folder for the database and temp files.
        upload_limit: the largest upload, in bytes.
    """

    token: str = setting(
        "XBOT_TOKEN", "bot token from @BotFather", "", _text, shown="required for `run`"
    )
    bot_api_url: str = setting(
        "XBOT_BOT_API_URL",
        "Bot API base URL (PTB `base_url`, ends in `/bot`), e.g. a local Bot API server",
        DEFAULT_BOT_API_URL,
        _api_url("/bot"),
    )
    bot_api_file_url: str = setting(
        "XBOT_BOT_API_FILE_URL",
        "Bot API file base URL (PTB `base_file_url`, ends in `/file/bot`)",
        DEFAULT_BOT_API_FILE_URL,
        _api_url("/file/bot"),
    )
    x_api_url: str = setting(
        "XBOT_X_API_URL", "fxtwitter-compatible API base", DEFAULT_X_API_URL, _url
    )
    vx_api_url: str = setting(  # "" disables the source
        "XBOT_VX_API_URL",
        "vxtwitter-compatible API base, asked when the first source fails transiently; "
        "empty disables",
        DEFAULT_VX_API_URL,
        _optional_url,
    )
    x_syndication_url: str = setting(  # "" disables the source
        "XBOT_X_SYNDICATION_URL",
        "X's syndication endpoint base (`/tweet-result`), the third source; empty disables",
        DEFAULT_X_SYNDICATION_URL,
        _optional_url,
    )
    data_dir: Path = setting(
        "XBOT_DATA_DIR",
        "where the database and temp files live",
        default_data_dir,
        _data_dir,
        shown="`$STATE_DIRECTORY` under systemd, else the platformdirs user data dir",
    )
    admin_ids: frozenset[int] = setting(
        "XBOT_ADMIN_IDS",
        "comma-separated user ids allowed admin commands (`/stats`)",
        "",
        _ids,
        shown="empty",
    )
    allowed_chat_ids: frozenset[int] = setting(
        "XBOT_ALLOWED_CHAT_IDS",
        "if set, only these chats/users (comma-separated ids) are served",
        "",
        _ids,
        shown="empty (everyone)",
    )
    workers: int = setting("XBOT_WORKERS", "concurrent workers (1-64)", "4", _count(1, 64))
    upload_limit_mb: int = setting(
        "XBOT_UPLOAD_LIMIT_MB",
        "largest file the bot uploads, in MB (50 on the cloud Bot API, "
        "up to 2000 on a local Bot API server)",
        "50",
        _count(1, 2000),
    )
    min_speed_kbps: float = setting(
        "XBOT_MIN_SPEED_KBPS",
        "the slowest a download may go, in kB/s on average over each `XBOT_SPEED_WINDOW_S`; "
        "a slower one is given up with one sentence, and a task may run for 10 minutes plus "
        "the upload limit at this speed (0.01-100000)",
        "10",
        _number(0.01, 100_000),
    )
    speed_window: float = setting(  # seconds
        "XBOT_SPEED_WINDOW_S",
        "seconds over which the speed floor (`XBOT_MIN_SPEED_KBPS`) is measured (1-3600)",
        "60",
        _whole(1, 3600),
    )
    ytdlp_sites: str = setting(
        "XBOT_YTDLP_SITES",
        "`known`: every yt-dlp extractor but the generic one; `all`: the generic one too",
        "known",
        _one_of("known", "all"),
    )
    gallerydl_config: Path | None = setting(
        "XBOT_GALLERYDL_CONFIG",
        "path of a gallery-dl configuration file (JSON) handed to gallery-dl for image posts "
        "from other sites: cookies, credentials, extra instances of sites it knows "
        "(Mastodon, *booru, …)",
        "",
        _optional_file,
        shown="none",
    )
    ytdlp_cookies: Path | None = setting(
        "XBOT_YTDLP_COOKIES",
        "path of a Netscape cookies file the operator exported, handed to yt-dlp; each "
        "cookie goes only to its own domain (a bare public suffix such as `.com` is refused)",
        "",
        _optional_file,
        shown="none",
    )
    bsky_api_url: str = setting(
        "XBOT_BSKY_API_URL", "Bluesky AppView base (public, no login)", DEFAULT_BSKY_API_URL, _url
    )
    bsky_plc_url: str = setting(
        "XBOT_BSKY_PLC_URL",
        "DID directory where a Bluesky author's PDS (their video files) is looked up",
        DEFAULT_BSKY_PLC_URL,
        _url,
    )
    pixiv_api_url: str = setting(
        "XBOT_PIXIV_API_URL", "pixiv base for its `/ajax/illust` API", DEFAULT_PIXIV_API_URL, _url
    )
    pixiv_session: str = setting(
        "XBOT_PIXIV_SESSION",
        "the operator's pixiv `PHPSESSID`; sent only to the pixiv ajax API, never to the image "
        "host, Telegram or a log; lets R-18 works through where a chat allows them",
        "",
        _session,
        shown="none",
        secret=True,
    )
    allow_private_networks: bool = setting(
        "XBOT_ALLOW_PRIVATE_NETWORKS",
        "`1` lets media come from loopback/private addresses (tests, demo)",
        "0",
        _bool,
        shown="off",
    )
    log_level: str = setting(
        "XBOT_LOG_LEVEL", "logging level: DEBUG, INFO, WARNING, ERROR", "INFO", _level
    )
    caption_edit_ttl: float = setting(
        "XBOT_CAPTION_EDIT_TTL",
        "seconds a caption-edit prompt stays open (60-2592000)",
        "86400",
        _whole(60, 30 * 86400),
    )
    cache_ttl: float = setting(  # seconds
        "XBOT_CACHE_TTL_DAYS",
        "days a link-cache entry is kept (1-365)",
        "7",
        _whole(1, 365, times=86400.0),
    )
    metrics_addr: tuple[str, int] | None = setting(  # None: no listener
        "XBOT_METRICS_ADDR",
        "`host:port` of the operator's HTTP listener: `GET /metrics` (Prometheus), `GET /livez` "
        "and `GET /readyz` (200 or 503, one line); a host other than loopback needs "
        "`XBOT_METRICS_PUBLIC=1`",
        "",
        _listen_addr,
        shown="empty (no listener)",
    )
    metrics_public: bool = setting(
        "XBOT_METRICS_PUBLIC",
        "`1` lets `XBOT_METRICS_ADDR` listen on a non-loopback address (put a firewall or a "
        "proxy with authentication in front: the metrics are not secret, but not for everyone)",
        "0",
        _bool,
        shown="off",
    )
    alert_after: float = setting(  # seconds
        "XBOT_ALERT_AFTER_S",
        "seconds a condition (every X source down, Telegram unreachable) lasts before the admins "
        "(`XBOT_ADMIN_IDS`) get an alert in their private chat (1-86400)",
        "300",
        _whole(1, 86400),
    )
    canary_interval: float = setting(  # seconds; 0: no canary
        "XBOT_CANARY_INTERVAL_S",
        "seconds between the canary's fetches of a known post from every source, to tell a "
        'source whose answers changed shape ("broken") from one that is down (0: off; else '
        "60-86400)",
        "0",
        _canary_interval,
    )
    canary_posts: tuple[str, ...] = setting(
        "XBOT_CANARY_POSTS",
        "comma-separated links to public posts with media the canary asks for, one per site "
        "(an X post is asked of every X source)",
        DEFAULT_CANARY_POSTS,
        _post_links,
    )
    time_scale: float = setting(  # tests only: shorter reconnect waits
        "XBOT_TEST_TIME_SCALE",
        "tests only: multiplies the waits between tries to reach Telegram at start-up and "
        "while polling (0.001-1), so a test of a long outage takes seconds",
        "1",
        _scale,
    )
    wall_clock_file: Path | None = setting(  # tests only: a stepped wall clock
        "XBOT_TEST_WALL_CLOCK_FILE",
        "tests only: a file holding seconds the bot adds to the wall clock, read at each "
        "look, so a test steps the wall clock (as NTP does) while the monotonic clock runs on",
        "",
        _test_file,
        shown="none",
    )

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


# Variables read outside `Settings`, documented with the others.
_READ_ELSEWHERE = (
    Setting(
        "XBOT_WEBHOOK_SECRET",
        "webhook mode only: the secret Telegram sends with every update "
        "(1-256 of A-Z a-z 0-9 _ -); `xbot run --secret-token-env` names another variable",
        shown="none",
    ),
    Setting(
        "XBOT_CONFIG",
        "optional TOML file with any of these names (the environment wins)",
        shown="none",
    ),
)

# Every variable, in the README's order: the fields of `Settings`, then the others.
SETTINGS: tuple[Setting, ...] = (
    *(f.metadata[_SETTING] for f in attrs.fields(Settings)),
    *_READ_ELSEWHERE,
)
# name -> (meaning, default as shown to people): what the README's table, the example
# environment file and `unknown_names` go by.
SETTINGS_DOC: dict[str, tuple[str, str]] = {
    s.name: (s.meaning, s.shown_default()) for s in SETTINGS
}


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
    values: dict[str, Any] = {}
    for field in attrs.fields(Settings):
        declared: Setting = field.metadata[_SETTING]
        assert declared.parse is not None
        try:
            values[field.name] = declared.parse(declared.name, declared.raw(merged))
        except ConfigError as exc:
            problems.append(str(exc))
    settings = Settings(**values)  # a field that did not parse keeps its default
    if (
        "upload_limit_mb" in values
        and settings.upload_limit_mb > CLOUD_UPLOAD_LIMIT_MB
        and urllib.parse.urlsplit(settings.bot_api_url).hostname == CLOUD_API_HOST
    ):
        problems.append(
            f"XBOT_UPLOAD_LIMIT_MB: {settings.upload_limit_mb} needs a local Bot API server "
            f"(set XBOT_BOT_API_URL); the cloud Bot API takes at most {CLOUD_UPLOAD_LIMIT_MB}"
        )
    addr = settings.metrics_addr
    if addr is not None and not settings.metrics_public and not _is_loopback(addr[0]):
        # Metrics and health answers name the bot's sources and load: nobody else's business.
        problems.append(
            f"XBOT_METRICS_ADDR: {addr[0]!r} is not a loopback address; set XBOT_METRICS_PUBLIC=1 "
            "to listen there (and keep strangers out with a firewall or a proxy)"
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
        max_connections: updates handled at once (setWebhook's ``max_connections``,
            1-100, Telegram's default 40); the listener answers 503 beyond it.
    """

    url: str
    listen: str
    port: int
    secret_token: str = attrs.field(repr=False)
    max_connections: int = 40

    @property
    def url_path(self) -> str:
        return urllib.parse.urlsplit(self.url).path.lstrip("/")


def webhook_config(
    url: str,
    listen: str,
    port: int,
    secret_env: str,
    env: Mapping[str, str],
    *,
    max_connections: int = 40,
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
    if not 1 <= max_connections <= 100:
        raise ConfigError(
            f"--max-connections: {max_connections} is out of range (1..100, Telegram's limit)"
        )
    return WebhookConfig(
        url=url, listen=listen, port=port, secret_token=secret, max_connections=max_connections
    )


def settings_table() -> str:
    """The README's configuration table, rendered from `SETTINGS` (a test keeps the
    README equal to it, so a setting cannot go undocumented)."""
    rows = ["| variable | meaning | default |", "| --- | --- | --- |"]
    rows += [f"| `{s.name}` | {s.meaning} | {s.shown_default()} |" for s in SETTINGS]
    return "\n".join(rows) + "\n"
