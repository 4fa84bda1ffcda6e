"""Collecting a producer's records into one open batch per partition: pure logic, no I/O.

A request per record would cost a round trip, a batch header and an Arrow schema per
record; like Kafka's RecordAccumulator this holds each partition's records in an open
batch until it is full (`batch_bytes` of estimated payload, or `batch_records` records)
or has been open for `linger_s`, trading that much latency for larger requests. Sealed
batches are handed to the caller at once and never reopened, so records leave in the
order they were added.

Sizes are estimates of the uncompressed Arrow payload (value, key and header bytes plus
a fixed per-record overhead for offsets, timestamp and validity bits): with compression
the batches on the wire are smaller than `batch_bytes`. A record larger than
`batch_bytes` on its own makes a batch of one.

The caller owns the clock (times are passed in, in seconds of any monotonic clock) and
the timer: `next_expiry` says when to call `seal_expired`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from spark_replica.errors import ConfigError
from spark_replica.topics import TopicPartition

R = TypeVar("R")

# Arrow bytes per record besides its key, value and headers: two int32 offsets, an int64
# timestamp, validity bits and a headers list offset. An upper bound, as in benchmarks.
RECORD_OVERHEAD_BYTES = 17


def estimate_record_bytes(
    value: bytes | None,
    key: bytes | None,
    headers: Sequence[tuple[str, bytes | None]] | None,
) -> int:
    """The bytes one record adds to an uncompressed payload, roughly."""
    size = RECORD_OVERHEAD_BYTES + len(value or b"") + len(key or b"")
    for name, header_value in headers or ():
        size += 8 + len(name) + len(header_value or b"")
    return size


@dataclass(slots=True)
class OpenBatch(Generic[R]):
    """Records waiting for their partition's batch to fill or to linger out."""

    opened_at: float
    records: list[R] = field(default_factory=list)
    size_bytes: int = 0


class RecordAccumulator(Generic[R]):
    """One open batch per partition; sealing hands its records back, oldest first."""

    def __init__(self, batch_bytes: int, batch_records: int, linger_s: float) -> None:
        if batch_bytes <= 0 or batch_records <= 0:
            raise ConfigError(
                f"batch_size and batch_records must be positive, not {batch_bytes} and "
                f"{batch_records}"
            )
        if linger_s < 0:
            raise ConfigError(f"linger_ms must be 0 or more, not {linger_s * 1000:g}")
        self.batch_bytes = batch_bytes
        self.batch_records = batch_records
        self.linger_s = linger_s
        self._open: dict[TopicPartition, OpenBatch[R]] = {}

    def __len__(self) -> int:
        """How many partitions have an open batch."""
        return len(self._open)

    def append(self, tp: TopicPartition, record: R, size_bytes: int, now: float) -> list[list[R]]:
        """Add `record` to `tp`'s open batch; return the batches this sealed, in order.

        The open batch is sealed first if `record` would not fit in it, and the new one
        is sealed at once if it is full with `record`.
        """
        sealed: list[list[R]] = []
        current = self._open.get(tp)
        if current is not None and current.size_bytes + size_bytes > self.batch_bytes:
            sealed.append(self._open.pop(tp).records)
            current = None
        if current is None:
            current = self._open[tp] = OpenBatch(opened_at=now)
        current.records.append(record)
        current.size_bytes += size_bytes
        if len(current.records) >= self.batch_records or current.size_bytes >= self.batch_bytes:
            sealed.append(self._open.pop(tp).records)
        return sealed

    def open_partitions(self) -> list[TopicPartition]:
        return list(self._open)

    def seal(self, tp: TopicPartition) -> list[R] | None:
        """Seal `tp`'s open batch now (flush, or a pre-built batch must follow it)."""
        batch = self._open.pop(tp, None)
        return None if batch is None else batch.records

    def seal_all(self) -> list[tuple[TopicPartition, list[R]]]:
        sealed = [(tp, batch.records) for tp, batch in self._open.items()]
        self._open.clear()
        return sealed

    def seal_expired(self, now: float) -> list[tuple[TopicPartition, list[R]]]:
        """Seal every open batch that has lingered `linger_s` by `now`."""
        expired = [tp for tp, batch in self._open.items() if batch.opened_at + self.linger_s <= now]
        return [(tp, self._open.pop(tp).records) for tp in expired]

    def next_expiry(self) -> float | None:
        """When the oldest open batch will have lingered enough; None if none is open."""
        if not self._open:
            return None
        return min(batch.opened_at for batch in self._open.values()) + self.linger_s
