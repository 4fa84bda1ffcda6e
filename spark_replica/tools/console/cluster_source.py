"""Reading the cluster for the console: who is registered, who controls, what the topics are.

With a ZooKeeper session the brokers and the controller come from their registrations
(`/brokers/ids/N`, which also say each broker's metrics port, and `/controller`), as
Kafka's tools read them. Without one (`--bootstrap` only) they come from the brokers'
metadata, which knows no metrics ports. Topics, partitions and high watermarks always
come from the brokers through Admin.describe.

Each of the two reads has its own deadline and its own `Freshness`: when one fails or
hangs, its last good answer is kept and marked stale with the reason ("ZooKeeper
unreachable", "brokers unreachable") rather than dropped or shown as current. kazoo
blocks, and a read of a ZooKeeper that went away can block until the session is
closed, so ZooKeeper reads run on a thread of their own, one at a time: a read still
hanging is waited on again rather than joined by another.

Owned by the console's refresh loop: everything here is written and read only there.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time

from kazoo.client import KazooClient

from spark_replica.client import Admin, Cluster, PartitionDescription
from spark_replica.errors import ReplogError
from spark_replica.tools.console.cluster_view import BrokerView, cluster_json
from spark_replica.tools.console.error_lines import collapse_error
from spark_replica.tools.console.freshness import Freshness
from spark_replica.zk import topic_store, znodes
from spark_replica.zk.kazoo_errors import read_if_present

NO_CONTROLLER = -1
# One read of ZooKeeper or of the brokers that takes longer has failed for this round.
READ_TIMEOUT_S = 5.0
ZOOKEEPER_UNREACHABLE = "ZooKeeper unreachable"
BROKERS_UNREACHABLE = "brokers unreachable"

Registrations = tuple[list[BrokerView], int | None]


def read_registrations(zk: KazooClient) -> Registrations:
    """The registered brokers and the controller's id (blocking)."""
    brokers = [
        BrokerView(r.broker_id, r.host, r.port, r.metrics_port, r.metrics_host)
        for r in topic_store.read_brokers(zk)
    ]
    found = read_if_present(zk, znodes.CONTROLLER_PATH)
    controller = None if found is None else znodes.ControllerRegistration.decode(found[0]).broker_id
    return brokers, controller


def now_ms() -> int:
    return int(time.time() * 1000)


def _forget_outcome(future: asyncio.Future[Registrations]) -> None:
    """Retrieve a read's outcome so that one nobody waited for is not logged."""
    if not future.cancelled():
        future.exception()


class ClusterSource:
    def __init__(self, cluster: Cluster, zk: KazooClient | None) -> None:
        self.cluster = cluster
        self.zk = zk
        self.known: dict[int, BrokerView] = {}
        self.live: list[BrokerView] = []
        self.controller: int | None = None
        self.topics: dict[str, list[PartitionDescription]] = {}
        self.brokers_freshness = Freshness()
        self.topics_freshness = Freshness()
        self._zk_thread = concurrent.futures.ThreadPoolExecutor(1, "console-zookeeper")
        self._zk_read: asyncio.Future[Registrations] | None = None

    @property
    def source(self) -> str:
        return "bootstrap" if self.zk is None else "zookeeper"

    @property
    def unreachable(self) -> str:
        return BROKERS_UNREACHABLE if self.zk is None else ZOOKEEPER_UNREACHABLE

    def close(self) -> None:
        """Stop waiting for a hanging ZooKeeper read (closing the session ends it)."""
        self._zk_thread.shutdown(wait=False, cancel_futures=True)

    async def _registered(self) -> Registrations:
        if self.zk is None:
            response = await self.cluster.refresh(None)
            brokers = [BrokerView(b.broker_id, b.host, b.port) for b in response.brokers]
            controller = None if response.controller_id == NO_CONTROLLER else response.controller_id
            return brokers, controller
        if self._zk_read is None or self._zk_read.done():
            loop = asyncio.get_running_loop()
            self._zk_read = loop.run_in_executor(self._zk_thread, read_registrations, self.zk)
            self._zk_read.add_done_callback(_forget_outcome)
        return await asyncio.shield(self._zk_read)

    async def read_brokers(self) -> None:
        try:
            self.live, self.controller = await asyncio.wait_for(self._registered(), READ_TIMEOUT_S)
        except TimeoutError:
            self.brokers_freshness.failed(
                now_ms(), self.unreachable, f"no answer in {READ_TIMEOUT_S:g} s"
            )
            return
        except ReplogError as exc:
            self.brokers_freshness.failed(now_ms(), self.unreachable, collapse_error(str(exc)))
            return
        self.known.update({b.broker_id: b for b in self.live})
        self.brokers_freshness.succeeded(now_ms())

    async def read_topics(self) -> None:
        try:
            self.topics = await asyncio.wait_for(Admin(self.cluster).describe(), READ_TIMEOUT_S)
        except TimeoutError:
            self.topics_freshness.failed(
                now_ms(), BROKERS_UNREACHABLE, f"no answer in {READ_TIMEOUT_S:g} s"
            )
            return
        except ReplogError as exc:
            self.topics_freshness.failed(now_ms(), BROKERS_UNREACHABLE, collapse_error(str(exc)))
            return
        self.topics_freshness.succeeded(now_ms())

    async def snapshot(self) -> dict[str, object]:
        """The /api/cluster document: the last good reads, and why the latest failed."""
        await asyncio.gather(self.read_brokers(), self.read_topics())
        errors = [
            f"{f.reason}: {f.detail}"
            for f in (self.brokers_freshness, self.topics_freshness)
            if f.detail is not None
        ]
        return cluster_json(
            source=self.source,
            live=self.live,
            known=self.known,
            controller=self.controller,
            topics=self.topics,
            error="; ".join(errors) or None,
        )
