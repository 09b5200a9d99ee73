"""The client's address: REMOTE_ADDR, or X-Forwarded-For when (and only when) the peer is a trusted proxy."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

from django.conf import settings

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@lru_cache(maxsize=8)
def _networks(entries: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(e.strip(), strict=False) for e in entries if e.strip())


def trusted_networks(entries: Iterable[str] | None = None) -> tuple[Network, ...]:
    """PORTAL_TRUSTED_PROXIES parsed: addresses or CIDR blocks (a bad entry fails at start-up, see checks)."""
    raw = settings.PORTAL_TRUSTED_PROXIES if entries is None else entries
    return _networks(tuple(raw))


def _is_trusted(addr: str, networks: Sequence[Network]) -> bool:
    try:
        ip = ipaddress.ip_address(addr)
    except ValueError:
        return False
    return any(ip in net for net in networks)


def client_ip(request: Any) -> str:
    """The address a limit should count: the peer, unless the peer is a trusted proxy; then the
    right-most X-Forwarded-For hop that is not itself a trusted proxy (hops left of it are the
    client's own claims and are never believed). With no trusted proxies (the default) the header
    is ignored."""
    remote = str(request.META.get("REMOTE_ADDR") or "unknown")
    networks = trusted_networks()
    if not networks or not _is_trusted(remote, networks):
        return remote
    hops = [h.strip() for h in str(request.META.get("HTTP_X_FORWARDED_FOR", "")).split(",") if h.strip()]
    for hop in reversed(hops):
        try:
            ipaddress.ip_address(hop)
        except ValueError:
            return remote  # a malformed chain: count the proxy, never a made-up address
        if not _is_trusted(hop, networks):
            return hop
    return hops[0] if hops else remote
