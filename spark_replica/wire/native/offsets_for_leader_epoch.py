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
from spark_replica.wire.primitives import Reader, Writer

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


@dataclass(slots=True)
class OffsetsForLeaderEpochRequest:
    API_KEY = ApiKey.OFFSETS_FOR_LEADER_EPOCH
    topics: list[EpochQueryTopic]
    replica_id: int = -1

    def write(self, w: Writer) -> None:
        w.int32(self.replica_id)

        def write_partition(p: EpochQuery) -> None:
            w.int32(p.partition)
            w.int32(p.current_leader_epoch)
            w.int32(p.leader_epoch)

        w.topics(self.topics, write_partition)

    @classmethod
    def read(cls, r: Reader) -> OffsetsForLeaderEpochRequest:
        replica_id = r.int32()

        def read_partition() -> EpochQuery:
            partition, current = r.int32(), r.int32()
            return EpochQuery(partition, r.int32(), current)

        return cls(r.topics(EpochQueryTopic, read_partition), replica_id)


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


@dataclass(slots=True)
class OffsetsForLeaderEpochResponse:
    topics: list[EpochEndOffsetTopic]

    def write(self, w: Writer) -> None:
        def write_partition(p: EpochEndOffset) -> None:
            w.int32(p.partition)
            w.int16(p.error_code)
            w.string(p.error_message)
            w.int32(p.leader_epoch)
            w.int64(p.end_offset)

        w.topics(self.topics, write_partition)

    @classmethod
    def read(cls, r: Reader) -> OffsetsForLeaderEpochResponse:
        def read_partition() -> EpochEndOffset:
            return EpochEndOffset(r.int32(), r.int16(), r.string(), r.int32(), r.int64())

        return cls(r.topics(EpochEndOffsetTopic, read_partition))
