"""Topic administration through the brokers: create, delete, describe.

Creating returns once every partition of the new topic has a leader in the metadata
the brokers serve, so that a producer started right after can send at once.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from spark_replica.errors import (
    LeaderNotAvailableError,
    ReplogError,
    TimeoutExpiredError,
    raise_for_code,
)
from spark_replica.protocol.list_offsets import LATEST_TIMESTAMP
from spark_replica.protocol.metadata import NO_LEADER, TopicMetadata
from spark_replica.protocol.topic_admin import (
    CreateTopicsRequest,
    DeleteTopicsRequest,
    NewTopic,
)
from spark_replica.topics import TopicPartition

from .cluster import Cluster
from .consumer import Consumer

DEFAULT_ADMIN_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class PartitionDescription:
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    high_watermark: int

    def as_json(self) -> dict[str, object]:
        return {
            "partition": self.partition,
            "leader": self.leader,
            "leader_epoch": self.leader_epoch,
            "replicas": self.replicas,
            "isr": self.isr,
            "high_watermark": self.high_watermark,
        }


class Admin:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    async def create_topic(
        self,
        topic: str,
        partitions: int,
        replication_factor: int = 1,
        configs: dict[str, str] | None = None,
        timeout_s: float = DEFAULT_ADMIN_TIMEOUT_S,
    ) -> TopicMetadata:
        conn = await self.cluster.any_connection()
        request = CreateTopicsRequest(
            [NewTopic(topic, partitions, replication_factor, configs or {})],
            int(timeout_s * 1000),
        )
        response = await conn.send(request)
        result = response.topics[0]
        raise_for_code(result.error_code, result.error_message or "")
        return await self.wait_for_leaders(topic, timeout_s)

    async def wait_for_leaders(self, topic: str, timeout_s: float) -> TopicMetadata:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            await self.cluster.refresh([topic])
            try:
                metadata = self.cluster.topic(topic)
                if metadata.partitions and all(
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
            await asyncio.sleep(0.05)

    async def delete_topic(self, topic: str, timeout_s: float = DEFAULT_ADMIN_TIMEOUT_S) -> None:
        conn = await self.cluster.any_connection()
        response = await conn.send(DeleteTopicsRequest([topic], int(timeout_s * 1000)))
        result = response.topics[0]
        raise_for_code(result.error_code, result.error_message or "")

    async def list_topics(self) -> list[str]:
        response = await self.cluster.refresh(None)
        return sorted(t.topic for t in response.topics if not t.error_code)

    async def describe(
        self, topics: list[str] | None = None
    ) -> dict[str, list[PartitionDescription]]:
        """Per topic, per partition: leader, epoch, replicas, ISR and high watermark."""
        response = await self.cluster.refresh(topics)
        consumer = Consumer(self.cluster)
        described: dict[str, list[PartitionDescription]] = {}
        for topic in sorted(response.topics, key=lambda t: t.topic):
            raise_for_code(topic.error_code, topic.error_message or topic.topic)
            led = [
                TopicPartition(topic.topic, p.partition)
                for p in topic.partitions
                if p.leader != NO_LEADER
            ]
            try:
                latest = await consumer.list_offsets(led, LATEST_TIMESTAMP) if led else {}
            except LeaderNotAvailableError:
                latest = {}
            described[topic.topic] = [
                PartitionDescription(
                    p.partition,
                    p.leader,
                    p.leader_epoch,
                    list(p.replicas),
                    list(p.isr),
                    latest.get(TopicPartition(topic.topic, p.partition), (-1, -1))[0],
                )
                for p in sorted(topic.partitions, key=lambda p: p.partition)
            ]
        return described
