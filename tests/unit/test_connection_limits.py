"""The broker's connection rules, with plain counts and times."""

from __future__ import annotations

from brokerd.connection_limits import ConnectionLimits, refusal

LIMITS = ConnectionLimits(max_connections=10, max_connections_per_ip=3)


def test_connections_under_both_limits_are_kept() -> None:
    assert refusal(LIMITS, open_total=9, open_from_ip=2) is None


def test_the_address_limit_comes_first() -> None:
    reason = refusal(LIMITS, open_total=10, open_from_ip=3)
    assert reason is not None and "max.connections.per.ip=3" in reason


def test_the_broker_limit_counts_every_address() -> None:
    reason = refusal(LIMITS, open_total=10, open_from_ip=0)
    assert reason is not None and "max.connections=10" in reason
