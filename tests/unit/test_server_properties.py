"""Kafka's server.properties read into replog's settings: plain values, no processes."""

from __future__ import annotations

import re
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from brokerd.config.broker import BrokerConfig
from brokerd.config.listeners import Endpoint
from brokerd.config.server_properties import cluster_configs, parse_server_properties
from spark_replica.errors import ConfigError


def raises(message: str) -> AbstractContextManager[object]:
    return pytest.raises(ConfigError, match=re.escape(message))


# The settings of the server.properties Kafka ships for ZooKeeper mode, comments left out.
KAFKA_DEFAULT_FILE = {
    "broker.id": "0",
    "num.network.threads": "3",
    "num.io.threads": "8",
    "socket.send.buffer.bytes": "102400",
    "socket.receive.buffer.bytes": "102400",
    "socket.request.max.bytes": "104857600",
    "log.dirs": "/tmp/kafka-logs",
    "num.partitions": "1",
    "num.recovery.threads.per.data.dir": "1",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "log.retention.hours": "168",
    "log.segment.bytes": "1073741824",
    "log.retention.check.interval.ms": "300000",
    "zookeeper.connect": "localhost:2181",
    "zookeeper.connection.timeout.ms": "18000",
    "group.initial.rebalance.delay.ms": "0",
}


def test_kafkas_own_file_is_read_with_its_unused_keys_ignored() -> None:
    parsed = parse_server_properties(KAFKA_DEFAULT_FILE)
    assert parsed.broker_id == 0
    assert parsed.log_dir == Path("/tmp/kafka-logs")
    assert parsed.zookeeper == "localhost:2181"
    assert parsed.port is None and parsed.kafka_port is None and parsed.metrics_port is None
    assert parsed.ignored == (
        "num.network.threads",
        "num.io.threads",
        "socket.send.buffer.bytes",
        "socket.receive.buffer.bytes",
        "num.recovery.threads.per.data.dir",
        "zookeeper.connection.timeout.ms",
    )
    assert parsed.broker_configs["log.retention.ms"] == str(168 * 3_600_000)
    config = BrokerConfig(0, Path("/d"), "localhost:2181").with_overrides(parsed.broker_configs)
    assert config.log_defaults.retention_ms == 168 * 3_600_000
    assert config.max_frame_bytes == 104857600
    assert config.group_initial_rebalance_delay_ms == 0
    assert config.num_partitions == 1 and config.default_replication_factor == 1
    assert config.transactions.state_log_replication_factor == 1
    assert config.transactions.state_log_min_isr == 1


def test_topic_defaults_are_read_and_must_be_positive() -> None:
    parsed = parse_server_properties({"num.partitions": "6", "default.replication.factor": "3"})
    config = BrokerConfig(0, Path("/d"), "zk:2181").with_overrides(parsed.broker_configs)
    assert (config.num_partitions, config.default_replication_factor) == (6, 3)
    with raises("default_replication_factor must be positive"):
        BrokerConfig(0, Path("/d"), "zk:2181").with_overrides({"default.replication.factor": "0"})


def test_retention_takes_the_finest_unit_given_and_minus_one_stays_unlimited() -> None:
    both = {"log.retention.hours": "1", "log.retention.minutes": "5"}
    assert parse_server_properties(both).broker_configs["log.retention.ms"] == "300000"
    finest = both | {"log.retention.ms": "1234"}
    assert parse_server_properties(finest).broker_configs["log.retention.ms"] == "1234"
    unlimited = parse_server_properties({"log.retention.hours": "-1"})
    assert unlimited.broker_configs["log.retention.ms"] == "-1"
    assert parse_server_properties({"log.roll.hours": "2"}).broker_configs == {
        "log.roll.ms": "7200000"
    }
    with raises("log.retention.hours='a week'"):
        parse_server_properties({"log.retention.hours": "a week"})


def listeners(text: str) -> tuple[object, ...]:
    parsed = parse_server_properties({"listeners": text})
    return (
        (parsed.host, parsed.port),
        (parsed.kafka_host, parsed.kafka_port),
        (parsed.metrics_host, parsed.metrics_port),
        parsed.broker_configs.get("listener.security.protocol"),
    )


def test_listeners_map_to_the_replog_kafka_and_metrics_listeners_each_with_its_host() -> None:
    assert listeners("REPLOG://0.0.0.0:9092,KAFKA://127.0.0.2:9093,METRICS://10.1.2.3:9100") == (
        ("0.0.0.0", 9092),
        ("127.0.0.2", 9093),
        ("10.1.2.3", 9100),
        None,
    )
    # Kafka's own meaning: Kafka clients connect to PLAINTEXT://:9092. No host: --host's.
    assert listeners("PLAINTEXT://:9092") == ((None, None), (None, 9092), (None, None), "PLAINTEXT")
    assert listeners("replog://[::1]:1,SASL_SSL://[::2]:2") == (
        ("::1", 1),
        ("::2", 2),
        (None, None),
        "SASL_SSL",
    )
    parsed = parse_server_properties({"listeners": "REPLOG://:7000,SSL://:7001"})
    assert (parsed.port, parsed.kafka_port) == (7000, 7001)
    assert parsed.broker_configs == {"listener.security.protocol": "SSL"}


def test_metrics_port_and_a_metrics_listener_must_agree() -> None:
    same = {"listeners": "METRICS://h:9100", "metrics.port": "9100"}
    assert parse_server_properties(same).metrics_port == 9100
    with raises("metrics.port=9200 and listeners' METRICS://h:9100 disagree"):
        parse_server_properties(same | {"metrics.port": "9200"})


def test_advertised_listeners_are_read_per_listener() -> None:
    parsed = parse_server_properties(
        {
            "listeners": "REPLOG://0.0.0.0:9092,PLAINTEXT://0.0.0.0:9093",
            "advertised.listeners": "REPLOG://b1.example:9092,PLAINTEXT://[fd00::1]:0",
        }
    )
    assert parsed.advertised_listeners == {
        "REPLOG": Endpoint("b1.example", 9092),
        "KAFKA": Endpoint("fd00::1", 0),
    }
    assert "advertised.listeners" in parsed.identity_keys
    with raises("a listener is named SSL but the security protocol is PLAINTEXT"):
        parse_server_properties(
            {"listeners": "PLAINTEXT://:1", "advertised.listeners": "SSL://h:1"}
        )


@pytest.mark.parametrize(
    ("listeners", "message"),
    [
        ("REPLOG://h:1,REPLOG://h:2", "more than one REPLOG"),
        ("PLAINTEXT://h:1,KAFKA://h:2", "more than one KAFKA"),
        ("INTERNAL://h:1", "name it REPLOG"),
        ("REPLOG://h", "not NAME://host:port"),
        ("h:9092", "not NAME://host:port"),
        ("REPLOG://h:70000", "between 0 and 65535"),
    ],
)
def test_bad_listeners_are_named(listeners: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_server_properties({"listeners": listeners})
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_server_properties({"advertised.listeners": listeners})


def test_a_listener_protocol_must_agree_with_the_security_protocol_key() -> None:
    same = {"listeners": "SSL://:1", "listener.security.protocol": "ssl"}
    assert parse_server_properties(same).broker_configs["listener.security.protocol"] == "SSL"
    with raises("share one security protocol"):
        parse_server_properties({"listeners": "SSL://:1", "listener.security.protocol": "SASL_SSL"})


def test_unknown_keys_are_errors_naming_them() -> None:
    with raises("'log.segment.byte' (did you mean log.segment.bytes?)"):
        parse_server_properties({"log.segment.byte": "1"})
    with raises("unknown broker config 'no.such.thing'"):
        parse_server_properties({"no.such.thing": "1"})


def test_identity_and_log_settings() -> None:
    parsed = parse_server_properties(
        {
            "log.dir": "/data",
            "metrics.port": "0",
            "broker.log.level": "DEBUG",
            "broker.log.logger.brokerd.zk": "WARN",
        }
    )
    assert parsed.log_dir == Path("/data") and parsed.metrics_port == 0
    assert parsed.log_settings == {
        "broker.log.level": "DEBUG",
        "broker.log.logger.brokerd.zk": "WARN",
    }
    with raises("one directory"):
        parse_server_properties({"log.dirs": "/a,/b"})
    with raises("broker.id='one'"):
        parse_server_properties({"broker.id": "one"})
    with raises("ZooKeeper connect string"):
        parse_server_properties({"zookeeper.connect": "nohost"})


def test_a_shared_cluster_file_refuses_identity_and_security() -> None:
    kept, ignored = cluster_configs({"log.retention.hours": "1", "num.io.threads": "8"})
    assert kept == {"log.retention.hours": "1"} and ignored == ("num.io.threads",)
    with raises("broker.id, listeners cannot be shared"):
        cluster_configs({"broker.id": "1", "listeners": "REPLOG://:1"})
    with raises("broker config log.segment.bytes='big': not an integer"):
        cluster_configs({"log.segment.bytes": "big"})
    with raises("broker.log.level='LOUD' is not a log level"):
        cluster_configs({"broker.log.level": "LOUD"})
    with raises("sasl.jaas.config: `replog up --security"):
        cluster_configs({"sasl.jaas.config": "x"})
