"""Ops: the operator's side. The `xbot` command, `doctor`, the offline demo,
systemd's notify protocol and the one-bot-per-data-dir lock."""
