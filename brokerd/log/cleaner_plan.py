"""What one cleaning of a compacted log keeps: pure decisions, no I/O.

The cleaner reads the batches of the cleanable part of a log (sealed segments only,
below the high watermark, older than min.compaction.lag.ms) and asks this module which
records stay. The rules, Kafka's log cleaner's, stated exactly:

1. The offset map. Walking the dirty part (from the first dirty offset, where the last
   cleaning stopped) batch by batch, each key maps to the last offset it has there. The
   map holds at most `max_keys` keys (log.cleaner.dedupe.buffer.size / 24 bytes, Kafka's
   entry size); when the next batch would overfill it, the walk stops before that batch
   and this cleaning ends there (`OffsetMap.end_offset`): the rest waits for the next
   cleaning. A batch is always taken whole, and the first batch always, so a cleaning
   always makes progress.
2. A record from the start of the log to the map's end is kept if it has a key, no later
   offset of that key is in the map, and it is not an expired tombstone.
3. Tombstones (null values) expire: a tombstone at an offset below the tombstone horizon
   is dropped. The cleaner sets the horizon to the end of an earlier cleaning that
   finished at least delete.retention.ms ago (see cleaner.py), so a tombstone stays
   readable for at least delete.retention.ms after the cleaning that first reached it,
   which is the window Kafka gives a consumer reading the log from its start.
4. A record without a key cannot be compacted; Kafka's cleaner drops it (such records
   only exist from before the topic was made compact), and so does this one.
5. Offsets never change. Our batches hold consecutive offsets, so a batch whose kept
   records are not contiguous becomes several batches, one per run of kept records; each
   keeps the producer id and epoch, and its base sequence is the sequence of its first
   record, so every kept record keeps its sequence number.
6. A producer's last batch in the log keeps its last record, even a superseded one or an
   expired tombstone: followers and restarts rebuild the idempotent producers' state from
   batch headers, and without it they would see an older last sequence and refuse the
   producer's next batch as out of order. Kafka keeps an empty batch for this; a replog
   batch holds at least one record, so the record stays. A reader still ends with the
   key's latest value, which comes later in the log.

A cleaning looks at every record of the log, so no Python code runs per record here:
the map takes each batch's keys in one dict update, the plan looks them all up with one
`map(dict.get, ...)` and decides on numpy arrays (kept = keyed, not superseded, not an
expired tombstone), and the runs are the edges of that mask. The offset map stays a
dict of the keys themselves, not of digests, so no two keys can ever be taken for one.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import repeat

import numpy as np
import numpy.typing as npt

from spark_replica.records import NO_PRODUCER_ID, NO_SEQUENCE, BatchHeader

# Kafka's offset map entry: a 16-byte key digest and an 8-byte offset.
OFFSET_MAP_ENTRY_BYTES = 24
_SEQUENCE_SPACE = 2**31


@dataclass(frozen=True, slots=True)
class BatchKeys:
    """What the plan needs of one batch: its header, and each record's key and nullness."""

    header: BatchHeader
    keys: Sequence[bytes | None]
    tombstones: Sequence[bool] | npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class OffsetMap:
    """Each key's last offset in the dirty part, up to `end_offset` (exclusive); None, the
    key of a keyless record, is never one of them, though it may be looked up."""

    last_offsets: dict[bytes | None, int]
    end_offset: int


@dataclass(frozen=True, slots=True)
class KeptRun:
    """Records [start, stop) of a batch, by index, kept as one batch from `base_offset`."""

    start: int
    stop: int
    base_offset: int
    base_sequence: int


@dataclass(frozen=True, slots=True)
class BatchPlan:
    """What becomes of one batch: the runs kept (none: the batch goes)."""

    header: BatchHeader
    runs: tuple[KeptRun, ...]

    @property
    def whole(self) -> bool:
        """Whether the batch stays as it is, bytes untouched."""
        if len(self.runs) != 1:
            return False
        run = self.runs[0]
        return run.start == 0 and run.stop == self.header.record_count


def max_keys_for(dedupe_buffer_size: int) -> int:
    """How many keys the offset map of one cleaning may hold (at least one batch's worth)."""
    return max(dedupe_buffer_size // OFFSET_MAP_ENTRY_BYTES, 1)


def build_offset_map(dirty: Iterable[BatchKeys], max_keys: int, first_dirty: int) -> OffsetMap:
    """Map each key of the dirty batches to its last offset, stopping before overflow."""
    last_offsets: dict[bytes | None, int] = {}
    end_offset = first_dirty
    for batch in dirty:
        # Only a batch that could overfill the map has its new keys counted: hashing
        # them is not free, and a map usually has room for millions.
        could_overfill = len(last_offsets) + len(batch.keys) > max_keys
        if last_offsets and could_overfill and _overfills(batch, last_offsets, max_keys):
            break
        base = batch.header.base_offset
        # A later record of a key overwrites an earlier one: each key ends at its last.
        last_offsets.update(zip(batch.keys, range(base, base + len(batch.keys)), strict=True))
        last_offsets.pop(None, None)
        end_offset = batch.header.next_offset
    return OffsetMap(last_offsets, end_offset)


def _overfills(batch: BatchKeys, last_offsets: dict[bytes | None, int], max_keys: int) -> bool:
    keys = set(batch.keys)
    keys.discard(None)
    new_keys = len(keys) - len(last_offsets.keys() & keys)
    return len(last_offsets) + new_keys > max_keys


def plan_cleaning(
    batches: Sequence[BatchKeys],
    offset_map: OffsetMap,
    tombstone_horizon: int,
    producers_after: frozenset[int] = frozenset(),
) -> list[BatchPlan]:
    """The plan for every batch of `batches`, in order.

    Batches at or past the map's end are planned too: nothing there is superseded, only
    keyless records and expired tombstones go. `producers_after` are the producer ids
    with batches after `batches` in the log, whose last batch is therefore not among
    them (rule 6).
    """
    in_range = list(batches)
    last_batch_of_producer = {
        batch.header.producer_id: index
        for index, batch in enumerate(in_range)
        if batch.header.producer_id != NO_PRODUCER_ID
    }
    plans = []
    for index, batch in enumerate(in_range):
        kept = _kept(batch, offset_map, tombstone_horizon)
        producer = batch.header.producer_id
        if last_batch_of_producer.get(producer) == index and producer not in producers_after:
            kept[-1] = True
        plans.append(BatchPlan(batch.header, _runs(batch.header, kept)))
    return plans


def _kept(batch: BatchKeys, offset_map: OffsetMap, horizon: int) -> npt.NDArray[np.bool_]:
    """Which records of the batch stay: rules 2 to 4, over the whole batch at once."""
    count = len(batch.keys)
    offsets = np.arange(batch.header.base_offset, batch.header.base_offset + count)
    # A key the map does not hold (a keyless record among them) has no later offset.
    later = np.fromiter(
        map(offset_map.last_offsets.get, batch.keys, repeat(-1, count)), np.int64, count
    )
    kept: npt.NDArray[np.bool_] = later <= offsets
    if None in batch.keys:
        kept &= np.fromiter(map(operator.is_not, batch.keys, repeat(None, count)), np.bool_, count)
    kept &= ~(np.asarray(batch.tombstones, np.bool_) & (offsets < horizon))
    return kept


def _runs(header: BatchHeader, kept: npt.NDArray[np.bool_]) -> tuple[KeptRun, ...]:
    """The runs of consecutive kept records: where the mask, padded with a dropped record
    at each end, changes."""
    edges = np.flatnonzero(np.diff(np.concatenate(([False], kept, [False])).astype(np.int8)))
    return tuple(
        KeptRun(start, stop, header.base_offset + start, _sequence_at(header, start))
        for start, stop in zip(edges[0::2].tolist(), edges[1::2].tolist(), strict=True)
    )


def _sequence_at(header: BatchHeader, index: int) -> int:
    if header.producer_id == NO_PRODUCER_ID or header.base_sequence == NO_SEQUENCE:
        return header.base_sequence
    return (header.base_sequence + index) % _SEQUENCE_SPACE
