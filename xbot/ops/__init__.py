"""Ops: the operator's side that the composition root or the `xbot` command calls:
`doctor`, the queue and cache commands, systemd's notify protocol, the metrics
listener and the one-bot-per-data-dir lock. The command itself is `xbot.cli`."""
