"""A broker's registration carries both listeners in Kafka's layout, and old ones still decode;
the Kafka port travels in the controller's requests and the broker's flag."""

from __future__ import annotations

import json

import pytest

from brokerd.__main__ import build_parser, resolve
from brokerd.config.broker import BrokerConfig
from spark_replica.errors import ConfigError, ZooKeeperError
from spark_replica.tools.cli.cluster import _plan as cluster_plan
from spark_replica.tools.cli.main import build_parser as build_replog_parser
from spark_replica.tools.launcher import cluster_dir
from spark_replica.tools.launcher.brokers import BrokerProcess
from spark_replica.wire.native.controller_requests import (
    ControllerHeader,
    LeaderAndIsrRequest,
    UpdateMetadataRequest,
)
from spark_replica.wire.native.metadata import BrokerInfo
from spark_replica.wire.primitives import Reader, Writer
from spark_replica.zk import znodes


def test_registration_writes_kafka_endpoints_and_protocol_map() -> None:
    registration = znodes.BrokerRegistration(
        2, "10.0.0.2", 9092, "17", kafka_port=9093, security_protocol="SASL_SSL"
    )
    value = json.loads(registration.encode())
    assert value["host"] == "10.0.0.2" and value["port"] == 9092
    assert value["endpoints"] == ["REPLOG://10.0.0.2:9092", "KAFKA://10.0.0.2:9093"]
    assert value["listener_security_protocol_map"] == {"REPLOG": "SASL_SSL", "KAFKA": "SASL_SSL"}
    assert value["version"] == 4 and value["jmx_port"] == -1
    assert znodes.BrokerRegistration.decode(2, registration.encode()) == registration


def test_registration_without_kafka_listener_names_only_replog() -> None:
    registration = znodes.BrokerRegistration(1, "h", 9092, "1")
    value = json.loads(registration.encode())
    assert value["endpoints"] == ["REPLOG://h:9092"]
    assert value["listener_security_protocol_map"] == {"REPLOG": "PLAINTEXT"}
    assert znodes.BrokerRegistration.decode(1, registration.encode()).kafka_port == -1


def test_ipv6_hosts_are_bracketed_and_decode() -> None:
    registration = znodes.BrokerRegistration(1, "::1", 9092, "1", kafka_port=9093)
    assert json.loads(registration.encode())["endpoints"][1] == "KAFKA://[::1]:9093"
    assert znodes.BrokerRegistration.decode(1, registration.encode()) == registration


def test_a_registration_from_before_the_kafka_listener_still_decodes() -> None:
    old = b'{"version":1,"host":"h","port":9092,"timestamp":"5"}'
    decoded = znodes.BrokerRegistration.decode(4, old)
    assert decoded == znodes.BrokerRegistration(4, "h", 9092, "5")
    assert decoded.kafka_port == -1 and decoded.security_protocol == "PLAINTEXT"


@pytest.mark.parametrize(
    "endpoints",
    ['"KAFKA://h:x"', '["KAFKA:h:1"]', '["KAFKA://h"]', '["KAFKA://h:z"]', "5"],
)
def test_malformed_endpoints_are_a_zookeeper_error_naming_the_path(endpoints: str) -> None:
    data = f'{{"host":"h","port":1,"timestamp":"1","endpoints":{endpoints}}}'.encode()
    with pytest.raises(ZooKeeperError, match="/brokers/ids/3"):
        znodes.BrokerRegistration.decode(3, data)


def test_controller_requests_carry_the_kafka_port() -> None:
    header = ControllerHeader(1, 2, 3)
    brokers = [BrokerInfo(1, "h", 9092, 9093), BrokerInfo(2, "h", 9094)]
    for request in (
        UpdateMetadataRequest(header, brokers, []),
        LeaderAndIsrRequest(header, False, [], brokers),
    ):
        writer = Writer()
        request.write(writer)
        decoded = type(request).read(Reader(writer.getvalue()))
        assert decoded == request
        assert [b.kafka_port for b in brokers] == [9093, -1]


def test_kafka_port_flag_and_validation(tmp_path) -> None:
    args = build_parser().parse_args(
        ["--broker-id", "1", "--log-dir", str(tmp_path), "--zookeeper", "z", "--kafka-port", "0"]
    )
    assert args.kafka_port == 0
    default = build_parser().parse_args(
        ["--broker-id", "1", "--log-dir", str(tmp_path), "--zookeeper", "z"]
    )
    assert resolve(default)[0].kafka_port == -1  # flags left out fall back to the defaults
    for bad in (-2, 65536):
        with pytest.raises(ConfigError, match="kafka port"):
            BrokerConfig(1, tmp_path, "z", kafka_port=bad)


def test_launcher_passes_the_kafka_port(tmp_path) -> None:
    broker = BrokerProcess(1, 9092, tmp_path, "z", kafka_port=9093)
    command = broker.command()
    assert command[command.index("--kafka-port") + 1] == "9093"
    assert broker.kafka_address == "127.0.0.1:9093"
    assert BrokerProcess(1, 9092, tmp_path, "z").kafka_address is None


def test_cluster_file_remembers_kafka_ports_and_reads_old_files(tmp_path) -> None:
    info = cluster_dir.ClusterInfo(
        "zk:1",
        None,
        [
            cluster_dir.BrokerEntry(2, "h", 9094, None, "b2", kafka_port=9095),
            cluster_dir.BrokerEntry(1, "h", 9092, None, "b1", kafka_port=9093),
        ],
    )
    cluster_dir.save(tmp_path, info)
    loaded = cluster_dir.load(tmp_path)
    assert loaded.kafka_bootstrap_servers == "h:9093,h:9095"
    loaded.kafka = False
    assert loaded.kafka_bootstrap_servers is None
    old = tmp_path / "old"
    old.mkdir()
    (old / cluster_dir.CLUSTER_FILE).write_text(
        '{"zookeeper": "zk:1", "embedded_zookeeper": null, "brokers": '
        '[{"id": 1, "host": "h", "port": 9092, "pid": null, "log_dir": "b1"}]}'
    )
    from_before = cluster_dir.load(old)
    assert from_before.brokers[0].kafka_port == -1 and from_before.kafka
    assert from_before.kafka_bootstrap_servers is None


def _up_args(directory, *argv: str):
    return build_replog_parser().parse_args(["up", "--dir", str(directory), *argv])


def test_up_plans_kafka_ports_unless_told_not_to(tmp_path) -> None:
    fresh = cluster_plan(_up_args(tmp_path / "a", "--brokers", "2", "--zookeeper", "z:1"))
    assert fresh.kafka and all(b.kafka_port > 0 for b in fresh.brokers)
    off = cluster_plan(_up_args(tmp_path / "b", "--no-kafka", "--zookeeper", "z:1"))
    assert not off.kafka and {b.kafka_port for b in off.brokers} == {-1}
    assert off.kafka_bootstrap_servers is None
    cluster_dir.save(tmp_path / "b", off)
    again = cluster_plan(_up_args(tmp_path / "b"))
    assert not again.kafka, "a recorded cluster keeps its choice"
    turned_on = cluster_plan(_up_args(tmp_path / "b", "--kafka"))
    assert turned_on.kafka and all(b.kafka_port > 0 for b in turned_on.brokers)
