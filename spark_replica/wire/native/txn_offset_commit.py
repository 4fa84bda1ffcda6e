"""TxnOffsetCommit: a transactional producer commits its consumer group's offsets inside
its transaction, to the group's coordinator; they become the group's committed offsets
when the transaction commits, and are dropped when it aborts.

Request: the transactional id, the group, the producer id and epoch, the consumer's
member id, generation (-1 and "" for a producer outside the group's membership) and group
instance id, then per topic per partition the offset, its leader epoch (-1: unknown) and
metadata. Response: per topic per partition an error code and message.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spark_replica.wire.native.add_partitions_to_txn import PARTITION_RESULTS, TxnTopicResult
from spark_replica.wire.native.apis import ApiKey
from spark_replica.wire.native.table import per_topic, wire_field
from spark_replica.wire.schema import Tabled, tabled

NO_GENERATION = -1
NO_MEMBER_ID = ""


@dataclass(slots=True)
class TxnOffset:
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str = ""


@dataclass(slots=True)
class TxnOffsetTopic:
    topic: str
    partitions: list[TxnOffset] = field(default_factory=list)


@tabled(
    wire_field("transactional_id", "string"),
    wire_field("group_id", "string"),
    wire_field("producer_id", "int64"),
    wire_field("producer_epoch", "int16"),
    wire_field("generation_id", "int32"),
    wire_field("member_id", "string"),
    wire_field("group_instance_id", "string", nullable=True),
    per_topic(
        "topics",
        TxnOffsetTopic,
        TxnOffset,
        wire_field("partition", "int32"),
        wire_field("offset", "int64"),
        wire_field("leader_epoch", "int32"),
        wire_field("metadata", "string"),
    ),
)
@dataclass(slots=True)
class TxnOffsetCommitRequest(Tabled):
    API_KEY = ApiKey.TXN_OFFSET_COMMIT
    transactional_id: str
    group_id: str
    producer_id: int
    producer_epoch: int
    topics: list[TxnOffsetTopic]
    generation_id: int = NO_GENERATION
    member_id: str = NO_MEMBER_ID
    group_instance_id: str | None = None


@tabled(PARTITION_RESULTS)
@dataclass(slots=True)
class TxnOffsetCommitResponse(Tabled):
    topics: list[TxnTopicResult]
