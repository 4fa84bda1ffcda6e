"""One segment of a partition's log: a file of whole batches, its two sparse indexes and
its aborted-transaction index (transaction_index.py).

Only batch headers are ever parsed here, except when recovering the active segment
(CRC of every batch) and when searching by timestamp (the timestamps of one batch).
Positions and offsets are tracked in memory so appends never re-read the file.

Offsets grow from batch to batch but need not be contiguous: the log cleaner removes
records and keeps the offsets of the others, leaving gaps (as in Kafka). A batch
starting below where the previous one ended is corruption; one starting above it is a
gap.

The aborted-transaction index cannot be rebuilt from the segment alone (a transaction's
first offset may lie in an earlier segment), so a segment only says whether its index
can be trusted (`transaction_index_trusted`): after a recovery, or when the file is
missing or torn, an index is trusted again only if the segment holds no control batch
(it is then empty); otherwise the partition rebuilds it by replaying its producer state.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from brokerd.log.config import INT32_MAX, LogConfig
from brokerd.log.index import IndexInconsistentError, OffsetIndex, TimeIndex
from brokerd.log.transaction_index import TransactionIndex
from spark_replica.errors import CorruptRecordError
from spark_replica.file_region import FileRegion
from spark_replica.records import (
    HEADER_SIZE,
    BatchHeader,
    decode_payload,
    verify_batch,
)

logger = logging.getLogger("brokerd.log")

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
NO_TIMESTAMP = -1

BatchSpan = tuple[int, BatchHeader]
"""Position of a batch (in a file or a buffer) and its header."""


def segment_file(directory: Path, base_offset: int, suffix: str) -> Path:
    """Segment files are named by base offset, zero-padded so they sort by name."""
    return directory / f"{base_offset:020d}{suffix}"


class LogSegment:
    """The batches with offsets [base_offset, next_offset) of one log, in one file."""

    def __init__(
        self, directory: Path, base_offset: int, config: LogConfig, fd: int, suffix: str = ""
    ) -> None:
        self.base_offset = base_offset
        self.log_path = segment_file(directory, base_offset, LOG_SUFFIX + suffix)
        self.offset_index = OffsetIndex(segment_file(directory, base_offset, INDEX_SUFFIX + suffix))
        self.time_index = TimeIndex(
            segment_file(directory, base_offset, TIME_INDEX_SUFFIX + suffix)
        )
        self.transaction_index = TransactionIndex(
            segment_file(directory, base_offset, TXN_INDEX_SUFFIX + suffix)
        )
        self.transaction_index_trusted = True
        self.first_append_ms: int | None = None
        self._config = config
        self._fd = fd
        self._reset_tracking()

    def _reset_tracking(self) -> None:
        self.size = 0
        self.next_offset = self.base_offset
        self.max_timestamp = NO_TIMESTAMP
        self._offset_of_max_timestamp = self.base_offset
        self._bytes_since_offset_entry = 0
        self._bytes_since_time_entry = 0

    @classmethod
    def create(
        cls, directory: Path, base_offset: int, config: LogConfig, suffix: str = ""
    ) -> LogSegment:
        """A new empty segment; `suffix` follows each file name of a segment being built
        aside (the log cleaner's ".cleaned"), which the log does not see until renamed."""
        path = segment_file(directory, base_offset, LOG_SUFFIX + suffix)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        segment = cls(directory, base_offset, config, fd, suffix)
        segment.offset_index.reset()
        segment.time_index.reset()
        segment.transaction_index.reset()
        return segment

    @classmethod
    def load(
        cls, directory: Path, base_offset: int, config: LogConfig, *, now_ms: int
    ) -> LogSegment:
        """Open a sealed segment, trusting its indexes if they look consistent with the log."""
        fd = os.open(segment_file(directory, base_offset, LOG_SUFFIX), os.O_RDWR)
        segment = cls(directory, base_offset, config, fd)
        try:
            segment._load_indexes()
        except IndexInconsistentError as exc:
            logger.warning("%s: rebuilding indexes: %s", segment.log_path, exc)
            segment._rebuild(verify_crc=False)
            segment.seal()
        segment._load_transaction_index()
        segment.first_append_ms = now_ms if segment.size else None
        return segment

    @classmethod
    def recover(
        cls, directory: Path, base_offset: int, config: LogConfig, *, now_ms: int
    ) -> LogSegment:
        """Open the active segment, checking every batch and cutting off a bad tail.

        The roll clock restarts at `now_ms`: when the first batch was written is not
        recorded on disk.
        """
        fd = os.open(segment_file(directory, base_offset, LOG_SUFFIX), os.O_RDWR)
        segment = cls(directory, base_offset, config, fd)
        holds_control_batches = segment._rebuild(verify_crc=True)
        segment._distrust_transaction_index(holds_control_batches)
        segment.flush()
        segment.first_append_ms = now_ms if segment.size else None
        return segment

    def _load_transaction_index(self) -> None:
        """Read the sealed segment's aborted-transaction index, or decide it needs a rebuild."""
        try:
            self.transaction_index = TransactionIndex.load(self.transaction_index.path)
        except IndexInconsistentError as exc:
            holds_control_batches = any(header.is_control for _, header in self.iter_headers(0))
            if holds_control_batches:
                logger.warning("%s: aborted-transaction index to rebuild: %s", self.log_path, exc)
            self._distrust_transaction_index(holds_control_batches)

    def _distrust_transaction_index(self, holds_control_batches: bool) -> None:
        """The index may not match the log. Without markers here it is empty; with them it
        is to be rebuilt, and the file is left as found until then: written empty, a
        crash before the rebuild would leave an index that looks whole."""
        if holds_control_batches:
            self.transaction_index = TransactionIndex(self.transaction_index.path)
        else:
            self.transaction_index.reset()
        self.transaction_index_trusted = not holds_control_batches

    def _load_indexes(self) -> None:
        self.offset_index = OffsetIndex.load(self.offset_index.path)
        self.time_index = TimeIndex.load(self.time_index.path)
        self._check_offset_index(os.fstat(self._fd).st_size)
        self._check_time_index()

    def _check_offset_index(self, file_size: int) -> None:
        """Walk the headers after the last entry: they must continue it and end the file."""
        last_entry = self.offset_index.last()
        relative_offset, position = last_entry if last_entry else (0, 0)
        if last_entry and (
            min(self.offset_index.keys[0], self.offset_index.values[0]) < 0 or position >= file_size
        ):
            raise IndexInconsistentError(f"offset index points outside the {file_size}-byte log")
        self.next_offset = self.base_offset + relative_offset
        try:
            while position < file_size:
                header = self._checked_header_at(position, file_size, verify_crc=False)
                self.next_offset = header.next_offset
                position += header.total_size
        except CorruptRecordError as exc:
            raise IndexInconsistentError(f"log does not match its offset index: {exc}") from exc
        self.size = file_size

    def _check_time_index(self) -> None:
        """A sealed segment's time index must end at its largest timestamp, so it is needed."""
        last_entry = self.time_index.last()
        if last_entry is None:
            if self.size:
                raise IndexInconsistentError("time index is empty but the log is not")
            return
        if self.time_index.values[0] < 0 or last_entry[1] >= self.next_offset - self.base_offset:
            raise IndexInconsistentError("time index points outside the log's offsets")
        self.max_timestamp, relative_offset = last_entry
        self._offset_of_max_timestamp = self.base_offset + relative_offset

    def _checked_header_at(self, position: int, file_size: int, *, verify_crc: bool) -> BatchHeader:
        """The header of the batch at `position`, if it is whole and follows the previous one
        (directly, or after a gap the cleaner left)."""
        header = BatchHeader.decode(os.pread(self._fd, HEADER_SIZE, position))
        if header.base_offset < self.next_offset:
            raise CorruptRecordError(
                f"batch at byte {position} starts at offset {header.base_offset}, "
                f"expected {self.next_offset} or more"
            )
        if position + header.total_size > file_size:
            raise CorruptRecordError(
                f"batch at byte {position} declares {header.total_size} bytes, "
                f"only {file_size - position} present"
            )
        if verify_crc:
            verify_batch(os.pread(self._fd, header.total_size, position), header)
        return header

    def _rebuild(self, *, verify_crc: bool) -> bool:
        """Scan the whole file to rebuild the indexes, cutting it at the first bad batch;
        True if a control batch is left in it."""
        self.offset_index.reset()
        self.time_index.reset()
        self._reset_tracking()
        file_size = os.fstat(self._fd).st_size
        position = 0
        holds_control_batches = False
        try:
            while position < file_size:
                header = self._checked_header_at(position, file_size, verify_crc=verify_crc)
                self._track_batch(position, header)
                holds_control_batches = holds_control_batches or header.is_control
                position += header.total_size
        except CorruptRecordError as exc:
            logger.warning(
                "%s: cutting %d bytes from byte %d (offset %d on): %s",
                self.log_path,
                file_size - position,
                position,
                self.next_offset,
                exc,
            )
            os.ftruncate(self._fd, position)
            os.fsync(self._fd)
        return holds_control_batches

    def _track_batch(self, position: int, header: BatchHeader) -> None:
        """Account for a batch now at `position` of the file: indexes, size, offsets, time."""
        relative_offset = header.base_offset - self.base_offset
        interval = self._config.index_interval_bytes
        if self._bytes_since_offset_entry > interval:
            self.offset_index.append(relative_offset, position)
            self._bytes_since_offset_entry = 0
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self._offset_of_max_timestamp = header.base_offset
            if self._bytes_since_time_entry > interval:
                self.time_index.append(header.max_timestamp, relative_offset)
                self._bytes_since_time_entry = 0
        self._bytes_since_offset_entry += header.total_size
        self._bytes_since_time_entry += header.total_size
        self.size = position + header.total_size
        self.next_offset = header.next_offset

    def should_roll(self, append_bytes: int, last_offset: int, now_ms: int) -> bool:
        """Whether an append of this size and last offset needs a fresh segment first."""
        if not self.size:
            return False
        too_old = (
            self.first_append_ms is not None
            and now_ms - self.first_append_ms >= self._config.segment_ms
        )
        return (
            self.size + append_bytes > self._config.segment_bytes
            or too_old
            or last_offset - self.base_offset > INT32_MAX
        )

    def append(
        self, data: bytes | bytearray | memoryview, spans: Sequence[BatchSpan], now_ms: int
    ) -> None:
        """Write validated batches at the end; `spans` gives their positions within `data`.

        On a write error the file is cut back, so a failed append leaves no partial batch.
        """
        start = self.size
        view = memoryview(data)
        written = 0
        try:
            while written < len(view):
                written += os.pwrite(self._fd, view[written:], start + written)
        except OSError:
            os.ftruncate(self._fd, start)
            raise
        for position, header in spans:
            self._track_batch(start + position, header)
        if self.first_append_ms is None:
            self.first_append_ms = now_ms

    def update_config(self, config: LogConfig) -> None:
        """Use `config` for the next roll check and index spacing (a live topic change)."""
        self._config = config

    def iter_headers(self, position: int) -> Iterator[BatchSpan]:
        """The batches from `position` (a batch boundary) to the end, headers only."""
        while position < self.size:
            header = BatchHeader.decode(os.pread(self._fd, HEADER_SIZE, position))
            yield position, header
            position += header.total_size

    def locate(self, offset: int) -> BatchSpan | None:
        """The first batch holding `offset` or, if none does, the first one after it."""
        start = self.offset_index.position_at_or_before(offset - self.base_offset)
        for position, header in self.iter_headers(start):
            if header.next_offset > offset:
                return position, header
        return None

    def batch_range(
        self, first: BatchSpan, max_bytes: int, max_offset: int, *, whole_first: bool
    ) -> tuple[int, int]:
        """The file range [start, end) of whole batches from `first` on, within `max_bytes`
        and below `max_offset` (start == end: none).

        The range is worked out from the index and headers, so the file is then read (or
        sent) once, exactly, with no copy to trim it.
        """
        position, header = first
        end = position + header.total_size
        budget_end = position + max_bytes
        if header.last_offset >= max_offset or (end > budget_end and not whole_first):
            return position, position
        return position, self._extend_range(end, budget_end, max_offset)

    def read_range(self, start: int, end: int) -> bytes:
        return os.pread(self._fd, end - start, start)

    def region(self, start: int, end: int) -> FileRegion:
        """The range as a FileRegion, to send as stored; it outlives this segment's file."""
        return FileRegion(self._fd, start, end - start)

    def _extend_range(self, end: int, budget_end: int, max_offset: int) -> int:
        """How far whole batches from `end` on reach, within `budget_end` and below `max_offset`.

        The index lets the walk start at the furthest known batch boundary that is surely
        inside both limits, so only a few headers are read.
        """
        jump = self.offset_index.furthest_position_within(max_offset - self.base_offset, budget_end)
        if jump is not None and jump > end:
            end = jump
        for position, header in self.iter_headers(end):
            if position + header.total_size > budget_end or header.last_offset >= max_offset:
                break
            end = position + header.total_size
        return end

    def find_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """The first record with a timestamp >= `timestamp_ms`, as (offset, timestamp)."""
        if self.max_timestamp < timestamp_ms:
            return None
        start_offset = self.time_index.start_offset_for(timestamp_ms)
        start = self.offset_index.position_at_or_before(start_offset)
        for position, header in self.iter_headers(start):
            if header.max_timestamp < timestamp_ms:
                continue
            batch = os.pread(self._fd, header.total_size, position)
            timestamps = decode_payload(batch).column("timestamp").cast(pa.int64())
            index = pc.index(pc.greater_equal(timestamps, timestamp_ms), True).as_py()
            if index >= 0:
                return header.base_offset + index, timestamps[index].as_py()
        return None

    def truncate_to(self, offset: int) -> None:
        """Drop the batch holding `offset` (or the first after it) and all that follow."""
        located = self.locate(offset)
        if located is None:
            return
        position, header = located
        os.ftruncate(self._fd, position)
        self.offset_index.truncate_from_position(position)
        self.time_index.truncate_from_offset(header.base_offset - self.base_offset)
        self.transaction_index.truncate_from(header.base_offset)
        self.size = position
        self.next_offset = header.base_offset
        self._recompute_max_timestamp()
        if not self.size:
            self.first_append_ms = None

    def _recompute_max_timestamp(self) -> None:
        """Find the largest timestamp left, scanning only batches after the last time entry."""
        last_time_entry = self.time_index.last()
        if last_time_entry is None:
            self.max_timestamp, relative_offset = NO_TIMESTAMP, 0
        else:
            self.max_timestamp, relative_offset = last_time_entry
        self._offset_of_max_timestamp = self.base_offset + relative_offset
        scan_from = self.offset_index.position_at_or_before(relative_offset)
        for _, header in self.iter_headers(scan_from):
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp = header.max_timestamp
                self._offset_of_max_timestamp = header.base_offset
        last_offset_entry = self.offset_index.last()
        self._bytes_since_offset_entry = self.size - (
            last_offset_entry[1] if last_offset_entry else 0
        )
        self._bytes_since_time_entry = self.size - scan_from

    def seal(self) -> None:
        """Make the segment read-only and durable: its time index must end at its max."""
        last_time_entry = self.time_index.last()
        if self.size and (last_time_entry is None or last_time_entry[0] < self.max_timestamp):
            relative_offset = self._offset_of_max_timestamp - self.base_offset
            self.time_index.append(self.max_timestamp, relative_offset)
        self.flush()

    def flush(self) -> None:
        os.fsync(self._fd)
        self.offset_index.flush()
        self.time_index.flush()
        self.transaction_index.flush()

    def close(self) -> None:
        self.flush()
        os.close(self._fd)

    def release(self) -> None:
        """Close the file without flushing: it is complete, or about to be replaced."""
        os.close(self._fd)

    def delete(self) -> None:
        os.close(self._fd)
        indexes = (self.offset_index, self.time_index, self.transaction_index)
        for path in (*(index.path for index in indexes), self.log_path):
            path.unlink(missing_ok=True)
