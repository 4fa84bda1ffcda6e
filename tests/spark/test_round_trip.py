"""df.write then spark.read through format("replog"): the same rows come back."""

from __future__ import annotations

import pytest
from chispa import assert_df_equality
from pyspark.sql import SparkSession

from tests.spark.conftest import TopicTools

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SCHEMA = "key binary, value binary, headers array<struct<key:string,value:binary>>"


def test_written_rows_read_back_equal_with_null_keys_values_and_headers(
    spark: SparkSession, topics: TopicTools, bootstrap_servers: str, topic_name: str
) -> None:
    topics.create(topic_name, 3, replication_factor=3)
    rows = [
        (b"k1", b"v1", [("trace", b"abc"), ("empty", None)]),
        (None, b"no key", []),
        (b"k3", None, None),
        (None, None, [("only", b"\x00\xff")]),
        *[(f"k{i}".encode(), f"v{i}".encode(), None) for i in range(4, 200)],
    ]
    original = spark.createDataFrame(rows, SCHEMA)
    (
        original.write.format("replog")
        .option("replog.bootstrap.servers", bootstrap_servers)
        .option("topic", topic_name)
        .mode("append")
        .save()
    )
    read_back = (
        spark.read.format("replog")
        .option("kafka.bootstrap.servers", bootstrap_servers)  # Kafka's option name works too
        .option("subscribe", topic_name)
        .option("includeHeaders", "true")
        .load()
        .select("key", "value", "headers")
    )
    assert_df_equality(read_back, original, ignore_row_order=True, ignore_nullable=True)
