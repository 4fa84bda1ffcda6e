"""DeleteRecords: move partitions' log start offsets forward, as Kafka's API of that name.

Request: per topic per partition: the partition and the offset below which records are
deleted (DELETE_TO_HIGH_WATERMARK, -1, for everything below the high watermark); and
how long the client waits. Sent to each partition's leader.

Response: per topic per partition: error code and message, and the partition's new low
watermark (its log start offset), -1 with an error.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spark_replica.wire.native.apis import ApiKey
from spark_replica.wire.native.table import ERROR, per_topic, wire_field
from spark_replica.wire.schema import Tabled, tabled

# The offset that deletes every record below the high watermark (Kafka's -1).
DELETE_TO_HIGH_WATERMARK = -1


@dataclass(slots=True)
class DeleteRecordsPartition:
    partition: int
    offset: int


@dataclass(slots=True)
class DeleteRecordsTopic:
    topic: str
    partitions: list[DeleteRecordsPartition]


@tabled(
    per_topic(
        "topics",
        DeleteRecordsTopic,
        DeleteRecordsPartition,
        wire_field("partition", "int32"),
        wire_field("offset", "int64"),
    ),
    wire_field("timeout_ms", "int32"),
)
@dataclass(slots=True)
class DeleteRecordsRequest(Tabled):
    API_KEY = ApiKey.DELETE_RECORDS
    topics: list[DeleteRecordsTopic]
    timeout_ms: int = 30_000


@dataclass(slots=True)
class DeleteRecordsPartitionResult:
    partition: int
    error_code: int = 0
    error_message: str | None = None
    low_watermark: int = -1


@dataclass(slots=True)
class DeleteRecordsTopicResult:
    topic: str
    partitions: list[DeleteRecordsPartitionResult] = field(default_factory=list)


@tabled(
    per_topic(
        "topics",
        DeleteRecordsTopicResult,
        DeleteRecordsPartitionResult,
        wire_field("partition", "int32"),
        *ERROR,
        wire_field("low_watermark", "int64"),
    )
)
@dataclass(slots=True)
class DeleteRecordsResponse(Tabled):
    topics: list[DeleteRecordsTopicResult]
