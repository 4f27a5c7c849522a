"""xbot: answers links to X posts (and other sites) with their media, durably."""

__version__ = "0.1.0"
