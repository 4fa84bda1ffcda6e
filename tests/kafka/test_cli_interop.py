"""Issue 13's interop with replog's own command line: `replog consume` prints the keys and
values a confluent-kafka producer wrote, and a confluent-kafka consumer reads the lines
`replog produce` sent, keys and values identical, in order."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import TopicPartition

from tests.kafka.clients import (
    Deliveries,
    consume,
    flush,
    kafka_consumer,
    kafka_producer,
    make_topic,
)
from tests.support import BrokerFactory, replog

pytestmark = pytest.mark.slow

LINES = 100


def replog_bootstrap(brokers: BrokerFactory) -> str:
    return ",".join(f"{host}:{port}" for host, port in brokers.bootstrap)


def test_replog_consume_reads_what_confluent_kafka_wrote(kafka_cluster: BrokerFactory) -> None:
    topic = f"cli-in-{uuid.uuid4().hex[:8]}"
    make_topic(kafka_cluster, topic, 1, rf=3)
    deliveries = Deliveries()
    config = {"bootstrap.servers": kafka_cluster.kafka_bootstrap(), "acks": "all"}
    with kafka_producer(config) as producer:
        for n in range(LINES):
            producer.produce(
                topic, key=f"k{n}".encode(), value=f"value {n}".encode(), on_delivery=deliveries
            )
        flush(producer)
    assert deliveries.failed == []

    result = replog(
        *("consume", topic, "--from-beginning", "--max-records", str(LINES)),
        *("--print-key", "--key-separator", "=", "--timeout", "30"),
        *("--bootstrap", replog_bootstrap(kafka_cluster)),
    )
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode().splitlines() == [f"k{n}=value {n}" for n in range(LINES)]


def test_confluent_kafka_reads_what_replog_produce_sent(kafka_cluster: BrokerFactory) -> None:
    topic = f"cli-out-{uuid.uuid4().hex[:8]}"
    make_topic(kafka_cluster, topic, 1, rf=3)
    lines = "".join(f"k{n}=value {n}\n" for n in range(LINES))
    result = replog(
        *("produce", topic, "--key-separator", "="),
        *("--bootstrap", replog_bootstrap(kafka_cluster)),
        stdin=lines.encode(),
    )
    assert result.returncode == 0, result.stderr.decode()

    config = {
        "bootstrap.servers": kafka_cluster.kafka_bootstrap(),
        "group.id": "unused",
        "enable.auto.commit": False,
    }
    with kafka_consumer(config) as consumer:
        consumer.assign([TopicPartition(topic, 0, 0)])
        records = consume(consumer, lambda r: len(r) >= LINES)
    assert [(r.key, r.value, r.offset) for r in records] == [
        (f"k{n}".encode(), f"value {n}".encode(), n) for n in range(LINES)
    ]
