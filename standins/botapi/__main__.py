"""``python -m standins.botapi [--port N] [--token T] [--allow-loopback-urls]``."""

from standins.botapi import main

main()
