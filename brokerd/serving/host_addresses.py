"""The addresses this machine might be reached at, for a broker bound to a wildcard.

Kafka advertises such a broker at the canonical host name; replog advertises an address
(brokerd.config.listeners.choose_reachable_host), gathered here in order of preference: what
the fully qualified name resolves to, what the host name resolves to, then the address
of the interface the default route leaves by (found by connecting a UDP socket, which
sends nothing), which works where no name resolves to a useful address.
"""

from __future__ import annotations

import socket

from brokerd.config.listeners import choose_reachable_host

# Any address outside this machine will do: a UDP connect only asks the routing table.
# TEST-NET-2 (RFC 5737) and its IPv6 documentation counterpart (RFC 3849).
_ROUTE_PROBES = ((socket.AF_INET, "198.51.100.1"), (socket.AF_INET6, "2001:db8::1"))


def reachable_host() -> str:
    return choose_reachable_host(candidate_addresses())


def candidate_addresses() -> list[str]:
    candidates: list[str] = []
    for name in dict.fromkeys((socket.getfqdn(), socket.gethostname())):
        candidates += _resolve(name)
    for family, probe in _ROUTE_PROBES:
        candidates += _route_source(family, probe)
    return candidates


def _resolve(name: str) -> list[str]:
    try:
        infos = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return []
    return [str(info[4][0]) for info in infos]


def _route_source(family: socket.AddressFamily, probe: str) -> list[str]:
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as sock:
            sock.connect((probe, 9))
            return [str(sock.getsockname()[0])]
    except OSError:
        return []
