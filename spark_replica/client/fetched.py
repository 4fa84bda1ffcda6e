"""Fetched records, and cutting a fetch answer to the offsets a reader wants: pure, no I/O.

Brokers answer a fetch with whole stored batches, so the first batch may start before
the reader's position and the last may run past the end of its range; the records
outside are sliced off here, zero-copy. Every batch's CRC32C is checked before its
payload is trusted, as Kafka's `check.crcs` does by default.

A batch that starts past the position leaves a gap, and where the gap lies says what it
is. At or above the log start offset the broker answered with, the log holds no records
at those offsets: compaction removed them (a compacted log's offsets have gaps, as in
Kafka), and readers move past them as Kafka's consumers and Spark's Kafka source do.
Below the log start they were deleted (retention, DeleteRecords) while the reader was
behind: records it will never get, which a reader of an exact range reports as lost.

Transaction markers (control batches) are never records, and under read_committed the
batches of aborted transactions are dropped too (transaction_filter.py): the offsets
they hold are moved past as gaps, never reported lost.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow as pa

from spark_replica.records import (
    TIMESTAMP_TYPE_LOG_APPEND,
    decode_payload,
    iter_batches,
    verify_batch,
)
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.fetch import AbortedTransaction

from .transaction_filter import TransactionFilter

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
    log_start_offset: int = 0,
    check_crcs: bool = True,
    aborted: Iterable[AbortedTransaction] | None = None,
) -> Taken:
    """The records of a fetch answer in [position, end) (no end: all after position).

    `log_start_offset` is the one the broker answered with. A gap between the position
    and the next batch's first offset (or the end, when that batch starts past it) is
    skipped; its part below the log start is given as a RecordsLost piece, and the
    caller decides whether that matters. `aborted` is the answer's list of aborted
    transactions for a read_committed reader (None: read_uncommitted).
    """
    pieces: list[FetchedRecords | RecordsLost] = []
    transactions = TransactionFilter(aborted)
    for header, batch in iter_batches(data, allow_partial_tail=True):
        if header.next_offset > position and end is not None and header.base_offset >= end:
            position = _skip_gap(tp, position, end, log_start_offset, pieces)
            break
        if check_crcs:
            verify_batch(batch, header)
        kept = transactions.keeps(header, batch)
        if header.next_offset <= position:
            continue
        if header.base_offset > position:
            position = _skip_gap(tp, position, header.base_offset, log_start_offset, pieces)
        stop = header.next_offset if end is None else min(end, header.next_offset)
        if not kept:
            position = stop
            continue
        skip = position - header.base_offset
        records = decode_payload(batch)
        if skip > 0 or stop < header.next_offset:
            records = records.slice(skip, stop - position)
        timestamp_type = (
            LOG_APPEND_TIME if header.attributes & TIMESTAMP_TYPE_LOG_APPEND else CREATE_TIME
        )
        pieces.append(FetchedRecords(tp, position, records, timestamp_type))
        position = stop
    return Taken(pieces, position)


def _skip_gap(
    tp: TopicPartition,
    position: int,
    to: int,
    log_start_offset: int,
    pieces: list[FetchedRecords | RecordsLost],
) -> int:
    """Move past [position, to), which the answer holds no records for; what of it lies
    below the log start was deleted, and is added to `pieces` as lost."""
    deleted_end = min(to, log_start_offset)
    if position < deleted_end:
        reason = (
            f"offsets {position}..{deleted_end - 1} were deleted "
            f"(the log starts at {log_start_offset})"
        )
        pieces.append(RecordsLost(tp, position, deleted_end, reason))
    return max(position, to)
