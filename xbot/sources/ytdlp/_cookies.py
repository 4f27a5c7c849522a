"""The operator's cookies for sites that want a login (``XBOT_YTDLP_COOKIES``).

A Netscape cookies file, as browser extensions and ``yt-dlp --cookies`` write it,
is read once at start with the standard library (`http.cookiejar.MozillaCookieJar`)
and handed to every yt-dlp job's own cookie jar (`_api`). The jar sends each cookie
only to hosts under its own domain (the standard domain match, checked for each
request and each redirect hop), so a login for one site never reaches another.

What a file may not do is name a domain that is not a site: a bare public suffix
(``.com``, ``.co.uk``), an empty domain, or a shared hosting suffix (``.github.io``),
whose cookies would go to every site under it. Such a file is refused at load with
one line naming the domain. Values are never shown: not in errors, not by
``xbot doctor`` (which lists the domains), not in a log.
"""

from __future__ import annotations

import http.cookiejar
import ipaddress
import time
import warnings
from pathlib import Path

import attrs

from xbot.errors import ConfigError

__all__ = ["Cookies", "load_cookies", "over_broad"]

SETTING = "XBOT_YTDLP_COOKIES"

# Second-level labels that, under a two-letter country code, make a public suffix
# (``co.uk``, ``com.au``, ``ne.jp``); the full Public Suffix List is not a dependency.
_SECOND_LEVEL = frozenset(
    {"ac", "co", "com", "edu", "gob", "go", "gov", "mil", "ne", "net", "or", "org"}
)
# Shared hosting whose every customer's site sits under one suffix.
_SHARED = frozenset(
    {
        "amazonaws.com",
        "appspot.com",
        "blogspot.com",
        "cloudfront.net",
        "github.io",
        "gitlab.io",
        "herokuapp.com",
        "netlify.app",
        "pages.dev",
        "vercel.app",
        "workers.dev",
    }
)


def over_broad(domain: str) -> bool:
    """The cookie's domain reaches beyond one site: empty, a bare suffix, shared hosting."""
    name = domain.strip().lstrip(".").lower().rstrip(".")
    if not name:
        return True
    try:
        ipaddress.ip_address(name)
    except ValueError:
        pass
    else:
        return False  # one host, matched exactly
    labels = name.split(".")
    if len(labels) == 1:
        return True  # a top-level domain, or a bare name like "localhost"
    if len(labels) == 2 and labels[0] in _SECOND_LEVEL and len(labels[1]) == 2:
        return True
    return name in _SHARED


@attrs.frozen
class Cookies:
    """The cookies of the operator's file, checked.

    Attributes:
        path: where they were read (None: no file, no cookies).
        jar: the cookies themselves; copied into each job's jar, never shown.
    """

    path: Path | None = None
    jar: tuple[http.cookiejar.Cookie, ...] = ()

    @property
    def domains(self) -> tuple[str, ...]:
        """The sites the cookies go to (for ``xbot doctor``), sorted, without values."""
        return tuple(sorted({c.domain.lstrip(".").lower() for c in self.jar}))


def _live(jar: http.cookiejar.CookieJar, now: float) -> tuple[http.cookiejar.Cookie, ...]:
    """The cookies a browser would still send. An export writes a session cookie (what
    many logins are) with expiry 0, which the standard library reads as long expired."""
    live = []
    for cookie in jar:
        if cookie.expires == 0:
            cookie.expires, cookie.discard = None, True
        if cookie.expires is None or cookie.expires > now:
            live.append(cookie)
    return tuple(live)


def load_cookies(path: Path | None) -> Cookies:
    """Read and check the file; no path, no cookies.

    Raises:
        ConfigError: the file cannot be read, is no Netscape cookies file, or names
            an over-broad domain (one line, naming the domain, never a value).
    """
    if path is None:
        return Cookies()
    jar = http.cookiejar.MozillaCookieJar(str(path))
    try:
        # A malformed line makes the stdlib warn "http.cookiejar bug!" with a traceback
        # before it raises LoadError: the error alone is what the operator reads.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            jar.load(ignore_discard=True, ignore_expires=True)
    except http.cookiejar.LoadError:  # an OSError too: caught first
        # Not the stdlib's words: they quote the offending line, which may hold a value.
        raise ConfigError(f"{SETTING}: {path} is not a Netscape cookies file") from None
    except OSError as exc:
        raise ConfigError(f"{SETTING}: cannot read {path}: {exc.strerror or exc}") from None
    cookies = _live(jar, time.time())
    for cookie in cookies:
        if over_broad(cookie.domain):
            shown = cookie.domain or "(empty)"
            raise ConfigError(
                f"{SETTING}: {path} has a cookie for {shown!s}, which is not one site; "
                "export cookies for the site alone"
            )
    return Cookies(path, cookies)
