"""How far a Spark streaming query is behind: its checkpoint's committed offsets against
the partitions' high watermarks.

Stub committed by the lead so that `replog lag` and `replog console` code against one
interface; its owner replaces the bodies.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from spark_replica.client import Cluster


@dataclass(frozen=True)
class PartitionLag:
    topic: str
    partition: int
    committed: int | None  # the next offset the query reads; None: not in its checkpoint
    high_watermark: int | None  # None: the partition's leader did not answer
    lag: int | None  # high_watermark - committed, None when either is unknown


@dataclass(frozen=True)
class QueryLag:
    checkpoint: str
    batch_id: int | None  # the last committed micro-batch, None before the first
    partitions: list[PartitionLag]

    @property
    def total_lag(self) -> int:
        return sum(p.lag for p in self.partitions if p.lag is not None)

    def as_json(self) -> dict[str, object]:
        raise NotImplementedError


def committed_offsets(checkpoint: Path) -> tuple[int | None, dict[tuple[str, int], int]]:
    """The last committed batch id and its end offsets per (topic, partition)."""
    raise NotImplementedError


async def query_lag(cluster: Cluster, checkpoint: Path) -> QueryLag:
    raise NotImplementedError
