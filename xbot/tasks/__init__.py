"""Tasks: the worker that leases and runs them, and the kinds it runs (deliver a
link, forward to a channel, a dead-letter notice)."""
