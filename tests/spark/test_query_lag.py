"""`replog lag` against the checkpoint of a real streaming query, and the source's latest
offsets in Spark's progress."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.streaming.listener import StreamingQueryProgress

from spark_replica.tools.cli.main import main
from tests.spark.conftest import TopicTools

pytestmark = [pytest.mark.spark, pytest.mark.slow]

QUERY_TIMEOUT_S = 120
MORE = 5  # records produced to each partition after the query stopped


class NextOffsets:
    """A foreachBatch sink that keeps, per partition, the offset after the last row read."""

    def __init__(self) -> None:
        self.next: dict[int, int] = {}

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        for row in batch.groupBy("partition").max("offset").collect():
            self.next[row[0]] = max(self.next.get(row[0], 0), row[1] + 1)


def run_available_now(
    spark: SparkSession, servers: str, topic: str, checkpoint: Path, **options: str
) -> tuple[StreamingQuery, NextOffsets]:
    sink = NextOffsets()
    reader = (
        spark.readStream.format("replog")
        .option("replog.bootstrap.servers", servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    for name, value in options.items():
        reader = reader.option(name, value)
    query = (
        reader.load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(QUERY_TIMEOUT_S), "AvailableNow query did not stop in time"
    assert query.exception() is None
    return query, sink


def replog_lag_json(
    capsys: pytest.CaptureFixture[str], servers: str, *checkpoints: Path
) -> list[dict]:
    capsys.readouterr()
    flags = [flag for checkpoint in checkpoints for flag in ("--checkpoint", str(checkpoint))]
    assert main(["lag", "--bootstrap", servers, *flags, "--json"]) == 0
    documents = json.loads(capsys.readouterr().out)
    assert isinstance(documents, list)
    return documents


def latest_offset(progress: StreamingQueryProgress | None) -> dict:
    """The replog source's latest offsets in a progress report (reportLatestOffset)."""
    assert progress is not None, "the query reported no progress"
    return json.loads(progress.sources[0].latestOffset)


def test_lag_of_a_stopped_query_and_latest_offsets_in_progress(
    spark: SparkSession,
    topics: TopicTools,
    bootstrap_servers: str,
    topic_name: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    checkpoint = tmp_path / "checkpoint"
    topics.create(topic_name, 2)
    topics.produce(topic_name, [f"a{i}" for i in range(4)], partition=0)
    topics.produce(topic_name, [f"b{i}" for i in range(6)], partition=1)

    query, read = run_available_now(spark, bootstrap_servers, topic_name, checkpoint)
    assert read.next == {0: 4, 1: 6}
    assert latest_offset(query.lastProgress) == {topic_name: {"0": 4, "1": 6}}

    for partition in (0, 1):
        topics.produce(topic_name, [f"more{i}" for i in range(MORE)], partition=partition)
    [lag] = replog_lag_json(capsys, bootstrap_servers, checkpoint)
    assert lag == {
        "checkpoint": str(checkpoint),
        "batch_id": 0,
        "total_lag": 2 * MORE,
        "partitions": [
            {
                "topic": topic_name,
                "partition": partition,
                "committed": read.next[partition],
                "high_watermark": read.next[partition] + MORE,
                "lag": MORE,
            }
            for partition in (0, 1)
        ],
    }

    # Restarted with a read limit, the first batch ends short of the HWs; the progress
    # still reports the HWs as the latest offsets: how far behind the query is.
    query, _ = run_available_now(
        spark, bootstrap_servers, topic_name, checkpoint, maxOffsetsPerTrigger=str(MORE)
    )
    first = query.recentProgress[0]
    assert sum(json.loads(first.sources[0].endOffset)[topic_name].values()) == 10 + MORE
    assert latest_offset(first) == {topic_name: {"0": 4 + MORE, "1": 6 + MORE}}
    # With a second checkpoint whose topic the cluster does not have: its HW is unknown.
    gone = tmp_path / "gone"
    (gone / "offsets").mkdir(parents=True)
    (gone / "commits").mkdir()
    (gone / "offsets" / "0").write_text('v1\n{"batchWatermarkMs":0}\n{"gone-topic": {"0": 3}}')
    (gone / "commits" / "0").write_text('v1\n{"nextBatchWatermarkMs":0}')
    lag, other = replog_lag_json(capsys, bootstrap_servers, checkpoint, gone)
    assert (lag["batch_id"], lag["total_lag"]) == (2, 0)
    assert other["partitions"] == [
        {"topic": "gone-topic", "partition": 0, "committed": 3, "high_watermark": None, "lag": None}
    ]
