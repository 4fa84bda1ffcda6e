"""CreateTopics, DeleteTopics and CreatePartitions: topic administration through any broker.

CreateTopics request: per topic its name, partition count, replication factor and config
entries (key, value); then timeout_ms. DeleteTopics request: topic names, timeout_ms.
CreatePartitions request: per topic its name and new total partition count; timeout_ms.
All answer per topic an error code and message. A partition count or replication
factor of -1 (USE_BROKER_DEFAULT) asks for the broker's num.partitions or
default.replication.factor, as in Kafka's CreateTopics.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spark_replica.wire.native.apis import ApiKey
from spark_replica.wire.native.table import ERROR, struct_array, wire_field
from spark_replica.wire.schema import Tabled, tabled

USE_BROKER_DEFAULT = -1


@dataclass(slots=True)
class NewTopic:
    topic: str
    num_partitions: int
    replication_factor: int
    configs: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class TopicResult:
    topic: str
    error_code: int = 0
    error_message: str | None = None


TIMEOUT_MS = wire_field("timeout_ms", "int32")


@tabled(
    struct_array(
        "topics",
        NewTopic,
        wire_field("topic", "string"),
        wire_field("num_partitions", "int32"),
        wire_field("replication_factor", "int16"),
        wire_field("configs", "map"),
    ),
    TIMEOUT_MS,
)
@dataclass(slots=True)
class CreateTopicsRequest(Tabled):
    API_KEY = ApiKey.CREATE_TOPICS
    topics: list[NewTopic]
    timeout_ms: int = 30_000


@tabled(wire_field("topics", "[]string"), TIMEOUT_MS)
@dataclass(slots=True)
class DeleteTopicsRequest(Tabled):
    API_KEY = ApiKey.DELETE_TOPICS
    topics: list[str]
    timeout_ms: int = 30_000


@dataclass(slots=True)
class PartitionCount:
    topic: str
    count: int


@tabled(
    struct_array(
        "topics", PartitionCount, wire_field("topic", "string"), wire_field("count", "int32")
    ),
    TIMEOUT_MS,
)
@dataclass(slots=True)
class CreatePartitionsRequest(Tabled):
    API_KEY = ApiKey.CREATE_PARTITIONS
    topics: list[PartitionCount]
    timeout_ms: int = 30_000


@tabled(struct_array("topics", TopicResult, wire_field("topic", "string"), *ERROR))
@dataclass(slots=True)
class TopicResultsResponse(Tabled):
    topics: list[TopicResult]
