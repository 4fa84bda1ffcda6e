"""The compaction configs: topic keys, broker keys, and what cleanup.policy does to retention."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from brokerd.config.broker import BrokerConfig
from brokerd.config.server_properties import parse_server_properties
from brokerd.log import Log, LogConfig
from spark_replica.errors import ConfigError
from spark_replica.records import build_batch
from spark_replica.topic_config import parse_topic_configs

DAY_MS = 86_400_000


def broker(**overrides: str) -> BrokerConfig:
    return BrokerConfig(0, Path("."), "localhost:2181").with_overrides(overrides)


def test_topic_defaults_are_kafkas() -> None:
    config = broker().log_config_for({})
    assert config.cleanup_policy == "delete"
    assert config.delete_retention_ms == DAY_MS
    assert config.min_compaction_lag_ms == 0
    assert config.max_compaction_lag_ms == 2**63 - 1
    assert config.min_cleanable_dirty_ratio == 0.5
    assert config.deletes and not config.compacts


@pytest.mark.parametrize(
    ("raw", "policy", "compacts", "deletes"),
    [
        ("delete", "delete", False, True),
        ("compact", "compact", True, False),
        ("compact,delete", "compact,delete", True, True),
        ("delete, compact", "compact,delete", True, True),
        ("Compact", "compact", True, False),
    ],
)
def test_cleanup_policy_takes_kafkas_values_in_any_order(
    raw: str, policy: str, compacts: bool, deletes: bool
) -> None:
    config = broker().log_config_for({"cleanup.policy": raw})
    assert (config.cleanup_policy, config.compacts, config.deletes) == (policy, compacts, deletes)


@pytest.mark.parametrize(
    ("key", "raw", "message"),
    [
        ("cleanup.policy", "compacted", "must be delete, compact, or both"),
        ("cleanup.policy", "", "must be delete, compact, or both"),
        ("cleanup.policy", "compact,", "must be delete, compact, or both"),
        ("delete.retention.ms", "-1", "must be at least 0"),
        ("min.compaction.lag.ms", "soon", "not an integer"),
        ("max.compaction.lag.ms", "0", "must be at least 1"),
        ("min.cleanable.dirty.ratio", "1.5", "between 0 and 1"),
        ("min.cleanable.dirty.ratio", "half", "not a number"),
    ],
)
def test_a_bad_compaction_value_is_one_config_error_naming_the_key(
    key: str, raw: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        parse_topic_configs({key: raw})
    assert key in str(caught.value) and "\n" not in str(caught.value)


def test_topic_overrides_reach_the_log_config() -> None:
    config = broker().log_config_for(
        {
            "cleanup.policy": "compact",
            "delete.retention.ms": "100",
            "min.compaction.lag.ms": "5",
            "max.compaction.lag.ms": "60000",
            "min.cleanable.dirty.ratio": "0.1",
        }
    )
    assert (
        config.delete_retention_ms,
        config.min_compaction_lag_ms,
        config.max_compaction_lag_ms,
        config.min_cleanable_dirty_ratio,
    ) == (100, 5, 60000, 0.1)


def test_broker_defaults_for_topics_take_kafkas_log_keys() -> None:
    config = broker(
        **{
            "log.cleanup.policy": "compact",
            "log.cleaner.delete.retention.ms": "10",
            "log.cleaner.min.compaction.lag.ms": "20",
            "log.cleaner.max.compaction.lag.ms": "30",
            "log.cleaner.min.cleanable.ratio": "0.25",
        }
    )
    defaults = config.log_config_for({})
    assert defaults.cleanup_policy == "compact"
    assert (defaults.delete_retention_ms, defaults.min_compaction_lag_ms) == (10, 20)
    assert (defaults.max_compaction_lag_ms, defaults.min_cleanable_dirty_ratio) == (30, 0.25)
    assert config.log_config_for({"cleanup.policy": "delete"}).cleanup_policy == "delete"


def test_cleaner_broker_configs_have_kafkas_defaults_and_take_overrides() -> None:
    default = broker().cleaner
    assert default.enable and default.threads == 1 and default.backoff_ms == 15_000
    assert default.dedupe_buffer_size == 128 * 1024 * 1024
    assert math.isinf(default.io_max_bytes_per_second)
    cleaner = broker(
        **{
            "log.cleaner.enable": "false",
            "log.cleaner.threads": "2",
            "log.cleaner.dedupe.buffer.size": "1048576",
            "log.cleaner.io.max.bytes.per.second": "1e6",
            "log.cleaner.backoff.ms": "100",
        }
    ).cleaner
    assert not cleaner.enable and cleaner.threads == 2 and cleaner.backoff_ms == 100
    assert (cleaner.dedupe_buffer_size, cleaner.io_max_bytes_per_second) == (1048576, 1e6)


@pytest.mark.parametrize(
    ("key", "raw", "message"),
    [
        ("log.cleanup.policy", "remove", "must be delete, compact, or both"),
        ("log.cleaner.enable", "yes", "use true or false"),
        ("log.cleaner.threads", "0", "must be positive"),
        ("log.cleaner.backoff.ms", "fast", "not an integer"),
        ("log.cleaner.io.max.bytes.per.second", "-5", "must be positive"),
        ("log.cleaner.min.cleanable.ratio", "2", "between 0 and 1"),
    ],
)
def test_a_bad_cleaner_broker_config_is_one_config_error_naming_the_key(
    key: str, raw: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        broker(**{key: raw})
    assert key in str(caught.value)


def test_server_properties_read_the_cleaner_keys_instead_of_ignoring_them() -> None:
    parsed = parse_server_properties(
        {"log.cleanup.policy": "compact", "log.cleaner.enable": "true"}
    )
    assert parsed.ignored == ()
    assert parsed.broker_configs == {"log.cleanup.policy": "compact", "log.cleaner.enable": "true"}


def _old_log(path: Path, policy: str) -> Log:
    """A log of three sealed one-batch segments and an active one, all with timestamp 0."""
    config = LogConfig(
        segment_bytes=1024, retention_ms=1000, retention_bytes=1, cleanup_policy=policy
    )
    log = Log.open(path / "topic-0", config, now_ms=0)
    for i in range(4):
        log.append(
            build_batch([b"x" * 200], keys=[b"k"], timestamps=[0]), assign_offsets=True, now_ms=0
        )
        assert log.segment_count == i + 1
    return log


@pytest.mark.parametrize(("policy", "kept"), [("compact", 4), ("delete", 1), ("compact,delete", 1)])
def test_only_a_policy_with_delete_lets_retention_delete_segments(
    tmp_path: Path, policy: str, kept: int
) -> None:
    log = _old_log(tmp_path, policy)
    try:
        log.delete_expired_segments(now_ms=10_000)
        assert log.segment_count == kept
    finally:
        log.close()
