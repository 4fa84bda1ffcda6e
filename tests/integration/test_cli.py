"""The `replog` command line against a real broker: what a user types, what they see."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spark_replica.tools.launcher.brokers import BrokerProcess, free_port
from spark_replica.tools.launcher.zookeeper import is_answering
from tests.support import BrokerFactory, replog

pytestmark = pytest.mark.slow

TIMEOUT_S = 60


def test_topics_produce_consume_describe_delete(broker: BrokerProcess) -> None:
    bootstrap = ["--bootstrap", broker.address]
    zookeeper = ["--zookeeper", broker.zookeeper]
    created = replog("topics", "create", "cli", "--partitions", "2", *zookeeper)
    assert created.returncode == 0, created.stderr
    again = replog("topics", "create", "cli", *bootstrap)
    assert again.returncode == 1 and b"already exists" in again.stderr

    lines = b"".join(f"k{i}:value {i}\n".encode() for i in range(20))
    produced = replog("produce", "cli", "--key-separator", ":", *bootstrap, stdin=lines)
    assert produced.returncode == 0, produced.stderr
    assert b"20 records acknowledged" in produced.stderr

    consumed = replog(
        "consume",
        "cli",
        "--from-beginning",
        "--max-records",
        "20",
        "--print-key",
        "--key-separator",
        ":",
        *zookeeper,
    )
    assert consumed.returncode == 0, consumed.stderr
    assert sorted(consumed.stdout.splitlines()) == sorted(lines.splitlines())

    described = replog("topics", "describe", "cli", "--json", *bootstrap)
    document = json.loads(described.stdout)
    assert [t["topic"] for t in document] == ["cli"]
    partitions = document[0]["partitions"]
    assert [p["partition"] for p in partitions] == [0, 1]
    assert all(p["leader"] == 1 and p["replicas"] == [1] and p["isr"] == [1] for p in partitions)
    assert all(p["log_end_offsets"] == {"1": p["high_watermark"]} for p in partitions)
    assert sum(p["high_watermark"] for p in partitions) == 20

    listed = json.loads(replog("topics", "list", "--json", *bootstrap).stdout)
    assert listed == [{"topic": "cli", "partitions": 2, "replication_factor": 1}]
    deleted = replog("topics", "delete", "cli", *bootstrap)
    assert deleted.returncode == 0, deleted.stderr
    deadline = time.monotonic() + 20
    while any(broker.log_dir.glob("cli-*")) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(broker.log_dir.glob("cli-*")), "the broker deleted the topic's logs"
    missing = replog("topics", "delete", "cli", *bootstrap)
    assert missing.returncode == 1 and b"does not exist" in missing.stderr


def test_consume_stops_after_timeout_with_no_records(broker: BrokerProcess) -> None:
    bootstrap = ["--bootstrap", broker.address]
    assert replog("topics", "create", "quiet", *bootstrap).returncode == 0
    started = time.monotonic()
    consumed = replog("consume", "quiet", "--timeout", "1", *bootstrap)
    assert consumed.returncode == 0
    assert consumed.stdout == b""
    assert time.monotonic() - started < TIMEOUT_S


def test_produce_fails_loudly_when_records_are_not_acknowledged(broker: BrokerProcess) -> None:
    produced = replog("produce", "missing-topic", "--bootstrap", broker.address, stdin=b"x\n")
    assert produced.returncode == 1
    assert b"missing-topic" in produced.stderr
    bad_line = replog(
        "produce", "t", "--key-separator", ":", "--bootstrap", broker.address, stdin=b"nokey\n"
    )
    assert bad_line.returncode == 2 and b"line 1 has no key separator" in bad_line.stderr


def test_bad_arguments_get_clear_errors() -> None:
    nowhere = replog("topics", "list")
    assert nowhere.returncode == 2 and b"--bootstrap" in nowhere.stderr
    bad_bootstrap = replog("topics", "list", "--bootstrap", "nohost")
    assert bad_bootstrap.returncode == 2 and b"not host:port" in bad_bootstrap.stderr
    bad_acks = replog("produce", "t", "--acks", "2", "--bootstrap", "127.0.0.1:1")
    assert bad_acks.returncode == 2 and b"acks" in bad_acks.stderr


def test_broker_refuses_bad_config(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "brokerd",
            "--broker-id",
            "1",
            "--log-dir",
            str(tmp_path),
            "--zookeeper",
            "127.0.0.1:1",
            "--override",
            "log.segment.bytes=lots",
        ],
        capture_output=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert result.returncode == 2
    assert b"log.segment.bytes" in result.stderr


def test_embedded_zookeeper_start_detached_and_stop(tmp_path: Path) -> None:
    port = free_port()
    started = replog("zookeeper", "start", "--port", str(port), "--dir", str(tmp_path), "--detach")
    try:
        assert started.returncode == 0, started.stderr
        assert is_answering("127.0.0.1", port)
    finally:
        stopped = replog("zookeeper", "stop", "--dir", str(tmp_path))
    assert stopped.returncode == 0
    assert not is_answering("127.0.0.1", port)


def test_broker_command_runs_and_stops_on_sigterm(brokers: BrokerFactory) -> None:
    broker = brokers.start(7)
    assert broker.stop() == 0
    assert "broker 7 stopped" in (broker.log_dir / "broker.log").read_text()


def test_broker_run_help_is_the_brokers_under_its_own_name() -> None:
    result = replog("broker", "run", "--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(b"usage: replog broker run")
    assert b"--broker-id" in result.stdout and b"--zookeeper" in result.stdout
