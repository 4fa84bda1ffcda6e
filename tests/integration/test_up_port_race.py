"""`replog up` cannot lose a port race.

It picks free ports and the processes bind them a moment later, so another process can
take one in between (another `up` starting at the same moment, an outgoing connection).
Here two ports of the plan are taken just after they were picked, ZooKeeper's and a
broker's Kafka port, so neither process can bind its port. Before, `up` failed
(ZooKeeper exited while starting); now each process is started again on fresh ports
and the cluster comes up.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from spark_replica.tools.cli import cluster, cluster_start
from spark_replica.tools.cli.main import build_parser
from spark_replica.tools.launcher import cluster_dir
from tests.support import replog_in_process

pytestmark = pytest.mark.slow

UP_TIMEOUT_S = 90.0


@contextlib.contextmanager
def listening_on(ports: list[int]) -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        for port in ports:
            sock = stack.enter_context(socket.socket())
            sock.bind((cluster.HOST, port))
            sock.listen()
        yield


def test_ports_taken_after_they_were_picked_are_replaced(tmp_path: Path) -> None:
    directory = tmp_path / "cluster"
    args = build_parser().parse_args(["up", "--dir", str(directory), "--brokers", "1"])
    plan = cluster._plan(args)
    assert plan.embedded_zookeeper is not None
    zookeeper_port, kafka_port = plan.embedded_zookeeper.port, plan.brokers[0].kafka_port
    try:
        with listening_on([zookeeper_port, kafka_port]):
            cluster_start.start(directory, plan, UP_TIMEOUT_S, fresh=True)
            info = cluster_dir.load(directory)
            assert info.embedded_zookeeper is not None
            assert info.embedded_zookeeper.port != zookeeper_port
            assert info.brokers[0].kafka_port != kafka_port
            with socket.create_connection((cluster.HOST, info.brokers[0].kafka_port), 10):
                pass
    finally:
        if cluster_dir.exists(directory):
            assert replog_in_process("down", "--dir", str(directory)).returncode == 0
