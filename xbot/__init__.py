"""xbot: answers links to X posts (and other sites) with their media, durably."""

import os

__version__ = "0.1.0"

# PTB 22 keeps durations as timedeltas but, unless this opt-in is set, warns on
# every RetryAfter it builds (its own constructor reads the int property). We
# read timedeltas everywhere (xbot.sending.sender.retry_after_seconds), so opt in
# before telegram is imported anywhere in the process.
os.environ.setdefault("PTB_TIMEDELTA", "1")
