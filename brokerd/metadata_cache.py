"""What this broker tells clients about the cluster: the controller's last UpdateMetadata.

Each UpdateMetadata carries the live brokers and the state of every partition, and
replaces the cache whole, so the cache is exactly one controller decision old at most.
Owned by the broker's event loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spark_replica.protocol.controller_requests import PartitionLeaderState, UpdateMetadataRequest
from spark_replica.protocol.metadata import BrokerInfo
from spark_replica.topics import TopicPartition


@dataclass
class MetadataCache:
    brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    partitions: dict[TopicPartition, PartitionLeaderState] = field(default_factory=dict)
    controller_id: int = -1

    def update(self, request: UpdateMetadataRequest) -> None:
        self.brokers = {b.broker_id: b for b in request.brokers}
        self.partitions = {
            TopicPartition(topic.topic, p.partition): p
            for topic in request.topics
            for p in topic.partitions
        }
        self.controller_id = request.header.controller_id

    def topics(self) -> list[str]:
        return sorted({tp.topic for tp in self.partitions})

    def partitions_of(self, topic: str) -> list[PartitionLeaderState]:
        return sorted(
            (state for tp, state in self.partitions.items() if tp.topic == topic),
            key=lambda state: state.partition,
        )
