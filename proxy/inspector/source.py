"""Who an admin request comes from (the peer, or X-Forwarded-For's nearest untrusted hop) and over
what (TLS here, or at a proxy that says so in X-Forwarded-Proto).

`X-Forwarded-For` and `X-Forwarded-Proto` are honoured only when the connection itself comes from a
network listed in `server.trusted_proxies`; anyone else could write any address there and dodge (or
aim) a lockout, or claim TLS it did not use. IPv6 sources count per /64, the block one host
typically controls.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from aiohttp import web

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPV6_SOURCE_PREFIX = 64


def parse_networks(entries: Sequence[str]) -> tuple[IPNetwork, ...]:
    """`server.trusted_proxies` entries (addresses or CIDR blocks) as networks; ValueError if bad."""
    return tuple(ipaddress.ip_network(entry.strip(), strict=False) for entry in entries)


def request_source(request: web.Request, trusted: Sequence[IPNetwork]) -> str:
    """The source a failed attempt counts against (see the module docstring)."""
    peer = _address(request.remote or "")
    if peer is None:
        return request.remote or "unknown"
    if _is_trusted(peer, trusted):
        hops = [hop.strip() for value in request.headers.getall("X-Forwarded-For", [])
                for hop in value.split(",")]
        for hop in reversed(hops):
            address = _address(hop)
            if address is None:
                break  # garbage from the client side: the last trusted hop is the source
            if not _is_trusted(address, trusted):
                return source_key(address)
            peer = address
    return source_key(peer)


def sent_over_https(request: web.Request, trusted: Sequence[IPNetwork]) -> bool:
    """TLS here, or at a trusted reverse proxy that says so (`X-Forwarded-Proto: https`, its first
    value: the scheme the client-facing proxy saw)."""
    if request.secure:
        return True
    peer = _address(request.remote or "")
    if peer is None or not _is_trusted(peer, trusted):
        return False
    forwarded = request.headers.get("X-Forwarded-Proto", "").split(",")[0].strip().lower()
    return forwarded == "https"


def source_key(address: IPAddress) -> str:
    """An IPv4 address as is; an IPv6 address as its /64 (an IPv4-mapped one as the IPv4 address)."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.ip_network(f"{address}/{IPV6_SOURCE_PREFIX}", strict=False))
    return str(address)


def _address(text: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(text.strip("[]").split("%")[0])
    except ValueError:
        return None


def _is_trusted(address: IPAddress, trusted: Sequence[IPNetwork]) -> bool:
    return any(address in network for network in trusted)
