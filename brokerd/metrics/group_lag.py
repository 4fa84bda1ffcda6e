"""Consumer-group lag from plain values (no I/O, no state), as kafka-exporter reports it.

A group's lag on a partition is the partition's high watermark minus the group's
committed offset: what a consumer that resumed from its commit has still to read of
what is committed. The coordinator knows the commits; the high watermark comes from its
own replica where it hosts one (exact on the leader, a fetch behind on a follower), else
from the partition's leader, asked every few seconds (brokerd/groups/remote_watermarks.py).
A partition whose high watermark could not be learnt gets no lag rather than a stale
figure: its current offset is still served.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from spark_replica.topics import TopicPartition


@dataclass(frozen=True, slots=True)
class GroupPartitionOffsets:
    group: str
    tp: TopicPartition
    current_offset: int  # the group's committed offset
    lag: int | None  # None: the partition's high watermark is not known here


def group_partition_offsets(
    committed: Mapping[str, Mapping[TopicPartition, int]],
    high_watermark: Callable[[TopicPartition], int | None],
) -> list[GroupPartitionOffsets]:
    """Each group's committed offset and lag per partition, sorted by group and partition.
    A commit above the high watermark (a follower's is behind) counts as no lag."""
    rows = []
    for group in sorted(committed):
        for tp, offset in sorted(committed[group].items()):
            known = high_watermark(tp)
            lag = None if known is None else max(0, known - offset)
            rows.append(GroupPartitionOffsets(group, tp, offset, lag))
    return rows
