"""AddPartitionsToTxn: a transactional producer names the partitions it is about to write
before its first batch to each, so that the coordinator writes their markers.

Request: the transactional id, the producer id and epoch, and per topic its partition
ids. Response: per topic per partition an error code and message. As in Kafka all the
partitions are added or none: a partition that does not exist gets its error and every
other one OPERATION_NOT_ATTEMPTED; a producer fenced, or a coordinator error, is every
partition's error.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spark_replica.wire.native.apis import ApiKey
from spark_replica.wire.native.table import (
    ERROR,
    per_topic,
    per_topic_partition_ids,
    wire_field,
)
from spark_replica.wire.schema import Tabled, tabled


@dataclass(slots=True)
class TxnTopic:
    topic: str
    partitions: list[int] = field(default_factory=list)


@tabled(
    wire_field("transactional_id", "string"),
    wire_field("producer_id", "int64"),
    wire_field("producer_epoch", "int16"),
    per_topic_partition_ids("topics", TxnTopic),
)
@dataclass(slots=True)
class AddPartitionsToTxnRequest(Tabled):
    API_KEY = ApiKey.ADD_PARTITIONS_TO_TXN
    transactional_id: str
    producer_id: int
    producer_epoch: int
    topics: list[TxnTopic]


@dataclass(slots=True)
class TxnPartitionResult:
    partition: int
    error_code: int = 0
    error_message: str | None = None


@dataclass(slots=True)
class TxnTopicResult:
    topic: str
    partitions: list[TxnPartitionResult] = field(default_factory=list)


# An error per partition, per topic: AddPartitionsToTxn's answer and TxnOffsetCommit's.
PARTITION_RESULTS = per_topic(
    "topics",
    TxnTopicResult,
    TxnPartitionResult,
    wire_field("partition", "int32"),
    *ERROR,
)


@tabled(PARTITION_RESULTS)
@dataclass(slots=True)
class AddPartitionsToTxnResponse(Tabled):
    topics: list[TxnTopicResult]
