"""Fetch: read record batches below the high watermark, with long polling.

Request: replica_id int32 (-1 for consumers, the broker id for a follower), max_wait_ms,
min_bytes, max_bytes (whole response), then per topic per partition: the partition, the
leader epoch the fetcher believes current (-1 = don't check), the fetch offset and the
partition's max bytes.

Response: per topic per partition: error code and message, high watermark, log start
offset, log end offset, and the records (whole batches; the first may start before the
fetch offset, and the client skips the records below it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spark_replica.wire.native.apis import ApiKey
from spark_replica.wire.primitives import Reader, Writer

CONSUMER_REPLICA_ID = -1
NO_LEADER_EPOCH = -1


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


@dataclass(slots=True)
class FetchRequest:
    API_KEY = ApiKey.FETCH
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    topics: list[FetchTopic]
    replica_id: int = CONSUMER_REPLICA_ID

    def write(self, w: Writer) -> None:
        w.int32(self.replica_id)
        w.int32(self.max_wait_ms)
        w.int32(self.min_bytes)
        w.int32(self.max_bytes)

        def write_partition(p: FetchPartition) -> None:
            w.int32(p.partition)
            w.int32(p.current_leader_epoch)
            w.int64(p.fetch_offset)
            w.int32(p.max_bytes)

        w.topics(self.topics, write_partition)

    @classmethod
    def read(cls, r: Reader) -> FetchRequest:
        replica_id = r.int32()
        max_wait_ms = r.int32()
        min_bytes = r.int32()
        max_bytes = r.int32()

        def read_partition() -> FetchPartition:
            partition = r.int32()
            epoch = r.int32()
            return FetchPartition(partition, r.int64(), r.int32(), epoch)

        topics = r.topics(FetchTopic, read_partition)
        return cls(max_wait_ms, min_bytes, max_bytes, topics, replica_id)


@dataclass(slots=True)
class FetchPartitionResult:
    partition: int
    error_code: int = 0
    error_message: str | None = None
    high_watermark: int = -1
    log_start_offset: int = -1
    log_end_offset: int = -1
    records: bytes | memoryview = b""


@dataclass(slots=True)
class FetchTopicResult:
    topic: str
    partitions: list[FetchPartitionResult] = field(default_factory=list)


@dataclass(slots=True)
class FetchResponse:
    topics: list[FetchTopicResult]

    def write(self, w: Writer) -> None:
        def write_partition(p: FetchPartitionResult) -> None:
            w.int32(p.partition)
            w.int16(p.error_code)
            w.string(p.error_message)
            w.int64(p.high_watermark)
            w.int64(p.log_start_offset)
            w.int64(p.log_end_offset)
            w.bytes_(p.records)

        w.topics(self.topics, write_partition)

    @classmethod
    def read(cls, r: Reader) -> FetchResponse:
        def read_partition() -> FetchPartitionResult:
            return FetchPartitionResult(
                r.int32(),
                r.int16(),
                r.string(),
                r.int64(),
                r.int64(),
                r.int64(),
                r.records() or b"",
            )

        return cls(r.topics(FetchTopicResult, read_partition))
