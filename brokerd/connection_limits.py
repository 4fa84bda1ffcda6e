"""Which connections a broker keeps: the rules, as plain functions of counts and times.

The server (brokerd/server.py) owns the connections and asks these functions what to do
with them; nothing here touches a socket or a clock, so every rule is tested with plain
values. Names follow Kafka's broker configs (max.connections, max.connections.per.ip,
connections.max.idle.ms); the read deadline is replog's own.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ConnectionLimits:
    max_connections: int
    max_connections_per_ip: int


def refusal(limits: ConnectionLimits, open_total: int, open_from_ip: int) -> str | None:
    """Why a new connection must be closed at once, given those already open; None to keep it.

    A refused connection is closed before anything is read from it, as Kafka does, so
    refusing costs the broker no more than the accept.
    """
    if open_from_ip >= limits.max_connections_per_ip:
        return (
            f"{open_from_ip} connections from this address already, "
            f"max.connections.per.ip={limits.max_connections_per_ip}"
        )
    if open_total >= limits.max_connections:
        return f"{open_total} connections already, max.connections={limits.max_connections}"
    return None
