"""OffsetsForLeaderEpoch: where did a leader epoch end, according to the leader?

A follower that becomes a follower asks its leader for the end offset of its own latest
epoch, and truncates its log to what the leader answers (KIP-101/279), instead of to its
high watermark, which could drop acknowledged records or keep divergent ones.

Request: replica_id, then per topic per partition the partition, the requester's view of
the current leader epoch (fencing) and the epoch asked about.
Response: per topic per partition an error code and message, the largest epoch at or
below the one asked about that the leader knows, and that epoch's end offset.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spark_replica.wire.native.apis import ApiKey
from spark_replica.wire.native.table import ERROR, per_topic, wire_field
from spark_replica.wire.schema import Tabled, tabled

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


@dataclass(slots=True)
class EpochQuery:
    partition: int
    leader_epoch: int
    current_leader_epoch: int = -1


@dataclass(slots=True)
class EpochQueryTopic:
    topic: str
    partitions: list[EpochQuery]


@tabled(
    wire_field("replica_id", "int32"),
    per_topic(
        "topics",
        EpochQueryTopic,
        EpochQuery,
        wire_field("partition", "int32"),
        wire_field("current_leader_epoch", "int32"),
        wire_field("leader_epoch", "int32"),
    ),
)
@dataclass(slots=True)
class OffsetsForLeaderEpochRequest(Tabled):
    API_KEY = ApiKey.OFFSETS_FOR_LEADER_EPOCH
    topics: list[EpochQueryTopic]
    replica_id: int = -1


@dataclass(slots=True)
class EpochEndOffset:
    partition: int
    error_code: int = 0
    error_message: str | None = None
    leader_epoch: int = UNDEFINED_EPOCH
    end_offset: int = UNDEFINED_OFFSET


@dataclass(slots=True)
class EpochEndOffsetTopic:
    topic: str
    partitions: list[EpochEndOffset] = field(default_factory=list)


@tabled(
    per_topic(
        "topics",
        EpochEndOffsetTopic,
        EpochEndOffset,
        wire_field("partition", "int32"),
        *ERROR,
        wire_field("leader_epoch", "int32"),
        wire_field("end_offset", "int64"),
    )
)
@dataclass(slots=True)
class OffsetsForLeaderEpochResponse(Tabled):
    topics: list[EpochEndOffsetTopic]
