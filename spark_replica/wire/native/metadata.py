"""Metadata: the brokers, the controller and each partition's leader, epoch, replicas, ISR.

Request: a nullable array of topic names (null = every topic).

Response: brokers (id, host, port), the controller id (-1 if none is known), and per
topic an error code and its partitions: error code, partition id, leader (-1 = none),
leader epoch, replicas and in-sync replicas.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spark_replica.wire.native.apis import ApiKey
from spark_replica.wire.primitives import Reader, Writer

NO_LEADER = -1


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A live broker at its advertised addresses. `kafka_host`/`kafka_port` (-1: none)
    travel in the controller's requests only: the replog Metadata response keeps its
    layout, and the Kafka listener answers with them. An empty `kafka_host` is `host`."""

    broker_id: int
    host: str
    port: int
    kafka_port: int = -1
    kafka_host: str = ""

    def __post_init__(self) -> None:
        if not self.kafka_host:
            object.__setattr__(self, "kafka_host", self.host)


@dataclass(slots=True)
class PartitionMetadata:
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    error_code: int = 0


@dataclass(slots=True)
class TopicMetadata:
    topic: str
    partitions: list[PartitionMetadata] = field(default_factory=list)
    error_code: int = 0
    error_message: str | None = None


@dataclass(slots=True)
class MetadataRequest:
    API_KEY = ApiKey.METADATA
    topics: list[str] | None = None

    def write(self, w: Writer) -> None:
        w.array(self.topics, w.string)

    @classmethod
    def read(cls, r: Reader) -> MetadataRequest:
        return cls(r.array(r.required_string))


@dataclass(slots=True)
class MetadataResponse:
    brokers: list[BrokerInfo]
    controller_id: int
    topics: list[TopicMetadata]

    def write(self, w: Writer) -> None:
        def write_broker(b: BrokerInfo) -> None:
            w.int32(b.broker_id)
            w.string(b.host)
            w.int32(b.port)

        def write_partition(p: PartitionMetadata) -> None:
            w.int16(p.error_code)
            w.int32(p.partition)
            w.int32(p.leader)
            w.int32(p.leader_epoch)
            w.int32_array(p.replicas)
            w.int32_array(p.isr)

        def write_topic(t: TopicMetadata) -> None:
            w.int16(t.error_code)
            w.string(t.error_message)
            w.string(t.topic)
            w.array(t.partitions, write_partition)

        w.array(self.brokers, write_broker)
        w.int32(self.controller_id)
        w.array(self.topics, write_topic)

    @classmethod
    def read(cls, r: Reader) -> MetadataResponse:
        def read_broker() -> BrokerInfo:
            return BrokerInfo(r.int32(), r.required_string(), r.int32())

        def read_partition() -> PartitionMetadata:
            error_code = r.int16()
            partition, leader, epoch = r.int32(), r.int32(), r.int32()
            return PartitionMetadata(
                partition, leader, epoch, r.int32_array(), r.int32_array(), error_code
            )

        def read_topic() -> TopicMetadata:
            error_code = r.int16()
            message = r.string()
            name = r.required_string()
            return TopicMetadata(name, r.required_array(read_partition), error_code, message)

        brokers = r.required_array(read_broker)
        controller_id = r.int32()
        return cls(brokers, controller_id, r.required_array(read_topic))
