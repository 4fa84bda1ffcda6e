"""The broker's connection rules, with plain counts and times (in seconds)."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokerd.config.broker import BrokerConfig
from brokerd.serving.connection_limits import ConnectionLimits, reap_reason, refusal
from spark_replica.errors import ConfigError

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


def test_broker_configs_take_kafkas_names() -> None:
    config = BrokerConfig(1, Path("logs"), "h:1").with_overrides(
        {
            "max.connections": "100",
            "max.connections.per.ip": "10",
            "queued.max.request.bytes": "2000",
            "socket.request.max.bytes": "1000",
            "connections.max.idle.ms": "5000",
            "socket.request.read.timeout.ms": "700",
        }
    )
    assert (
        config.max_connections,
        config.max_connections_per_ip,
        config.queued_max_request_bytes,
        config.connections_max_idle_ms,
        config.socket_request_read_timeout_ms,
    ) == (100, 10, 2000, 5000, 700)


def test_the_request_budget_must_hold_the_largest_request() -> None:
    with pytest.raises(ConfigError, match=r"queued\.max\.request\.bytes=999 must be at least"):
        BrokerConfig(1, Path("logs"), "h:1").with_overrides(
            {"queued.max.request.bytes": "999", "socket.request.max.bytes": "1000"}
        )
