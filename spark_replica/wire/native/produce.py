"""Produce: append record batches to partition leaders.

Request: acks int16 (0, 1, -1 = all), timeout_ms int32, then per topic its name and per
partition the partition id and the record batches (one bytes field holding whole batches
end to end). With acks=0 the broker sends no response at all.

Response: per topic, per partition: error code and message, the base offset assigned to
the first batch, and the log start offset.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spark_replica.wire.native.apis import ApiKey
from spark_replica.wire.native.table import ERROR, per_topic, wire_field
from spark_replica.wire.schema import Tabled, tabled

ACKS_NONE = 0
ACKS_LEADER = 1
ACKS_ALL = -1


@dataclass(slots=True)
class ProducePartition:
    partition: int
    records: bytes | bytearray | memoryview


@dataclass(slots=True)
class ProduceTopic:
    topic: str
    partitions: list[ProducePartition]


@tabled(
    wire_field("acks", "int16"),
    wire_field("timeout_ms", "int32"),
    per_topic(
        "topics",
        ProduceTopic,
        ProducePartition,
        wire_field("partition", "int32"),
        wire_field("records", "records", empty_if_null=True),
    ),
)
@dataclass(slots=True)
class ProduceRequest(Tabled):
    API_KEY = ApiKey.PRODUCE
    acks: int
    timeout_ms: int
    topics: list[ProduceTopic]


@dataclass(slots=True)
class ProducePartitionResult:
    partition: int
    error_code: int = 0
    error_message: str | None = None
    base_offset: int = -1
    log_start_offset: int = -1


@dataclass(slots=True)
class ProduceTopicResult:
    topic: str
    partitions: list[ProducePartitionResult] = field(default_factory=list)


@tabled(
    per_topic(
        "topics",
        ProduceTopicResult,
        ProducePartitionResult,
        wire_field("partition", "int32"),
        *ERROR,
        wire_field("base_offset", "int64"),
        wire_field("log_start_offset", "int64"),
    )
)
@dataclass(slots=True)
class ProduceResponse(Tabled):
    topics: list[ProduceTopicResult]
