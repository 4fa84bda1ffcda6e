"""WriteTxnMarkers between brokers: a transaction coordinator asks a partition leader to
end transactions, as Kafka's API of that number.

Request: per marker the producer id and epoch, whether the transaction committed, the
coordinator's epoch, and per topic the partitions to write the marker in; and how long
the leader may wait for the markers to replicate. Sent to each partition's leader.

Response: per marker its producer id and, per topic per partition, an error code and
message (0 once the marker is committed).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spark_replica.wire.native.apis import ApiKey
from spark_replica.wire.native.table import (
    ERROR,
    per_topic,
    per_topic_partition_ids,
    struct_array,
    wire_field,
)
from spark_replica.wire.schema import Tabled, tabled


@dataclass(slots=True)
class MarkerTopic:
    topic: str
    partitions: list[int] = field(default_factory=list)


@dataclass(slots=True)
class TxnMarkerRequestEntry:
    producer_id: int
    producer_epoch: int
    committed: bool
    coordinator_epoch: int
    topics: list[MarkerTopic]


@tabled(
    struct_array(
        "markers",
        TxnMarkerRequestEntry,
        wire_field("producer_id", "int64"),
        wire_field("producer_epoch", "int16"),
        wire_field("committed", "bool"),
        wire_field("coordinator_epoch", "int32"),
        per_topic_partition_ids("topics", MarkerTopic),
    ),
    wire_field("timeout_ms", "int32"),
)
@dataclass(slots=True)
class WriteTxnMarkersRequest(Tabled):
    API_KEY = ApiKey.WRITE_TXN_MARKERS
    markers: list[TxnMarkerRequestEntry]
    timeout_ms: int = 30_000


@dataclass(slots=True)
class MarkerPartitionResult:
    partition: int
    error_code: int = 0
    error_message: str | None = None


@dataclass(slots=True)
class MarkerTopicResult:
    topic: str
    partitions: list[MarkerPartitionResult] = field(default_factory=list)


@dataclass(slots=True)
class TxnMarkerResult:
    producer_id: int
    topics: list[MarkerTopicResult] = field(default_factory=list)


@tabled(
    struct_array(
        "markers",
        TxnMarkerResult,
        wire_field("producer_id", "int64"),
        per_topic(
            "topics",
            MarkerTopicResult,
            MarkerPartitionResult,
            wire_field("partition", "int32"),
            *ERROR,
        ),
    )
)
@dataclass(slots=True)
class WriteTxnMarkersResponse(Tabled):
    markers: list[TxnMarkerResult]
