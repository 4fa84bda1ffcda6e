"""Reading the cluster for the console: who is registered, who controls, what the topics are.

With a ZooKeeper session the brokers and the controller come from their registrations
(`/brokers/ids/N`, which also say each broker's metrics and Kafka listener, and
`/controller`), as Kafka's tools read them, and the topics' config overrides from
`/config/topics/T` (in one multiRead), as `replog configs describe` reads them. Without
one (`--bootstrap` only) they come from the brokers' metadata, which knows no metrics
or Kafka listeners, and no configs are shown. Topics, partitions and high watermarks always
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
from dataclasses import dataclass, field

from kazoo.client import KazooClient

from spark_replica.client import Admin, Cluster, PartitionDescription
from spark_replica.errors import ReplogError
from spark_replica.tools.console.cluster_view import BrokerView, cluster_json
from spark_replica.tools.console.error_lines import collapse_error
from spark_replica.tools.console.freshness import Freshness
from spark_replica.zk import topic_store, znodes
from spark_replica.zk.kazoo_errors import read_if_present
from spark_replica.zk.multi_read import get_many

NO_CONTROLLER = -1
# One read of ZooKeeper or of the brokers that takes longer has failed for this round.
READ_TIMEOUT_S = 5.0
ZOOKEEPER_UNREACHABLE = "ZooKeeper unreachable"
BROKERS_UNREACHABLE = "brokers unreachable"


@dataclass(frozen=True)
class Registrations:
    brokers: list[BrokerView]
    controller: int | None
    configs: dict[str, dict[str, str]] | None = field(default=None)  # None: not known


def read_configs(zk: KazooClient) -> dict[str, dict[str, str]]:
    """Every topic's config overrides (blocking)."""
    topics = topic_store.list_topics(zk)
    found = get_many(zk, [znodes.topic_config_path(t) for t in topics])
    return {
        topic: {} if read is None else znodes.TopicConfig.decode(topic, read[0]).config
        for topic, read in zip(topics, found, strict=True)
    }


def read_registrations(zk: KazooClient) -> Registrations:
    """The registered brokers, the controller's id and the topics' configs (blocking)."""
    brokers = [
        BrokerView(
            r.broker_id,
            r.host,
            r.port,
            r.metrics_port,
            r.metrics_host,
            r.kafka_port,
            r.kafka_host,
        )
        for r in topic_store.read_brokers(zk)
    ]
    found = read_if_present(zk, znodes.CONTROLLER_PATH)
    controller = None if found is None else znodes.ControllerRegistration.decode(found[0]).broker_id
    return Registrations(brokers, controller, read_configs(zk))


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
        self.configs: dict[str, dict[str, str]] | None = None
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
            return Registrations(brokers, controller)
        if self._zk_read is None or self._zk_read.done():
            loop = asyncio.get_running_loop()
            self._zk_read = loop.run_in_executor(self._zk_thread, read_registrations, self.zk)
            self._zk_read.add_done_callback(_forget_outcome)
        return await asyncio.shield(self._zk_read)

    async def read_brokers(self) -> None:
        try:
            read = await asyncio.wait_for(self._registered(), READ_TIMEOUT_S)
        except TimeoutError:
            self.brokers_freshness.failed(
                now_ms(), self.unreachable, f"no answer in {READ_TIMEOUT_S:g} s"
            )
            return
        except ReplogError as exc:
            self.brokers_freshness.failed(now_ms(), self.unreachable, collapse_error(str(exc)))
            return
        self.live, self.controller, self.configs = read.brokers, read.controller, read.configs
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
            configs=self.configs,
        )
