"""Fetch: read record batches below the high watermark, with long polling.

Request: replica_id int32 (-1 for consumers, the broker id for a follower), max_wait_ms,
min_bytes, max_bytes (whole response), then per topic per partition: the partition, the
leader epoch the fetcher believes current (-1 = don't check), the fetch offset and the
partition's max bytes.

Response: per topic per partition: error code and message, high watermark, log start
offset, log end offset, and the records (whole batches; the first may start before the
fetch offset, and the client skips the records below it).

Version 1 (transactions): the request's isolation_level (int8, after max_bytes: 0
read_uncommitted, 1 read_committed, spark_replica/wire/native/isolation.py); each
partition's answer gains the last stable offset (after the high watermark) and the
aborted transactions of the returned range (producer id, first offset; before the
records): a read_committed reader drops those producers' records from the first offset
up to their ABORT markers. Version 0 is unchanged: read_uncommitted, no LSO.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from spark_replica.wire.native.apis import ApiKey
from spark_replica.wire.native.isolation import IsolationLevel
from spark_replica.wire.native.table import ERROR, per_topic, struct_array, wire_field
from spark_replica.wire.primitives import Chunk
from spark_replica.wire.schema import Tabled, tabled

CONSUMER_REPLICA_ID = -1
NO_LEADER_EPOCH = -1
# The version that carries the isolation level, the LSO and the aborted transactions.
TRANSACTIONS_VERSION = 1
# An answer's LSO where the version does not carry it.
UNKNOWN_OFFSET = -1


@dataclass(slots=True)
class FetchPartition:
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = NO_LEADER_EPOCH


@dataclass(slots=True)
class FetchTopic:
    topic: str
    partitions: list[FetchPartition]


@tabled(
    wire_field("replica_id", "int32"),
    wire_field("max_wait_ms", "int32"),
    wire_field("min_bytes", "int32"),
    wire_field("max_bytes", "int32"),
    wire_field("isolation_level", "int8", since=TRANSACTIONS_VERSION),
    per_topic(
        "topics",
        FetchTopic,
        FetchPartition,
        wire_field("partition", "int32"),
        wire_field("current_leader_epoch", "int32"),
        wire_field("fetch_offset", "int64"),
        wire_field("max_bytes", "int32"),
    ),
    latest=TRANSACTIONS_VERSION,
)
@dataclass(slots=True)
class FetchRequest(Tabled):
    API_KEY = ApiKey.FETCH
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    topics: list[FetchTopic]
    replica_id: int = CONSUMER_REPLICA_ID
    isolation_level: int = IsolationLevel.READ_UNCOMMITTED

    def lowest_version(self) -> int:
        """read_committed needs version 1: version 0 would read uncommitted records."""
        if self.isolation_level == IsolationLevel.READ_COMMITTED:
            return TRANSACTIONS_VERSION
        return 0


@dataclass(frozen=True, slots=True)
class AbortedTransaction:
    """A transaction aborted within the answered range: `producer_id`'s records from
    `first_offset` up to its ABORT marker are to be dropped by a read_committed reader."""

    producer_id: int
    first_offset: int


@dataclass(slots=True)
class FetchPartitionResult:
    partition: int
    error_code: int = 0
    error_message: str | None = None
    high_watermark: int = -1
    log_start_offset: int = -1
    log_end_offset: int = -1
    # Decoded: a view of the frame. Answered: bytes, or the log's ranges as stored (a
    # broker's consumer fetch), written one after another as one records field.
    records: bytes | memoryview | Sequence[Chunk] = b""
    # From version 1 (after records here, so that positional construction stays as it was).
    last_stable_offset: int = UNKNOWN_OFFSET
    aborted_transactions: list[AbortedTransaction] = field(default_factory=list)


@dataclass(slots=True)
class FetchTopicResult:
    topic: str
    partitions: list[FetchPartitionResult] = field(default_factory=list)


@tabled(
    per_topic(
        "topics",
        FetchTopicResult,
        FetchPartitionResult,
        wire_field("partition", "int32"),
        *ERROR,
        wire_field("high_watermark", "int64"),
        wire_field(
            "last_stable_offset", "int64", since=TRANSACTIONS_VERSION, default=UNKNOWN_OFFSET
        ),
        wire_field("log_start_offset", "int64"),
        wire_field("log_end_offset", "int64"),
        struct_array(
            "aborted_transactions",
            AbortedTransaction,
            wire_field("producer_id", "int64"),
            wire_field("first_offset", "int64"),
            since=TRANSACTIONS_VERSION,
        ),
        wire_field("records", "records", empty_if_null=True),
    ),
    latest=TRANSACTIONS_VERSION,
)
@dataclass(slots=True)
class FetchResponse(Tabled):
    topics: list[FetchTopicResult]
