"""The versions a bug report needs: xbot, PTB, yt-dlp, gallery-dl, SQLite, Python.

One place for `xbot --version`, `xbot doctor` and `/stats`. Read from the
installed distributions' metadata, so nothing here imports telegram or
yt_dlp (yt-dlp alone takes 0.2 s to import). yt-dlp goes stale fastest:
sites change every week and its version is its release date, so
`staleness` can say how old it is without asking the network. gallery-dl
follows the sites as closely, but its version is a number: how long ago it was
installed (its distribution's metadata file) is what can be known offline
(`gallerydl_staleness`); nothing here imports it either (GPL-2.0: it only ever
runs as a separate process).
"""

from __future__ import annotations

import platform
import re
import sys
from datetime import date
from importlib import metadata
from pathlib import Path

import apsw
import attrs

from xbot import __version__

# yt-dlp releases every few weeks; past this its extractors are often broken.
YTDLP_MAX_AGE_DAYS = 90
# gallery-dl likewise; its age is counted from when it was installed (or updated).
GALLERYDL_MAX_AGE_DAYS = 90
# "2026.10.26", a nightly "2026.10.26.232417", a dev build "2026.10.26.dev0".
_YTDLP_DATE = re.compile(r"^(\d{4})\.(\d{1,2})\.(\d{1,2})(?:\D|$)")


@attrs.frozen
class Versions:
    """What is installed.

    Attributes:
        xbot: this package.
        ptb: python-telegram-bot.
        ytdlp: yt-dlp (a date, YYYY.MM.DD).
        gallerydl: gallery-dl (a version number).
        sqlite: the SQLite library apsw is linked with.
        apsw: apsw itself.
        python: the interpreter.
    """

    xbot: str
    ptb: str
    ytdlp: str
    sqlite: str
    apsw: str
    python: str
    gallerydl: str = "not installed"

    def lines(self) -> list[str]:
        """One piece a line, the way `xbot --version` prints them."""
        return [
            f"xbot {self.xbot}",
            f"python-telegram-bot {self.ptb}",
            f"yt-dlp {self.ytdlp}",
            f"gallery-dl {self.gallerydl}",
            f"SQLite {self.sqlite} (apsw {self.apsw})",
            f"Python {self.python}",
        ]

    def one_line(self) -> str:
        """For /stats and doctor: xbot's version, then the others in parentheses."""
        return (
            f"xbot {self.xbot} (python-telegram-bot {self.ptb}, yt-dlp {self.ytdlp}, "
            f"gallery-dl {self.gallerydl}, SQLite {self.sqlite}, Python {self.python})"
        )


def _dist(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def installed() -> Versions:
    return Versions(
        xbot=__version__,
        ptb=_dist("python-telegram-bot"),
        ytdlp=_dist("yt-dlp"),
        gallerydl=_dist("gallery-dl"),
        sqlite=apsw.sqlite_lib_version(),
        apsw=apsw.apsw_version(),
        python=platform.python_version(),
    )


def ytdlp_release(version: str) -> date | None:
    """The release date yt-dlp's version string is; None when it is not one."""
    match = _YTDLP_DATE.match(version)
    if match is None:
        return None
    try:
        return date(*(int(g) for g in match.groups()))
    except ValueError:
        return None


def update_command(package: str = "yt-dlp") -> str:
    """How to update `package` in the environment xbot runs from."""
    python = Path(sys.executable)
    return f"{python} -m pip install -U {package}"


def installed_on(name: str) -> date | None:
    """The day distribution `name` was installed or last updated (its METADATA file's
    time); None when it is not installed or says nothing."""
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return None
    for file in dist.files or ():
        if file.name == "METADATA":
            try:
                stamp = Path(str(dist.locate_file(file))).stat().st_mtime
            except OSError:
                return None
            return date.fromtimestamp(stamp)
    return None


def gallerydl_staleness(version: str, installed: date | None, today: date) -> tuple[bool, str]:
    """(too old?, what to say) about an installed gallery-dl `version`, installed on
    `installed`, on `today`."""
    if version == "not installed":
        return True, (
            f"not installed: image posts of other sites go to yt-dlp alone. "
            f"Install it with `{update_command('gallery-dl')}`"
        )
    if installed is None:
        return False, f"{version} (when it was installed is unknown)"
    age = max((today - installed).days, 0)
    if age > GALLERYDL_MAX_AGE_DAYS:
        return True, (
            f"{version}, installed {age} days ago (over {GALLERYDL_MAX_AGE_DAYS}): sites change "
            f"and old extractors break. Update it with `{update_command('gallery-dl')}`, "
            f"then restart xbot"
        )
    return False, f"{version}, installed {age} days ago; it runs as a separate process"


def staleness(version: str, today: date) -> tuple[bool, str]:
    """(too old?, what to say) about an installed yt-dlp `version` on `today`."""
    released = ytdlp_release(version)
    if released is None:
        return True, (
            f"version {version!r} is not a release date; install a release: `{update_command()}`"
        )
    age = (today - released).days
    if age > YTDLP_MAX_AGE_DAYS:
        return True, (
            f"{version} is {age} days old (over {YTDLP_MAX_AGE_DAYS}): sites change and old "
            f"extractors break. Update it with `{update_command()}`, then restart xbot"
        )
    return False, f"{version}, released {max(age, 0)} days ago"
