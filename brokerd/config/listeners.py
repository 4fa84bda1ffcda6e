"""A broker's listeners: the address each binds, and the address it advertises.

Kafka's model: `listeners` says where each listener binds, `advertised.listeners` what
the broker registers in /brokers/ids/N and hands to clients, which connect to nothing
else. A listener that advertised.listeners leaves out is advertised as it is bound, and
an advertised port 0 means the port bound (so `--advertised-host H` is every listener
advertised at H:0). An advertised 0.0.0.0 or :: is refused, as in Kafka: no client can
connect to it.

One departure from Kafka, which refuses a listener bound to a wildcard address with
nothing advertised: replog advertises such a listener at the machine's reachable
address (`choose_reachable_host`), so `--host 0.0.0.0` alone gives a working broker.

Three listeners exist: REPLOG (replog's protocol: its client, Spark, the other brokers),
KAFKA (Kafka's protocol, for Kafka's clients; a listener named after a security protocol,
as `PLAINTEXT://:9092` in Kafka's own file, is this one and names its protocol) and
METRICS (Prometheus text over HTTP). Everything here is pure; the broker's start-up
gathers the candidate addresses (brokerd.host_addresses).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from brokerd.config.security import PROTOCOLS
from spark_replica.errors import ConfigError

REPLOG = "REPLOG"
KAFKA = "KAFKA"
METRICS = "METRICS"
LISTENER_NAMES = (REPLOG, KAFKA, METRICS)
WILDCARD_HOSTS = frozenset({"0.0.0.0", "::"})
# Advertised where nothing better is found: the machine alone can reach it.
LOOPBACK_HOST = "127.0.0.1"


@dataclass(frozen=True, slots=True)
class Endpoint:
    host: str  # "" where the text gave none
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class ListenerEntry:
    """One `NAME://host:port` of a listeners list, its name turned into a listener."""

    listener: str  # REPLOG, KAFKA or METRICS
    endpoint: Endpoint
    security_protocol: str | None  # what the name said (SSL://...), None for the plain names


def is_wildcard(host: str) -> bool:
    """0.0.0.0 or :: (in any spelling): every interface, which no client can connect to."""
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def parse_listener_list(key: str, text: str) -> list[ListenerEntry]:
    """`NAME://host:port,...` (key is the config's name, for messages); at most one entry
    per listener. An IPv6 host is bracketed, as in Kafka: `REPLOG://[::1]:9092`."""
    entries: list[ListenerEntry] = []
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        name, separator, address = entry.partition("://")
        host, colon, port_text = address.rpartition(":")
        if not separator or not colon:
            raise ConfigError(f"{key} entry {entry!r} is not NAME://host:port")
        name = name.strip().upper()
        protocol = name if name in PROTOCOLS else None
        listener = KAFKA if protocol is not None else name
        if listener not in LISTENER_NAMES:
            raise ConfigError(
                f"{key} entry {entry!r}: name it REPLOG (replog's protocol), KAFKA, METRICS or "
                f"a security protocol ({', '.join(PROTOCOLS)}; both Kafka's protocol)"
            )
        if any(e.listener == listener for e in entries):
            raise ConfigError(f"{key} names more than one {listener} listener: {text!r}")
        host = host.strip().removeprefix("[").removesuffix("]")
        entries.append(
            ListenerEntry(listener, Endpoint(host, _port(key, entry, port_text)), protocol)
        )
    return entries


def check_shared_ports(bound: Mapping[str, Endpoint]) -> None:
    """ConfigError if two listeners would bind the same port on overlapping addresses."""
    seen: list[tuple[str, Endpoint]] = []
    for listener, endpoint in bound.items():
        for other, taken in seen:
            overlap = (
                taken.host == endpoint.host or is_wildcard(taken.host) or is_wildcard(endpoint.host)
            )
            if endpoint.port > 0 and endpoint.port == taken.port and overlap:
                raise ConfigError(
                    f"the {other} and {listener} listeners cannot share port {endpoint.port}"
                )
        seen.append((listener, endpoint))


def check_advertised(advertised: Mapping[str, Endpoint], bound: Iterable[str]) -> None:
    """ConfigError unless each advertised listener is bound and names a connectable host."""
    bound = set(bound)
    for listener, endpoint in advertised.items():
        if listener not in LISTENER_NAMES:
            raise ConfigError(
                f"advertised.listeners names {listener!r}: the listeners are "
                f"{', '.join(LISTENER_NAMES)}"
            )
        if listener not in bound:
            raise ConfigError(
                f"advertised.listeners names {listener}://{endpoint}, but the broker has no "
                f"{listener} listener: add it to listeners (or give its port flag)"
            )
        if is_wildcard(endpoint.host):
            raise ConfigError(
                f"advertised.listeners cannot advertise {listener}://{endpoint}: clients cannot "
                "connect to a wildcard address; give the host's name or address"
            )
        if not 0 <= endpoint.port < 65536:
            raise ConfigError(
                f"advertised.listeners {listener}://{endpoint}: the port must be between 0 "
                "and 65535"
            )


def advertise(
    bound: Mapping[str, Endpoint],
    advertised: Mapping[str, Endpoint],
    advertised_host: str | None,
    reachable_host: Callable[[], str],
) -> dict[str, Endpoint]:
    """What each bound listener is registered as (`bound` holds the ports really bound).

    `advertised_host` (the --advertised-host flag) wins over `advertised`; a listener
    neither names is advertised as bound, except that a wildcard or empty host becomes
    `reachable_host()`, asked only when needed (it may resolve names).
    """
    result: dict[str, Endpoint] = {}
    for listener, endpoint in bound.items():
        chosen = advertised.get(listener, endpoint)
        host = chosen.host if advertised_host is None else advertised_host
        port = chosen.port if advertised_host is None else 0
        if not host or is_wildcard(host):
            host = reachable_host()
        result[listener] = Endpoint(host, port or endpoint.port)
    return result


def choose_reachable_host(candidates: Iterable[str]) -> str:
    """The address to advertise for a wildcard bind: the first candidate that other hosts
    could connect to (not loopback, link-local or a wildcard), else the first loopback
    candidate (a machine alone), else 127.0.0.1. An address, not a name: it works on
    machines with no DNS, where a name resolves on this host only."""
    loopback: list[str] = []
    for candidate in candidates:
        try:
            address = ipaddress.ip_address(candidate.split("%", 1)[0])
        except ValueError:
            continue
        if address.is_unspecified or address.is_multicast:
            continue
        if address.is_loopback:
            loopback.append(candidate)
        elif not address.is_link_local:
            return candidate
    return loopback[0] if loopback else LOOPBACK_HOST


def _port(key: str, entry: str, text: str) -> int:
    try:
        port = int(text.strip())
    except ValueError:
        port = -1
    if not 0 <= port < 65536:
        raise ConfigError(f"{key} entry {entry!r}: the port must be between 0 and 65535")
    return port
