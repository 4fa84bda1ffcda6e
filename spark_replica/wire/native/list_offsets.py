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
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spark_replica.wire.native.apis import ApiKey
from spark_replica.wire.primitives import Reader, Writer

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
# replica_id of a debugging client (describe): any replica answers, LATEST is its LEO.
DEBUG_REPLICA_ID = -2


@dataclass(slots=True)
class ListOffsetsPartition:
    partition: int
    timestamp: int
    current_leader_epoch: int = -1


@dataclass(slots=True)
class ListOffsetsTopic:
    topic: str
    partitions: list[ListOffsetsPartition]


@dataclass(slots=True)
class ListOffsetsRequest:
    API_KEY = ApiKey.LIST_OFFSETS
    topics: list[ListOffsetsTopic]
    replica_id: int = -1

    def write(self, w: Writer) -> None:
        w.int32(self.replica_id)

        def write_partition(p: ListOffsetsPartition) -> None:
            w.int32(p.partition)
            w.int32(p.current_leader_epoch)
            w.int64(p.timestamp)

        w.topics(self.topics, write_partition)

    @classmethod
    def read(cls, r: Reader) -> ListOffsetsRequest:
        replica_id = r.int32()

        def read_partition() -> ListOffsetsPartition:
            partition = r.int32()
            epoch = r.int32()
            return ListOffsetsPartition(partition, r.int64(), epoch)

        return cls(r.topics(ListOffsetsTopic, read_partition), replica_id)


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


@dataclass(slots=True)
class ListOffsetsResponse:
    topics: list[ListOffsetsTopicResult]

    def write(self, w: Writer) -> None:
        def write_partition(p: ListOffsetsPartitionResult) -> None:
            w.int32(p.partition)
            w.int16(p.error_code)
            w.string(p.error_message)
            w.int64(p.timestamp)
            w.int64(p.offset)

        w.topics(self.topics, write_partition)

    @classmethod
    def read(cls, r: Reader) -> ListOffsetsResponse:
        def read_partition() -> ListOffsetsPartitionResult:
            return ListOffsetsPartitionResult(
                r.int32(), r.int16(), r.string(), r.int64(), r.int64()
            )

        return cls(r.topics(ListOffsetsTopicResult, read_partition))
