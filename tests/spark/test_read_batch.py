"""spark.read.format("replog") against the shared 3-broker cluster: rows, ranges, splitting."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from chispa import assert_df_equality
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from connectors.spark.offsets import DataLossError
from connectors.spark.partition_reader import RangePartition, read_range
from connectors.spark.schema import source_schema
from tests.spark.conftest import TopicTools
from tests.support import BrokerFactory

pytestmark = [pytest.mark.spark, pytest.mark.slow]

BASE_MS = 1_700_000_000_000


def read(spark: SparkSession, servers: str, **options: str) -> DataFrame:
    reader = spark.read.format("replog").option("replog.bootstrap.servers", servers)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def at(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


def test_rows_have_kafkas_schema_with_headers_null_keys_and_values(
    spark: SparkSession, topics: TopicTools, bootstrap_servers: str, topic_name: str
) -> None:
    topics.create(topic_name, 2)
    topics.produce(
        topic_name,
        [b"v0", None, b"v2"],
        partition=0,
        keys=[b"k0", b"k1", None],
        timestamps=[BASE_MS, BASE_MS + 1, BASE_MS + 2],
        headers=[[("h", b"x"), ("n", None)], None, []],
    )
    topics.produce(topic_name, ["only"], partition=1, timestamps=[BASE_MS + 3])

    df = read(spark, bootstrap_servers, subscribe=topic_name, includeHeaders="true")

    expected = spark.createDataFrame(
        [
            (b"k0", b"v0", topic_name, 0, 0, at(BASE_MS), 0, [("h", b"x"), ("n", None)]),
            (b"k1", None, topic_name, 0, 1, at(BASE_MS + 1), 0, None),
            (None, b"v2", topic_name, 0, 2, at(BASE_MS + 2), 0, []),
            (None, b"only", topic_name, 1, 0, at(BASE_MS + 3), 0, None),
        ],
        source_schema(include_headers=True),
    )
    assert df.schema == source_schema(include_headers=True)
    assert_df_equality(df, expected, ignore_row_order=True)
    # Without includeHeaders the column is not there at all, as with Kafka's source.
    assert read(spark, bootstrap_servers, subscribe=topic_name).columns == [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
    ]


def test_offsets_timestamps_and_min_partitions_select_exactly_the_range(
    spark: SparkSession, topics: TopicTools, bootstrap_servers: str, topic_name: str
) -> None:
    topics.create(topic_name, 2)
    for partition in (0, 1):
        topics.produce(
            topic_name,
            [f"p{partition}-{i}" for i in range(10)],
            partition=partition,
            timestamps=[BASE_MS + i for i in range(10)],
        )

    def offsets(df: DataFrame) -> set[tuple[int, int]]:
        return {(row.partition, row.offset) for row in df.select("partition", "offset").collect()}

    by_offsets = read(
        spark,
        bootstrap_servers,
        subscribe=topic_name,
        startingOffsets=f'{{"{topic_name}": {{"0": 3, "1": -2}}}}',
        endingOffsets=f'{{"{topic_name}": {{"0": 7, "1": -1}}}}',
    )
    assert offsets(by_offsets) == {(0, o) for o in range(3, 7)} | {(1, o) for o in range(10)}

    by_time = read(
        spark,
        bootstrap_servers,
        subscribe=topic_name,
        startingTimestamp=str(BASE_MS + 5),
        endingTimestamp=str(BASE_MS + 8),
    )
    rows = by_time.select("partition", "offset", F.unix_millis("timestamp").alias("ms")).collect()
    assert {(r.partition, r.offset) for r in rows} == {(p, o) for p in (0, 1) for o in (5, 6, 7)}
    assert all(BASE_MS + 5 <= r.ms < BASE_MS + 8 for r in rows)

    split = read(spark, bootstrap_servers, subscribe=topic_name, minPartitions="7")
    assert split.rdd.getNumPartitions() >= 7
    values = [r.value.decode() for r in split.orderBy("partition", "offset").collect()]
    assert values == [f"p{p}-{i}" for p in (0, 1) for i in range(10)]


def test_records_lost_to_retention_fail_the_read_or_are_skipped(
    spark: SparkSession,
    brokers: BrokerFactory,
    topic_tools: type[TopicTools],
    topic_name: str,
) -> None:
    brokers.start(1, **{"log.retention.check.interval.ms": "200"})
    tools = topic_tools(brokers.bootstrap)
    tools.create(topic_name, 1, 1, **{"segment.bytes": "1024", "retention.bytes": "2048"})
    for i in range(0, 40, 4):
        tools.produce(topic_name, [f"r-{n}".encode() * 20 for n in range(i, i + 4)])
    log_start = wait_for_retention(tools, topic_name)
    servers = ",".join(f"{host}:{port}" for host, port in brokers.bootstrap)
    from_zero = f'{{"{topic_name}": {{"0": 0}}}}'

    # Planning sees the loss.
    with pytest.raises(Exception, match="failOnDataLoss"):
        read(spark, servers, subscribe=topic_name, startingOffsets=from_zero).collect()
    lenient = read(
        spark, servers, subscribe=topic_name, startingOffsets=from_zero, failOnDataLoss="false"
    )
    assert [r.offset for r in lenient.orderBy("offset").collect()] == list(range(log_start, 40))

    # A task whose range was planned before retention ran sees it while reading.
    planned = RangePartition(topic_name, 0, 0, 40, servers, False, True, 10_000)
    with pytest.raises(DataLossError, match=f"offsets 0..{log_start - 1} were deleted"):
        list(read_range(planned))
    skipping = replace(planned, fail_on_data_loss=False)
    offsets = [o for batch in read_range(skipping) for o in batch.column("offset").to_pylist()]
    assert offsets == list(range(log_start, 40))


def wait_for_retention(tools: TopicTools, topic: str) -> int:
    """The log start offset once retention has moved it and stopped moving it."""
    deadline = time.monotonic() + 60
    previous = -1
    while True:
        log_start = tools.log_start(topic)
        if log_start > 0 and log_start == previous:
            return log_start
        assert time.monotonic() < deadline, "retention did not delete the first segments"
        previous = log_start
        time.sleep(0.5)
