"""The processes of one chaos schedule and the faults done to them.

Three brokers (real processes, started and stopped by PID through the launcher) in a
chroot of their own on a ZooKeeper shared by every schedule of a run. Everything here
blocks; the runner calls it from worker threads so that the load keeps running.
Ownership: one runner owns a ChaosCluster; it never touches a broker from two threads at
once (a broker under a fault is "busy" in the runner until the fault is undone).

On a network (spark_replica.tools.netns), each broker runs on its host and the network faults
cut links. Cuts of faults that overlap may share links, and tc heals only all at once:
undoing one fault heals everything and applies again the cuts of the others, so they
lapse for the few milliseconds between (a blip, as a flapping switch would make).
"""

from __future__ import annotations

import contextlib
import random
import threading
import uuid
from pathlib import Path

from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from spark_replica.errors import ReplogError
from spark_replica.records import decode_payload, iter_batches
from spark_replica.tools.launcher.brokers import BrokerProcess, free_port
from spark_replica.tools.launcher.zookeeper import EmbeddedZooKeeper
from spark_replica.tools.netns import network
from spark_replica.tools.netns.topology import Cut, Topology, broker_host
from spark_replica.zk import znodes
from spark_replica.zk.session import connect
from tests.chaos.checker import Stored
from tests.chaos.partitions import cut_from_clients
from tests.chaos.schedule import Tear, TearMode

BROKER_OVERRIDES = {
    "zookeeper.session.timeout.ms": "3000",
    "replica.lag.time.max.ms": "2000",
    # Small segments, so a schedule's partitions have several and tears hit a live tail.
    "log.segment.bytes": str(512 * 1024),
}
BROKER_START_TIMEOUT_S = 30.0
ZOOKEEPER_QUERY_TIMEOUT_S = 2.0
# How long a running broker may take to register again (its session may just have
# expired) before it counts as hung.
REGISTRATION_GRACE_S = 10.0


class ChaosCluster:
    def __init__(
        self,
        zookeeper: EmbeddedZooKeeper,
        root: Path,
        broker_count: int,
        topic: str,
        topology: Topology | None = None,
    ) -> None:
        self.zookeeper = zookeeper
        self.topic = topic
        self.topology = topology
        self.zk_connect = f"{zookeeper.connect_string}/chaos-{uuid.uuid4().hex[:12]}"
        self.brokers = {
            broker_id: self._broker(broker_id, root) for broker_id in range(1, broker_count + 1)
        }
        self.paused: set[int] = set()
        self.cuts: dict[object, list[Cut]] = {}  # by the fault that made them
        self._cuts_lock = threading.Lock()

    def _broker(self, broker_id: int, root: Path) -> BrokerProcess:
        broker = BrokerProcess(
            broker_id,
            free_port(),
            root / f"broker-{broker_id}",
            self.zk_connect,
            overrides=dict(BROKER_OVERRIDES),
            kafka_port=free_port(),
        )
        if self.topology is not None:
            broker.host = self.topology.address(broker_host(broker_id))
            broker.command_prefix = self.topology.exec_prefix(broker_host(broker_id))
        return broker

    @property
    def bootstrap(self) -> list[tuple[str, int]]:
        return [(b.host, b.port) for b in self.brokers.values()]

    @property
    def kafka_bootstrap(self) -> str:
        """The Kafka listeners, as Kafka clients take bootstrap.servers."""
        return ",".join(f"{b.reachable_host}:{b.kafka_port}" for b in self.brokers.values())

    def start(self) -> None:
        for broker in self.brokers.values():
            broker.start(BROKER_START_TIMEOUT_S)

    def kill(self, broker_id: int) -> None:
        self.brokers[broker_id].kill()

    def restart(self, broker_id: int) -> None:
        self.brokers[broker_id].start(BROKER_START_TIMEOUT_S)

    def pause(self, broker_id: int) -> None:
        self.brokers[broker_id].pause()
        self.paused.add(broker_id)

    def resume(self, broker_id: int) -> None:
        self.brokers[broker_id].resume()
        self.paused.discard(broker_id)

    def tear_tail(self, broker_id: int, partition: int, tear: Tear) -> str:
        """Tear the active segment of a killed broker's partition; say what was done."""
        directory = self.brokers[broker_id].log_dir / f"{self.topic}-{partition}"
        segments = sorted(directory.glob("*.log"))
        if not segments:
            return f"broker {broker_id} has no segment of partition {partition} to tear"
        segment = segments[-1]
        size = segment.stat().st_size
        if tear.mode is TearMode.TRUNCATE:
            with segment.open("r+b") as file:
                file.truncate(max(0, size - tear.byte_count))
        else:
            garbage = random.Random(tear.byte_count).randbytes(tear.byte_count)
            with segment.open("ab") as file:
                file.write(garbage)
        return f"{tear.mode} {tear.byte_count} bytes of {segment.name} ({size} bytes)"

    @property
    def network(self) -> Topology:
        assert self.topology is not None, "network faults need a cluster on a network"
        return self.topology

    def cut(self, key: object, cuts: list[Cut]) -> None:
        with self._cuts_lock:
            self.cuts[key] = cuts
            network.apply_cuts(self.network, cuts)

    def uncut(self, key: object) -> None:
        with self._cuts_lock:
            if self.cuts.pop(key, None) is None:
                return
            network.heal(self.network)
            for cuts in self.cuts.values():
                network.apply_cuts(self.network, cuts)

    def heal_network(self) -> None:
        with self._cuts_lock:
            self.cuts.clear()
            if self.topology is not None:
                network.heal(self.topology)

    def unreachable(self) -> set[int]:
        """Brokers the clients are cut from right now."""
        with self._cuts_lock:
            hosts = cut_from_clients(cut for cuts in self.cuts.values() for cut in cuts)
        return {broker_id for broker_id in self.brokers if broker_host(broker_id) in hosts}

    def stop_zookeeper(self) -> None:
        self.zookeeper.stop()

    def start_zookeeper(self) -> None:
        if self.zookeeper.process is None:
            self.zookeeper.start()

    def controller_id(self) -> int | None:
        """The broker /controller names, or None (no controller, ZooKeeper unreachable)."""
        try:
            zk = connect(self.zk_connect, connect_timeout_s=ZOOKEEPER_QUERY_TIMEOUT_S)
        except ReplogError:
            return None
        try:
            data, _ = zk.get(znodes.CONTROLLER_PATH)
            return znodes.ControllerRegistration.decode(data).broker_id
        except (KazooException, KazooTimeoutError, ReplogError):
            return None
        finally:
            zk.stop()
            zk.close()

    def heal(self) -> list[int]:
        """Undo every fault still in place: network healed, ZooKeeper up, paused brokers
        resumed, dead ones restarted. Return the brokers that were running but never
        registered again (hung): those are killed and restarted too, so that the data can
        still be checked."""
        self.heal_network()
        self.start_zookeeper()
        for broker_id in sorted(self.paused):
            self.resume(broker_id)
        hung = []
        for broker_id, broker in self.brokers.items():
            if broker.process is not None and broker.process.poll() is None:
                try:
                    broker.wait_registered(REGISTRATION_GRACE_S)
                    continue
                except ReplogError:
                    hung.append(broker_id)
                    broker.kill()
            broker.process = None
            broker.start(BROKER_START_TIMEOUT_S)
        return hung

    def stop_all(self) -> None:
        """SIGKILL every broker (paused ones too); a failing kill does not stop the others."""
        with contextlib.ExitStack() as stack:
            stack.callback(self.heal_network)
            for broker in self.brokers.values():
                stack.callback(broker.kill)
        self.paused.clear()

    def read_replica(self, broker_id: int, partition: int) -> list[Stored]:
        """Every record of one replica's partition as its files hold them (broker stopped)."""
        directory = self.brokers[broker_id].log_dir / f"{self.topic}-{partition}"
        records: list[Stored] = []
        for segment in sorted(directory.glob("*.log")):
            for header, batch in iter_batches(segment.read_bytes(), allow_partial_tail=True):
                payload = decode_payload(batch)
                keys = payload.column("key").to_pylist()
                values = payload.column("value").to_pylist()
                records.extend(
                    Stored(partition, header.base_offset + n, key, value)
                    for n, (key, value) in enumerate(zip(keys, values, strict=True))
                )
        return records
