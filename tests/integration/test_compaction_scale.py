"""The log cleaner at the acceptance's scale: 100,000 records over 1,000 keys, then
tombstones for half the keys, on one real broker.

After cleaning, each live key's last value is the only record of it, at the offset its
producer was acknowledged; the tombstoned keys are gone, and not before
delete.retention.ms; a Kafka client (confluent-kafka through the Kafka listener) reads
the same (offset, key, value) list as the native consumer. The topic's segments are
small so that nearly all of the log is sealed and cleanable, and the cleaner backs off
200 ms, so the whole run fits in well under a minute.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING
from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from spark_replica.client import Cluster, Consumer, Producer, ProducerConfig
from spark_replica.tools.launcher.brokers import BrokerProcess
from spark_replica.tools.launcher.zookeeper import EmbeddedZooKeeper
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.list_offsets import LATEST_TIMESTAMP
from tests.support import BrokerFactory, create_topic, rows_of, run

pytestmark = pytest.mark.slow

TOPIC = "cdc-at-scale"
KEYS = 1_000
RECORDS = 100_000
TOMBSTONED = KEYS // 2
DELETE_RETENTION_MS = 5_000
CLEANED_TIMEOUT_S = 40.0
READ_TIMEOUT_S = 30.0
TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": "262144",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": str(DELETE_RETENTION_MS),
}
FILLER_KEY = "filler"
# Enough filler after the tombstones to seal the segment that holds them.
FILLER_RECORDS = 1_000

Row = tuple[int, bytes, bytes | None]


def key(number: int) -> str:
    return f"key-{number:04d}"


def is_tombstoned(name: str) -> bool:
    return name != FILLER_KEY and int(name.removeprefix("key-")) < TOMBSTONED


@pytest.fixture(scope="module")
def broker(
    zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerProcess]:
    factory = BrokerFactory(
        f"{zookeeper.connect_string}/test-{uuid.uuid4().hex[:12]}",
        Path(tmp_path_factory.mktemp("compaction-scale")),
    )
    try:
        yield factory.start(1, **{"log.cleaner.backoff.ms": "200"})
    finally:
        factory.stop_all()


async def fill(bootstrap: list[tuple[str, int]]) -> tuple[dict[str, Row], float]:
    """Produce the values, the tombstones and the filler; return each live key's last
    (acknowledged offset, key, value), and when the tombstones were sent."""
    await create_topic(bootstrap, TOPIC, **TOPIC_CONFIGS)
    cluster = Cluster(bootstrap)
    try:
        producer = Producer(cluster, ProducerConfig(batch_records=1_000))
        keys = [key(i % KEYS) for i in range(RECORDS)]
        values = [f"{k}-v{i}" for i, k in enumerate(keys)]
        sent = await producer.send_records(TOPIC, values, keys, partition=0)
        tombstones_sent_at = time.monotonic()
        tombstones = [key(i) for i in range(TOMBSTONED)]
        await producer.send_records(TOPIC, [None] * TOMBSTONED, tombstones, partition=0)
        filler = ["x" * 100] * FILLER_RECORDS
        await producer.send_records(TOPIC, filler, [FILLER_KEY] * FILLER_RECORDS, partition=0)
        await producer.close()
    finally:
        await cluster.close()
    last = {
        k: (m.offset, k.encode(), v.encode()) for k, v, m in zip(keys, values, sent, strict=True)
    }
    return {k: row for k, row in last.items() if not is_tombstoned(k)}, tombstones_sent_at


async def read_natively(bootstrap: list[tuple[str, int]]) -> list[Row]:
    """Every record from the log start to the high watermark, across offset gaps."""
    cluster = Cluster(bootstrap)
    try:
        consumer = Consumer(cluster)
        tp = TopicPartition(TOPIC, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning()
        end = (await consumer.list_offsets([tp], LATEST_TIMESTAMP))[tp][0]
        fetched = []
        deadline = time.monotonic() + READ_TIMEOUT_S
        while consumer.position(tp) < end and time.monotonic() < deadline:
            fetched += await consumer.poll(max_wait_ms=200)
        assert consumer.position(tp) == end, "the native consumer reached the high watermark"
    finally:
        await cluster.close()
    return [(row["offset"], row["key"], row["value"]) for row in rows_of(fetched)]


def read_with_kafka_client(broker: BrokerProcess, last_offset: int) -> list[Row]:
    """What confluent-kafka reads from the beginning through the Kafka listener, up to
    and including `last_offset`."""
    consumer = KafkaConsumer(
        {
            "bootstrap.servers": f"{broker.host}:{broker.kafka_port}",
            "group.id": f"scale-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
        }
    )
    got: list[Row] = []
    try:
        consumer.assign([KafkaTopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + READ_TIMEOUT_S
        while (not got or got[-1][0] < last_offset) and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=10_000, timeout=0.5):
                assert message.error() is None, message.error()
                got.append((message.offset(), message.key(), message.value()))
    finally:
        consumer.close()
    return got


def live_rows(rows: list[Row]) -> dict[str, list[Row]]:
    """The rows of each key but the filler, by key, in offset order."""
    by_key: dict[str, list[Row]] = {}
    for row in rows:
        name = row[1].decode()
        if name != FILLER_KEY:
            by_key.setdefault(name, []).append(row)
    return by_key


def test_a_cleaned_log_holds_each_live_keys_last_value_at_its_offset_for_every_reader(
    broker: BrokerProcess,
) -> None:
    bootstrap = [(broker.host, broker.port)]
    live, tombstones_sent_at = run(fill(bootstrap))
    expected = {k: [row] for k, row in live.items()}
    deadline = time.monotonic() + CLEANED_TIMEOUT_S
    tombstones_seen_alone = False
    while True:
        rows = run(read_natively(bootstrap))
        by_key = live_rows(rows)
        current = {k: v for k, v in by_key.items() if not is_tombstoned(k)}
        tombstoned = {k: v for k, v in by_key.items() if is_tombstoned(k)}
        tombstones_seen_alone |= len(tombstoned) == TOMBSTONED and all(
            len(records) == 1 and records[0][2] is None for records in tombstoned.values()
        )
        if current == expected and not tombstoned:
            break
        assert time.monotonic() < deadline, (
            f"not cleaned in {CLEANED_TIMEOUT_S} s: {len(rows)} records, "
            f"{len(tombstoned)} tombstoned keys still there"
        )
        time.sleep(1.0)
    assert time.monotonic() - tombstones_sent_at >= DELETE_RETENTION_MS / 1000
    assert tombstones_seen_alone, "each tombstone was the only record of its key for a while"

    assert run(read_natively(bootstrap)) == rows, "the cleaned log is stable"
    assert read_with_kafka_client(broker, rows[-1][0]) == rows
