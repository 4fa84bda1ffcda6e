"""Cutting one topic-partition's records into batches at boundaries fixed by the records.

An idempotent producer numbers records per partition, and the leader recognises a
replayed batch by its first and last sequence number. For a replayed write task to be
recognised, it must cut its batches where the first attempt did, whatever way Spark
chunked the input this time. So a batch boundary here depends only on the records:
starting where the previous batch ended, a batch takes records while their total size
stays within `max_bytes` and their count within `max_records` (and always at least one
record, however large). The last batch of a task ends with the task's input.

A batch is handed out only once it is known to be complete: a record that did not fit
has arrived, or the count limit is reached. Until then its records wait here, so what
waits per partition is at most one batch.

The last batch of a task is the exception: where it ends depends on where the input
ended, and an input can end early. When a failure upstream stops a task, Spark ends the
task's Arrow input cleanly, so the writer cannot tell it from a real end and writes
what it has. A replay of the task then holds a longer batch starting at the same
sequence, which the leader refuses as overlapping. So, when asked (`split_tail`), the
last batch is written as pieces whose sizes are powers of two, largest first: a replay
can then find each piece by halving aligned blocks (see sink_sender.recover_batch).

Pure: no I/O.
"""

from __future__ import annotations

import itertools

import pyarrow as pa
import pyarrow.compute as pc

from spark_replica.errors import ConfigError


def power_of_two_pieces(count: int) -> list[int]:
    """`count` as a sum of distinct powers of two, largest first: 13 -> [8, 4, 1]."""
    return [1 << bit for bit in range(count.bit_length() - 1, -1, -1) if count >> bit & 1]


def cut_points(sizes: pa.Array, max_bytes: int, max_records: int, final: bool) -> list[int]:
    """Ends of the complete batches over records of these sizes, from the first record.

    With `final`, the records left after the last complete batch form one more batch.
    """
    total = len(sizes)
    running = pa.concat_arrays(
        [pa.array([0], pa.int64()), pc.cumulative_sum(pc.cast(sizes, pa.int64()))]
    )
    ends: list[int] = []
    start = 0
    while start < total:
        limit = running[start].as_py() + max_bytes
        fits = pc.search_sorted(running, pa.scalar(limit, pa.int64()), side="right").as_py() - 1
        end = min(max(fits, start + 1), start + max_records, total)
        if end == total and not final and end - start < max_records:
            break
        ends.append(end)
        start = end
    return ends


class BatchCutter:
    """Collects one topic-partition's records of a task and hands out whole batches."""

    def __init__(self, max_bytes: int, max_records: int, split_tail: bool = False) -> None:
        if max_bytes < 1 or max_records < 1:
            raise ConfigError(
                f"batches need room for a record: max_bytes={max_bytes}, max_records={max_records}"
            )
        self.max_bytes = max_bytes
        self.max_records = max_records
        self.split_tail = split_tail
        self._records: list[pa.RecordBatch] = []
        self._sizes: list[pa.Array] = []
        self._pending_records = 0
        self._pending_bytes = 0

    @property
    def pending_records(self) -> int:
        return self._pending_records

    def add(self, records: pa.RecordBatch, sizes: pa.Array) -> list[pa.RecordBatch]:
        """Take records (in order) and return the batches they complete, if any."""
        if records.num_rows == 0:
            return []
        self._records.append(records)
        self._sizes.append(sizes if sizes.type == pa.int64() else sizes.cast(pa.int64()))
        self._pending_records += records.num_rows
        self._pending_bytes += pc.sum(sizes).as_py()
        if self._pending_records < self.max_records and self._pending_bytes <= self.max_bytes:
            return []
        return self._cut(final=False)

    def finish(self) -> list[pa.RecordBatch]:
        """The batches of everything still waiting: the end of the task's input."""
        if not self._pending_records:
            return []
        batches = self._cut(final=True)
        last = batches[-1]
        if not self.split_tail or last.num_rows == self.max_records:
            return batches  # a batch at the count limit is whole however the input goes on
        pieces, start = [], 0
        for size in power_of_two_pieces(last.num_rows):
            pieces.append(last.slice(start, size))
            start += size
        return batches[:-1] + pieces

    def _cut(self, final: bool) -> list[pa.RecordBatch]:
        pieces = self._sizes
        sizes = pieces[0] if len(pieces) == 1 else pa.concat_arrays(pieces)
        ends = cut_points(sizes, self.max_bytes, self.max_records, final)
        if not ends:
            return []
        batches = []
        for start, end in itertools.pairwise([0, *ends]):
            parts = self._slices(start, end)
            batches.append(parts[0] if len(parts) == 1 else pa.concat_batches(parts))
        done = ends[-1]
        self._records = self._slices(done, self._pending_records)
        self._sizes = [sizes.slice(done)] if self._records else []
        self._pending_records -= done
        self._pending_bytes = pc.sum(self._sizes[0]).as_py() if self._records else 0
        return batches

    def _slices(self, start: int, end: int) -> list[pa.RecordBatch]:
        """Pending rows [start, end) as slices of the input pieces, uncopied: a batch held
        by one piece (the usual case when input chunks and batches line up) is sent as
        it came; only one spanning pieces is joined."""
        parts = []
        first = 0
        for records in self._records:
            stop = first + records.num_rows
            if stop > start and first < end:
                low = max(start, first) - first
                parts.append(records.slice(low, min(end, stop) - first - low))
            first = stop
        return parts
