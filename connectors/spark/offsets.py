"""Offset arithmetic for the replog source: pure functions, no I/O.

Everything the readers decide about offsets is decided here, from numbers the cluster
gave them, so that it can be tested without a cluster: resolving Kafka's -2/-1
placeholders, splitting ranges over more tasks, admission control, clamping to the high
watermark (HW) and spotting data that was lost between two looks at the cluster. The JSON
form of offsets Spark keeps in its checkpoint is spark_replica.partition_offsets.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from spark_replica.errors import ConfigError, ReplogError
from spark_replica.partition_offsets import EARLIEST, LATEST, Offsets
from spark_replica.topics import TopicPartition

FAIL_ON_DATA_LOSS_HINT = (
    "Records were lost before the query read them: retention deleted them, the topic was "
    "deleted, or its log was truncated. Set the source option failOnDataLoss=false to skip "
    "lost records and go on instead of failing."
)


class DataLossError(ReplogError):
    """Records a query should read are gone, and failOnDataLoss asks to fail rather than skip."""


def data_loss_error(detail: str) -> DataLossError:
    """The error for lost records: what was lost, and how to go on regardless."""
    return DataLossError(f"{detail}. {FAIL_ON_DATA_LOSS_HINT}")


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Offsets [start, end) of one partition: what one Spark task reads."""

    tp: TopicPartition
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(self.end - self.start, 0)


@dataclass(frozen=True, slots=True)
class DataLoss:
    """Records a query was due to read that the cluster no longer has."""

    tp: TopicPartition
    message: str


def resolve_offsets(
    requested: Mapping[TopicPartition, int],
    earliest: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
) -> Offsets:
    """Replace -2 with the partition's log start offset and -1 with its HW."""
    resolved: Offsets = {}
    for tp, offset in requested.items():
        if offset == EARLIEST:
            resolved[tp] = earliest[tp]
        elif offset == LATEST:
            resolved[tp] = latest[tp]
        else:
            resolved[tp] = offset
    return resolved


def clamp_to_high_watermarks(
    ends: Mapping[TopicPartition, int], high_watermarks: Mapping[TopicPartition, int]
) -> Offsets:
    """Ends no higher than the HW: above it records are not committed and may vanish."""
    return {tp: min(end, high_watermarks[tp]) for tp, end in ends.items() if tp in high_watermarks}


def offset_ranges(
    start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int]
) -> list[OffsetRange]:
    """One range per partition of `end` that has records to read, in partition order.

    A partition missing from `start` is new since `start` was taken, so it is read from
    its first offset, 0, as Kafka's source reads new partitions from the beginning.
    """
    ranges = []
    for tp in sorted(end):
        first = start.get(tp, 0)
        if end[tp] > first:
            ranges.append(OffsetRange(tp, first, end[tp]))
    return ranges


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """Split ranges so that there are about `min_partitions` of them, never losing an offset.

    As Kafka's source does, nothing is split when there are already enough ranges; else
    each range gets a share of the pieces in proportion to its size (at least one, never
    more than it has offsets) and is cut into pieces of near-equal size.
    """
    ranges = [r for r in ranges if r.size > 0]
    if min_partitions is None or len(ranges) >= min_partitions:
        return ranges
    pieces = _proportional_shares([r.size for r in ranges], min_partitions, minimum=1)
    split: list[OffsetRange] = []
    for r, count in zip(ranges, pieces, strict=True):
        count = min(count, r.size)
        for i in range(count):
            start = r.start + r.size * i // count
            end = r.start + r.size * (i + 1) // count
            split.append(OffsetRange(r.tp, start, end))
    return split


def limit_ranges(
    start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int], max_rows: int
) -> Offsets:
    """Ends that admit at most `max_rows` records in all, shared by backlog (admission control).

    Like Kafka's maxOffsetsPerTrigger, each partition gets a share of the limit in
    proportion to its backlog; unlike Kafka's rounding, the shares never add up to more
    than the limit (largest remainders get the rounding), and a batch always moves on
    while there is a backlog. Partitions missing from `start` begin at 0.
    """
    if max_rows <= 0:
        raise ValueError(f"max_rows must be positive, not {max_rows}")
    partitions = sorted(latest)
    backlogs = [max(latest[tp] - start.get(tp, 0), 0) for tp in partitions]
    if sum(backlogs) > max_rows:
        backlogs = _proportional_shares(backlogs, max_rows, minimum=0)
    return {tp: start.get(tp, 0) + share for tp, share in zip(partitions, backlogs, strict=True)}


def _proportional_shares(sizes: list[int], total: int, minimum: int) -> list[int]:
    """Split `total` over `sizes` in proportion, by largest remainder, each within its size.

    Each share is at least `minimum` (for sizes above 0) and at most its size; the shares
    add up to `total` unless the sizes (or the minimums) do not allow it.
    """
    whole = sum(sizes)
    if whole == 0:
        return [0] * len(sizes)
    exact = [total * size / whole for size in sizes]
    shares = [
        min(size, max(math.floor(e), minimum if size else 0))
        for e, size in zip(exact, sizes, strict=True)
    ]
    left = total - sum(shares)
    by_remainder = sorted(range(len(sizes)), key=lambda i: (shares[i] - exact[i], i))
    while left > 0:
        grew = False
        for i in by_remainder:
            if left == 0:
                break
            if shares[i] < sizes[i]:
                shares[i] += 1
                left -= 1
                grew = True
        if not grew:
            break
    return shares


def backlog(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int]) -> int:
    """How many records lie between `start` and `latest` (new partitions count from 0)."""
    return sum(max(latest[tp] - start.get(tp, 0), 0) for tp in latest)


def find_data_loss(
    start: Mapping[TopicPartition, int],
    partitions: Iterable[TopicPartition],
    log_starts: Mapping[TopicPartition, int],
    log_ends: Mapping[TopicPartition, int],
) -> list[DataLoss]:
    """What a query starting from `start` would miss, given the cluster as it is now.

    Three ways to lose records: the partition is gone (its topic was deleted), its log
    now starts above the offset (retention deleted them), or the leader's log now ends
    below it (the log was truncated, e.g. the topic was deleted and created again).
    Only partitions with a log start or end in the maps are judged on those; note that
    an HW below `start` alone is no loss: a new leader's HW may lag for a moment.
    """
    present = set(partitions)
    losses = []
    for tp in sorted(start):
        offset = start[tp]
        if tp not in present:
            losses.append(DataLoss(tp, f"{tp} is gone (its topic was deleted?)"))
        elif tp in log_starts and offset < log_starts[tp]:
            losses.append(
                DataLoss(
                    tp,
                    f"{tp}: offsets {offset}..{log_starts[tp] - 1} were deleted "
                    f"(the log now starts at {log_starts[tp]})",
                )
            )
        elif tp in log_ends and offset > log_ends[tp]:
            losses.append(
                DataLoss(
                    tp,
                    f"{tp}: offset {offset} is past the end of the log, {log_ends[tp]} "
                    "(the log was truncated or the topic created again)",
                )
            )
    return losses


def skip_lost(
    start: Mapping[TopicPartition, int],
    partitions: Iterable[TopicPartition],
    log_starts: Mapping[TopicPartition, int],
    log_ends: Mapping[TopicPartition, int],
) -> Offsets:
    """`start` moved past lost records: gone partitions dropped, the rest moved into the log.

    Moving forward never reads a record twice; moving a truncated partition back to its
    log end reads only records written after the truncation.
    """
    present = set(partitions)
    moved: Offsets = {}
    for tp, offset in start.items():
        if tp not in present:
            continue
        if tp in log_starts:
            offset = max(offset, log_starts[tp])
        if tp in log_ends:
            offset = min(offset, log_ends[tp])
        moved[tp] = offset
    return moved


def offsets_for_timestamps(
    found: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    *,
    fail_without_match: bool,
    option: str,
) -> Offsets:
    """Offsets found by timestamp; -1 (no record that recent) becomes the HW or an error.

    A start fails by default (startingOffsetsByTimestampStrategy=error) because silently
    starting at the end could skip data the user meant to read; an end is then simply
    the HW, as in Kafka's source.
    """
    resolved: Offsets = {}
    for tp in sorted(found):
        if found[tp] >= 0:
            resolved[tp] = found[tp]
        elif fail_without_match:
            raise ConfigError(
                f"{option}: {tp} has no record at or after the given timestamp; set "
                "startingOffsetsByTimestampStrategy=latest to start such partitions at latest"
            )
        else:
            resolved[tp] = latest[tp]
    return resolved


def plan_end(
    start: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    *,
    max_rows: int | None,
    min_rows: int | None,
    waited_ms: float,
    max_delay_ms: int,
) -> Offsets:
    """The end of the next micro-batch, or `start` itself when it should wait for more.

    `latest` holds what may be read now (the HW, or the AvailableNow target). With
    minOffsetsPerTrigger a batch waits until that many records are there or
    maxTriggerDelay has passed since the last batch; maxOffsetsPerTrigger caps it.
    Every partition of `start` stays in the result, so none is taken for new later, and
    no end is below its start.
    """
    if min_rows is not None and backlog(start, latest) < min_rows and waited_ms < max_delay_ms:
        return dict(start)
    end = dict(latest) if max_rows is None else limit_ranges(start, latest, max_rows)
    return {**start, **{tp: max(offset, start.get(tp, 0)) for tp, offset in end.items()}}
