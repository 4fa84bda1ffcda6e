"""The log of one partition: an ordered list of segments, the last one taking appends.

Concurrency: a Log is owned by one thread, the broker's asyncio loop, and takes no
locks. Callers must not share one between threads, nor use it after close().

Durability: appended bytes reach the OS at once and the disk per the flush policy. A
crash can lose only the unflushed tail of the active segment; ``Log.open`` checks that
segment batch by batch and cuts it at the first torn or corrupt batch. Operations that
touch several segments (truncation, retention) delete files from the end that keeps
the log contiguous, so a crash in the middle leaves a shorter but valid log.

Compaction (cleaner.py) rewrites sealed segments on a cleaner thread, from files it
opens itself, and only the swap of the cleaned segments for the old ones happens here,
on the owner's thread, in `swap_cleaned`: readers see the old segments or the new.
Offsets then have gaps, which every read below already steps over.

The leader epoch cache follows the log: appends add epochs to it in memory, and they
reach its file with the log's flushes and rolls; truncation and retention write it at
once. ``Log.open`` reconciles a file left stale by a crash with the recovered segments.

Each segment's aborted-transaction index follows its segment (created, truncated,
deleted and swapped with it); the entries are appended by the log's owner, which knows
the transactions (`append_aborted_transaction`), and so are the rebuilt indexes of
segments recovered with markers in them (`rebuild_transaction_indexes`).

Producer-state snapshots (producer_snapshots.py) follow it too: the log writes one from
the source its owner installs at every roll and at close, and deletes the ones that no
longer describe it after retention, truncation and recovery.

The log start offset is the first segment's base offset, or later when a DeleteRecords
request moved it into a segment (start_offset.py records that). Reads below it are
refused although the segment still holds those batches, as in Kafka.
"""

from __future__ import annotations

import dataclasses
import errno
import logging
import shutil
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from brokerd.log.cleaner import CleaningJob, CleaningResult, SegmentFile, discard
from brokerd.log.cleaner_swap import cleaned_files_exist, complete_interrupted_swaps, swap_in
from brokerd.log.config import UNLIMITED, LogConfig
from brokerd.log.directory import fsync_directory, prepare_directory
from brokerd.log.epoch_cache import LEADER_EPOCH_CHECKPOINT_FILE, LeaderEpochCache
from brokerd.log.producer_snapshots import (
    SnapshotSource,
    delete_all_snapshots,
    delete_snapshots_outside,
    write_snapshot,
)
from brokerd.log.segment import BatchSpan, LogSegment
from brokerd.log.start_offset import read_log_start_offset, write_log_start_offset
from brokerd.log.transaction_index import AbortedTransaction
from spark_replica.errors import (
    InvalidFetchSizeError,
    InvalidRecordError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
)
from spark_replica.file_region import FileRegion
from spark_replica.records import (
    BatchHeader,
    ControlMarker,
    decode_control_marker,
    iter_batches,
    set_base_offset,
    set_leader_epoch,
    verify_batch,
)

logger = logging.getLogger("brokerd.log")


@dataclass(frozen=True, slots=True)
class AppendInfo:
    """What one append wrote: the offsets it took and the size it added."""

    first_offset: int
    last_offset: int
    record_count: int
    max_timestamp: int
    bytes_appended: int


class Log:
    """The append-only, truncatable sequence of batches of one partition replica."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        segments: list[LogSegment],
        epoch_cache: LeaderEpochCache,
        now_ms: int,
        requested_start_offset: int = 0,
    ) -> None:
        self._directory = directory
        self._config = config
        self._segments = segments
        self._requested_start_offset = requested_start_offset
        self._epoch_cache = epoch_cache
        self._unflushed_records = 0
        self._last_flush_ms = now_ms
        self._closed = False
        self._snapshot_source: SnapshotSource | None = None
        # Bumped by every truncation, so that a cleaning planned before one is not swapped in.
        self._truncations = 0

    @classmethod
    def open(cls, directory: Path, config: LogConfig, *, now_ms: int) -> Log:
        """Open (or create) the log in `directory`, recovering the active segment and epochs."""
        directory.mkdir(parents=True, exist_ok=True)
        complete_interrupted_swaps(directory)
        base_offsets = prepare_directory(directory)
        segments = [
            LogSegment.load(directory, base, config, now_ms=now_ms) for base in base_offsets[:-1]
        ]
        if base_offsets:
            segments.append(LogSegment.recover(directory, base_offsets[-1], config, now_ms=now_ms))
        else:
            segments.append(LogSegment.create(directory, 0, config))
            fsync_directory(directory)
        requested_start = min(read_log_start_offset(directory), segments[-1].next_offset)
        _delete_segments_below(segments, requested_start)
        log_start = max(requested_start, segments[0].base_offset)
        delete_snapshots_outside(directory, log_start, segments[-1].next_offset)
        epoch_cache = _open_epoch_cache(directory, segments, log_start)
        return cls(directory, config, segments, epoch_cache, now_ms, requested_start)

    def set_producer_snapshot_source(self, source: SnapshotSource) -> None:
        """Write what `source` returns as the producer-state snapshot at rolls and at close."""
        self._snapshot_source = source

    def _write_producer_snapshot(self, *, required: bool) -> None:
        if self._snapshot_source is None:
            return
        lines = self._snapshot_source(required)
        if lines is not None:
            write_snapshot(self._directory, self.log_end_offset, lines)

    def update_config(self, config: LogConfig) -> None:
        """Use `config` from now on: a topic's config was altered while the log is open.

        Nothing is rewritten or rolled here. The next decision reads the new values: the
        next append's roll check (segment.bytes, segment.ms, measured against the active
        segment as it already is), the next retention pass and the next flush check.
        Segments keep their own reference for the roll check and index spacing, so every
        open segment is pointed at the new config too; segments already larger than a
        smaller segment.bytes stay as they are, as in Kafka.
        """
        self._config = config
        for segment in self._segments:
            segment.update_config(config)

    def iter_producer_batches(
        self, from_offset: int = 0
    ) -> Iterator[tuple[BatchHeader, ControlMarker | None]]:
        """The batch headers from `from_offset` on, oldest first, each control batch's with
        its marker: what the producer state is built from. Only control batches are read
        past their header.

        `from_offset` is a batch boundary (a roll or the log end at some moment), as
        snapshot offsets are; batches starting before it are skipped.
        """
        segments = self._segments[self._segment_index(from_offset) :]
        for index, segment in enumerate(segments):
            position = 0
            if index == 0 and from_offset > segment.base_offset:
                located = segment.locate(from_offset)  # the offset index finds it
                if located is None:
                    continue
                position = located[0]
            for batch_position, header in segment.iter_headers(position):
                if header.base_offset < from_offset:
                    continue
                marker = None
                if header.is_control:
                    end = batch_position + header.total_size
                    marker = decode_control_marker(segment.read_range(batch_position, end))
                yield header, marker

    @property
    def transaction_index_rebuild_from(self) -> int | None:
        """The base offset of the first segment whose aborted-transaction index must be
        rebuilt (it holds markers and was recovered, or its index file was lost), or
        None when every index can be trusted; see rebuild_transaction_indexes."""
        for segment in self._segments:
            if not segment.transaction_index_trusted:
                return segment.base_offset
        return None

    def rebuild_transaction_indexes(self, aborted: Iterable[AbortedTransaction]) -> None:
        """Rewrite each untrusted aborted-transaction index from `aborted`: the aborted
        transactions of a replay of the producer state over (at least) those segments."""
        by_segment: dict[int, list[AbortedTransaction]] = {}
        for entry in aborted:
            by_segment.setdefault(self._segment_index(entry.last_offset), []).append(entry)
        for index, segment in enumerate(self._segments):
            if not segment.transaction_index_trusted:
                segment.transaction_index.reset(by_segment.get(index, []))
                segment.transaction_index.flush()
                segment.transaction_index_trusted = True
                logger.info(
                    "%s: rebuilt the aborted-transaction index of segment %d (%d entries)",
                    self._directory,
                    segment.base_offset,
                    len(segment.transaction_index.entries),
                )

    def append_aborted_transaction(self, entry: AbortedTransaction) -> None:
        """Index a transaction whose ABORT marker was just appended at `entry.last_offset`.

        A follower's copy can roll past the marker's segment before the marker is
        indexed; that segment was made durable when sealed, so its index is made durable
        now: only the active segment's index is rebuilt after a crash.
        """
        segment = self._segments[self._segment_index(entry.last_offset)]
        segment.transaction_index.append(entry)
        if segment is not self._active:
            segment.transaction_index.flush()

    def aborted_transactions(self, start_offset: int, end_offset: int) -> list[AbortedTransaction]:
        """The aborted transactions with records in [start_offset, end_offset): what a
        read_committed fetch of that range lists, for its reader to drop their records.

        A transaction's entry sits with its marker, which may be in a later segment than
        its records, so the search goes on past the range until an entry shows that every
        transaction beginning below `end_offset` had ended (Kafka's search, too).
        """
        found: list[AbortedTransaction] = []
        for segment in self._segments[self._segment_index(start_offset) :]:
            entries, complete = segment.transaction_index.collect(start_offset, end_offset)
            found += entries
            if complete:
                break
        return found

    @property
    def directory(self) -> Path:
        return self._directory

    @property
    def config(self) -> LogConfig:
        return self._config

    @property
    def log_start_offset(self) -> int:
        return max(self._requested_start_offset, self._segments[0].base_offset)

    @property
    def log_end_offset(self) -> int:
        return self._active.next_offset

    @property
    def size_bytes(self) -> int:
        return sum(segment.size for segment in self._segments)

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    @property
    def epoch_cache(self) -> LeaderEpochCache:
        return self._epoch_cache

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int]:
        """Where `leader_epoch` ended in this log, as (epoch, end offset); see the cache."""
        return self._epoch_cache.end_offset_for(leader_epoch, self.log_end_offset)

    @property
    def _active(self) -> LogSegment:
        return self._segments[-1]

    def append(
        self,
        batches: bytes | bytearray | memoryview,
        *,
        assign_offsets: bool,
        leader_epoch: int | None = None,
        now_ms: int,
        crc_checked: bool = False,
    ) -> AppendInfo:
        """Append whole batches, all or none.

        `crc_checked`: the caller has checked every batch's CRC over these very bytes (a
        leader's produce path does, once, when it validates the request), so the log
        checks only their structure and sizes; else it checks the CRCs too.

        A leader passes ``assign_offsets=True`` and the log numbers the batches from its
        end offset (and stamps ``leader_epoch``). A follower copies the leader's batches
        as they are, so they must continue the log exactly.
        """
        if leader_epoch is not None and not assign_offsets:
            raise ValueError("leader_epoch is stamped only when the log assigns offsets")
        data: bytearray | memoryview
        data, spans = self._validate(batches, crc_checked)
        if assign_offsets:
            data, spans = self._stamp(data, spans, leader_epoch)
        else:
            self._check_continues_log(spans)
        first, last = spans[0][1], spans[-1][1]
        if self._active.should_roll(len(data), last.last_offset, now_ms):
            self.roll(now_ms)
        self._active.append(data, spans, now_ms)
        self._record_epochs(spans)
        record_count = last.next_offset - first.base_offset
        self._unflushed_records += record_count
        self._apply_flush_policy(now_ms)
        return AppendInfo(
            first_offset=first.base_offset,
            last_offset=last.last_offset,
            record_count=record_count,
            max_timestamp=max(header.max_timestamp for _, header in spans),
            bytes_appended=len(data),
        )

    def _validate(
        self, batches: bytes | bytearray | memoryview, crc_checked: bool
    ) -> tuple[memoryview, list[BatchSpan]]:
        """Check the structure, size and (unless checked already) the CRC of every batch
        before anything is written."""
        view = memoryview(batches).cast("B")
        if len(view) > self._config.segment_bytes:
            raise RecordListTooLargeError(
                f"{len(view)} bytes of batches exceed segment_bytes {self._config.segment_bytes}"
            )
        spans: list[BatchSpan] = []
        position = 0
        for header, batch in iter_batches(view):
            if header.total_size > self._config.max_batch_bytes:
                raise MessageTooLargeError(
                    f"batch of {header.total_size} bytes exceeds max_batch_bytes "
                    f"{self._config.max_batch_bytes}"
                )
            if not crc_checked:
                verify_batch(batch, header)
            spans.append((position, header))
            position += header.total_size
        if not spans:
            raise InvalidRecordError("an append needs at least one batch")
        return view, spans

    def _stamp(
        self, view: memoryview, spans: list[BatchSpan], leader_epoch: int | None
    ) -> tuple[bytearray | memoryview, list[BatchSpan]]:
        """The batches numbered from the log end offset; the CRC stays valid.

        A writable buffer (the broker's own copy of a request frame) is stamped in place;
        a read-only one is copied first.
        """
        data = view if not view.readonly else bytearray(view)
        next_offset = self.log_end_offset
        stamped: list[BatchSpan] = []
        for position, header in spans:
            set_base_offset(data, next_offset, position)
            changes = {"base_offset": next_offset}
            if leader_epoch is not None:
                set_leader_epoch(data, leader_epoch, position)
                changes["leader_epoch"] = leader_epoch
            stamped.append((position, dataclasses.replace(header, **changes)))
            next_offset += header.record_count
        return data, stamped

    def _record_epochs(self, spans: list[BatchSpan]) -> None:
        """Note each epoch change among the written batches: one comparison per batch."""
        latest = self._epoch_cache.latest_epoch
        for _, header in spans:
            if header.leader_epoch > latest:
                latest = header.leader_epoch
                self._epoch_cache.assign(latest, header.base_offset)

    def _check_continues_log(self, spans: list[BatchSpan]) -> None:
        """A copy must go on from the log end, directly or after a gap that compaction
        left in the leader's log; never overlap it."""
        expected = self.log_end_offset
        for _, header in spans:
            if header.base_offset < expected:
                raise InvalidRecordError(
                    f"batch starts at offset {header.base_offset} but the log needs "
                    f"offset {expected} or more next (log end offset {self.log_end_offset})"
                )
            expected = header.next_offset

    def read(self, start_offset: int, max_bytes: int, *, max_offset: int | None = None) -> bytes:
        """Whole batches from the one holding `start_offset`, below `max_offset`.

        The first batch may begin before `start_offset`; the reader skips those records.
        The first batch is returned whole even past `max_bytes`, so that a consumer
        always makes progress; later ones only if they fit. Batches are never cut.
        """
        chunks = [
            segment.read_range(start, end)
            for segment, start, end in self._ranges(start_offset, max_bytes, max_offset)
        ]
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def read_stored(
        self, start_offset: int, max_bytes: int, *, max_offset: int, region_bytes: int
    ) -> list[bytes | FileRegion]:
        """The batches `read` gives, with each segment's range of at least `region_bytes`
        left in the file (a FileRegion, sent as stored) rather than read into memory.

        A range is read after all when no descriptor is left for a region of it.
        """
        stored: list[bytes | FileRegion] = []
        for segment, start, end in self._ranges(start_offset, max_bytes, max_offset):
            if end - start >= region_bytes:
                try:
                    stored.append(segment.region(start, end))
                    continue
                except OSError as exc:
                    if exc.errno not in (errno.EMFILE, errno.ENFILE):
                        raise
            stored.append(segment.read_range(start, end))
        return stored

    def _ranges(
        self, start_offset: int, max_bytes: int, max_offset: int | None
    ) -> list[tuple[LogSegment, int, int]]:
        """The file ranges of the batches a read returns, segment by segment, in order."""
        if max_bytes <= 0:
            raise InvalidFetchSizeError(f"max_bytes must be positive, not {max_bytes}")
        self._check_in_range(start_offset)
        limit = self.log_end_offset if max_offset is None else min(max_offset, self.log_end_offset)
        ranges: list[tuple[LogSegment, int, int]] = []
        budget = max_bytes
        for segment in self._segments[self._segment_index(start_offset) :]:
            located = segment.locate(start_offset)
            if located is None:
                continue
            start, end = segment.batch_range(located, budget, limit, whole_first=not ranges)
            if end == start:
                break
            ranges.append((segment, start, end))
            budget -= end - start
            if end != segment.size or budget <= 0:
                break
        return ranges

    def _check_in_range(self, offset: int) -> None:
        if not self.log_start_offset <= offset <= self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} is outside the log's range "
                f"[{self.log_start_offset}, {self.log_end_offset}]"
            )

    def _segment_index(self, offset: int) -> int:
        """Index of the last segment whose base offset is <= `offset` (0 if none is)."""
        return max(bisect_right(self._segments, offset, key=_base_offset) - 1, 0)

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """The first offset whose record has a timestamp >= `timestamp_ms`, and that timestamp.

        Timestamps need not grow with offsets, so every segment whose largest timestamp
        reaches the target is searched in order; the indexes only say where to start.
        A record found below a log start that DeleteRecords moved into its segment
        answers with the log start, the first offset a consumer can still read.
        """
        for segment in self._segments:
            found = segment.find_timestamp(timestamp_ms)
            if found is not None:
                return max(found[0], self.log_start_offset), found[1]
        return None

    def truncate_to(self, offset: int) -> None:
        """Remove every batch at or after `offset`, and the whole batch holding it.

        Below the log start offset nothing can stay, so the log restarts empty at
        `offset`, as after truncate_fully_and_start_at.
        """
        if offset >= self.log_end_offset:
            return
        self._truncations += 1
        if offset <= self.log_start_offset:
            self.truncate_fully_and_start_at(offset)
            return
        keep = self._segment_index(offset)
        while len(self._segments) > keep + 1:
            self._segments.pop().delete()
        old_end = self.log_end_offset
        self._active.truncate_to(offset)
        self._epoch_cache.truncate_from_end(self.log_end_offset)
        self._epoch_cache.flush()
        delete_snapshots_outside(self._directory, self.log_start_offset, self.log_end_offset)
        logger.info(
            "%s: truncated to offset %d (asked %d, was %d)",
            self._directory,
            self.log_end_offset,
            offset,
            old_end,
        )

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and start an empty log whose next offset is `offset`."""
        self._truncations += 1
        if self._requested_start_offset > offset:
            write_log_start_offset(self._directory, offset)
            self._requested_start_offset = offset
        self._epoch_cache.clear()
        while self._segments:
            self._segments.pop().delete()
        self._segments.append(LogSegment.create(self._directory, offset, self._config))
        fsync_directory(self._directory)
        self._epoch_cache.flush()
        delete_all_snapshots(self._directory)
        logger.info("%s: emptied, restarting at offset %d", self._directory, offset)

    def advance_log_start_offset(self, offset: int) -> bool:
        """Move the log start up to `offset` (a DeleteRecords); False if it is there already.

        The new start is recorded durably first; then the segments wholly below it go,
        while the one holding it stays and only reads below the start are refused. The
        start never moves back, and never past the log end offset (OffsetOutOfRangeError):
        the caller keeps it at or below the high watermark.
        """
        if offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"cannot start the log at offset {offset}: it ends at offset {self.log_end_offset}"
            )
        if offset <= self.log_start_offset:
            return False
        write_log_start_offset(self._directory, offset)
        self._requested_start_offset = offset
        _delete_segments_below(self._segments, offset)
        self._epoch_cache.truncate_from_start(offset)
        self._epoch_cache.flush()
        delete_snapshots_outside(self._directory, offset, self.log_end_offset)
        logger.info("%s: log start moved to offset %d by request", self._directory, offset)
        return True

    def roll(self, now_ms: int) -> None:
        """Seal the active segment (fsynced) and start a new one at the log end offset.

        The producer state is snapshotted at the new segment's base offset, so that it
        outlives the segments retention will delete (see producer_snapshots.py).
        """
        if not self._active.size:
            return
        self._active.seal()
        self._epoch_cache.flush()
        self._segments.append(LogSegment.create(self._directory, self.log_end_offset, self._config))
        fsync_directory(self._directory)
        self._unflushed_records = 0
        self._last_flush_ms = now_ms
        self._write_producer_snapshot(required=True)

    def delete_expired_segments(self, now_ms: int) -> int:
        """Apply retention by time, then by size, to the oldest segments; return how many went.

        Only a prefix of the log can go, so the log stays contiguous. The active segment
        is never deleted by size. When every segment is expired by time, the active one
        is rolled and deleted in the same call, leaving an empty log at its end offset.
        A log whose cleanup.policy is compact alone keeps every segment (the cleaner
        bounds it instead), as in Kafka.
        """
        if not self._config.deletes:
            return 0
        deleted = 0
        if self._config.retention_ms != UNLIMITED:
            cutoff = now_ms - self._config.retention_ms
            expired = 0
            while expired < len(self._segments) and self._segments[expired].max_timestamp < cutoff:
                expired += 1
            if expired == len(self._segments):
                self.roll(now_ms)
            deleted += self._delete_oldest(min(expired, len(self._segments) - 1))
        if self._config.retention_bytes != UNLIMITED:
            excess = self.size_bytes - self._config.retention_bytes
            doomed = 0
            while doomed < len(self._segments) - 1 and excess >= self._segments[doomed].size:
                excess -= self._segments[doomed].size
                doomed += 1
            deleted += self._delete_oldest(doomed)
        if deleted:
            self._epoch_cache.truncate_from_start(self.log_start_offset)
            self._epoch_cache.flush()
            delete_snapshots_outside(self._directory, self.log_start_offset, self.log_end_offset)
        return deleted

    @property
    def truncation_count(self) -> int:
        """How many truncations this log has had since it was opened."""
        return self._truncations

    def cleaning_job(
        self,
        high_watermark: int,
        first_dirty: int,
        tombstone_horizon: int,
        now_ms: int,
        *,
        tombstones_due: bool = False,
    ) -> CleaningJob | None:
        """What a cleaning of this log may work on now, or None if there is nothing to do:
        nothing dirty, and no tombstones due (`tombstones_due`: the horizon has passed
        tombstones that the clean part still holds).

        The cleanable segments are the sealed ones from the start of the log that lie
        wholly below `high_watermark` and whose records are all older than
        min.compaction.lag.ms; the active segment never is one.
        """
        if not self._config.compacts:
            return None
        lag_cutoff = now_ms - self._config.min_compaction_lag_ms
        cleanable: list[SegmentFile] = []
        for segment in self._segments[:-1]:
            if segment.next_offset > high_watermark or segment.max_timestamp > lag_cutoff:
                break
            cleanable.append(_segment_file(segment))
        first_dirty = max(first_dirty, self.log_start_offset)
        if not cleanable or (cleanable[-1].next_offset <= first_dirty and not tombstones_due):
            return None
        later = tuple(_segment_file(s) for s in self._segments[len(cleanable) :])
        return CleaningJob(
            self._directory,
            self._config,
            tuple(cleanable),
            later,
            first_dirty,
            tombstone_horizon,
            self._truncations,
        )

    def swap_cleaned(self, result: CleaningResult, now_ms: int) -> bool:
        """Put the cleaned segments of `result` in place of the ones they replace.

        False (and the cleaned files removed) if the log changed under the cleaning so
        that those segments are no longer its sealed segments (a truncation or retention
        took some, or the log was closed), or the cleaned files are gone (the log was
        reopened, which removes them).
        """
        new_bases = [group.new_base for group in result.groups]
        if (
            self._closed
            or result.truncations != self._truncations
            or not all(self._holds_sealed(group.replaced) for group in result.groups)
            or not all(cleaned_files_exist(self._directory, base) for base in new_bases)
        ):
            discard(self._directory, new_bases)
            return False
        for group in result.groups:
            first = self._segment_index(group.new_base)
            for segment in self._segments[first : first + len(group.replaced)]:
                segment.release()
        swap_in(self._directory, [(group.new_base, group.replaced) for group in result.groups])
        for group in result.groups:
            first = self._segment_index(group.new_base)
            new = LogSegment.load(self._directory, group.new_base, self._config, now_ms=now_ms)
            self._segments[first : first + len(group.replaced)] = [new]
        logger.info(
            "%s: cleaned to offset %d: %d bytes read, %d written, %d segments now",
            self._directory,
            result.first_dirty,
            result.bytes_read,
            result.bytes_written,
            len(self._segments),
        )
        return True

    def _holds_sealed(self, bases: tuple[int, ...]) -> bool:
        """Whether `bases` are the base offsets of consecutive sealed segments of the log."""
        first = self._segment_index(bases[0])
        found = [s.base_offset for s in self._segments[first : first + len(bases)]]
        return found == list(bases) and first + len(bases) < len(self._segments)

    def _delete_oldest(self, count: int) -> int:
        for _ in range(count):
            segment = self._segments.pop(0)
            segment.delete()
            logger.info(
                "%s: retention deleted segment %d, log starts at %d now",
                self._directory,
                segment.base_offset,
                self.log_start_offset,
            )
        return count

    def _apply_flush_policy(self, now_ms: int) -> None:
        flush_messages = self._config.flush_messages
        if flush_messages is not None and self._unflushed_records >= flush_messages:
            self._flush_at(now_ms)
        else:
            self.maybe_flush(now_ms)

    def maybe_flush(self, now_ms: int) -> None:
        """Flush if flush_ms has passed since the last flush and something is unflushed."""
        flush_ms = self._config.flush_ms
        if (
            flush_ms is not None
            and self._unflushed_records
            and now_ms - self._last_flush_ms >= flush_ms
        ):
            self._flush_at(now_ms)

    def _flush_at(self, now_ms: int) -> None:
        self.flush()
        self._last_flush_ms = now_ms

    def flush(self) -> None:
        """fsync the active segment, its indexes and the epoch cache (if it changed).

        Older segments, and the epochs they hold, were made durable on roll.
        """
        self._active.flush()
        self._epoch_cache.flush()
        self._unflushed_records = 0

    def close(self) -> None:
        if self._closed:
            return
        self._write_producer_snapshot(required=False)
        for segment in self._segments:
            segment.close()
        self._epoch_cache.flush()
        self._closed = True

    def delete(self) -> None:
        """Close the log and remove its directory with everything in it."""
        self.close()
        shutil.rmtree(self._directory)


def _segment_file(segment: LogSegment) -> SegmentFile:
    return SegmentFile(
        segment.base_offset, segment.size, segment.next_offset, segment.max_timestamp
    )


def _base_offset(segment: LogSegment) -> int:
    return segment.base_offset


def _delete_segments_below(segments: list[LogSegment], offset: int) -> None:
    """Delete the oldest segments whose batches all lie below `offset`; never the last."""
    while len(segments) > 1 and segments[0].next_offset <= offset:
        segments.pop(0).delete()


def _open_epoch_cache(
    directory: Path, segments: list[LogSegment], log_start_offset: int
) -> LeaderEpochCache:
    """The epoch cache, made consistent with the recovered segments.

    The file may be stale after a crash: it may name epochs whose records were cut off
    (truncated here), start before a log start that retention moved (moved here), or
    miss epochs appended since the last flush. Those can only be in the active segment,
    as every roll flushes the cache, so only its headers are scanned. Without a file,
    every segment is scanned: the epochs are rebuilt from the batch headers. An entry
    starting at the log end (a new leader's epoch before its first append, or the last
    epoch of a log that retention emptied) goes too: it has no records, and a leader
    assigns its epoch again when it takes over.
    """
    path = directory / LEADER_EPOCH_CHECKPOINT_FILE
    scanned = segments if not path.exists() else segments[-1:]
    cache = LeaderEpochCache.load(path)
    cache.truncate_from_end(segments[-1].next_offset)
    cache.truncate_from_start(log_start_offset)
    for segment in scanned:
        for _, header in segment.iter_headers(0):
            cache.assign(header.leader_epoch, header.base_offset)
    cache.flush()
    return cache
