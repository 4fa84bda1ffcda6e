"""The broker's connection rules, with plain counts and times (in seconds)."""

from __future__ import annotations

import pytest

from brokerd.connection_limits import ConnectionLimits, reap_reason, refusal

LIMITS = ConnectionLimits(
    max_connections=10, max_connections_per_ip=3, idle_ms=60_000, request_read_timeout_ms=2_000
)


def test_connections_under_both_limits_are_kept() -> None:
    assert refusal(LIMITS, open_total=9, open_from_ip=2) is None


def test_the_address_limit_comes_first() -> None:
    reason = refusal(LIMITS, open_total=10, open_from_ip=3)
    assert reason is not None and "max.connections.per.ip=3" in reason


def test_the_broker_limit_counts_every_address() -> None:
    reason = refusal(LIMITS, open_total=10, open_from_ip=0)
    assert reason is not None and "max.connections=10" in reason


def test_a_request_arriving_past_the_read_deadline_is_cut_off() -> None:
    assert reap_reason(LIMITS, 102.0, 101.9, receiving_since_s=100.5, busy=False) is None
    reason = reap_reason(LIMITS, 102.6, 102.5, receiving_since_s=100.5, busy=True)
    assert reason is not None and "socket.request.read.timeout.ms=2000" in reason


def test_a_connection_receiving_a_request_is_not_idle() -> None:
    assert reap_reason(LIMITS, 1000.0, 0.0, receiving_since_s=999.0, busy=False) is None


@pytest.mark.parametrize(
    ("now", "busy", "reaped"),
    [(59.0, False, False), (61.0, False, True), (61.0, True, False)],
)
def test_idle_means_no_bytes_no_answers_and_no_request_in_hand(
    now: float, busy: bool, reaped: bool
) -> None:
    reason = reap_reason(LIMITS, now, 0.0, receiving_since_s=None, busy=busy)
    assert (reason is not None) == reaped
    assert reason is None or "connections.max.idle.ms=60000" in reason


@pytest.mark.parametrize(
    ("idle_ms", "read_ms", "interval_s"),
    [(600_000, 30_000, 1.0), (1_000, 30_000, 0.25), (10, 30_000, 0.05)],
)
def test_sweeps_come_a_quarter_deadline_apart_within_bounds(
    idle_ms: int, read_ms: int, interval_s: float
) -> None:
    limits = ConnectionLimits(1, 1, idle_ms, read_ms)
    assert limits.sweep_interval_s == pytest.approx(interval_s)
