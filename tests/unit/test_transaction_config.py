"""The transaction coordinator's broker configs: Kafka's names, defaults and checks, and the
`__transaction_state` topic they shape."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokerd.config.broker import BrokerConfig
from brokerd.config.server_properties import parse_server_properties
from brokerd.groups.offsets_topic import offsets_topic
from brokerd.transactions.state_manager import transaction_state_topic
from spark_replica.errors import ConfigError


def _config(**settings: str) -> BrokerConfig:
    return BrokerConfig(1, Path("logs"), "h:1").with_overrides(settings)


def test_defaults_are_kafkas() -> None:
    config = _config().transactions
    assert config.state_log_num_partitions == 50
    assert config.state_log_replication_factor == 3
    assert config.state_log_min_isr == 2
    assert config.state_log_segment_bytes == 104_857_600
    assert config.state_log_load_buffer_size == 5_242_880
    assert config.max_timeout_ms == 900_000
    assert config.transactional_id_expiration_ms == 604_800_000
    assert config.abort_timed_out_interval_ms == 10_000
    assert config.remove_expired_interval_ms == 3_600_000


def test_overrides_by_kafka_name_from_a_properties_file() -> None:
    parsed = parse_server_properties(
        {
            "transaction.state.log.num.partitions": "5",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.segment.bytes": "1048576",
            "transaction.state.log.load.buffer.size": "4096",
            "transaction.max.timeout.ms": "60000",
            "transactional.id.expiration.ms": "1000",
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "100",
            "transaction.remove.expired.transaction.cleanup.interval.ms": "200",
        }
    )
    assert parsed.ignored == ()
    config = _config(**parsed.broker_configs).transactions
    assert (
        config.state_log_num_partitions,
        config.state_log_replication_factor,
        config.state_log_min_isr,
        config.state_log_segment_bytes,
        config.state_log_load_buffer_size,
        config.max_timeout_ms,
        config.transactional_id_expiration_ms,
        config.abort_timed_out_interval_ms,
        config.remove_expired_interval_ms,
    ) == (5, 1, 1, 1_048_576, 4096, 60_000, 1000, 100, 200)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"transaction.state.log.num.partitions": "0"},
            "transaction.state.log.num.partitions must be positive, not 0",
        ),
        ({"transaction.max.timeout.ms": "-5"}, "transaction.max.timeout.ms must be positive"),
        (
            {"transactional.id.expiration.ms": "a week"},
            "transactional.id.expiration.ms='a week': not an integer",
        ),
        (
            {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "0"},
            "transaction.abort.timed.out.transaction.cleanup.interval.ms must be positive",
        ),
        (
            {"transaction.state.log.replication.factor": "1"},
            "transaction.state.log.min.isr=2 is over transaction.state.log.replication.factor=1",
        ),
    ],
)
def test_bad_values_are_named(settings: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _config(**settings)


def test_the_state_topic_is_created_compacted_with_its_min_isr_capped_by_its_copies() -> None:
    topic = transaction_state_topic(_config(**{"transaction.state.log.segment.bytes": "1048576"}))
    assert (topic.name, topic.num_partitions, topic.replication_factor) == (
        "__transaction_state",
        50,
        3,
    )
    assert topic.configs(3) == {
        "cleanup.policy": "compact",
        "segment.bytes": "1048576",
        "min.insync.replicas": "2",
    }
    # A one-broker cluster gets one copy, and a min ISR it can meet.
    assert topic.configs(1)["min.insync.replicas"] == "1"
    # The offsets topic keeps the broker's default min ISR, as before.
    assert "min.insync.replicas" not in offsets_topic(_config()).configs(1)
