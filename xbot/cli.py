"""`xbot`: the bot and the operator's tools.

A configuration error, a missing file, a refused token or an unusable database is
one line on stderr and exit status 2 (a restart cannot help), never a traceback; the
token never appears in it. `xbot run` exits 1 for what may pass (a database still
locked or a disk still full after the start's wait); a Bot API that does not answer
is no exit at all: the start waits for it.
The commands' work is in `xbot.ops.opscli` and `xbot.ops.doctor`; this module only
parses arguments and maps errors to exit statuses.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import sys
from collections.abc import Callable, Mapping, Sequence

from xbot.config import (
    DEFAULT_WEBHOOK_SECRET_ENV,
    Settings,
    WebhookConfig,
    load_settings,
    token_problem,
    webhook_config,
)
from xbot.errors import StoreBusy, TokenRefused, XbotError
from xbot.logs import redact

EXIT_FAILED = 1
EXIT_USAGE = 2

UNSET_HELP = (
    "xbot: XBOT_TOKEN is not set. Get a token from @BotFather in Telegram and put it in "
    "the environment (XBOT_TOKEN=...); `xbot demo` shows the bot working offline without one."
)
REFUSED_HELP = (
    "XBOT_TOKEN: Telegram refused the token (revoked or mistyped); copy the current one "
    "from @BotFather (/mybots, API Token)"
)
NO_TORNADO = (
    "xbot: webhook mode needs the webhooks extra (tornado, for its listener): "
    "`pip install 'python-telegram-bot[webhooks]'` in xbot's venv, "
    "or leave out --webhook to use long polling"
)

Command = Callable[[argparse.Namespace, Settings], int]


def _fail(message: str, secrets: Sequence[str] = ()) -> int:
    line = " ".join(message.split())  # one line, whatever the error text held
    for secret in secrets:
        if secret:
            line = line.replace(secret, "***")
    line = redact(line)
    print(line if line.startswith("xbot") else f"xbot: {line}", file=sys.stderr)
    return EXIT_USAGE


# --- the bot ------------------------------------------------------------------------------------


def cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    if not settings.token:
        return _fail(UNSET_HELP)
    problem = token_problem(settings.token)
    if problem is not None:
        return _fail(problem)
    webhook = _webhook(args, os.environ)
    from xbot.logs import setup_logging
    from xbot.runtime import Runtime, run_until_signalled  # PTB loads only to run

    # The pixiv session too: no line should name it, and this redacts one that would.
    setup_logging(settings.log_level, secrets=[settings.token, settings.pixiv_session])
    # A Bot API that does not answer is no exit: the start waits for it (xbot.runtime).
    # Exit 2 (a restart cannot help: the unit's RestartPreventExitStatus=2) or 1 (it may).
    try:
        asyncio.run(run_until_signalled(Runtime(settings, webhook=webhook)))
    except TokenRefused:  # the start-up's getMe
        return _fail(REFUSED_HELP, [settings.token])
    except (StoreBusy, OSError) as exc:
        # A database locked or a disk full past the start's patience, a port in use:
        # may pass, so systemd's Restart=on-failure tries again later.
        _fail(str(exc) or type(exc).__name__, [settings.token])
        return EXIT_FAILED
    return 0


def _webhook(args: argparse.Namespace, env: Mapping[str, str]) -> WebhookConfig | None:
    if args.webhook is None:
        flags = (
            ("--listen", args.listen),
            ("--port", args.port),
            ("--max-connections", args.max_connections),
        )
        for flag, value in flags:
            if value is not None:
                raise_usage(f"{flag} only makes sense with --webhook URL")
        return None
    config = webhook_config(
        args.webhook,
        args.listen or "127.0.0.1",
        args.port or 8443,
        args.secret_env or DEFAULT_WEBHOOK_SECRET_ENV,
        env,
        max_connections=args.max_connections or 40,
    )
    if importlib.util.find_spec("tornado") is None:
        raise_usage(NO_TORNADO)
    return config


class UsageError(XbotError):
    """A command line that cannot work; printed as one line, exit 2."""


def raise_usage(message: str) -> None:
    raise UsageError(message)


def cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    from xbot.demo import run_demo  # the stand-ins load only for the demo

    return asyncio.run(run_demo(verbose=args.verbose))


def cmd_version(args: argparse.Namespace, settings: Settings) -> int:
    from xbot.versions import installed

    print("\n".join(installed().lines()))
    return 0


class _VersionAction(argparse.Action):
    """`--version` prints what `xbot version` does (argparse's own would rewrap the lines)."""

    def __call__(self, parser: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        cmd_version(argparse.Namespace(), Settings())
        parser.exit()


# --- the operator's tools -----------------------------------------------------------------------


def cmd_migrate(args: argparse.Namespace, settings: Settings) -> int:
    from xbot.ops import opscli

    return opscli.migrate(settings, sys.stdout, check=args.check)


def cmd_doctor(args: argparse.Namespace, settings: Settings) -> int:
    from xbot.ops.doctor import diagnose

    report = diagnose(os.environ, online=not args.offline, timeout=args.timeout)
    secrets = tuple(os.environ.get(n, "").strip() for n in ("XBOT_TOKEN", "XBOT_PIXIV_SESSION"))
    for line in report.lines(secrets=secrets):
        print(line)
    return report.exit_code


def cmd_queue(args: argparse.Namespace, settings: Settings) -> int:
    from xbot.ops import opscli

    out = sys.stdout
    if args.queue_command == "stats":
        return opscli.queue_stats(settings, out)
    if args.queue_command == "list":
        return opscli.queue_list(
            settings, out, state=args.state, chat_id=args.chat, limit=args.limit
        )
    if args.queue_command == "show":
        return opscli.queue_show(settings, out, args.id)
    if args.queue_command == "retry":
        return opscli.queue_retry(settings, out, args.id)
    return opscli.queue_purge_dead(settings, out, older_than=args.older_than)


def cmd_cache(args: argparse.Namespace, settings: Settings) -> int:
    from xbot.ops import opscli

    if args.cache_command == "stats":
        return opscli.cache_stats(settings, sys.stdout)
    return opscli.cache_clear(settings, sys.stdout, args.link)


def cmd_backup(args: argparse.Namespace, settings: Settings) -> int:
    from xbot.ops import opscli

    return opscli.run_backup(settings, sys.stdout, args.path, force=args.force)


# --- the parser ---------------------------------------------------------------------------------


def _duration(text: str) -> float:
    from xbot.ops.opscli import parse_duration

    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value


def _chat(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a numeric chat id") from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="xbot",
        description=(
            "A Telegram bot that answers links to X posts with their media. Settings come "
            "from XBOT_* environment variables (see the README); every command has --help."
        ),
    )
    parser.add_argument(
        "--version", action=_VersionAction, nargs=0, help="print the versions and exit"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser(
        "run",
        help="run the bot (long polling, or a webhook)",
        description="Run the bot until SIGTERM/SIGINT. Long polling unless --webhook is given.",
    )
    p.add_argument("--webhook", metavar="URL", help="public https URL Telegram posts updates to")
    p.add_argument("--listen", metavar="ADDR", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", metavar="N", type=_positive, help="port to listen on (default 8443)")
    p.add_argument(
        "--max-connections",
        metavar="N",
        type=_positive,
        help="updates Telegram posts at once, 1-100 (default 40); more get a 503",
    )
    p.add_argument(
        "--secret-token-env",
        "--secret-token",
        dest="secret_env",
        metavar="NAME",
        help=f"environment variable holding the webhook's secret token "
        f"(default {DEFAULT_WEBHOOK_SECRET_ENV})",
    )
    p.set_defaults(func=cmd_run)

    p = sub.add_parser(
        "demo",
        help="the real bot, offline, against local stand-ins",
        description="Run the real bot against local stand-ins of Telegram and X and print "
        "the conversation. Needs no token and no network.",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="also print the bot's log")
    p.set_defaults(func=cmd_demo, settings=False)

    p = sub.add_parser(
        "migrate",
        help="migrate the database without starting the bot",
        description="Apply pending schema migrations (the bot also does this on start).",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="only say whether migrations are pending (exit 1 if so), change nothing",
    )
    p.set_defaults(func=cmd_migrate)

    p = sub.add_parser(
        "doctor",
        help="check the configuration, data dir, database, token and Bot API",
        description="Check everything xbot needs, one line per finding. Exit 2: configuration "
        "problems; 1: another check failed; 0: all good (warnings allowed).",
    )
    p.add_argument("--offline", action="store_true", help="skip the getMe call to the Bot API")
    p.add_argument(
        "--timeout", type=float, default=10.0, metavar="S", help="getMe timeout (default 10)"
    )
    p.set_defaults(func=cmd_doctor, settings=False)

    q = sub.add_parser(
        "queue", help="inspect and repair the task queue", description="The task queue."
    )
    qs = q.add_subparsers(dest="queue_command", metavar="SUBCOMMAND", required=True)
    qs.add_parser("stats", help="tasks by state, oldest pending, held chats")
    p = qs.add_parser("list", help="the newest tasks, optionally by state or chat")
    p.add_argument("--state", choices=("pending", "running", "done", "dead"))
    p.add_argument("--chat", type=_chat, metavar="ID", help="only this chat's tasks")
    p.add_argument("--limit", type=_positive, default=50, metavar="N", help="default 50")
    p = qs.add_parser("show", help="one task in full, payload included")
    p.add_argument("id", type=_positive)
    p = qs.add_parser("retry", help="put a dead task back to pending with fresh attempts")
    p.add_argument("id", type=_positive)
    p = qs.add_parser("purge-dead", help="delete dead tasks")
    p.add_argument(
        "--older-than",
        type=_duration,
        metavar="D",
        help="only those dead for longer than D (90s, 30m, 12h, 7d)",
    )
    q.set_defaults(func=cmd_queue)

    c = sub.add_parser(
        "cache", help="inspect or clear the link cache", description="The link cache."
    )
    cs = c.add_subparsers(dest="cache_command", metavar="SUBCOMMAND", required=True)
    cs.add_parser("stats", help="how many entries, and their lifetime")
    p = cs.add_parser("clear", help="forget every entry, or one link's")
    p.add_argument("link", nargs="?", help="a post link (any mirror spelling) or a cache key")
    c.set_defaults(func=cmd_cache)

    p = sub.add_parser(
        "backup",
        help="an online, consistent copy of the database",
        description="Copy the database while the bot runs (SQLite's backup API), check the copy "
        "and write it mode 0600. PATH may be a folder (a time-stamped file goes in it) or - "
        "(standard output).",
    )
    p.add_argument("path", metavar="PATH")
    p.add_argument("--force", action="store_true", help="overwrite PATH if it exists")
    p.set_defaults(func=cmd_backup)

    p = sub.add_parser("version", help="print the versions of xbot, PTB, yt-dlp, SQLite, Python")
    p.set_defaults(func=cmd_version, settings=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func: Command | None = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    secrets = (os.environ.get("XBOT_TOKEN", "").strip(),)
    try:
        settings = load_settings(os.environ) if getattr(args, "settings", True) else Settings()
        return func(args, settings)
    except (XbotError, OSError) as exc:
        return _fail(str(exc) or type(exc).__name__, secrets)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
