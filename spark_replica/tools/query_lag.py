"""How far a Spark streaming query is behind: its checkpoint's committed offsets against
the partitions' high watermarks.

A query keeps its progress only in its checkpoint directory, never in the cluster, so
the lag of a query is read where Spark writes it. Spark's layout (checked against
pyspark 4.3):

- `metadata`: one JSON line, `{"id": "<query uuid>"}`, written when the query starts;
- `offsets/N`: the write-ahead log of micro-batch N, written before the batch runs:
  `v1`, a line of batch metadata JSON, then one line per source in the order of the
  query's plan: that source's end offsets for batch N, or `-` when it had none;
- `commits/N`: written once batch N's output is committed.

The committed position is therefore `offsets/N` of the highest N in `commits/`: a
batch planned but not committed is read again after a restart. The replog source's
offsets are `{"topic": {"partition": next offset}}` (spark_replica/partition_offsets.py);
lines of other sources (a file source's `{"logOffset": 3}`, a rate source's number)
are skipped. Kafka's source writes the same shape, so its partitions are counted too.
When two sources of one query read the same partition, the one further behind counts:
the query is as late as its slowest reader.

Parsing is pure (`parse_offset_log`, `lag_of`) and tested on plain text; the file and
network reads are thin shells around it.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict, dataclass
from pathlib import Path

from spark_replica.client import LATEST, Cluster, list_offsets
from spark_replica.errors import ConfigError
from spark_replica.partition_offsets import Offsets, decode_offsets
from spark_replica.topics import TopicPartition

OFFSETS_DIR = "offsets"
COMMITS_DIR = "commits"
METADATA_FILE = "metadata"
OFFSET_LOG_VERSION = "v1"
NO_OFFSETS = "-"

# A partition whose leader is moving is asked again for this long; then its HW is
# reported unknown rather than holding up the answer for every other partition.
HIGH_WATERMARK_WAIT_S = 10.0


@dataclass(frozen=True)
class PartitionLag:
    topic: str
    partition: int
    committed: int | None  # the next offset the query reads; None: not in its checkpoint
    high_watermark: int | None  # None: the partition's leader did not answer
    lag: int | None  # high_watermark - committed, None when either is unknown

    @property
    def behind_the_log(self) -> bool:
        """The query stands past the HW: the log was truncated or the topic made anew,
        and the query's next batch will see lost data (its lag reads 0)."""
        return (
            self.committed is not None
            and self.high_watermark is not None
            and self.committed > self.high_watermark
        )


@dataclass(frozen=True)
class QueryLag:
    checkpoint: str
    batch_id: int | None  # the last committed micro-batch, None before the first
    partitions: list[PartitionLag]

    @property
    def total_lag(self) -> int:
        return sum(p.lag for p in self.partitions if p.lag is not None)

    def as_json(self) -> dict[str, object]:
        return {
            "checkpoint": self.checkpoint,
            "batch_id": self.batch_id,
            "total_lag": self.total_lag,
            "partitions": [asdict(p) for p in self.partitions],
        }


def committed_offsets(checkpoint: Path) -> tuple[int | None, dict[tuple[str, int], int]]:
    """The last committed batch id and its end offsets per (topic, partition)."""
    check_checkpoint(checkpoint)
    committed = _batch_ids(checkpoint / COMMITS_DIR)
    if not committed:
        return None, {}
    batch_id = max(committed)
    path = checkpoint / OFFSETS_DIR / str(batch_id)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            f"{checkpoint}: batch {batch_id} is committed but {OFFSETS_DIR}/{batch_id} is "
            "missing; the checkpoint is damaged"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read it ({exc})") from None
    offsets = parse_offset_log(text, str(path))
    return batch_id, {(tp.topic, tp.partition): offset for tp, offset in offsets.items()}


def parse_offset_log(text: str, what: str) -> Offsets:
    """The replog-shaped source offsets of one `offsets/N` file, merged over sources."""
    lines = text.split("\n")
    if lines[0].strip() != OFFSET_LOG_VERSION:
        raise ConfigError(
            f"{what}: not a Spark offset log of version {OFFSET_LOG_VERSION} "
            f"(first line {lines[0][:40]!r})"
        )
    if len(lines) < 2 or not _is_json_object(lines[1]):
        raise ConfigError(f"{what}: the second line is not Spark's batch metadata JSON")
    merged: Offsets = {}
    for line in lines[2:]:
        for tp, offset in _source_offsets(line.strip()).items():
            merged[tp] = min(offset, merged.get(tp, offset))
    return merged


def lag_of(committed: int | None, high_watermark: int | None) -> int | None:
    """Records the query has yet to read, never below 0 (see behind_the_log)."""
    if committed is None or high_watermark is None:
        return None
    return max(high_watermark - committed, 0)


async def query_lag(cluster: Cluster, checkpoint: Path) -> QueryLag:
    """The checkpoint's committed offsets beside the HWs of now: a HW that cannot be had
    leaves that partition's lag unknown instead of failing the whole answer."""
    batch_id, committed = await asyncio.to_thread(committed_offsets, checkpoint)
    high_watermarks = await _high_watermarks(
        cluster, sorted(TopicPartition(*tp) for tp in committed)
    )
    partitions = []
    for (topic, partition), offset in sorted(committed.items()):
        high_watermark = high_watermarks.get(TopicPartition(topic, partition))
        partitions.append(
            PartitionLag(topic, partition, offset, high_watermark, lag_of(offset, high_watermark))
        )
    return QueryLag(str(checkpoint), batch_id, partitions)


async def _high_watermarks(
    cluster: Cluster, partitions: list[TopicPartition]
) -> dict[TopicPartition, int]:
    """HWs of the partitions that exist and whose leader answers; a deleted topic is
    left out at once instead of being waited for."""
    if not partitions:
        return {}
    response = await cluster.refresh(sorted({tp.topic for tp in partitions}))
    existing = {
        TopicPartition(t.topic, p.partition)
        for t in response.topics
        if not t.error_code
        for p in t.partitions
    }
    present = [tp for tp in partitions if tp in existing]
    if not present:
        return {}
    found = await list_offsets(cluster, present, LATEST, wait_s=HIGH_WATERMARK_WAIT_S, partial=True)
    return {tp: offset for tp, (offset, _) in found.items()}


def check_checkpoint(checkpoint: Path) -> None:
    """Raise ConfigError naming `checkpoint` unless it looks like a Spark query's."""
    if not checkpoint.exists():
        raise ConfigError(f"checkpoint {checkpoint} does not exist")
    if not checkpoint.is_dir():
        raise ConfigError(f"checkpoint {checkpoint} is not a directory")
    if not any((checkpoint / name).exists() for name in (METADATA_FILE, OFFSETS_DIR, COMMITS_DIR)):
        raise ConfigError(
            f"{checkpoint} is not a Spark streaming checkpoint: it has no {METADATA_FILE}, "
            f"{OFFSETS_DIR}/ or {COMMITS_DIR}/"
        )
    metadata = checkpoint / METADATA_FILE
    if metadata.is_file() and not _is_query_metadata(metadata):
        raise ConfigError(
            f"{checkpoint} is not a Spark streaming checkpoint: {METADATA_FILE} is not "
            'Spark\'s {"id": ...}'
        )


def _is_query_metadata(path: Path) -> bool:
    try:
        document = json.loads(path.read_text(encoding="utf-8").split("\n")[0])
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(document, dict) and isinstance(document.get("id"), str)


def _batch_ids(log_dir: Path) -> list[int]:
    """Batch ids of a Spark metadata log: its files named by a number (Spark also keeps
    hidden `.N.crc` and temporary files there)."""
    if not log_dir.is_dir():
        return []
    return [
        int(entry.name)
        for entry in log_dir.iterdir()
        if entry.name.isascii() and entry.name.isdigit()
    ]


def _is_json_object(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except json.JSONDecodeError:
        return False


def _source_offsets(line: str) -> Offsets:
    """One source's offsets if they have the replog source's shape, else none."""
    if not line or line == NO_OFFSETS:
        return {}
    try:
        value = json.loads(line)
    except json.JSONDecodeError:
        return {}
    if not isinstance(value, dict) or not value:
        return {}
    try:
        return decode_offsets(value, "source offsets")
    except ConfigError:
        return {}
