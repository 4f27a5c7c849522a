"""The bot and its chats as the Bot API stand-in tells them: getMe, the command lists,
getChat, getChatMember, getChatAdministrators.

`BotInfo` owns the command lists (per scope and language); the bot and the chats are
the state's, read under its lock.
"""

from __future__ import annotations

import json
import re
from typing import Any

from standins.botapi._state import BotApiState, api_method
from standins.botapi._wire import JSON, Upload, as_int, as_json, bad_request


class BotInfo:
    """What the bot says about itself and about its chats."""

    def __init__(self, state: BotApiState) -> None:
        self._state = state
        self._commands: dict[str, list[JSON]] = {}

    @api_method("getMe")
    async def get_me(self, params: JSON, files: dict[str, Upload]) -> Any:
        return self._state.bot_user

    @api_method("setMyCommands")
    async def set_my_commands(self, params: JSON, files: dict[str, Upload]) -> Any:
        commands = as_json(params.get("commands", "[]"), "commands")
        if not isinstance(commands, list) or len(commands) > 100:
            raise bad_request("Bad Request: can't parse commands JSON object")
        for cmd in commands:
            name = str(cmd.get("command", ""))
            if not re.fullmatch(r"[a-z0-9_]{1,32}", name):
                raise bad_request("Bad Request: BOT_COMMAND_INVALID")
            if not 1 <= len(str(cmd.get("description", ""))) <= 256:
                raise bad_request("Bad Request: command description must be non-empty")
        key = _commands_key(params)
        with self._state.lock:
            self._commands[key] = [
                {"command": c["command"], "description": c["description"]} for c in commands
            ]
        return True

    @api_method("getMyCommands")
    async def get_my_commands(self, params: JSON, files: dict[str, Upload]) -> Any:
        with self._state.lock:
            return list(self._commands.get(_commands_key(params), []))

    @api_method("deleteMyCommands")
    async def delete_my_commands(self, params: JSON, files: dict[str, Upload]) -> Any:
        with self._state.lock:
            self._commands.pop(_commands_key(params), None)
        return True

    @api_method("getChat")
    async def get_chat(self, params: JSON, files: dict[str, Upload]) -> Any:
        with self._state.lock:
            return self._state.chats.require(params, posting=False).full_info()

    @api_method("getChatMember")
    async def get_chat_member(self, params: JSON, files: dict[str, Upload]) -> Any:
        chats = self._state.chats
        with self._state.lock:
            chat = chats.require(params, posting=False)
            return chats.member(chat, as_int(params.get("user_id"), "user_id"))

    @api_method("getChatAdministrators")
    async def get_chat_administrators(self, params: JSON, files: dict[str, Upload]) -> Any:
        chats = self._state.chats
        with self._state.lock:
            return chats.administrators(chats.require(params, posting=False))


def _commands_key(params: JSON) -> str:
    scope = params.get("scope")
    scope_key = json.dumps(as_json(scope, "scope"), sort_keys=True) if scope else "default"
    return f"{scope_key}|{params.get('language_code', '')}"
