"""The fixed ports of a local cluster (`replog up`), all moved together by `--port-base`.

Addresses that stay the same from one `up` to the next let the README's and the docs'
examples run as written, and let scripts keep what they wrote down. The defaults are
the ports Kafka users know: broker i (1, 2, …) serves replog on 9092 + i - 1, Kafka on
19092 + i - 1 and metrics on 9404 + i - 1; ZooKeeper listens on 2181 (an ensemble's
node k on 2181 + k - 1, its quorum and election ports on 2888 + k - 1 and 3888 + k - 1).
A base N puts each port where it would be if 9092 were N, so one number moves a whole
cluster out of another's way.

Pure arithmetic: binding and checking the ports is the caller's.
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_replica.errors import ConfigError

DEFAULT_PORT_BASE = 9092
KAFKA_OFFSET = 10_000  # 19092
METRICS_OFFSET = 312  # 9404
ZOOKEEPER_OFFSET = 2181 - DEFAULT_PORT_BASE
QUORUM_OFFSET = 2888 - DEFAULT_PORT_BASE
ELECTION_OFFSET = 3888 - DEFAULT_PORT_BASE
# Ports below this need root on most systems; a cluster for development never asks for it.
LOWEST_PORT = 1024
HIGHEST_PORT = 65535
# More brokers than this would run their replog ports into the metrics ports.
MAX_BROKERS = METRICS_OFFSET


@dataclass(frozen=True)
class PortPlan:
    """Where each listener of a cluster of `brokers` brokers and `zookeeper_nodes`
    ZooKeeper nodes goes, from `base` (the first broker's replog port)."""

    base: int = DEFAULT_PORT_BASE
    brokers: int = 3
    zookeeper_nodes: int = 1

    def __post_init__(self) -> None:
        if not 1 <= self.brokers <= MAX_BROKERS:
            raise ConfigError(f"--brokers must be from 1 to {MAX_BROKERS}, not {self.brokers}")
        lowest = LOWEST_PORT - min(ZOOKEEPER_OFFSET, QUORUM_OFFSET)
        highest = HIGHEST_PORT - KAFKA_OFFSET - (self.brokers - 1)
        if not lowest <= self.base <= highest:
            raise ConfigError(
                f"--port-base must be from {lowest} to {highest} (ZooKeeper takes "
                f"base{ZOOKEEPER_OFFSET}, Kafka base+{KAFKA_OFFSET}), not {self.base}"
            )

    def replog(self, broker_id: int) -> int:
        return self.base + broker_id - 1

    def kafka(self, broker_id: int) -> int:
        return self.base + KAFKA_OFFSET + broker_id - 1

    def metrics(self, broker_id: int) -> int:
        return self.base + METRICS_OFFSET + broker_id - 1

    def zookeeper(self, node: int = 1) -> int:
        return self.base + ZOOKEEPER_OFFSET + node - 1

    def quorum(self, node: int) -> int:
        return self.base + QUORUM_OFFSET + node - 1

    def election(self, node: int) -> int:
        return self.base + ELECTION_OFFSET + node - 1

    def ensemble_ports(self) -> list[int]:
        """Client, quorum and election port of each node in turn (as plan_ensemble takes
        them)."""
        return [
            port
            for node in range(1, self.zookeeper_nodes + 1)
            for port in (self.zookeeper(node), self.quorum(node), self.election(node))
        ]
