"""The broker log of a real broker: rotated at a small size, one documented line per event,
and none for each request a broker sends another (replica fetches) unless asked for."""

from __future__ import annotations

import re

import pytest

from spark_replica.tools.launcher.brokers import free_port
from tests.support import (
    BrokerFactory,
    create,
    create_topic,
    produce,
    run,
    run_broker_command,
    start_cluster,
)

pytestmark = pytest.mark.slow

LINE = re.compile(
    r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (DEBUG|INFO|WARNING|ERROR|CRITICAL) "
    r"broker=5 [\w.]+: \S"
)
MAX_BYTES = 1024


def test_the_log_rotates_at_its_size_and_keeps_its_backup_count(
    brokers: BrokerFactory, zk_connect: str
) -> None:
    log_dir = brokers.root / "broker-5"
    port = free_port()
    broker = run_broker_command(
        brokers, 5, log_dir,
        "--broker-id", "5", "--port", str(port), "--log-dir", str(log_dir),
        "--zookeeper", zk_connect, "--log-max-bytes", str(MAX_BYTES), "--log-backup-count", "2",
        "--logger", "brokerd.controller=WARN", "--logger", "brokerd.partition=DEBUG",
    )  # fmt: skip
    for i in range(4):  # the leader logs a DEBUG line for each partition
        run(create_topic([("127.0.0.1", port)], f"rotating-{i}", partitions=12))
    broker.stop()

    files = sorted(p.name for p in log_dir.glob("broker.log*"))
    assert files == ["broker.log", "broker.log.1", "broker.log.2"]
    for name in files:
        data = (log_dir / name).read_text()
        assert len(data.encode()) <= MAX_BYTES
        lines = data.splitlines()
        assert lines, name
        assert all(LINE.match(line) for line in lines), [x for x in lines if not LINE.match(x)]
    text = "".join((log_dir / name).read_text() for name in files)
    assert "DEBUG broker=5 brokerd.partition: rotating-3-11: leader" in text
    assert "brokerd.controller" not in text, "a logger's own level wins over the root's"


def test_a_brokers_own_requests_are_not_logged_unless_asked(brokers: BrokerFactory) -> None:
    start_cluster(brokers, 2)
    brokers.brokers[2].stop()
    brokers.start(2, **{"broker.log.logger.spark_replica.client.requests": "INFO"})
    # Two partitions of two copies: their leaders differ, so each broker follows one.
    run(create(brokers.bootstrap, "replicated", partitions=2, rf=2))
    run(produce(brokers.bootstrap, "replicated", ["a", "b"]))
    quiet, asked = ((brokers.brokers[i].log_dir / "broker.log").read_text() for i in (1, 2))
    assert "spark_replica.client.requests" not in quiet
    assert "spark_replica.client.requests" in asked
