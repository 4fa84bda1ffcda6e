"""Topic administration through the brokers: create, delete, describe, delete records.

Creating returns once every partition of the new topic has a leader in the metadata
the brokers serve, so that a producer started right after can send at once.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from spark_replica.errors import (
    ReplogError,
    TimeoutExpiredError,
    UnknownTopicOrPartitionError,
    raise_for_code,
)
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.metadata import NO_LEADER, TopicMetadata
from spark_replica.wire.native.topic_admin import (
    USE_BROKER_DEFAULT,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    NewTopic,
    PartitionCount,
)

from .cluster import Cluster
from .list_offsets import LATEST, list_offsets_at
from .record_deletion import DeletionOutcome, delete_records

DEFAULT_ADMIN_TIMEOUT_S = 30.0
# A broker that does not say its offsets within this long shows -1 in a description.
DESCRIBE_OFFSETS_TIMEOUT_S = 5.0
# How often a create or delete looks whether the brokers' metadata shows it done yet.
STATE_POLL_INTERVAL_S = 0.05


@dataclass(frozen=True)
class PartitionDescription:
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    high_watermark: int
    log_end_offsets: dict[int, int] = field(default_factory=dict)  # replica -> its LEO

    def as_json(self) -> dict[str, object]:
        return {
            "partition": self.partition,
            "leader": self.leader,
            "leader_epoch": self.leader_epoch,
            "replicas": self.replicas,
            "isr": self.isr,
            "high_watermark": self.high_watermark,
            "log_end_offsets": {str(r): offset for r, offset in self.log_end_offsets.items()},
        }


class Admin:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    async def create_topic(
        self,
        topic: str,
        partitions: int | None,
        replication_factor: int | None = 1,
        configs: dict[str, str] | None = None,
        timeout_s: float = DEFAULT_ADMIN_TIMEOUT_S,
    ) -> TopicMetadata:
        """Create `topic` and return once every partition has a leader. A partition
        count or replication factor of None takes the brokers' num.partitions or
        default.replication.factor, as kafka-topics does without the flag."""
        conn = await self.cluster.any_connection()
        new = NewTopic(
            topic,
            USE_BROKER_DEFAULT if partitions is None else partitions,
            USE_BROKER_DEFAULT if replication_factor is None else replication_factor,
            configs or {},
        )
        response = await conn.send(CreateTopicsRequest([new], int(timeout_s * 1000)))
        result = response.topics[0]
        raise_for_code(result.error_code, result.error_message or "")
        return await self.wait_for_leaders(topic, timeout_s, partitions or 0)

    async def create_partitions(
        self, topic: str, count: int, timeout_s: float = DEFAULT_ADMIN_TIMEOUT_S
    ) -> TopicMetadata:
        """Grow `topic` to `count` partitions; return once every one has a leader."""
        conn = await self.cluster.any_connection()
        response = await conn.send(
            CreatePartitionsRequest([PartitionCount(topic, count)], int(timeout_s * 1000))
        )
        result = response.topics[0]
        raise_for_code(result.error_code, result.error_message or "")
        return await self.wait_for_leaders(topic, timeout_s, count)

    async def wait_for_leaders(
        self, topic: str, timeout_s: float, partitions: int = 0
    ) -> TopicMetadata:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            await self.cluster.refresh([topic])
            try:
                metadata = self.cluster.topic(topic)
                if len(metadata.partitions) >= max(partitions, 1) and all(
                    p.leader != NO_LEADER and not p.error_code for p in metadata.partitions
                ):
                    return metadata
            except ReplogError as exc:
                if not exc.retriable:
                    raise
            if loop.time() > deadline:
                raise TimeoutExpiredError(
                    f"topic {topic!r} has no leader for every partition after {timeout_s:.0f} s"
                )
            await asyncio.sleep(STATE_POLL_INTERVAL_S)

    async def delete_topic(self, topic: str, timeout_s: float = DEFAULT_ADMIN_TIMEOUT_S) -> None:
        """Delete a topic; return once the brokers no longer know it (its name is free)."""
        conn = await self.cluster.any_connection()
        response = await conn.send(DeleteTopicsRequest([topic], int(timeout_s * 1000)))
        result = response.topics[0]
        raise_for_code(result.error_code, result.error_message or "")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            metadata = (await self.cluster.refresh([topic])).topics[0]
            if metadata.error_code == UnknownTopicOrPartitionError.code:
                return
            if loop.time() > deadline:
                raise TimeoutExpiredError(f"topic {topic!r} still exists after {timeout_s:.0f} s")
            await asyncio.sleep(STATE_POLL_INTERVAL_S)

    async def delete_records(
        self, offsets: Mapping[TopicPartition, int], timeout_s: float = DEFAULT_ADMIN_TIMEOUT_S
    ) -> dict[TopicPartition, DeletionOutcome]:
        """Delete each partition's records below its offset (-1: all below the high
        watermark), as Kafka's DeleteRecords: per partition its new low watermark, or
        the error that refused it (record_deletion.py)."""
        return await delete_records(self.cluster, offsets, timeout_s)

    async def list_topics(self) -> list[str]:
        response = await self.cluster.refresh(None)
        return sorted(t.topic for t in response.topics if not t.error_code)

    async def describe(
        self, topics: list[str] | None = None
    ) -> dict[str, list[PartitionDescription]]:
        """Per topic, per partition: leader, epoch, replicas, ISR, HW and each replica's LEO.

        Offsets come from the brokers; one that cannot answer (it is down, or no longer
        leads) shows -1 rather than failing the whole description.
        """
        response = await self.cluster.refresh(topics)
        for topic in response.topics:
            raise_for_code(topic.error_code, topic.error_message or topic.topic)
        partitions = {
            TopicPartition(topic.topic, p.partition): p
            for topic in response.topics
            for p in topic.partitions
        }
        by_leader: dict[int, list[TopicPartition]] = defaultdict(list)
        by_replica: dict[int, list[TopicPartition]] = defaultdict(list)
        for tp, p in partitions.items():
            if p.leader != NO_LEADER:
                by_leader[p.leader].append(tp)
            for replica in p.replicas:
                by_replica[replica].append(tp)
        high_watermarks, *replica_ends = await asyncio.gather(
            self._offsets(by_leader, log_end=False),
            *(self._offsets({r: tps}, log_end=True) for r, tps in by_replica.items()),
        )
        log_ends = dict(zip(by_replica, replica_ends, strict=True))
        described: dict[str, list[PartitionDescription]] = defaultdict(list)
        for tp in sorted(partitions):
            p = partitions[tp]
            described[tp.topic].append(
                PartitionDescription(
                    p.partition,
                    p.leader,
                    p.leader_epoch,
                    list(p.replicas),
                    list(p.isr),
                    high_watermarks.get(tp, -1),
                    {r: log_ends[r].get(tp, -1) for r in p.replicas},
                )
            )
        return dict(described)

    async def _offsets(
        self, by_broker: dict[int, list[TopicPartition]], *, log_end: bool
    ) -> dict[TopicPartition, int]:
        """Each broker's HW (or, with `log_end`, its own log end) of the partitions given.

        Not retried: a description shows -1 for a broker that cannot answer now.
        """
        offsets: dict[TopicPartition, int] = {}
        for broker_id, tps in by_broker.items():
            try:
                found = await asyncio.wait_for(
                    list_offsets_at(self.cluster, broker_id, tps, LATEST, log_end=log_end),
                    DESCRIBE_OFFSETS_TIMEOUT_S,
                )
            except (ReplogError, TimeoutError):
                continue
            offsets.update({tp: offset for tp, (offset, _) in found.items()})
        return offsets
