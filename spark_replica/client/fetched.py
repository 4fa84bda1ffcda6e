"""Fetched records, and cutting a fetch answer to the offsets a reader wants: pure, no I/O.

Brokers answer a fetch with whole stored batches, so the first batch may start before
the reader's position and the last may run past the end of its range; the records
outside are sliced off here, zero-copy. Every batch's CRC32C is checked before its
payload is trusted, as Kafka's `check.crcs` does by default. A batch that starts past
the position leaves a gap: records a reader of an exact range expected and will never
get, which it reports as lost.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from spark_replica.records import (
    TIMESTAMP_TYPE_LOG_APPEND,
    decode_payload,
    iter_batches,
    verify_batch,
)
from spark_replica.topics import TopicPartition

CREATE_TIME = 0
LOG_APPEND_TIME = 1


@dataclass(frozen=True, slots=True)
class FetchedRecords:
    """Records of one partition, consecutive from `first_offset`, from one stored batch
    or a part of one. `timestamp_type` says what their timestamps are: CREATE_TIME (the
    producer's) or LOG_APPEND_TIME (the broker's, by topic config)."""

    tp: TopicPartition
    first_offset: int
    records: pa.RecordBatch
    timestamp_type: int = CREATE_TIME

    @property
    def next_offset(self) -> int:
        return self.first_offset + self.records.num_rows


@dataclass(frozen=True, slots=True)
class RecordsLost:
    """Offsets [start, end) of `tp` that a range reader will never get, and why."""

    tp: TopicPartition
    start: int
    end: int
    reason: str

    def __str__(self) -> str:
        return f"{self.tp}: {self.reason}"


@dataclass(frozen=True, slots=True)
class Taken:
    """What a fetch answer held for a reader at some position."""

    pieces: list[FetchedRecords | RecordsLost]  # in offset order
    position: int  # the next offset to read


def take_records(
    tp: TopicPartition,
    data: bytes | memoryview,
    position: int,
    end: int | None = None,
    *,
    check_crcs: bool = True,
) -> Taken:
    """The records of a fetch answer in [position, end) (no end: all after position).

    A gap between the position and the next batch's first offset is given as a
    RecordsLost piece; the caller decides whether that matters.
    """
    pieces: list[FetchedRecords | RecordsLost] = []
    for header, batch in iter_batches(data, allow_partial_tail=True):
        if header.next_offset <= position:
            continue
        if end is not None and header.base_offset >= end:
            break
        if header.base_offset > position:
            missing = f"offsets {position}..{header.base_offset - 1} are missing"
            pieces.append(RecordsLost(tp, position, header.base_offset, missing))
            position = header.base_offset
        if check_crcs:
            verify_batch(batch, header)
        skip = position - header.base_offset
        stop = header.next_offset if end is None else min(end, header.next_offset)
        records = decode_payload(batch)
        if skip > 0 or stop < header.next_offset:
            records = records.slice(skip, stop - position)
        timestamp_type = (
            LOG_APPEND_TIME if header.attributes & TIMESTAMP_TYPE_LOG_APPEND else CREATE_TIME
        )
        pieces.append(FetchedRecords(tp, position, records, timestamp_type))
        position = stop
    return Taken(pieces, position)
