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
from spark_replica.wire.primitives import Reader, Writer

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


@dataclass(slots=True)
class ProduceRequest:
    API_KEY = ApiKey.PRODUCE
    acks: int
    timeout_ms: int
    topics: list[ProduceTopic]

    def write(self, w: Writer) -> None:
        w.int16(self.acks)
        w.int32(self.timeout_ms)

        def write_partition(p: ProducePartition) -> None:
            w.int32(p.partition)
            w.bytes_(p.records)

        w.topics(self.topics, write_partition)

    @classmethod
    def read(cls, r: Reader) -> ProduceRequest:
        acks = r.int16()
        timeout_ms = r.int32()

        def read_partition() -> ProducePartition:
            partition = r.int32()
            return ProducePartition(partition, r.records() or b"")

        return cls(acks, timeout_ms, r.topics(ProduceTopic, read_partition))


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


@dataclass(slots=True)
class ProduceResponse:
    topics: list[ProduceTopicResult]

    def write(self, w: Writer) -> None:
        def write_partition(p: ProducePartitionResult) -> None:
            w.int32(p.partition)
            w.int16(p.error_code)
            w.string(p.error_message)
            w.int64(p.base_offset)
            w.int64(p.log_start_offset)

        w.topics(self.topics, write_partition)

    @classmethod
    def read(cls, r: Reader) -> ProduceResponse:
        def read_partition() -> ProducePartitionResult:
            return ProducePartitionResult(r.int32(), r.int16(), r.string(), r.int64(), r.int64())

        return cls(r.topics(ProduceTopicResult, read_partition))
