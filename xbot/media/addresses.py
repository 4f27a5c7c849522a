"""Which IP addresses a fetch for a user may reach: the one policy of the SSRF guard. Pure.

Both guards read it: `xbot.media.netguard` (the bot's own httpx fetches,
checked where httpcore connects) and `xbot.media.connguard` (yt-dlp in its
thread, gallery-dl in its process, checked at each ``socket.connect``).
Standard library only: the gallery-dl child imports it at every start.
"""

from __future__ import annotations

import ipaddress

__all__ = ["IPAddress", "is_allowed_ip", "parse_ip"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
# IPv4-compatible IPv6 (deprecated, ::a.b.c.d): never a legitimate public target.
_V4_COMPAT = ipaddress.IPv6Network("::/96")


def _embedded_v4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address stands for, where the network would route it there."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:  # 2002::/16; Python calls 2002:7f00:1:: "global"
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def is_allowed_ip(ip: IPAddress, allow_private: bool) -> bool:
    """Whether a connection to `ip` is allowed.

    Without `allow_private` only globally routable unicast addresses pass:
    ``is_global`` already refuses loopback, RFC 1918, link-local (the cloud
    metadata address 169.254.169.254), CGNAT 100.64/10, ULA fc00::/7 and
    0.0.0.0; multicast needs its own test because 224/4 counts as global.
    """
    if isinstance(ip, ipaddress.IPv6Address):
        inner = _embedded_v4(ip)
        if inner is not None:
            # Judge what the packet would reach, and the wrapper too (teredo's is not global).
            return is_allowed_ip(inner, allow_private) and (
                allow_private or ip.ipv4_mapped is not None or ip.is_global
            )
        if ip in _V4_COMPAT and not ip.is_loopback and not ip.is_unspecified:
            return False
    if ip.is_multicast or ip.is_unspecified:
        return False
    if allow_private:
        return True
    return ip.is_global


def parse_ip(host: str) -> IPAddress | None:
    """`host` as an address when it is one (brackets allowed), else None."""
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None
