"""Pure pieces: topic names, partitioner, znode codecs, replica assignment, configs, errors."""

from __future__ import annotations

from pathlib import Path

import pytest

import spark_replica.client as client_package
import spark_replica.wire.native as protocol_package
from brokerd.config.broker import BrokerConfig
from spark_replica import errors
from spark_replica.client import murmur2, parse_acks, parse_bootstrap, partition_for_key
from spark_replica.errors import (
    ConfigError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    ZooKeeperError,
)
from spark_replica.reassignment import assign_replicas
from spark_replica.topic_config import parse_assignments, parse_topic_configs
from spark_replica.topics import validate_topic_name
from spark_replica.zk import znodes
from spark_replica.zk.session import split_connect_string


@pytest.mark.parametrize("name", ["a", "A.b_c-9", "x" * 249])
def test_legal_topic_names(name: str) -> None:
    assert validate_topic_name(name) == name


@pytest.mark.parametrize("name", ["", ".", "..", "x" * 250, "has space", "a/b", "\udcff"])
def test_illegal_topic_names(name: str) -> None:
    with pytest.raises(InvalidTopicError):
        validate_topic_name(name)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"21", -973932308),
        (b"foobar", -790332482),
        (b"a-little-bit-long-string", -985981536),
        (b"a-little-bit-longer-string", -1486304829),
        (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
        (b"abc", 479470107),
    ],
)
def test_murmur2_matches_kafka(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


def test_partition_for_key_is_stable_and_in_range() -> None:
    assert all(0 <= partition_for_key(f"k{i}".encode(), 7) < 7 for i in range(100))
    assert partition_for_key(b"same", 5) == partition_for_key(b"same", 5)


def test_znode_codecs_round_trip_and_reject_garbage() -> None:
    state = znodes.PartitionState(1, 4, [1, 2, 3], 7)
    assert znodes.PartitionState.decode("/p", state.encode()) == state
    assignment = znodes.TopicAssignment("t", {0: [1, 2], 1: [2, 1]})
    assert znodes.TopicAssignment.decode("t", assignment.encode()) == assignment
    registration = znodes.BrokerRegistration(3, "h", 9092, "1")
    assert znodes.BrokerRegistration.decode(3, registration.encode()) == registration
    with pytest.raises(ZooKeeperError, match="/p"):
        znodes.PartitionState.decode("/p", b"{not json")
    with pytest.raises(ZooKeeperError):
        znodes.TopicAssignment.decode("t", b'{"partitions": 5}')


def test_assignment_spreads_leaders_and_followers() -> None:
    assignment = assign_replicas([1, 2, 3], partitions=6, replication_factor=3)
    leaders = [replicas[0] for replicas in assignment.values()]
    assert sorted(leaders) == [1, 1, 2, 2, 3, 3]
    assert all(len(set(r)) == 3 for r in assignment.values())
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas([1, 2], partitions=1, replication_factor=3)


def test_topic_configs_are_checked_by_key() -> None:
    assert parse_topic_configs({"retention.ms": "-1"}) == {"retention.ms": -1}
    with pytest.raises(ConfigError, match=r"unknown topic config 'retention\.mss'"):
        parse_topic_configs({"retention.mss": "1"})
    with pytest.raises(ConfigError, match=r"segment\.bytes"):
        parse_topic_configs({"segment.bytes": "ten"})
    with pytest.raises(ConfigError, match="key=value"):
        parse_assignments(["novalue"])


def test_broker_overrides_by_kafka_name(tmp_path: Path) -> None:
    config = BrokerConfig(1, tmp_path, "h:1").with_overrides({"log.segment.bytes": "2048"})
    assert config.log_defaults.segment_bytes == 2048
    topic = config.log_config_for({"retention.bytes": "100"})
    assert topic.retention_bytes == 100 and topic.segment_bytes == 2048
    with pytest.raises(ConfigError, match="unknown broker config"):
        config.with_overrides({"log.segmnt.bytes": "1"})


def test_connection_strings() -> None:
    assert parse_bootstrap("a:1, b:2") == [("a", 1), ("b", 2)]
    with pytest.raises(ConfigError, match="'a'"):
        parse_bootstrap("a")
    assert split_connect_string("h:1,g:2/x/y/") == ("h:1,g:2", "/x/y")
    assert split_connect_string("h:1/") == ("h:1", None)
    with pytest.raises(ConfigError):
        split_connect_string("h:port")
    assert parse_acks("all") == -1
    with pytest.raises(ConfigError):
        parse_acks("2")


def test_error_codes_map_to_types_with_flags() -> None:
    error = errors.error_for_code(6, "moved")
    assert isinstance(error, errors.NotLeaderOrFollowerError)
    assert error.retriable and error.invalid_metadata
    assert isinstance(errors.error_for_code(12345), errors.UnknownServerError)
    assert errors.code_of(errors.CorruptRecordError("x")) == 2
    assert errors.code_of(ConfigError("x")) == 40
    assert errors.code_of(errors.ZooKeeperConnectionError("lost")) == 7
    assert errors.error_for_code(7).retriable
    assert not errors.InvalidTopicError.retriable


@pytest.mark.parametrize("package", [client_package, protocol_package])
def test_public_names_are_exported(package: object) -> None:
    for name in package.__all__:  # type: ignore[attr-defined]
        assert hasattr(package, name)
