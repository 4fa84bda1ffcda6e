"""What the console's /api/cluster says, built from plain values (no I/O here).

A broker is alive while it is registered (in ZooKeeper's /brokers/ids, or, without
ZooKeeper, in the brokers' metadata). A broker that is not is still shown, as dead, when
the console saw it earlier or a partition names it as a replica: a crashed broker is
exactly what an operator opens the console to see. A partition is under-replicated when
its ISR is smaller than its replica set, offline when it has no live leader. Its replicas
on brokers that are not alive are named (`dead_replicas`), and a leader other than the
preferred replica (the first of the assignment, as in Kafka) is flagged: load is then
uneven until a preferred-replica election moves it back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from spark_replica.client import PartitionDescription
from spark_replica.wire.native.metadata import NO_LEADER

# Admin.describe's "this broker did not say" offset.
UNKNOWN_OFFSET = -1


@dataclass(frozen=True)
class BrokerView:
    broker_id: int
    host: str
    port: int
    metrics_port: int = -1  # -1: metrics off, or not known without ZooKeeper
    metrics_host: str = ""  # "": the broker's host
    kafka_port: int = -1  # -1: no Kafka listener, or not known without ZooKeeper
    kafka_host: str = ""

    @property
    def metrics_address(self) -> str:
        return self.metrics_host or self.host

    @property
    def metrics_url(self) -> str | None:
        if self.metrics_port < 0:
            return None
        address = self.metrics_address
        host = f"[{address}]" if ":" in address else address
        return f"http://{host}:{self.metrics_port}/metrics"


def partition_json(p: PartitionDescription, live: set[int]) -> dict[str, object]:
    leader = None if p.leader == NO_LEADER else p.leader
    preferred = p.replicas[0] if p.replicas else None
    return {
        "partition": p.partition,
        "leader": leader,
        "leader_epoch": p.leader_epoch,
        "replicas": p.replicas,
        "dead_replicas": [r for r in p.replicas if r not in live],
        "preferred_leader": preferred,
        "leader_not_preferred": leader is not None and leader != preferred,
        "isr": p.isr,
        "high_watermark": None if p.high_watermark == UNKNOWN_OFFSET else p.high_watermark,
        "under_replicated": len(p.isr) < len(p.replicas),
        "offline": p.leader == NO_LEADER or p.leader not in live,
    }


def replica_ids(topics: dict[str, list[PartitionDescription]]) -> set[int]:
    return {r for partitions in topics.values() for p in partitions for r in p.replicas}


def broker_json(
    broker_id: int, view: BrokerView | None, *, alive: bool, controller: int | None
) -> dict[str, object]:
    return {
        "id": broker_id,
        "host": None if view is None else view.host,
        "port": None if view is None else view.port,
        "alive": alive,
        "controller": broker_id == controller,
        "metrics_url": None if view is None else view.metrics_url,
    }


def cluster_json(
    *,
    source: str,
    live: Iterable[BrokerView],
    known: dict[int, BrokerView],
    controller: int | None,
    topics: dict[str, list[PartitionDescription]],
    error: str | None,
    configs: Mapping[str, Mapping[str, str]] | None = None,
) -> dict[str, object]:
    """The whole /api/cluster document.

    `known` holds every broker seen so far (the last place each was seen), `topics` what
    Admin.describe said (empty when it failed, with `error` saying why), `configs` each
    topic's config overrides (None: not known, without ZooKeeper).
    """
    live_by_id = {b.broker_id: b for b in live}
    every_id = sorted(set(live_by_id) | set(known) | replica_ids(topics))
    brokers = [
        broker_json(
            broker_id,
            live_by_id.get(broker_id, known.get(broker_id)),
            alive=broker_id in live_by_id,
            controller=controller,
        )
        for broker_id in every_id
    ]
    live_ids = set(live_by_id)
    partition_docs = {
        topic: [partition_json(p, live_ids) for p in partitions]
        for topic, partitions in sorted(topics.items())
    }
    partitions = [p for docs in partition_docs.values() for p in docs]
    return {
        "source": source,
        "error": error,
        "controller": controller,
        "brokers": brokers,
        "topics": [
            {
                "topic": t,
                "config": None if configs is None else dict(sorted(configs.get(t, {}).items())),
                "partitions": docs,
            }
            for t, docs in partition_docs.items()
        ],
        "summary": {
            "brokers": len(brokers),
            "brokers_alive": len(live_by_id),
            "topics": len(partition_docs),
            "partitions": len(partitions),
            "under_replicated": sum(1 for p in partitions if p["under_replicated"]),
            "offline": sum(1 for p in partitions if p["offline"]),
            "leader_not_preferred": sum(1 for p in partitions if p["leader_not_preferred"]),
        },
    }
