"""`replog broker run --config server.properties` with a real broker: the file wins over the
defaults, flags win over the file, and a typo in the file stops the broker naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest
from kazoo.client import KazooClient

from spark_replica.tools.launcher.brokers import free_port
from spark_replica.zk import znodes
from spark_replica.zk.session import connect
from tests.support import BrokerFactory, kafka_broker_configs, replog, run_broker_command


def write_properties(path: Path, settings: dict[str, str]) -> Path:
    path.write_text("# a Kafka-style file\n" + "".join(f"{k}={v}\n" for k, v in settings.items()))
    return path


def registration(zk_connect: str, broker_id: int) -> znodes.BrokerRegistration:
    zk: KazooClient = connect(zk_connect)
    try:
        data, _ = zk.get(znodes.broker_path(broker_id))
        return znodes.BrokerRegistration.decode(broker_id, data)
    finally:
        zk.stop()
        zk.close()


@pytest.mark.slow
def test_the_file_overrides_defaults_and_flags_override_the_file(
    brokers: BrokerFactory, zk_connect: str, tmp_path: Path
) -> None:
    log_dir = tmp_path / "data-4"
    file_port, flag_port, kafka_port = free_port(), free_port(), free_port()
    config = write_properties(
        tmp_path / "server.properties",
        {
            "broker.id": "4",
            "log.dirs": str(log_dir),
            "zookeeper.connect": zk_connect,
            "listeners": f"REPLOG://127.0.0.1:{file_port},KAFKA://127.0.0.1:{kafka_port}",
            "log.retention.hours": "2",
            "log.segment.bytes": "2097152",
            "num.io.threads": "8",
            "broker.log.level": "INFO",
        },
    )
    run_broker_command(
        brokers, 4, log_dir,
        "--config", str(config), "--port", str(flag_port),
        "--override", "log.segment.bytes=3145728",
    )  # fmt: skip

    registered = registration(zk_connect, 4)
    assert (registered.port, registered.kafka_port) == (flag_port, kafka_port)
    configs = kafka_broker_configs(f"127.0.0.1:{kafka_port}", 4)
    assert configs["log.retention.ms"] == str(2 * 3_600_000), "the file beats the default"
    assert configs["log.segment.bytes"] == "3145728", "--override beats the file"
    log = (log_dir / "broker.log").read_text()
    warned = [line for line in log.splitlines() if "num.io.threads" in line]
    assert len(warned) == 1, "one warning line for a Kafka key replog does not use"
    assert " WARNING broker=4 brokerd: num.io.threads is a Kafka broker config" in warned[0]


def test_an_unknown_key_stops_the_broker_naming_it(tmp_path: Path) -> None:
    config = write_properties(
        tmp_path / "server.properties",
        {
            "broker.id": "1",
            "log.dirs": str(tmp_path / "data"),
            "zookeeper.connect": "127.0.0.1:1",
            "log.retention.hour": "2",
        },
    )
    result = replog("broker", "run", "--config", str(config))
    assert result.returncode == 2
    assert b"unknown broker config 'log.retention.hour'" in result.stderr
    assert b"did you mean log.retention.hours?" in result.stderr
    missing = write_properties(tmp_path / "no-id.properties", {"zookeeper.connect": "h:1"})
    no_id = replog("broker", "run", "--config", str(missing), "--log-dir", str(tmp_path))
    assert (
        no_id.returncode == 2 and b"give --broker-id, or broker.id in the --config" in no_id.stderr
    )
