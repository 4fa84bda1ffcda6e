"""df.write.format("replog") against a real 3-broker cluster: what lands where, and the
input and options that are refused (with messages naming the column or option)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from chispa import assert_df_equality
from pyspark.sql import DataFrame, DataFrameWriter, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    StringType,
    StructField,
    StructType,
)

from spark_replica.client.partitioner import partition_for_key
from tests.support import BrokerFactory

pytestmark = [pytest.mark.spark, pytest.mark.slow]

HEADERS = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)
ROW_SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("headers", HEADERS),
    ]
)


def writer(df: DataFrame, bootstrap: str, **options: str) -> DataFrameWriter:
    """An append to replog; `options` are sink options (e.g. topic=...)."""
    return (
        df.write.format("replog")
        .mode("append")
        .option("replog.bootstrap.servers", bootstrap)
        .options(**options)
    )


def failure_of(action: Callable[[], object]) -> str:
    """The text of the error an action fails with (Spark wraps the sink's own error)."""
    with pytest.raises(Exception) as caught:
        action()
    return str(caught.value)


def test_round_trip_with_null_keys_null_values_and_headers(
    spark: SparkSession,
    spark_cluster: BrokerFactory,
    bootstrap_servers: str,
    topics: Any,
    topic_name: str,
    stored_records: Callable[..., list],
) -> None:
    topics.create(topic_name, 3, 3)
    rows = []
    for i in range(300):
        key = None if i % 3 == 0 else f"key-{i % 17}".encode()
        value = None if i % 10 == 0 else f"value-{i}".encode()
        if i % 4 == 0:
            headers = None
        elif i % 4 == 1:
            headers = []
        else:
            headers = [("h1", f"x{i}".encode()), ("h2", None)]
        rows.append((key, value, headers))
    original = spark.createDataFrame(rows, ROW_SCHEMA).repartition(2)
    # Keyless records fill a partition with a batch's bytes before moving on: small
    # batches make this small input move over every partition.
    writer(original, bootstrap_servers, topic=topic_name, **{"replog.batch.size": "256"}).save()

    stored = stored_records(spark_cluster.bootstrap, topic_name)
    back = spark.createDataFrame([(r.key, r.value, r.headers) for r in stored], ROW_SCHEMA)
    assert_df_equality(original, back, ignore_row_order=True)
    for record in stored:
        if record.key is not None:
            assert record.partition == partition_for_key(record.key, 3)
    keyless = Counter(r.partition for r in stored if r.key is None)
    assert sorted(keyless) == [0, 1, 2], "keyless records are spread over every partition"


def test_topic_and_partition_columns_route_each_row(
    spark: SparkSession,
    spark_cluster: BrokerFactory,
    bootstrap_servers: str,
    topics: Any,
    topic_name: str,
    stored_records: Callable[..., list],
) -> None:
    first, second = f"{topic_name}-a", f"{topic_name}-b"
    topics.create(first, 2)
    topics.create(second, 4)
    df = spark.range(40).select(
        F.when(F.col("id") % 2 == 0, F.lit(first)).otherwise(F.lit(second)).alias("topic"),
        F.when(F.col("id") < 20, (F.col("id") % 2).cast("int")).alias("partition"),
        F.col("id").cast("string").alias("key"),
        F.concat(F.lit("v"), F.col("id").cast("string")).alias("value"),
    )
    writer(df, bootstrap_servers).save()

    for topic, parity, partitions in ((first, 0, 2), (second, 1, 4)):
        stored = stored_records(spark_cluster.bootstrap, topic)
        ids = sorted(int(r.value.decode()[1:]) for r in stored)
        assert ids == [i for i in range(40) if i % 2 == parity]
        for record in stored:
            i = int(record.key.decode())
            expected = i % 2 if i < 20 else partition_for_key(record.key, partitions)
            assert record.partition == expected, f"row {i}"


def test_topic_option_overrides_the_topic_column(
    spark: SparkSession,
    spark_cluster: BrokerFactory,
    bootstrap_servers: str,
    topics: Any,
    topic_name: str,
    stored_records: Callable[..., list],
) -> None:
    topics.create(topic_name, 1)
    df = spark.createDataFrame([("elsewhere", "a"), (None, "b")], "topic string, value string")
    writer(df, bootstrap_servers, topic=topic_name).save()
    stored = stored_records(spark_cluster.bootstrap, topic_name)
    assert sorted(r.value for r in stored) == [b"a", b"b"]


def test_null_topic_without_option_fails_naming_the_column(
    spark: SparkSession, bootstrap_servers: str, topics: Any, topic_name: str
) -> None:
    topics.create(topic_name, 1)
    df = spark.createDataFrame([(topic_name, "a"), (None, "b")], "topic string, value string")
    message = failure_of(writer(df.coalesce(1), bootstrap_servers).save)
    assert "column 'topic' is null in row 1" in message
    assert "'topic' option" in message


@pytest.mark.parametrize(
    ("select", "named"),
    [
        ("cast(id as int) as value", "column 'value' must be binary or string, not int"),
        ("cast(id as string) as key", "needs a 'value' column"),
        ("'v' as value, id as partition", "column 'partition' must be int, not bigint"),
        ("'v' as value, 1.5 as key", "column 'key' must be binary or string"),
    ],
)
def test_bad_input_columns_fail_naming_the_column(
    spark: SparkSession, bootstrap_servers: str, topic_name: str, select: str, named: str
) -> None:
    df = spark.range(3).selectExpr(*[part.strip() for part in select.split(",")])
    message = failure_of(writer(df, bootstrap_servers, topic=topic_name).save)
    assert named in message


def test_overwrite_mode_is_refused(
    spark: SparkSession, bootstrap_servers: str, topic_name: str
) -> None:
    df = spark.range(3).selectExpr("cast(id as string) as value")
    save = (
        df.write.format("replog")
        .mode("overwrite")
        .option("replog.bootstrap.servers", bootstrap_servers)
        .option("topic", topic_name)
        .save
    )
    message = failure_of(save)
    assert "save mode 'overwrite' is not supported" in message
    assert "mode('append')" in message


def test_bad_options_fail_naming_the_option(
    spark: SparkSession, bootstrap_servers: str, topic_name: str
) -> None:
    df = spark.range(3).selectExpr("cast(id as string) as value")
    message = failure_of(
        writer(df, bootstrap_servers, topic=topic_name).option("replog.acks", "2").save
    )
    assert "replog.acks='2'" in message
    message = failure_of(df.write.format("replog").mode("append").option("topic", topic_name).save)
    assert "replog.bootstrap.servers" in message


def test_missing_topic_fails_saying_so(
    spark: SparkSession, bootstrap_servers: str, topic_name: str
) -> None:
    df = spark.range(3).selectExpr("cast(id as string) as value")
    message = failure_of(writer(df, bootstrap_servers, topic=topic_name).save)
    assert f"topic '{topic_name}' does not exist" in message


def test_a_batch_the_broker_refuses_fails_the_write(
    spark: SparkSession, bootstrap_servers: str, topics: Any, topic_name: str
) -> None:
    topics.create(topic_name, 1, 1, **{"max.message.bytes": "4096"})
    df = spark.range(3).selectExpr("repeat('x', 10000) as value")
    message = failure_of(writer(df.coalesce(1), bootstrap_servers, topic=topic_name).save)
    assert "max_batch_bytes" in message or "too large" in message.lower()
