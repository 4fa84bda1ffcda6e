"""Reading the cluster for the console: who is registered, who controls, what the topics are.

With a ZooKeeper session the brokers and the controller come from their registrations
(`/brokers/ids/N`, which also say each broker's metrics port, and `/controller`), as
Kafka's tools read them; kazoo blocks, so those reads run in a worker thread. Without
one (`--bootstrap` only) they come from the brokers' metadata, which knows no metrics
ports. Topics, partitions and high watermarks always come from the brokers through
Admin.describe.

Owned by the console's refresh loop: `known` grows as brokers are seen and is read only
there.
"""

from __future__ import annotations

import asyncio

from kazoo.client import KazooClient

from spark_replica.client import Admin, Cluster, PartitionDescription
from spark_replica.errors import ReplogError
from spark_replica.tools.console.cluster_view import BrokerView, cluster_json
from spark_replica.zk import topic_store, znodes
from spark_replica.zk.kazoo_errors import read_if_present

NO_CONTROLLER = -1


def read_registrations(zk: KazooClient) -> tuple[list[BrokerView], int | None]:
    """The registered brokers and the controller's id (blocking)."""
    brokers = [
        BrokerView(r.broker_id, r.host, r.port, r.metrics_port, r.metrics_host)
        for r in topic_store.read_brokers(zk)
    ]
    found = read_if_present(zk, znodes.CONTROLLER_PATH)
    controller = None if found is None else znodes.ControllerRegistration.decode(found[0]).broker_id
    return brokers, controller


class ClusterSource:
    def __init__(self, cluster: Cluster, zk: KazooClient | None) -> None:
        self.cluster = cluster
        self.zk = zk
        self.known: dict[int, BrokerView] = {}
        self.live: list[BrokerView] = []
        self.controller: int | None = None

    @property
    def source(self) -> str:
        return "bootstrap" if self.zk is None else "zookeeper"

    async def _registered(self) -> tuple[list[BrokerView], int | None]:
        if self.zk is not None:
            return await asyncio.to_thread(read_registrations, self.zk)
        response = await self.cluster.refresh(None)
        brokers = [BrokerView(b.broker_id, b.host, b.port) for b in response.brokers]
        controller = None if response.controller_id == NO_CONTROLLER else response.controller_id
        return brokers, controller

    async def snapshot(self) -> dict[str, object]:
        """The /api/cluster document now; what could not be read is named in `error`."""
        errors = []
        try:
            live, controller = await self._registered()
        except ReplogError as exc:
            # Shown as last read rather than all dead: not reading them says nothing of them.
            errors.append(f"brokers unavailable: {exc}")
            live, controller = self.live, self.controller
        topics: dict[str, list[PartitionDescription]] = {}
        try:
            topics = await Admin(self.cluster).describe()
        except ReplogError as exc:
            errors.append(f"topics unavailable: {exc}")
        self.live, self.controller = live, controller
        self.known.update({b.broker_id: b for b in live})
        return cluster_json(
            source=self.source,
            live=live,
            known=self.known,
            controller=controller,
            topics=topics,
            error="; ".join(errors) or None,
        )
