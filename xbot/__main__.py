"""`python -m xbot ...` is `xbot ...`: the same parser, the same exit statuses."""

import sys

from xbot.cli import main

sys.exit(main())
