"""Starting `replog up`'s processes so that a port taken meanwhile costs a retry, not the `up`.

Ports are picked free (launcher.free_port) and bound a moment later by the process
started on them, so another process can take one in between: another `up` starting at
the same moment, an outgoing connection given that port by the OS. A broker that exits
saying a port is in use (launcher.PortInUseError), and an embedded ZooKeeper that cannot
bind its port or finds another ZooKeeper answering there, are started again on fresh
ports, up to PORT_ATTEMPTS times. The entries are updated in place, so the ports recorded
in the cluster directory are the ones bound.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from spark_replica.errors import ZooKeeperError
from spark_replica.tools.launcher.brokers import (
    BrokerProcess,
    PortInUseError,
    free_port,
    output_since,
    says_port_in_use,
)
from spark_replica.tools.launcher.cluster_dir import (
    BrokerEntry,
    ClusterInfo,
    EmbeddedZooKeeperEntry,
)
from spark_replica.tools.launcher.zookeeper import LOG_FILE, EmbeddedZooKeeper, is_answering

PORT_ATTEMPTS = 5


def start_embedded_zookeeper(
    build: Callable[[ClusterInfo, EmbeddedZooKeeperEntry, str], EmbeddedZooKeeper],
    info: ClusterInfo,
    entry: EmbeddedZooKeeperEntry,
    host: str,
    remaining_s: Callable[[], float],
) -> EmbeddedZooKeeper:
    """Start the cluster's own ZooKeeper (made by `build`), on a fresh port whenever its
    port is taken; `remaining_s` is the time left for each attempt."""
    attempt = 1
    while True:
        zookeeper = build(info, entry, host)
        log_file = Path(entry.dir) / LOG_FILE
        offset = log_file.stat().st_size if log_file.exists() else 0
        try:
            if is_answering(zookeeper.host, zookeeper.port):
                raise PortInUseError(f"something already answers on {zookeeper.connect_string}")
            zookeeper.start(remaining_s())
            return zookeeper
        except (PortInUseError, ZooKeeperError) as exc:
            taken = isinstance(exc, PortInUseError) or says_port_in_use(
                output_since(log_file, offset)
            )
            if not taken or attempt >= PORT_ATTEMPTS:
                raise
            attempt += 1
            taken_port, entry.port = entry.port, free_port()
            print(
                f"replog up: ZooKeeper's port {taken_port} is taken; starting it on {entry.port}",
                file=sys.stderr,
                flush=True,
            )


def start_broker(
    brokers: list[BrokerProcess],
    index: int,
    entry: BrokerEntry,
    build: Callable[[BrokerEntry], BrokerProcess],
    remaining_s: Callable[[], float],
) -> None:
    """Start `brokers[index]` (of `entry`), on fresh ports whenever one of its ports is
    taken. The process is replaced in `brokers`, so that a failure stops the one that
    runs."""
    for attempt in range(1, PORT_ATTEMPTS + 1):
        try:
            brokers[index].start(remaining_s())
            return
        except PortInUseError as exc:
            if attempt == PORT_ATTEMPTS:
                raise
            entry.port = free_port()
            entry.kafka_port = free_port() if entry.kafka_port != -1 else -1
            entry.metrics_port = free_port() if entry.metrics_port != -1 else -1
            print(
                f"replog up: {exc}; starting it on {entry.address} instead",
                file=sys.stderr,
                flush=True,
            )
            brokers[index] = build(entry)
