"""Security options of the Spark source and sink, with a real SparkSession.

Against a cluster started by `replog up --security sasl_ssl`, batch and streaming reads
and writes work with Kafka's client options (SCRAM over TLS, the local CA as a PEM
trust store), and a wrong password fails the query naming authentication. A security
setting replog does not support fails the query naming it, on every path (batch and
stream, read and write): a pipeline moved from Kafka must never run in plaintext while
its options say otherwise.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession

from spark_replica.client import Admin
from tests.spark.conftest import TopicTools
from tests.support import SecureCluster, run, secure_cluster

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


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureCluster]:
    """Three brokers with SASL_SSL listeners, shared by this module's secure tests."""
    with secure_cluster(tmp_path_factory.mktemp("secure-spark"), "sasl_ssl") as cluster:
        yield cluster


def secure_options(cluster: SecureCluster, password: str | None = None) -> dict[str, str]:
    """Kafka's client options for the admin over SASL_SSL, as a Kafka pipeline gives them."""
    login = cluster.admin_security
    assert login.username is not None and login.password is not None
    return {
        "kafka.bootstrap.servers": cluster.bootstrap,
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-256",
        "kafka.sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{login.username}" password="{password or login.password}";'
        ),
        "kafka.ssl.truststore.location": str(cluster.ca_file),
        "kafka.ssl.truststore.type": "PEM",
    }


def new_topic(cluster: SecureCluster, partitions: int = 2) -> str:
    topic = f"secure-{uuid.uuid4().hex[:10]}"

    async def create() -> None:
        client = cluster.admin_cluster()
        try:
            await Admin(client).create_topic(topic, partitions, 3)
        finally:
            await client.close()

    run(create())
    return topic


def numbers(spark: SparkSession, count: int) -> DataFrame:
    return spark.range(count).selectExpr("cast(id as string) as value")


def read_values(spark: SparkSession, options: dict[str, str], topic: str) -> list[str]:
    rows = (
        spark.read.format("replog")
        .options(**options)
        .option("subscribe", topic)
        .load()
        .selectExpr("cast(value as string) as value")
        .collect()
    )
    return sorted(row.value for row in rows)


def test_batch_write_and_read_over_sasl_ssl(spark: SparkSession, secure: SecureCluster) -> None:
    options = secure_options(secure)
    topic = new_topic(secure)
    numbers(spark, 100).write.format("replog").mode("append").options(**options).option(
        "topic", topic
    ).save()
    assert read_values(spark, options, topic) == sorted(str(n) for n in range(100))


def test_stream_read_and_write_over_sasl_ssl(
    spark: SparkSession, secure: SecureCluster, tmp_path: Path
) -> None:
    options = secure_options(secure)
    source, sink = new_topic(secure), new_topic(secure)
    numbers(spark, 50).write.format("replog").mode("append").options(**options).option(
        "topic", source
    ).save()
    query = (
        spark.readStream.format("replog")
        .options(**options)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .select("key", "value")
        .writeStream.format("replog")
        .options(**options)
        .option("topic", sink)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(120), "the availableNow query did not finish in 120 s"
    finally:
        query.stop()
    assert query.exception() is None
    assert read_values(spark, options, sink) == sorted(str(n) for n in range(50))


def test_wrong_password_fails_the_query_naming_authentication(
    spark: SparkSession, secure: SecureCluster
) -> None:
    options = secure_options(secure, password="not-the-password")
    topic = new_topic(secure, partitions=1)
    message = failure_of(lambda: read_values(spark, options, topic))
    assert "authentication" in message.lower()
    assert "not-the-password" not in message
    writer = (
        numbers(spark, 3)
        .write.format("replog")
        .mode("append")
        .options(**options)
        .option("topic", topic)
    )
    assert "authentication" in failure_of(writer.save).lower()
