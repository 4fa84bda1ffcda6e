"""Readers of a log whose offsets have gaps, as a compacted log has: every reader gets
each record that is there, at its own offset, and none reports the gap as data loss.

The gap is made for real, on a real broker's disk: a topic that rolls a segment per
batch is written, the broker is stopped cleanly, the segments of some batches are
removed (what the cleaner leaves after it dropped every record of those batches) and
an empty active segment is put at the log end (the last batches are gone too, as when
the log rolled and the cleaner emptied the segment before it), and the broker is
started again on that log. Readers then go through the broker as users do:
the native client's consumer, `replog consume`, a Kafka client (confluent-kafka) through
the Kafka listener, and the Spark source's task reader with failOnDataLoss on.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from connectors.spark.partition_reader import RangePartition, read_range
from spark_replica.client import EARLIEST, LATEST, Cluster, Consumer, list_offsets
from spark_replica.tools.launcher.zookeeper import EmbeddedZooKeeper
from spark_replica.topics import TopicPartition
from tests.support import BrokerFactory, create_topic, produce, read_everything, replog, run

TOPIC = "gappy"
BATCHES = 10
RECORDS_PER_BATCH = 5
# Batches whose segments are removed: offsets 10..24 and 40..49 are gaps, and nothing
# follows the last one below the high watermark (50).
REMOVED_BATCHES = (2, 3, 4, 8, 9)
LOG_END = BATCHES * RECORDS_PER_BATCH
READ_TIMEOUT_S = 30.0
# An offset inside the first gap (10..24): a reader asked to start there begins at 25.
IN_GAP = 12
POLL_TIMEOUT_MS = 10_000
# The smallest segment.bytes a topic takes: each batch gets a segment of its own.
SEGMENT_BYTES = 1024


def kept_offsets() -> list[int]:
    return [
        batch * RECORDS_PER_BATCH + n
        for batch in range(BATCHES)
        if batch not in REMOVED_BATCHES
        for n in range(RECORDS_PER_BATCH)
    ]


def value_at(offset: int) -> str:
    """A value that makes a batch more than half of SEGMENT_BYTES: two never share one."""
    return f"v{offset}:" + "x" * 30


@dataclass(frozen=True)
class GappyBroker:
    factory: BrokerFactory

    @property
    def address(self) -> str:
        return self.factory.brokers[1].address

    @property
    def bootstrap(self) -> list[tuple[str, int]]:
        return self.factory.bootstrap


async def log_bounds(bootstrap: list[tuple[str, int]]) -> tuple[int, int]:
    """(log start, high watermark) of the partition, as its leader answers them."""
    tp = TopicPartition(TOPIC, 0)
    cluster = Cluster(bootstrap)
    try:
        earliest = await list_offsets(cluster, [tp], EARLIEST, wait_s=READ_TIMEOUT_S)
        latest = await list_offsets(cluster, [tp], LATEST, wait_s=READ_TIMEOUT_S)
        return earliest[tp][0], latest[tp][0]
    finally:
        await cluster.close()


def remove_segments(partition_dir: Path, base_offsets: list[int]) -> None:
    """Remove the segment files (log and indexes) that start at each base offset."""
    for base in base_offsets:
        files = list(partition_dir.glob(f"{base:020d}.*"))
        assert any(f.suffix == ".log" for f in files), f"no segment at {base} in {partition_dir}"
        for file in files:
            file.unlink()


@pytest.fixture(scope="module")
def gappy(
    zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GappyBroker]:
    factory = BrokerFactory(
        f"{zookeeper.connect_string}/test-{uuid.uuid4().hex[:12]}",
        tmp_path_factory.mktemp("offset-gaps"),
    )
    try:
        broker = factory.start(1)
        run(create_topic(factory.bootstrap, TOPIC, **{"segment.bytes": str(SEGMENT_BYTES)}))
        for batch in range(BATCHES):
            first = batch * RECORDS_PER_BATCH
            values = [value_at(first + n) for n in range(RECORDS_PER_BATCH)]
            run(produce(factory.bootstrap, TOPIC, values))
        broker.stop()
        removed = [batch * RECORDS_PER_BATCH for batch in REMOVED_BATCHES]
        partition_dir = broker.log_dir / f"{TOPIC}-0"
        remove_segments(partition_dir, removed)
        (partition_dir / f"{LOG_END:020d}.log").touch()
        factory.start(1)
        assert run(log_bounds(factory.bootstrap)) == (0, LOG_END), "the gaps are inside the log"
        yield GappyBroker(factory)
    finally:
        factory.stop_all()


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
