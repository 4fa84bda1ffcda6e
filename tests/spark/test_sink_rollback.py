"""Exactly-once streaming writes after the query's checkpoint was rolled back.

A user who deletes the latest entries of a checkpoint's `offsets/` and `commits/`, or
puts back an older copy of the checkpoint directory, makes the restarted query write
micro-batches again that the topic already holds, under the same batch ids. The sink
must recognise them as written: the query finishes, and the topic holds each record
once.

The input is a replog topic filled before the query starts, read with
maxOffsetsPerTrigger under Trigger.AvailableNow: a micro-batch planned again from the
same start covers the same records, as the guarantee requires of a rolled-back query.
Two input partitions make two write tasks (two producer ids); small sink batches make
each task send several batches per partition in every micro-batch.
"""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

pytestmark = [pytest.mark.spark, pytest.mark.slow]

QUERY_TIMEOUT_S = 120.0
ROWS_PER_MICRO_BATCH = 90
SINK_OPTIONS = {"replog.batch.max.records": "3"}


@dataclass
class Pipeline:
    """One test's query: an input topic of 2 partitions, an output topic of 3, and the
    query's checkpoint."""

    spark: SparkSession
    servers: str
    topics: Any
    source: str
    sink: str
    checkpoint: Path
    stored: Callable[[], list[Any]]  # what the output topic holds

    def fill(self, first: int, count: int) -> None:
        """Records `first`..`first + count - 1`, alternately in input partitions 0 and 1;
        every 4th has no key, so keyless routing is replayed too."""
        for partition in (0, 1):
            ids = [i for i in range(first, first + count) if i % 2 == partition]
            self.topics.produce(
                self.source,
                [f"v{i}" for i in ids],
                keys=[None if i % 4 == 0 else f"k{i % 7}" for i in ids],
                partition=partition,
            )

    def run_to_end(self) -> int:
        """Run the query (AvailableNow) until it has read everything; return its last batch id."""
        query: StreamingQuery = (
            self.spark.readStream.format("replog")
            .option("replog.bootstrap.servers", self.servers)
            .option("subscribe", self.source)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", ROWS_PER_MICRO_BATCH)
            .load()
            .select("key", "value")
            .writeStream.format("replog")
            .option("replog.bootstrap.servers", self.servers)
            .option("topic", self.sink)
            .options(**SINK_OPTIONS)
            .option("checkpointLocation", str(self.checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        try:
            assert query.awaitTermination(QUERY_TIMEOUT_S), "the query did not finish in time"
            assert query.exception() is None, f"the query failed: {query.exception()}"
        finally:
            if query.isActive:
                query.stop()
        return last_entry(self.checkpoint / "commits")


@pytest.fixture
def pipeline(
    spark: SparkSession,
    spark_cluster: Any,
    bootstrap_servers: str,
    topics: Any,
    topic_name: str,
    stored_records: Callable[..., list[Any]],
    tmp_path: Path,
) -> Pipeline:
    source, sink = f"{topic_name}-in", topic_name
    topics.create(source, 2)
    topics.create(sink, 3)
    return Pipeline(
        spark,
        bootstrap_servers,
        topics,
        source,
        sink,
        tmp_path / "checkpoint",
        lambda: stored_records(spark_cluster.bootstrap, sink),
    )


def last_entry(log: Path) -> int:
    return max(int(entry.name) for entry in log.iterdir() if entry.name.isdigit())


def delete_latest(checkpoint: Path, count: int) -> None:
    """Delete the latest `count` entries of offsets/ and commits/ (and their checksums)."""
    last = last_entry(checkpoint / "offsets")
    for batch_id in range(last - count + 1, last + 1):
        for log in ("offsets", "commits"):
            for name in (str(batch_id), f".{batch_id}.crc"):
                (checkpoint / log / name).unlink(missing_ok=True)


def assert_each_once(stored: list[Any], count: int) -> None:
    written = Counter(record.value for record in stored)
    duplicated = {value: n for value, n in written.items() if n > 1}
    assert not duplicated, f"{len(duplicated)} records written twice, e.g. {list(duplicated)[:5]}"
    assert set(written) == {f"v{i}".encode() for i in range(count)}


def test_replay_after_deleting_the_latest_checkpoint_entries(pipeline: Pipeline) -> None:
    total = 3 * ROWS_PER_MICRO_BATCH
    pipeline.fill(0, total)
    assert pipeline.run_to_end() == 2

    delete_latest(pipeline.checkpoint, 2)  # micro-batches 1 and 2 are planned and written again
    assert pipeline.run_to_end() == 2
    assert_each_once(pipeline.stored(), total)


def test_replay_after_restoring_an_older_checkpoint_copy(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    half = 2 * ROWS_PER_MICRO_BATCH
    pipeline.fill(0, half)
    assert pipeline.run_to_end() == 1
    shutil.copytree(pipeline.checkpoint, tmp_path / "after-batch-1")

    pipeline.fill(half, half)
    assert pipeline.run_to_end() == 3

    shutil.rmtree(pipeline.checkpoint)
    shutil.copytree(tmp_path / "after-batch-1", pipeline.checkpoint)  # micro-batches 2, 3 again
    assert pipeline.run_to_end() == 3
    assert_each_once(pipeline.stored(), 2 * half)
