"""Bind side and advertised side of a broker's listeners: plain values, no processes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from brokerd.__main__ import build_parser, resolve
from brokerd.config.broker import BrokerConfig
from brokerd.config.listeners import (
    KAFKA,
    METRICS,
    REPLOG,
    Endpoint,
    advertise,
    choose_reachable_host,
    is_wildcard,
)
from spark_replica.errors import ConfigError
from spark_replica.tools.launcher.brokers import BrokerProcess
from spark_replica.wire.native.controller_requests import ControllerHeader, UpdateMetadataRequest
from spark_replica.wire.native.metadata import BrokerInfo
from spark_replica.wire.primitives import Reader, Writer
from spark_replica.zk import znodes


def never() -> str:
    raise AssertionError("the reachable host was asked for when nothing needed it")


BOUND = {
    REPLOG: Endpoint("0.0.0.0", 9092),
    KAFKA: Endpoint("127.0.0.1", 9093),
    METRICS: Endpoint("::", 9100),
}


def test_a_listener_not_advertised_is_advertised_as_bound_and_wildcards_become_reachable() -> None:
    assert advertise(BOUND, {}, None, lambda: "10.0.0.7") == {
        REPLOG: Endpoint("10.0.0.7", 9092),
        KAFKA: Endpoint("127.0.0.1", 9093),
        METRICS: Endpoint("10.0.0.7", 9100),
    }


def test_advertised_listeners_name_host_and_port_and_port_zero_is_the_bound_port() -> None:
    advertised = {REPLOG: Endpoint("b1.example", 19092), METRICS: Endpoint("b1.example", 0)}
    assert advertise(BOUND | {REPLOG: Endpoint("h", 9092)}, advertised, None, lambda: "x") == {
        REPLOG: Endpoint("b1.example", 19092),
        KAFKA: Endpoint("127.0.0.1", 9093),
        METRICS: Endpoint("b1.example", 9100),
    }


def test_an_empty_advertised_host_is_the_reachable_one_as_in_kafka() -> None:
    bound = {REPLOG: Endpoint("127.0.0.1", 9092)}
    assert advertise(bound, {REPLOG: Endpoint("", 0)}, None, lambda: "10.0.0.7") == {
        REPLOG: Endpoint("10.0.0.7", 9092)
    }


def test_the_advertised_host_flag_wins_with_every_bound_port() -> None:
    advertised = {REPLOG: Endpoint("ignored", 1)}
    assert advertise(BOUND, advertised, "127.0.0.2", never) == {
        name: Endpoint("127.0.0.2", endpoint.port) for name, endpoint in BOUND.items()
    }


def test_wildcards_in_any_spelling() -> None:
    assert all(is_wildcard(h) for h in ("0.0.0.0", "::", "0:0::0"))
    assert not any(is_wildcard(h) for h in ("", "127.0.0.1", "localhost", "::1"))


@pytest.mark.parametrize(
    ("candidates", "chosen"),
    [
        (["127.0.0.1", "0.0.0.0", "10.1.2.3", "192.0.2.2"], "10.1.2.3"),
        (["127.0.1.1", "fe80::1%eth0", "fd00::2"], "fd00::2"),
        (["not-an-address", "127.0.1.1", "::1"], "127.0.1.1"),
        (["::", "0.0.0.0", "224.0.0.1"], "127.0.0.1"),
        ([], "127.0.0.1"),
    ],
)
def test_the_reachable_host_is_routable_else_loopback_never_a_wildcard(
    candidates: list[str], chosen: str
) -> None:
    assert choose_reachable_host(candidates) == chosen


def config(tmp_path: Path, **fields: object) -> BrokerConfig:
    return BrokerConfig(1, tmp_path, "z", **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"advertised_listeners": {KAFKA: Endpoint("h", 1)}}, "no KAFKA listener"),
        (
            {"metrics_port": 0, "advertised_listeners": {METRICS: Endpoint("0.0.0.0", 1)}},
            "cannot advertise METRICS://0.0.0.0:1",
        ),
        ({"advertised_listeners": {REPLOG: Endpoint("h", 70000)}}, "between 0 and 65535"),
        ({"advertised_listeners": {"INTERNAL": Endpoint("h", 1)}}, "names 'INTERNAL'"),
        ({"advertised_host": "::"}, "cannot advertise '::'"),
        ({"advertised_host": " "}, "cannot advertise ' '"),
        ({"port": 9092, "kafka_port": 9092}, "REPLOG and KAFKA listeners cannot share port 9092"),
        (
            {"host": "10.0.0.1", "metrics_host": "0.0.0.0", "port": 9092, "metrics_port": 9092},
            "REPLOG and METRICS listeners cannot share port 9092",
        ),
    ],
)
def test_bad_listener_settings_are_config_errors_saying_why(
    tmp_path: Path, fields: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        config(tmp_path, **fields)


def test_listeners_on_different_hosts_may_share_a_port(tmp_path: Path) -> None:
    shared = config(tmp_path, host="127.0.0.2", kafka_host="127.0.0.3", port=9092, kafka_port=9092)
    assert shared.bind_endpoints() == {
        REPLOG: Endpoint("127.0.0.2", 9092),
        KAFKA: Endpoint("127.0.0.3", 9092),
    }


def broker_args(tmp_path: Path, *argv: str) -> BrokerConfig:
    args = build_parser().parse_args(
        ["--broker-id", "1", "--log-dir", str(tmp_path), "--zookeeper", "z", *argv]
    )
    return resolve(args)[0]


def test_the_file_binds_each_listener_on_its_host_and_host_flag_wins(tmp_path: Path) -> None:
    properties = tmp_path / "server.properties"
    properties.write_text(
        "listeners=REPLOG://0.0.0.0:9092,KAFKA://127.0.0.1:9093,METRICS://:9100\n"
        "advertised.listeners=REPLOG://b1.example:9092\n"
    )
    from_file = broker_args(tmp_path, "--config", str(properties))
    assert from_file.bind_endpoints() == {
        REPLOG: Endpoint("0.0.0.0", 9092),
        KAFKA: Endpoint("127.0.0.1", 9093),
        METRICS: Endpoint("127.0.0.1", 9100),  # no host given: --host's default
    }
    assert from_file.advertised_listeners == {REPLOG: Endpoint("b1.example", 9092)}
    flagged = broker_args(
        tmp_path, "--config", str(properties), "--host", "0.0.0.0", "--advertised-host", "h2"
    )
    assert {e.host for e in flagged.bind_endpoints().values()} == {"0.0.0.0"}
    assert flagged.advertised_host == "h2" and flagged.advertised_listeners == {}
    overridden = broker_args(tmp_path, "--override", "advertised.listeners=REPLOG://h3:0")
    assert overridden.advertised_listeners == {REPLOG: Endpoint("h3", 0)}
    with pytest.raises(ConfigError, match="cannot advertise"):
        broker_args(tmp_path, "--advertised-host", "0.0.0.0")


def test_the_registration_keeps_each_listeners_own_host() -> None:
    registration = znodes.BrokerRegistration(
        3,
        "10.0.0.3",
        9092,
        "1",
        kafka_port=9093,
        metrics_port=9100,
        kafka_host="b3.example",
        metrics_host="::1",
    )
    value = json.loads(registration.encode())
    assert value["endpoints"] == ["REPLOG://10.0.0.3:9092", "KAFKA://b3.example:9093"]
    assert (value["host"], value["port"]) == ("10.0.0.3", 9092)
    assert (value["metrics_host"], value["metrics_port"]) == ("::1", 9100)
    assert znodes.BrokerRegistration.decode(3, registration.encode()) == registration
    old = b'{"host":"h","port":1,"timestamp":"1","metrics_port":5,"endpoints":["KAFKA://h:2"]}'
    decoded = znodes.BrokerRegistration.decode(3, old)
    assert (decoded.kafka_host, decoded.metrics_host) == ("h", "h")


def test_the_controller_passes_the_advertised_kafka_host_on() -> None:
    brokers = [BrokerInfo(1, "10.0.0.1", 9092, 9093, "b1.example"), BrokerInfo(2, "h", 9094)]
    request = UpdateMetadataRequest(ControllerHeader(1, 2, 3), brokers, [])
    writer = Writer()
    request.write(writer)
    decoded = UpdateMetadataRequest.read(Reader(writer.getvalue()))
    assert [b.kafka_host for b in decoded.brokers] == ["b1.example", "h"]


def test_the_launcher_advertises_and_connects_to_the_advertised_host(tmp_path: Path) -> None:
    broker = BrokerProcess(
        1,
        9092,
        tmp_path,
        "z",
        host="0.0.0.0",
        kafka_port=9093,
        metrics_port=9100,
        advertised_host="127.0.0.2",
    )
    command = broker.command()
    assert command[command.index("--advertised-host") + 1] == "127.0.0.2"
    assert (broker.address, broker.kafka_address) == ("127.0.0.2:9092", "127.0.0.2:9093")
    assert broker.metrics_url == "http://127.0.0.2:9100/metrics"
    assert "--advertised-host" not in BrokerProcess(1, 9092, tmp_path, "z").command()
