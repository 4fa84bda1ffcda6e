"""One cleaning of one log, done off the log's owning thread: read, plan, write `.cleaned`.

A cleaning has three parts, and only the outer two touch the Log object:

1. on the log's owner (the broker's loop): `Log.cleaning_job` takes a consistent view of
   the cleanable segments (sealed, wholly below the high watermark, older than
   min.compaction.lag.ms) as base offsets and sizes;
2. here, on a cleaner thread: `clean` opens those files with descriptors of its own
   (sealed segments are never written again; retention or a truncation can only unlink
   them, which an open descriptor outlives), builds the offset map of the dirty part,
   plans each batch (cleaner_plan), one at a time so that memory holds one batch and
   the map, and writes each group of segments as one new segment under `.cleaned`
   names, fsynced. The log is not changed and readers see nothing;
3. on the log's owner again: `Log.swap_cleaned` checks that the replaced segments are
   still the log's, then swaps the files in (cleaner_swap, crash-safe) and the segment
   objects, between two of the loop's steps, so every read sees the old segments or the
   new ones. A cleaning whose segments went meanwhile is dropped (`discard`).

Transactional batches and their markers are copied whole and stay out of the offset map:
an aborted record must not stand for its key, and which of them may go is a decision of
its own (Kafka removes aborted data and markers once no reader can need them; here they
stay). The new segment takes over the aborted-transaction index entries of the old ones.

Segments are grouped as Kafka groups them: consecutive segments whose old sizes add up
to at most segment.bytes (and whose offsets fit a segment's int32 index) become one, so
a log that compacts well ends with fewer, fuller segments.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import pyarrow as pa

from brokerd.log.cleaner_plan import (
    BatchKeys,
    BatchPlan,
    OffsetMap,
    build_offset_map,
    plan_cleaning,
)
from brokerd.log.cleaner_swap import CLEANED_SUFFIX, SEGMENT_SUFFIXES
from brokerd.log.config import INT32_MAX, LogConfig
from brokerd.log.directory import fsync_directory
from brokerd.log.index import IndexInconsistentError
from brokerd.log.segment import LOG_SUFFIX, TXN_INDEX_SUFFIX, LogSegment, segment_file
from brokerd.log.transaction_index import AbortedTransaction, TransactionIndex
from spark_replica.errors import CorruptRecordError
from spark_replica.records import (
    HEADER_SIZE,
    NO_PRODUCER_ID,
    BatchHeader,
    decode_payload,
    encode_batch,
)

logger = logging.getLogger("brokerd.log")


@dataclass(frozen=True, slots=True)
class SegmentFile:
    """A segment as a cleaning sees it: its base offset, and its bytes when the job began."""

    base_offset: int
    size: int
    next_offset: int
    max_timestamp: int


@dataclass(frozen=True, slots=True)
class CleaningJob:
    """What one cleaning of one log works on, taken on the log's owning thread."""

    directory: Path
    config: LogConfig
    cleanable: tuple[SegmentFile, ...]
    later: tuple[SegmentFile, ...]  # the rest of the log: its producers' batches come later
    first_dirty: int
    tombstone_horizon: int
    truncations: int  # the log's count when the job was taken: a swap needs it unchanged

    @property
    def dirty_ratio(self) -> float:
        """The share of the cleanable bytes in segments holding records not yet cleaned."""
        total = sum(s.size for s in self.cleanable)
        dirty = sum(s.size for s in self.cleanable if s.next_offset > self.first_dirty)
        return dirty / total if total else 0.0


@dataclass(frozen=True, slots=True)
class CleanedGroup:
    """One new segment, at the base offset of the first of the segments it replaces."""

    new_base: int
    replaced: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class CleaningResult:
    groups: tuple[CleanedGroup, ...]
    first_dirty: int  # where the next cleaning of this log starts mapping
    bytes_read: int
    bytes_written: int
    truncations: int
    tombstones_kept: int  # in the cleaned segments: a later cleaning may be due to drop them
    mapped_keys: int  # distinct keys in the offset map: its share of the dedupe buffer


class IoThrottle:
    """Keeps a cleaner's reads and writes under log.cleaner.io.max.bytes.per.second."""

    def __init__(
        self,
        max_bytes_per_second: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._rate = max_bytes_per_second
        self._clock = clock
        self._sleep = sleep
        self._start = clock()
        self._bytes = 0

    def account(self, count: int) -> None:
        """Note `count` bytes moved, sleeping until the average rate is within the limit."""
        self._bytes += count
        ahead = self._bytes / self._rate - (self._clock() - self._start)
        if ahead > 0:
            self._sleep(ahead)


def group_segments(segments: Sequence[SegmentFile], max_bytes: int) -> list[list[SegmentFile]]:
    """Consecutive segments, grouped while their sizes fit `max_bytes` and offsets int32."""
    groups: list[list[SegmentFile]] = []
    for segment in segments:
        if groups:
            group = groups[-1]
            size = sum(s.size for s in group) + segment.size
            span = segment.next_offset - group[0].base_offset
            if size <= max_bytes and span <= INT32_MAX:
                group.append(segment)
                continue
        groups.append([segment])
    return groups


def read_batches(directory: Path, segment: SegmentFile) -> Iterator[tuple[BatchHeader, bytes]]:
    """The batches of a sealed segment file, up to its size when the job was taken."""
    fd = os.open(segment_file(directory, segment.base_offset, LOG_SUFFIX), os.O_RDONLY)
    try:
        position = 0
        while position < segment.size:
            header = BatchHeader.decode(os.pread(fd, HEADER_SIZE, position))
            batch = os.pread(fd, header.total_size, position)
            if len(batch) != header.total_size:
                raise CorruptRecordError(
                    f"segment {segment.base_offset}: batch at byte {position} is cut short"
                )
            yield header, batch
            position += header.total_size
    finally:
        os.close(fd)


def batch_keys(header: BatchHeader, records: pa.RecordBatch) -> BatchKeys:
    """The keys the plan looks up (Python objects: the offset map is a dict of them) and
    the tombstones (an array, never looked at one by one)."""
    return BatchKeys(
        header,
        records.column("key").to_pylist(),
        records.column("value").is_null().to_numpy(zero_copy_only=False),
    )


def rewritten(
    header: BatchHeader, batch: bytes, records: pa.RecordBatch, plan: BatchPlan
) -> list[bytes]:
    """The batches a plan leaves of one batch (`records` its decoded payload): itself
    untouched, or one per kept run."""
    if plan.whole:
        return [batch]
    return [
        bytes(
            encode_batch(
                records.slice(run.start, run.stop - run.start),
                base_offset=run.base_offset,
                leader_epoch=header.leader_epoch,
                attributes=header.attributes,
                producer_id=header.producer_id,
                producer_epoch=header.producer_epoch,
                base_sequence=run.base_sequence,
                compression=header.compression,
            )
        )
        for run in plan.runs
    ]


class StopFlag(Protocol):
    """What stops a cleaning: a thread's or a process's event."""

    def is_set(self) -> bool: ...


class CleaningStopped(Exception):
    """The broker is shutting down: the cleaning was abandoned between two segments."""


def clean(
    job: CleaningJob,
    max_keys: int,
    throttle: IoThrottle | None = None,
    stop: StopFlag | None = None,
) -> CleaningResult:
    """Write the cleaned segments of `job` under `.cleaned` names; the log is untouched.

    `stop` set makes it give up (CleaningStopped) before its next segment. On any error
    the `.cleaned` files written so far are removed before it propagates.
    """
    written: list[int] = []
    try:
        return _clean(job, max_keys, throttle, stop, written)
    except BaseException:
        discard(job.directory, written)
        raise


def _clean(
    job: CleaningJob,
    max_keys: int,
    throttle: IoThrottle | None,
    stop: StopFlag | None,
    written: list[int],
) -> CleaningResult:
    bytes_read = 0
    offset_map, last_batch_of_producer = _map_dirty_part(job, max_keys)
    bytes_read += sum(s.size for s in job.cleanable if s.next_offset > job.first_dirty)
    cleaned = [s for s in job.cleanable if s.base_offset < offset_map.end_offset]
    groups: list[CleanedGroup] = []
    bytes_written = 0
    tombstones_kept = 0
    for group in group_segments(cleaned, job.config.segment_bytes):
        new_base = group[0].base_offset
        segment = LogSegment.create(job.directory, new_base, job.config, suffix=CLEANED_SUFFIX)
        written.append(new_base)
        try:
            for old in group:
                if stop is not None and stop.is_set():
                    raise CleaningStopped(f"{job.directory}: cleaning stopped")
                for header, batch in read_batches(job.directory, old):
                    if header.is_transactional:
                        position = segment.size
                        segment.append(batch, [(0, header)], 0)
                        bytes_written += segment.size - position
                        continue
                    records = decode_payload(batch)
                    keys = batch_keys(header, records)
                    producer = header.producer_id
                    later = last_batch_of_producer.get(producer, -1) > header.base_offset
                    after = frozenset({producer}) if later else frozenset()
                    (plan,) = plan_cleaning([keys], offset_map, job.tombstone_horizon, after)
                    tombstones = np.asarray(keys.tombstones)
                    tombstones_kept += sum(
                        int(np.count_nonzero(tombstones[run.start : run.stop])) for run in plan.runs
                    )
                    for data in rewritten(header, batch, records, plan):
                        position = segment.size
                        segment.append(data, [(0, BatchHeader.decode(data))], 0)
                        bytes_written += segment.size - position
                if throttle is not None:
                    throttle.account(old.size)
                bytes_read += old.size
            segment.transaction_index.reset(aborted_transactions(job.directory, group))
            segment.seal()
        finally:
            segment.release()
        groups.append(CleanedGroup(new_base, tuple(s.base_offset for s in group)))
    fsync_directory(job.directory)
    return CleaningResult(
        tuple(groups),
        offset_map.end_offset,
        bytes_read,
        bytes_written,
        job.truncations,
        tombstones_kept,
        len(offset_map.last_offsets),
    )


def _map_dirty_part(job: CleaningJob, max_keys: int) -> tuple[OffsetMap, dict[int, int]]:
    """The offset map of the dirty part, and each producer's last batch offset in the log."""
    last_batch_of_producer: dict[int, int] = {}

    def dirty_batches() -> Iterator[BatchKeys]:
        for segment in job.cleanable:
            if segment.next_offset <= job.first_dirty:
                continue
            for header, batch in read_batches(job.directory, segment):
                if header.next_offset > job.first_dirty and not header.is_transactional:
                    yield batch_keys(header, decode_payload(batch))

    offset_map = build_offset_map(dirty_batches(), max_keys, job.first_dirty)
    for segment in (*job.cleanable, *job.later):
        for header in _headers(job.directory, segment):
            if header.producer_id != NO_PRODUCER_ID:
                last_batch_of_producer[header.producer_id] = header.base_offset
    return offset_map, last_batch_of_producer


def aborted_transactions(
    directory: Path, group: Sequence[SegmentFile]
) -> Iterator[AbortedTransaction]:
    """The entries of the aborted-transaction indexes of a group's old segments, which
    the new segment takes over: their markers are all kept."""
    for segment in group:
        path = segment_file(directory, segment.base_offset, TXN_INDEX_SUFFIX)
        try:
            yield from TransactionIndex.load(path).entries
        except IndexInconsistentError as exc:
            raise CorruptRecordError(f"segment {segment.base_offset}: {exc}") from exc


def _headers(directory: Path, segment: SegmentFile) -> Iterator[BatchHeader]:
    """The headers of a segment up to its size when the job began (active ones included)."""
    fd = os.open(segment_file(directory, segment.base_offset, LOG_SUFFIX), os.O_RDONLY)
    try:
        position = 0
        while position + HEADER_SIZE <= segment.size:
            header = BatchHeader.decode(os.pread(fd, HEADER_SIZE, position))
            yield header
            position += header.total_size
    finally:
        os.close(fd)


def discard(directory: Path, new_bases: Sequence[int]) -> None:
    """Remove the `.cleaned` files of a cleaning that will not be swapped in."""
    for base in new_bases:
        for suffix in SEGMENT_SUFFIXES:
            segment_file(directory, base, suffix + CLEANED_SUFFIX).unlink(missing_ok=True)
