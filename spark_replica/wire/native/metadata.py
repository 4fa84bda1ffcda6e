"""Metadata: the brokers, the controller and each partition's leader, epoch, replicas, ISR.

Request: a nullable array of topic names (null = every topic).

Response: brokers (id, host, port), the controller id (-1 if none is known), and per
topic an error code and its partitions: error code, partition id, leader (-1 = none),
leader epoch, replicas and in-sync replicas.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spark_replica.wire.native.apis import ApiKey
from spark_replica.wire.native.table import ERROR, struct_array, wire_field
from spark_replica.wire.schema import Tabled, tabled

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


# A broker's id and replog address, as every broker entry starts.
BROKER_ADDRESS = (
    wire_field("broker_id", "int32"),
    wire_field("host", "string"),
    wire_field("port", "int32"),
)


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


@tabled(wire_field("topics", "[]string", nullable=True))
@dataclass(slots=True)
class MetadataRequest(Tabled):
    API_KEY = ApiKey.METADATA
    topics: list[str] | None = None


@tabled(
    struct_array("brokers", BrokerInfo, *BROKER_ADDRESS),
    wire_field("controller_id", "int32"),
    struct_array(
        "topics",
        TopicMetadata,
        *ERROR,
        wire_field("topic", "string"),
        struct_array(
            "partitions",
            PartitionMetadata,
            wire_field("error_code", "int16"),
            wire_field("partition", "int32"),
            wire_field("leader", "int32"),
            wire_field("leader_epoch", "int32"),
            wire_field("replicas", "[]int32"),
            wire_field("isr", "[]int32"),
        ),
    ),
)
@dataclass(slots=True)
class MetadataResponse(Tabled):
    brokers: list[BrokerInfo]
    controller_id: int
    topics: list[TopicMetadata]
