"""Produce: append record batches to partition leaders.

Request: acks int16 (0, 1, -1 = all), timeout_ms int32, then per topic its name and per
partition the partition id and the record batches (one bytes field holding whole batches
end to end). With acks=0 the broker sends no response at all.

Response: per topic, per partition: error code and message, the base offset assigned to
the first batch, and the log start offset.

Version 1 (transactions): the request's transactional id (nullable string, first), which
a transactional producer's batches (attribute bit 4) need; the response is unchanged.
Version 0 carries none, so a leader refuses transactional batches sent at it.
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


# The version that carries the transactional id.
TRANSACTIONS_VERSION = 1


@tabled(
    wire_field("transactional_id", "string", nullable=True, since=TRANSACTIONS_VERSION),
    wire_field("acks", "int16"),
    wire_field("timeout_ms", "int32"),
    per_topic(
        "topics",
        ProduceTopic,
        ProducePartition,
        wire_field("partition", "int32"),
        wire_field("records", "records", empty_if_null=True),
    ),
    latest=TRANSACTIONS_VERSION,
)
@dataclass(slots=True)
class ProduceRequest(Tabled):
    API_KEY = ApiKey.PRODUCE
    acks: int
    timeout_ms: int
    topics: list[ProduceTopic]
    transactional_id: str | None = None

    def lowest_version(self) -> int:
        """A transactional producer's request needs version 1, which names its id."""
        return 0 if self.transactional_id is None else TRANSACTIONS_VERSION


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
    ),
    latest=TRANSACTIONS_VERSION,
)
@dataclass(slots=True)
class ProduceResponse(Tabled):
    topics: list[ProduceTopicResult]
