"""A cluster on separate hosts: ZooKeeper and each broker in a network namespace of its
own (spark_replica.tools.netns), the test itself in the machine's namespace as "clients".

Faults here are the network's: cuts between hosts that drop packets silently, besides the
kills and pauses of launcher.py. Every process is started and stopped by its own PID and
the network is removed by `stop_all`, whatever state the test left it in.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from brokerd.controller.zk_store import current_controller
from spark_replica.tools.launcher.brokers import BrokerProcess
from spark_replica.tools.launcher.zookeeper import EmbeddedZooKeeper
from spark_replica.tools.netns import network
from spark_replica.tools.netns.topology import ZOOKEEPER, Topology, broker_host, cuts_between
from spark_replica.zk.session import connect

REPLOG_PORT = 9092
KAFKA_PORT = 9093
ZOOKEEPER_PORT = 2181
# Partition tests wait for sessions to expire and followers to drop out of the ISR:
# short timeouts keep them quick.
FAST_FAILURE_DETECTION = {
    "zookeeper.session.timeout.ms": "3000",
    "replica.lag.time.max.ms": "2000",
}
STOP_TIMEOUT_S = 10.0


class NetnsCluster:
    def __init__(self, root: Path, broker_count: int = 3, **overrides: str) -> None:
        self.root = root
        self.broker_ids = list(range(1, broker_count + 1))
        self.overrides = {**FAST_FAILURE_DETECTION, **overrides}
        self.topology: Topology | None = None
        self.zookeeper: EmbeddedZooKeeper | None = None
        self.brokers: dict[int, BrokerProcess] = {}
        self.paused: set[int] = set()

    def __enter__(self) -> NetnsCluster:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop_all()

    def start(self) -> None:
        topology = self.topology = network.create_network(self.broker_ids)
        try:
            self.zookeeper = EmbeddedZooKeeper(
                ZOOKEEPER_PORT,
                self.root / ZOOKEEPER,
                host=topology.address(ZOOKEEPER),
                command_prefix=topology.exec_prefix(ZOOKEEPER),
            )
            self.zookeeper.start()
            for broker_id in self.broker_ids:
                name = broker_host(broker_id)
                self.brokers[broker_id] = BrokerProcess(
                    broker_id,
                    REPLOG_PORT,
                    self.root / name,
                    self.zk_connect,
                    host=topology.address(name),
                    kafka_port=KAFKA_PORT,
                    overrides=dict(self.overrides),
                    command_prefix=topology.exec_prefix(name),
                )
            for broker in self.brokers.values():
                broker.start()
        except BaseException:
            self.stop_all()
            raise

    @property
    def network(self) -> Topology:
        assert self.topology is not None, "the cluster is not started"
        return self.topology

    @property
    def zk_connect(self) -> str:
        return f"{self.network.address(ZOOKEEPER)}:{ZOOKEEPER_PORT}"

    @property
    def bootstrap(self) -> list[tuple[str, int]]:
        return [(self.network.address(broker_host(i)), REPLOG_PORT) for i in self.broker_ids]

    @property
    def kafka_bootstrap(self) -> str:
        return ",".join(f"{host}:{KAFKA_PORT}" for host, _ in self.bootstrap)

    def broker(self, broker_id: int) -> BrokerProcess:
        return self.brokers[broker_id]

    def kill(self, broker_id: int) -> None:
        self.paused.discard(broker_id)
        self.brokers[broker_id].kill()

    def restart(self, broker_id: int) -> None:
        self.brokers[broker_id].start()

    def pause(self, broker_id: int) -> None:
        self.brokers[broker_id].pause()
        self.paused.add(broker_id)

    def resume(self, broker_id: int) -> None:
        self.brokers[broker_id].resume()
        self.paused.discard(broker_id)

    def cut(self, a: str | int, b: str | int, *, one_way: bool = False) -> None:
        """Drop packets between two hosts (a broker id, "zookeeper" or "clients")."""
        network.apply_cuts(self.network, cuts_between(str(a), str(b), one_way=one_way))

    def cut_all(self, a: str | int, *, one_way: bool = False) -> None:
        """Drop packets between one host and every other, clients included."""
        network.apply_cuts(self.network, self.network.cuts_from_all(str(a), one_way=one_way))

    def heal(self) -> None:
        network.heal(self.network)

    def controller_id(self) -> int | None:
        """The controller's broker id as ZooKeeper has it, None when there is none."""
        zk = connect(self.zk_connect)
        try:
            controller = current_controller(zk)
            return None if controller == -1 else controller
        finally:
            zk.stop()
            zk.close()

    def stop_all(self) -> None:
        """Heal first, so that brokers shut down cleanly, then stop everything by PID and
        remove the network."""
        if self.topology is None:
            return
        with contextlib.suppress(Exception):
            self.heal()
        for broker_id in list(self.paused):
            with contextlib.suppress(Exception):
                self.resume(broker_id)
        for broker in self.brokers.values():
            with contextlib.suppress(Exception):
                broker.stop(STOP_TIMEOUT_S)
        if self.zookeeper is not None:
            with contextlib.suppress(Exception):
                self.zookeeper.stop()
        network.destroy_network(self.topology)
        self.topology = None
