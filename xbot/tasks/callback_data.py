"""The data behind inline buttons: short, versioned, strictly parsed strings.

Pure functions, no I/O. A button carries ``v1:<action>[:<arg>...]``, at most
64 bytes (Telegram's limit), for example ``v1:fwd:1234`` or ``v1:set:ytdlp``.
Arguments are non-negative integers (ids that point into our database) or
short ``[a-z_][a-z0-9_]*`` tokens (setting names); a token never starts with
a digit, so every string reads back as exactly one value.

Callback data comes from the client and can be forged: `decode` accepts only
the canonical form `encode` writes and returns None for anything else, never
raising. It is never trusted for authority — a handler still checks who
pressed the button and looks the rest up by id. The version prefix lets a
later format coexist with buttons already sitting in chats.
"""

from __future__ import annotations

import enum
import re

import attrs

__all__ = [
    "MAX_ARGS",
    "MAX_BYTES",
    "MAX_INT",
    "PATTERN",
    "VERSION",
    "Action",
    "CallbackData",
    "decode",
    "encode",
]

VERSION = "v1"
MAX_BYTES = 64  # Telegram: callback_data is 1-64 bytes
MAX_ARGS = 4
MAX_INT = 2**63 - 1  # what SQLite's INTEGER holds
# For `CallbackQueryHandler(pattern=...)`: buttons of this format, any version.
PATTERN = r"^v[0-9]+:"

_TOKEN = re.compile(r"[a-z_][a-z0-9_]{0,31}")
# Canonical decimal only: "007" or "+7" would be a second spelling of 7.
_INT = re.compile(r"0|[1-9][0-9]{0,18}")


class Action(enum.StrEnum):
    """What a button does."""

    FORWARD = "fwd"  # forward what the bot sent to the chat's linked channel
    EDIT = "edit"  # edit the caption before forwarding
    SKIP = "skip"  # dismiss the buttons
    CONFIRM = "conf"  # confirm a forward after a caption edit
    SETTING = "set"  # toggle a chat setting (arg: the setting's code)
    RETRY = "retry"  # retry a dead task (arg: the task id)
    MENU = "menu"  # open or navigate the settings menu
    MUTE = "mute"  # mute (1) or unmute (0) an alert condition (args: condition, 1|0)
    AUDIO = "audio"  # the sound alone of the video it sits under (no args: the video's caption)


def _to_action(value: str) -> Action:
    return Action(value)


def _check_args(instance: object, attribute: object, args: tuple[int | str, ...]) -> None:
    if not isinstance(args, tuple):
        raise TypeError(f"args must be a tuple, got {type(args).__name__}")
    if len(args) > MAX_ARGS:
        raise ValueError(f"at most {MAX_ARGS} arguments, got {len(args)}")
    for arg in args:
        # type() rather than isinstance(): True is an int but no id.
        if type(arg) is int:
            if not 0 <= arg <= MAX_INT:
                raise ValueError(f"integer argument out of range: {arg}")
        elif type(arg) is str:
            if not _TOKEN.fullmatch(arg):
                raise ValueError(f"token argument must match {_TOKEN.pattern}: {arg!r}")
        else:
            raise TypeError(f"arguments are ints or tokens, got {type(arg).__name__}")


@attrs.frozen
class CallbackData:
    """A decoded button press.

    Attributes:
        action: what the button does (a plain string such as ``"fwd"`` is converted).
        args: non-negative ints and ``[a-z_][a-z0-9_]*`` tokens, at most `MAX_ARGS`.
    """

    action: Action = attrs.field(converter=_to_action)
    args: tuple[int | str, ...] = attrs.field(default=(), validator=_check_args)

    def int_arg(self, index: int) -> int | None:
        """The ``index``-th argument if it is an int, else None."""
        if 0 <= index < len(self.args):
            arg = self.args[index]
            return arg if isinstance(arg, int) else None
        return None

    def str_arg(self, index: int) -> str | None:
        """The ``index``-th argument if it is a token, else None."""
        if 0 <= index < len(self.args):
            arg = self.args[index]
            return arg if isinstance(arg, str) else None
        return None


def encode(data: CallbackData) -> str:
    """The button string for ``data``; ValueError when it would exceed 64 bytes."""
    text = ":".join([VERSION, data.action.value, *(str(arg) for arg in data.args)])
    if len(text) > MAX_BYTES:  # all ASCII: characters are bytes
        raise ValueError(f"callback data over {MAX_BYTES} bytes: {text!r}")
    return text


def decode(data: object) -> CallbackData | None:
    """The `CallbackData` behind a button string, or None for anything but `encode`'s output.

    Never raises: wrong type, non-ASCII, oversize, unknown version or action,
    non-canonical numbers, stray colons — all None.
    """
    if not isinstance(data, str) or not 0 < len(data) <= MAX_BYTES or not data.isascii():
        return None
    parts = data.split(":")
    if len(parts) < 2 or len(parts) > 2 + MAX_ARGS or parts[0] != VERSION:
        return None
    try:
        action = Action(parts[1])
    except ValueError:
        return None
    args: list[int | str] = []
    for part in parts[2:]:
        if _INT.fullmatch(part):
            value = int(part)
            if value > MAX_INT:
                return None
            args.append(value)
        elif _TOKEN.fullmatch(part):
            args.append(part)
        else:
            return None
    return CallbackData(action, tuple(args))
