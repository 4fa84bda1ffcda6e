"""The consumer group broker configs: Kafka's names, defaults and checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokerd.config.broker import BrokerConfig
from spark_replica.errors import ConfigError


def _config(**settings: str) -> BrokerConfig:
    return BrokerConfig(1, Path("logs"), "h:1").with_overrides(settings)


def test_defaults_are_kafkas_but_the_initial_delay() -> None:
    config = _config()
    assert config.group_min_session_timeout_ms == 6_000
    assert config.group_max_session_timeout_ms == 1_800_000
    assert config.group_initial_rebalance_delay_ms == 300
    assert config.group_max_size == 2**31 - 1
    assert config.offset_metadata_max_bytes == 4096
    assert config.offsets_retention_ms == 10_080 * 60_000
    assert config.offsets_retention_check_interval_ms == 600_000


def test_offsets_retention_in_kafkas_minutes_or_replogs_ms() -> None:
    assert _config(**{"offsets.retention.minutes": "2"}).offsets_retention_ms == 120_000
    both = {"offsets.retention.minutes": "2", "offsets.retention.ms": "500"}
    assert _config(**both).offsets_retention_ms == 500
    interval = _config(**{"offsets.retention.check.interval.ms": "100"})
    assert interval.offsets_retention_check_interval_ms == 100


def test_overrides_by_kafka_name() -> None:
    config = _config(
        **{
            "group.min.session.timeout.ms": "500",
            "group.max.session.timeout.ms": "9000",
            "group.initial.rebalance.delay.ms": "0",
            "group.max.size": "3",
            "offset.metadata.max.bytes": "10",
        }
    )
    assert (
        config.group_min_session_timeout_ms,
        config.group_max_session_timeout_ms,
        config.group_initial_rebalance_delay_ms,
        config.group_max_size,
        config.offset_metadata_max_bytes,
    ) == (500, 9000, 0, 3, 10)


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"group.min.session.timeout.ms": "0"}, "group_min_session_timeout_ms"),
        ({"group.max.size": "0"}, "group_max_size"),
        ({"offset.metadata.max.bytes": "-1"}, "offset_metadata_max_bytes"),
        ({"group.initial.rebalance.delay.ms": "-1"}, "group.initial.rebalance.delay.ms"),
        (
            {"group.min.session.timeout.ms": "7000", "group.max.session.timeout.ms": "6000"},
            "group.max.session.timeout.ms",
        ),
        ({"group.max.size": "many"}, "group.max.size"),
        ({"offsets.retention.minutes": "0"}, "offsets_retention_ms"),
        ({"offsets.retention.check.interval.ms": "0"}, "offsets_retention_check_interval_ms"),
    ],
)
def test_bad_values_are_named(settings: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        _config(**settings)
