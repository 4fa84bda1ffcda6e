"""ListOffsets: find an offset by time, or the earliest or latest offset.

Request: per topic per partition: the partition, the leader epoch the client believes
current (-1 = don't check) and a timestamp: EARLIEST (-2) asks for the log start offset,
LATEST (-1) for the high watermark (consumers never see past it), and any other value
for the first offset whose record timestamp is at or after it.

Response: per topic per partition: error code and message, the timestamp of the record
found (-1 for EARLIEST/LATEST) and its offset (-1 when no record is that recent).

With replica_id DEBUG_REPLICA_ID (as in Kafka's debug consumer) followers answer too and
LATEST is the replica's own log end offset: that is how `topics describe` shows the LEO
of every replica.

Version 1 (transactions): the request's isolation_level (int8, after replica_id); under
read_committed LATEST is the last stable offset, and a time is looked up below it, as
Kafka's ListOffsets v2 does. Version 0 is unchanged (read_uncommitted).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spark_replica.wire.native.apis import ApiKey
from spark_replica.wire.native.isolation import IsolationLevel
from spark_replica.wire.native.table import ERROR, per_topic, wire_field
from spark_replica.wire.schema import Tabled, tabled

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
# replica_id of a debugging client (describe): any replica answers, LATEST is its LEO.
DEBUG_REPLICA_ID = -2
# The version that carries the isolation level.
TRANSACTIONS_VERSION = 1


@dataclass(slots=True)
class ListOffsetsPartition:
    partition: int
    timestamp: int
    current_leader_epoch: int = -1


@dataclass(slots=True)
class ListOffsetsTopic:
    topic: str
    partitions: list[ListOffsetsPartition]


@tabled(
    wire_field("replica_id", "int32"),
    wire_field("isolation_level", "int8", since=TRANSACTIONS_VERSION),
    per_topic(
        "topics",
        ListOffsetsTopic,
        ListOffsetsPartition,
        wire_field("partition", "int32"),
        wire_field("current_leader_epoch", "int32"),
        wire_field("timestamp", "int64"),
    ),
    latest=TRANSACTIONS_VERSION,
)
@dataclass(slots=True)
class ListOffsetsRequest(Tabled):
    API_KEY = ApiKey.LIST_OFFSETS
    topics: list[ListOffsetsTopic]
    replica_id: int = -1
    isolation_level: int = IsolationLevel.READ_UNCOMMITTED

    def lowest_version(self) -> int:
        """read_committed needs version 1: version 0 would answer the HW, not the LSO."""
        if self.isolation_level == IsolationLevel.READ_COMMITTED:
            return TRANSACTIONS_VERSION
        return 0


@dataclass(slots=True)
class ListOffsetsPartitionResult:
    partition: int
    error_code: int = 0
    error_message: str | None = None
    timestamp: int = -1
    offset: int = -1


@dataclass(slots=True)
class ListOffsetsTopicResult:
    topic: str
    partitions: list[ListOffsetsPartitionResult] = field(default_factory=list)


@tabled(
    per_topic(
        "topics",
        ListOffsetsTopicResult,
        ListOffsetsPartitionResult,
        wire_field("partition", "int32"),
        *ERROR,
        wire_field("timestamp", "int64"),
        wire_field("offset", "int64"),
    ),
    latest=TRANSACTIONS_VERSION,
)
@dataclass(slots=True)
class ListOffsetsResponse(Tabled):
    topics: list[ListOffsetsTopicResult]
