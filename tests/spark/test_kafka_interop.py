"""Issue 13's interop acceptance: the topics Kafka's clients and Spark share are the same.

`format("replog")` reads what a confluent-kafka producer wrote through the Kafka
listener, and a confluent-kafka consumer reads what `df.write.format("replog")` wrote;
both compared column by column: keys, values, headers, timestamps, partitions, offsets.
Kafka's wire cannot tell a record without headers from one with an empty list, so both
count as no headers here.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from confluent_kafka import KafkaError, Message, TopicPartition
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructField,
    StructType,
)

from tests.kafka.clients import (
    Headers,
    KafkaRecord,
    consume,
    flush,
    kafka_consumer,
    kafka_producer,
    wait_for_topic,
)
from tests.spark.conftest import TopicTools
from tests.support import BrokerFactory

pytestmark = [pytest.mark.spark, pytest.mark.slow]

PARTITIONS = 3
RECORDS = 300
BASE_TIMESTAMP_MS = 1_700_000_000_000
CREATE_TIME = 0

HEADERS = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)
SINK_SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("headers", HEADERS),
        StructField("partition", IntegerType()),
    ]
)


def spark_records(spark: SparkSession, bootstrap: str, topic: str) -> list[KafkaRecord]:
    """The whole topic as format("replog") reads it, one KafkaRecord per row."""
    frame: DataFrame = (
        spark.read.format("replog")
        .option("replog.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("includeHeaders", "true")
        .load()
    )
    assert frame.filter(F.col("timestampType") != CREATE_TIME).count() == 0
    rows = frame.select(
        "partition", "offset", "key", "value", "headers", F.expr("unix_millis(timestamp)")
    ).collect()
    return sorted(
        (
            KafkaRecord(
                row[0],
                row[1],
                row[2] and bytes(row[2]),
                row[3] and bytes(row[3]),
                [(h["key"], h["value"] and bytes(h["value"])) for h in row[4] or []],
                row[5],
            )
            for row in rows
        ),
        key=lambda r: (r.partition, r.offset),
    )


def sample(i: int) -> tuple[bytes | None, bytes | None, Headers]:
    key = None if i % 5 == 0 else f"key-{i}".encode()
    value = None if i % 11 == 0 else f"value-{i}".encode() * (i % 3)
    headers = [] if i % 4 == 0 else [("trace", f"t{i}".encode()), ("empty", None), ("b", b"\x00")]
    return key, value, headers


def test_spark_reads_what_confluent_kafka_wrote(
    spark: SparkSession,
    spark_cluster: BrokerFactory,
    bootstrap_servers: str,
    topics: TopicTools,
    topic_name: str,
) -> None:
    topics.create(topic_name, PARTITIONS, replication_factor=3)
    kafka_bootstrap = spark_cluster.kafka_bootstrap()
    wait_for_topic(kafka_bootstrap, topic_name, PARTITIONS)
    config = {
        "bootstrap.servers": kafka_bootstrap,
        "acks": "all",
        "enable.idempotence": True,
        "compression.type": "zstd",
        "linger.ms": 5,
    }
    failed: list[KafkaError] = []
    expected: list[KafkaRecord] = []

    def delivered(
        key: bytes | None, value: bytes | None, headers: Headers, timestamp: int
    ) -> Callable[[KafkaError | None, Message], None]:
        def report(error: KafkaError | None, message: Message) -> None:
            if error is not None:
                failed.append(error)
            else:
                stored = KafkaRecord(
                    message.partition(), message.offset(), key, value, headers, timestamp
                )
                expected.append(stored)

        return report

    with kafka_producer(config) as producer:
        for i in range(RECORDS):
            key, value, headers = sample(i)
            timestamp = BASE_TIMESTAMP_MS + i * 1000
            producer.produce(
                topic_name,
                key=key,
                value=value,
                headers=headers,
                partition=i % PARTITIONS,
                timestamp=timestamp,
                on_delivery=delivered(key, value, headers, timestamp),
            )
        flush(producer)
    assert failed == []
    assert len(expected) == RECORDS
    expected.sort(key=lambda r: (r.partition, r.offset))

    read = spark_records(spark, bootstrap_servers, topic_name)
    assert [r.partition for r in read] == [r.partition for r in expected]
    assert [r.offset for r in read] == [r.offset for r in expected]
    assert [r.key for r in read] == [r.key for r in expected]
    assert [r.value for r in read] == [r.value for r in expected]
    assert [r.headers for r in read] == [r.headers for r in expected]
    assert [r.timestamp_ms for r in read] == [r.timestamp_ms for r in expected]


def test_confluent_kafka_reads_what_spark_wrote(
    spark: SparkSession,
    spark_cluster: BrokerFactory,
    bootstrap_servers: str,
    topics: TopicTools,
    topic_name: str,
) -> None:
    topics.create(topic_name, PARTITIONS, replication_factor=3)
    kafka_bootstrap = spark_cluster.kafka_bootstrap()
    wait_for_topic(kafka_bootstrap, topic_name, PARTITIONS)
    rows = [(*sample(i), i % PARTITIONS) for i in range(RECORDS)]
    (
        spark.createDataFrame(rows, SINK_SCHEMA)
        .write.format("replog")
        .mode("append")
        .option("replog.bootstrap.servers", bootstrap_servers)
        .option("topic", topic_name)
        .save()
    )
    written = spark_records(spark, bootstrap_servers, topic_name)
    assert len(written) == RECORDS

    config = {
        "bootstrap.servers": kafka_bootstrap,
        "group.id": "unused",
        "enable.auto.commit": False,
    }
    with kafka_consumer(config) as consumer:
        consumer.assign([TopicPartition(topic_name, p, 0) for p in range(PARTITIONS)])
        read = consume(consumer, lambda r: len(r) >= RECORDS)
        assert not consumer.consume(num_messages=1, timeout=1.0), "more records than written"
    read.sort(key=lambda r: (r.partition, r.offset))

    assert [r.partition for r in read] == [r.partition for r in written]
    assert [r.offset for r in read] == [r.offset for r in written]
    assert [r.key for r in read] == [r.key for r in written]
    assert [r.value for r in read] == [r.value for r in written]
    assert [r.headers for r in read] == [r.headers for r in written]
    assert [r.timestamp_ms for r in read] == [r.timestamp_ms for r in written]
    by_input = sorted(((k, v, h, p) for k, v, h, p in rows), key=repr)
    assert sorted(((r.key, r.value, r.headers, r.partition) for r in read), key=repr) == by_input
