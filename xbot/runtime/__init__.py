"""The running bot: `Runtime` starts what `xbot.app` wires (retrying the start-up's
calls while Telegram or the database is not there yet), runs the sweep and the clock
watch beside it and stops it cleanly; `run_until_signalled` is `xbot run` under
systemd's supervision (READY, WATCHDOG while healthy, STATUS, STOPPING).
"""

from xbot.runtime._runtime import Runtime
from xbot.runtime._supervision import polling_healthy, run_until_signalled, status_line
from xbot.runtime._sweep import sweep_once

__all__ = ["Runtime", "polling_healthy", "run_until_signalled", "status_line", "sweep_once"]
