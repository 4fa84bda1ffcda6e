"""Readers of a log whose offsets have gaps, as a compacted log has: every reader gets
each record that is there, at its own offset, and none reports the gap as data loss.

The gaps are made for real, on a real broker's disk (tests/support_gaps.py). Readers go
through the broker as users do: the native client's consumer, `replog consume`, a Kafka
client (confluent-kafka) through the Kafka listener, and the Spark source's task reader
with failOnDataLoss on (a whole Spark query: tests/spark/test_read_offset_gaps.py).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from connectors.spark.partition_reader import RangePartition, read_range
from spark_replica.client import Cluster, Consumer
from spark_replica.tools.launcher.zookeeper import EmbeddedZooKeeper
from spark_replica.topics import TopicPartition
from tests.support import read_everything, replog, run
from tests.support_gaps import (
    LOG_END,
    READ_TIMEOUT_S,
    TOPIC,
    GappyBroker,
    kept_offsets,
    running_gappy_broker,
    value_at,
)

# An offset inside the first gap (10..24): a reader asked to start there begins at 25.
IN_GAP = 12
POLL_TIMEOUT_MS = 10_000


@pytest.fixture(scope="module")
def gappy(
    zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GappyBroker]:
    with running_gappy_broker(
        zookeeper.connect_string, tmp_path_factory.mktemp("offset-gaps")
    ) as broker:
        yield broker


@pytest.mark.slow
def test_the_native_consumer_reads_every_kept_record_at_its_offset(gappy: GappyBroker) -> None:
    rows = run(read_everything(gappy.bootstrap, TOPIC, len(kept_offsets())))
    got = [(row["offset"], row["value"]) for row in rows]
    assert got == [(o, value_at(o).encode()) for o in kept_offsets()]


async def read_natively_from(bootstrap: list[tuple[str, int]], offset: int) -> list[int]:
    """Offsets the native consumer returns from `offset` on, until the last kept one."""
    tp = TopicPartition(TOPIC, 0)
    cluster = Cluster(bootstrap)
    try:
        consumer = Consumer(cluster)
        consumer.assign([tp])
        consumer.seek(tp, offset)
        offsets: list[int] = []
        deadline = time.monotonic() + READ_TIMEOUT_S
        while (not offsets or offsets[-1] < kept_offsets()[-1]) and time.monotonic() < deadline:
            for chunk in await consumer.poll(max_wait_ms=200):
                offsets += range(chunk.first_offset, chunk.next_offset)
        return offsets
    finally:
        await cluster.close()


@pytest.mark.slow
def test_the_native_consumer_started_inside_a_gap_begins_at_the_next_record(
    gappy: GappyBroker,
) -> None:
    offsets = run(read_natively_from(gappy.bootstrap, IN_GAP))
    assert offsets == [o for o in kept_offsets() if o > IN_GAP]


@pytest.mark.slow
def test_replog_consume_prints_every_kept_record(gappy: GappyBroker) -> None:
    printed = replog(
        "consume",
        TOPIC,
        "--from-beginning",
        "--max-records",
        str(len(kept_offsets())),
        "--property",
        "print.offset=true",
        "--bootstrap",
        gappy.address,
    )
    assert printed.returncode == 0, printed.stderr
    expected = [f"Offset:{o}\t{value_at(o)}" for o in kept_offsets()]
    assert printed.stdout.decode().splitlines() == expected


@pytest.mark.slow
def test_replog_consume_started_inside_a_gap_prints_from_the_next_record(
    gappy: GappyBroker,
) -> None:
    expected = [o for o in kept_offsets() if o > IN_GAP]
    printed = replog(
        "consume",
        TOPIC,
        "--partition",
        "0",
        "--offset",
        str(IN_GAP),
        "--max-records",
        str(len(expected)),
        "--property",
        "print.offset=true",
        "--property",
        "print.value=false",
        "--bootstrap",
        gappy.address,
    )
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout.decode().splitlines() == [f"Offset:{o}" for o in expected]


def read_with_kafka_client(gappy: GappyBroker, offset: int) -> list[tuple[int, bytes]]:
    """(offset, value) of what confluent-kafka reads from `offset` through the Kafka
    listener, until the last kept record."""
    broker = gappy.factory.brokers[1]
    consumer = KafkaConsumer(
        {
            "bootstrap.servers": f"{broker.host}:{broker.kafka_port}",
            "group.id": f"gaps-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
        }
    )
    got: list[tuple[int, bytes]] = []
    try:
        consumer.assign([KafkaTopicPartition(TOPIC, 0, offset)])
        deadline = time.monotonic() + READ_TIMEOUT_S
        while (not got or got[-1][0] < kept_offsets()[-1]) and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=100, timeout=0.2):
                assert message.error() is None, message.error()
                got.append((message.offset(), message.value()))
    finally:
        consumer.close()
    return got


@pytest.mark.slow
def test_a_kafka_client_reads_every_kept_record_at_its_offset(gappy: GappyBroker) -> None:
    got = read_with_kafka_client(gappy, 0)
    assert got == [(o, value_at(o).encode()) for o in kept_offsets()]


@pytest.mark.slow
def test_a_kafka_client_started_inside_a_gap_begins_at_the_next_record(
    gappy: GappyBroker,
) -> None:
    got = read_with_kafka_client(gappy, IN_GAP)
    assert [offset for offset, _ in got] == [o for o in kept_offsets() if o > IN_GAP]


def spark_task(gappy: GappyBroker, start: int, end: int) -> RangePartition:
    return RangePartition(
        TOPIC,
        0,
        start,
        end,
        gappy.address,
        include_headers=False,
        fail_on_data_loss=True,
        poll_timeout_ms=POLL_TIMEOUT_MS,
    )


@pytest.mark.slow
def test_the_spark_source_reads_across_gaps_without_reporting_data_loss(
    gappy: GappyBroker,
) -> None:
    batches = list(read_range(spark_task(gappy, 0, LOG_END)))
    got = [(row["offset"], row["value"]) for b in batches for row in b.to_pylist()]
    assert got == [(o, value_at(o).encode()) for o in kept_offsets()]


@pytest.mark.slow
def test_a_spark_task_whose_range_ends_inside_a_gap_finishes(gappy: GappyBroker) -> None:
    """Offsets 10..24 are gone: a range [5, 20) has only 5..9, and must not wait for 10."""
    started = time.monotonic()
    batches = list(read_range(spark_task(gappy, 5, 20)))
    offsets = [row["offset"] for b in batches for row in b.to_pylist()]
    assert offsets == [5, 6, 7, 8, 9]
    assert time.monotonic() - started < POLL_TIMEOUT_MS / 1000


@pytest.mark.slow
def test_a_spark_task_whose_range_lies_inside_a_gap_reads_nothing(gappy: GappyBroker) -> None:
    assert list(read_range(spark_task(gappy, 12, 20))) == []


@pytest.mark.slow
def test_a_spark_task_whose_range_ends_in_a_gap_at_the_high_watermark_finishes(
    gappy: GappyBroker,
) -> None:
    """From 40 the broker has no batch to answer below its high watermark (50)."""
    started = time.monotonic()
    batches = list(read_range(spark_task(gappy, 30, LOG_END)))
    offsets = [row["offset"] for b in batches for row in b.to_pylist()]
    assert offsets == list(range(30, 40))
    assert time.monotonic() - started < POLL_TIMEOUT_MS / 1000
