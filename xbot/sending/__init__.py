"""Sending: what goes to Telegram (the sender, albums, captions), paced inside
Telegram's limits, and the status message people see meanwhile."""
