"""The ports `replog up` starts a cluster on: placed by launcher.port_plan, checked before
anything starts, and a taken one refused with one line that says how to move the cluster.

Ports are fixed so that addresses stay the same between runs, which means a port taken
by something else cannot be swapped for a fresh one behind the user's back (the
recorded addresses, the docs' examples and the user's scripts would all go stale).
So every port is tried before the first process starts, and a process that still finds
its port taken (something bound it in between) fails the `up` with the same message.
Tests that start many clusters at once each pick a free base (tests/support.py).
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

from spark_replica.errors import ZooKeeperError
from spark_replica.tools.launcher.brokers import (
    BrokerProcess,
    PortInUseError,
    output_since,
    says_port_in_use,
)
from spark_replica.tools.launcher.cluster_dir import (
    BrokerEntry,
    ClusterInfo,
    EmbeddedZooKeeperEntry,
)
from spark_replica.tools.launcher.port_plan import PortPlan
from spark_replica.tools.launcher.zookeeper import LOG_FILE, EmbeddedZooKeeper, is_answering

HOW_TO_MOVE = (
    "stop what listens there, or move every port of the cluster with `replog up --port-base N`"
)


def planned(info: ClusterInfo, plan: PortPlan) -> None:
    """Put every listener of `info` on the ports of `plan` (off listeners stay off)."""
    for broker in info.brokers:
        broker.port = plan.replog(broker.id)
        broker.kafka_port = plan.kafka(broker.id) if info.kafka else -1
        broker.metrics_port = plan.metrics(broker.id) if info.metrics else -1
    if info.embedded_zookeeper is not None:
        info.embedded_zookeeper.port = plan.zookeeper()
    for node in info.zookeeper_nodes:
        node.port, node.quorum_port, node.election_port = (
            plan.zookeeper(node.id),
            plan.quorum(node.id),
            plan.election(node.id),
        )


def named_ports(info: ClusterInfo) -> list[tuple[int, str]]:
    """Every port the cluster's processes will listen on, with what listens there."""
    ports: list[tuple[int, str]] = []
    if info.embedded_zookeeper is not None:
        ports.append((info.embedded_zookeeper.port, "ZooKeeper"))
    for node in info.zookeeper_nodes:
        ports += [
            (node.port, f"ZooKeeper node {node.id}"),
            (node.quorum_port, f"ZooKeeper node {node.id}'s quorum port"),
            (node.election_port, f"ZooKeeper node {node.id}'s election port"),
        ]
    for broker in info.brokers:
        ports.append((broker.port, f"broker {broker.id}'s replog listener"))
        if broker.kafka_port != -1:
            ports.append((broker.kafka_port, f"broker {broker.id}'s Kafka listener"))
        if broker.metrics_port != -1:
            ports.append((broker.metrics_port, f"broker {broker.id}'s metrics listener"))
    return ports


def require_free(info: ClusterInfo, host: str) -> None:
    """Refuse (PortInUseError, exit 1) when any port the cluster needs is taken."""
    for port, what in named_ports(info):
        if not _bindable(host, port):
            raise PortInUseError(f"port {port} ({what}) is taken: {HOW_TO_MOVE}")


def _bindable(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def start_embedded_zookeeper(
    build: Callable[[ClusterInfo, EmbeddedZooKeeperEntry, str], EmbeddedZooKeeper],
    info: ClusterInfo,
    entry: EmbeddedZooKeeperEntry,
    host: str,
    timeout_s: float,
) -> EmbeddedZooKeeper:
    """Start the cluster's own ZooKeeper (made by `build`); its port taken since the check
    is the same refusal as before it."""
    zookeeper = build(info, entry, host)
    log_file = Path(entry.dir) / LOG_FILE
    offset = log_file.stat().st_size if log_file.exists() else 0
    taken = PortInUseError(f"port {entry.port} (ZooKeeper) is taken: {HOW_TO_MOVE}")
    if is_answering(zookeeper.host, zookeeper.port):
        raise taken
    try:
        zookeeper.start(timeout_s)
    except ZooKeeperError as exc:
        if says_port_in_use(output_since(log_file, offset)):
            raise taken from exc
        raise
    return zookeeper


def start_broker(process: BrokerProcess, entry: BrokerEntry, timeout_s: float) -> None:
    """Start a broker; a port of its taken since the check is refused like one before."""
    try:
        process.start(timeout_s)
    except PortInUseError as exc:
        ports = ", ".join(
            str(p) for p in (entry.port, entry.kafka_port, entry.metrics_port) if p > 0
        )
        raise PortInUseError(
            f"a port of broker {entry.id} ({ports}) was taken as it started: {HOW_TO_MOVE}"
        ) from exc
