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
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

pytestmark = [pytest.mark.spark, pytest.mark.slow]

QUERY_TIMEOUT_S = 120.0
ROWS_PER_MICRO_BATCH = 90
SINK_OPTIONS = {"replog.batch.max.records": "3"}


def fill_input(topics: Any, topic: str, first: int, count: int) -> None:
    """Records `first`..`first + count - 1`, alternately in input partitions 0 and 1;
    every 4th has no key, so keyless routing is replayed too."""
    for partition in (0, 1):
        ids = [i for i in range(first, first + count) if i % 2 == partition]
        topics.produce(
            topic,
            [f"v{i}" for i in ids],
            keys=[None if i % 4 == 0 else f"k{i % 7}" for i in ids],
            partition=partition,
        )


def run_to_end(spark: SparkSession, servers: str, source: str, sink: str, checkpoint: Path) -> int:
    """Run the query (AvailableNow) until it has read everything; return its last batch id."""
    query: StreamingQuery = (
        spark.readStream.format("replog")
        .option("replog.bootstrap.servers", servers)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", ROWS_PER_MICRO_BATCH)
        .load()
        .select("key", "value")
        .writeStream.format("replog")
        .option("replog.bootstrap.servers", servers)
        .option("topic", sink)
        .options(**SINK_OPTIONS)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(QUERY_TIMEOUT_S), "the query did not finish in time"
        assert query.exception() is None, f"the query failed: {query.exception()}"
    finally:
        if query.isActive:
            query.stop()
    return last_entry(checkpoint / "commits")


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


def test_replay_after_deleting_the_latest_checkpoint_entries(
    spark: SparkSession,
    spark_cluster: Any,
    bootstrap_servers: str,
    topics: Any,
    topic_name: str,
    stored_records: Callable[..., list[Any]],
    tmp_path: Path,
) -> None:
    source, sink, checkpoint = f"{topic_name}-in", topic_name, tmp_path / "checkpoint"
    topics.create(source, 2)
    topics.create(sink, 3)
    total = 3 * ROWS_PER_MICRO_BATCH
    fill_input(topics, source, 0, total)
    assert run_to_end(spark, bootstrap_servers, source, sink, checkpoint) == 2

    delete_latest(checkpoint, 2)  # micro-batches 1 and 2 are planned and written again
    assert run_to_end(spark, bootstrap_servers, source, sink, checkpoint) == 2
    assert_each_once(stored_records(spark_cluster.bootstrap, sink), total)


def test_replay_after_restoring_an_older_checkpoint_copy(
    spark: SparkSession,
    spark_cluster: Any,
    bootstrap_servers: str,
    topics: Any,
    topic_name: str,
    stored_records: Callable[..., list[Any]],
    tmp_path: Path,
) -> None:
    source, sink, checkpoint = f"{topic_name}-in", topic_name, tmp_path / "checkpoint"
    topics.create(source, 2)
    topics.create(sink, 3)
    half = 2 * ROWS_PER_MICRO_BATCH
    fill_input(topics, source, 0, half)
    assert run_to_end(spark, bootstrap_servers, source, sink, checkpoint) == 1
    shutil.copytree(checkpoint, tmp_path / "after-batch-1")

    fill_input(topics, source, half, half)
    assert run_to_end(spark, bootstrap_servers, source, sink, checkpoint) == 3

    shutil.rmtree(checkpoint)
    shutil.copytree(tmp_path / "after-batch-1", checkpoint)  # micro-batches 2, 3 again
    assert run_to_end(spark, bootstrap_servers, source, sink, checkpoint) == 3
    assert_each_once(stored_records(spark_cluster.bootstrap, sink), 2 * half)
