"""Which connections a broker keeps: the rules, as plain functions of counts and times.

The server (brokerd/serving/server.py) owns the connections and asks these functions what to do
with them; nothing here touches a socket or a clock, so every rule is tested with plain
values. Names follow Kafka's broker configs (max.connections, max.connections.per.ip,
connections.max.idle.ms); the read deadline and the login deadline
(sasl.server.authentication.timeout.ms, brokerd/serving/connection_state.py) are replog's own.
"""

from __future__ import annotations

from dataclasses import dataclass

# How often the server looks for connections to close: a quarter of the shortest
# deadline, so that each is enforced within a quarter of its length late; at least once
# a second, and no more than twenty times a second, however short the deadlines.
SWEEPS_PER_DEADLINE = 4
MAX_SWEEP_INTERVAL_S = 1.0
MIN_SWEEP_INTERVAL_S = 0.05


@dataclass(frozen=True)
class ConnectionLimits:
    max_connections: int
    max_connections_per_ip: int
    idle_ms: int
    request_read_timeout_ms: int
    login_timeout_ms: int | None = None  # None: no connection has to log in

    @property
    def sweep_interval_s(self) -> float:
        deadlines = [self.idle_ms, self.request_read_timeout_ms]
        if self.login_timeout_ms is not None:
            deadlines.append(self.login_timeout_ms)
        shortest_s = min(deadlines) / 1000
        return min(
            MAX_SWEEP_INTERVAL_S, max(MIN_SWEEP_INTERVAL_S, shortest_s / SWEEPS_PER_DEADLINE)
        )


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


def reap_reason(
    limits: ConnectionLimits,
    now_s: float,
    last_active_s: float,
    receiving_since_s: float | None,
    busy: bool,
    login_deadline_s: float | None = None,
) -> str | None:
    """Why an open connection must be closed now; None to keep it.

    A connection that must log in (login_deadline_s not None) and has not by then is
    closed whatever it is doing: before login a client may only authenticate, and a
    slow one would hold a connection and a share of the request budget.
    A request whose bytes have been arriving for longer than the read deadline is a
    slow-loris sender (or a dead link): it would hold its connection, and possibly its
    share of the request budget, for ever. A connection that is neither handling a
    request nor receiving one, and has received nothing and been answered nothing for
    connections.max.idle.ms, is idle.
    """
    if login_deadline_s is not None and now_s > login_deadline_s:
        return (
            "not logged in in time, "
            f"sasl.server.authentication.timeout.ms={limits.login_timeout_ms}"
        )
    if receiving_since_s is not None:
        receiving_ms = (now_s - receiving_since_s) * 1000
        if receiving_ms > limits.request_read_timeout_ms:
            return (
                f"a request has been arriving for {receiving_ms:.0f} ms, over "
                f"socket.request.read.timeout.ms={limits.request_read_timeout_ms}"
            )
        return None
    idle_ms = (now_s - last_active_s) * 1000
    if not busy and idle_ms > limits.idle_ms:
        return f"idle for {idle_ms:.0f} ms, over connections.max.idle.ms={limits.idle_ms}"
    return None
