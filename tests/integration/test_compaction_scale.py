"""The log cleaner at the acceptance's scale: 100,000 records over 1,000 keys, then
tombstones for half the keys, on one real broker (tests/support_compaction.py).

After cleaning, each live key's last value is the only record of it, at the offset its
producer was acknowledged; the tombstoned keys are gone, and not before
delete.retention.ms; a Kafka client (confluent-kafka through the Kafka listener) reads
the same (offset, key, value) list as the native consumer.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import OFFSET_BEGINNING
from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from spark_replica.tools.launcher.brokers import BrokerProcess
from spark_replica.tools.launcher.zookeeper import EmbeddedZooKeeper
from tests.support import run
from tests.support_compaction import (
    READ_TIMEOUT_S,
    Row,
    fill_upsert_topic,
    read_natively,
    running_cleaner_broker,
    wait_until_cleaned,
)

pytestmark = pytest.mark.slow

TOPIC = "cdc-at-scale"
KEYS = 1_000
RECORDS = 100_000
DELETE_RETENTION_MS = 5_000
CLEANED_TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def broker(
    zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerProcess]:
    with running_cleaner_broker(
        zookeeper.connect_string, tmp_path_factory.mktemp("compaction-scale")
    ) as started:
        yield started


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


def test_a_cleaned_log_holds_each_live_keys_last_value_at_its_offset_for_every_reader(
    broker: BrokerProcess,
) -> None:
    bootstrap = [(broker.host, broker.port)]
    produced = run(fill_upsert_topic(bootstrap, TOPIC, RECORDS, KEYS, DELETE_RETENTION_MS))
    cleaned = wait_until_cleaned(bootstrap, produced, CLEANED_TIMEOUT_S)

    assert time.monotonic() - produced.tombstones_sent_at >= DELETE_RETENTION_MS / 1000
    assert cleaned.tombstones_seen_alone, "each tombstone was its key's only record a while"
    assert run(read_natively(bootstrap, TOPIC)) == cleaned.rows, "the cleaned log is stable"
    assert read_with_kafka_client(broker, cleaned.rows[-1][0]) == cleaned.rows
