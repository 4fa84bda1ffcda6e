"""Security options of the Spark source and sink, with a real SparkSession.

A security setting replog does not support fails the query naming it, on every path
(batch and stream, read and write): a pipeline moved from Kafka must never run in
plaintext while its options say otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.spark.conftest import TopicTools

pytestmark = [pytest.mark.spark, pytest.mark.slow]

UNSUPPORTED = [
    (
        {"kafka.security.protocol": "SSL", "kafka.ssl.truststore.type": "JKS"},
        "kafka.ssl.truststore.type=JKS: only PEM is supported",
    ),
    (
        {"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "GSSAPI"},
        "kafka.sasl.mechanism=GSSAPI: supported mechanisms are",
    ),
]


def failure_of(action: Callable[[], object]) -> str:
    """The text of the error an action fails with (Spark wraps the source's own error)."""
    with pytest.raises(Exception) as caught:
        action()
    return str(caught.value)


@pytest.mark.parametrize(("options", "message"), UNSUPPORTED)
def test_unsupported_security_option_fails_a_batch_read_and_write(
    spark: SparkSession,
    bootstrap_servers: str,
    topics: TopicTools,
    topic_name: str,
    options: dict[str, str],
    message: str,
) -> None:
    topics.create(topic_name, 1)
    reader = (
        spark.read.format("replog")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("subscribe", topic_name)
        .options(**options)
    )
    assert message in failure_of(lambda: reader.load().collect())
    df = spark.range(3).selectExpr("cast(id as string) as value")
    writer = (
        df.write.format("replog")
        .mode("append")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("topic", topic_name)
        .options(**options)
    )
    assert message in failure_of(writer.save)


@pytest.mark.parametrize(("options", "message"), UNSUPPORTED)
def test_unsupported_security_option_fails_a_stream_read_and_write(
    spark: SparkSession,
    bootstrap_servers: str,
    topics: TopicTools,
    topic_name: str,
    tmp_path: Path,
    options: dict[str, str],
    message: str,
) -> None:
    topics.create(topic_name, 1)

    def run_stream_read() -> None:
        query = (
            spark.readStream.format("replog")
            .option("kafka.bootstrap.servers", bootstrap_servers)
            .option("subscribe", topic_name)
            .options(**options)
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", str(tmp_path / "read-checkpoint"))
            .start()
        )
        try:
            query.awaitTermination(120)
        finally:
            query.stop()

    def run_stream_write() -> None:
        query = (
            spark.readStream.format("rate")
            .option("rowsPerSecond", "1")
            .load()
            .selectExpr("cast(value as string) as value")
            .writeStream.format("replog")
            .option("kafka.bootstrap.servers", bootstrap_servers)
            .option("topic", topic_name)
            .options(**options)
            .option("checkpointLocation", str(tmp_path / "write-checkpoint"))
            .start()
        )
        try:
            query.awaitTermination(120)
        finally:
            query.stop()

    assert message in failure_of(run_stream_read)
    assert message in failure_of(run_stream_write)
