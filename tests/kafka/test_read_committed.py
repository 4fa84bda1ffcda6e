"""read_committed on the Kafka listener, with confluent-kafka and aiokafka consumers.

1. A topic without transactions reads the same under read_committed as under
   read_uncommitted: everything, up to the HW.
2. A log holding transactions (committed, aborted, one still open) reads, under
   read_committed, only the committed records, up to the last stable offset; under
   read_uncommitted every data record. Without a transaction coordinator yet, the
   transactions are written into the stopped broker's partition directory through the
   log's own classes (the markers through Partition.append_markers, the path the
   coordinator will take); the broker then recovers that log on start, rebuilding the
   aborted-transaction index of the recovered segment from the log. Ending the open
   transaction (broker stopped again) moves the LSO past it after the next start.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, KafkaError
from confluent_kafka import TopicPartition as KafkaTopicPartition

from brokerd.log import Log, LogConfig
from brokerd.replication.partition import Partition, TxnMarker
from spark_replica.records import TRANSACTIONAL_FLAG, ControlType, build_batch
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.produce import ACKS_LEADER
from tests.kafka.clients import (
    CLIENT_TIMEOUT_S,
    POLL_S,
    Deliveries,
    flush,
    kafka_producer,
    make_topic,
)
from tests.support import BrokerFactory, module_brokers, run

pytestmark = pytest.mark.slow

PLAIN_RECORDS = 500
# Producer ids of the three transactions: far above those the brokers hand out, which
# would otherwise be taken for these producers' retries.
COMMITTED, ABORTED, OPEN = 2**40 + 1, 2**40 + 2, 2**40 + 3


@pytest.fixture(scope="module")
def one_broker(
    zookeeper: object, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerFactory]:
    with module_brokers(
        zookeeper.connect_string,
        tmp_path_factory.mktemp("read-committed"),
    ) as brokers:
        yield brokers


def read_to_end(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    """Every value confluent-kafka's consumer reads from partition 0 until it reports the
    end of the partition (for read_committed: the last stable offset)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
        }
    )
    values: list[bytes] = []
    try:
        consumer.assign([KafkaTopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + CLIENT_TIMEOUT_S
        while time.monotonic() < deadline:
            for message in consumer.consume(num_messages=1000, timeout=POLL_S):
                error = message.error()
                if error is not None and error.code() == KafkaError._PARTITION_EOF:
                    return values
                assert error is None, f"consumer error: {error}"
                values.append(message.value())
        raise AssertionError(f"no end of partition within {CLIENT_TIMEOUT_S} s: {len(values)}")
    finally:
        consumer.close()


async def aiokafka_read(bootstrap: str, topic: str, isolation: str) -> tuple[list[bytes], int]:
    """aiokafka's values of partition 0 up to its end offset under `isolation`, and that
    end offset (ListOffsets LATEST: the LSO under read_committed)."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        isolation_level=isolation,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    await consumer.start()
    try:
        tp = AioTopicPartition(topic, 0)
        consumer.assign([tp])
        end = (await consumer.end_offsets([tp]))[tp]
        values: list[bytes] = []
        async with asyncio.timeout(CLIENT_TIMEOUT_S):
            while await consumer.position(tp) < end:
                fetched = await consumer.getmany(tp, timeout_ms=500)
                values += [record.value for record in fetched.get(tp, [])]
        return values, end
    finally:
        await consumer.stop()


def test_a_topic_without_transactions_reads_whole_under_read_committed(
    one_broker: BrokerFactory,
) -> None:
    topic = "plain"
    make_topic(one_broker, topic, 1, rf=1)
    bootstrap = one_broker.kafka_bootstrap()
    sent = [f"v{i}".encode() for i in range(PLAIN_RECORDS)]
    with kafka_producer({"bootstrap.servers": bootstrap, "enable.idempotence": True}) as producer:
        for value in sent:
            producer.produce(topic, value, partition=0)
        flush(producer)
    assert read_to_end(bootstrap, topic, "read_committed") == sent
    assert read_to_end(bootstrap, topic, "read_uncommitted") == sent
    assert run(aiokafka_read(bootstrap, topic, "read_committed")) == (sent, PLAIN_RECORDS)


def write_offline(partition_dir: Path, write: Callable[[Partition], None]) -> None:
    """Open the stopped broker's log of the partition as its leader would, let `write`
    append to it, and close it (a producer-state snapshot at the log end)."""
    log = Log.open(partition_dir, LogConfig(), now_ms=int(time.time() * 1000))
    partition = Partition(TopicPartition(partition_dir.name.rsplit("-", 1)[0], 0), log, 1)
    epoch = max(log.epoch_cache.latest_epoch, 0)
    partition.make_leader(epoch, [1], [1], 0, 0, now_ms=0)
    try:
        write(partition)
    finally:
        log.close()


def append(partition: Partition, values: list[bytes], pid: int = -1, seq: int = -1) -> None:
    batch = build_batch(
        values,
        attributes=TRANSACTIONAL_FLAG if pid >= 0 else 0,
        producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1,
        base_sequence=seq,
    )
    partition.append_as_leader(batch, ACKS_LEADER, now_ms=int(time.time() * 1000))


def end(partition: Partition, pid: int, kind: ControlType) -> None:
    partition.append_markers([TxnMarker(pid, 0, 0, kind)], now_ms=int(time.time() * 1000))


def transactions(partition: Partition) -> None:
    append(partition, [b"plain-0", b"plain-1"])  # offsets 0-1
    append(partition, [b"committed-0"], COMMITTED, 0)  # 2
    append(partition, [b"aborted-0", b"aborted-1"], ABORTED, 0)  # 3-4
    append(partition, [b"committed-1"], COMMITTED, 1)  # 5
    end(partition, ABORTED, ControlType.ABORT)  # 6
    append(partition, [b"plain-2"])  # 7
    end(partition, COMMITTED, ControlType.COMMIT)  # 8
    append(partition, [b"open-0"], OPEN, 0)  # 9: the last stable offset
    append(partition, [b"plain-3"])  # 10


def test_read_committed_stops_at_the_lso_and_drops_aborted_records(
    one_broker: BrokerFactory,
) -> None:
    topic = "transactions"
    make_topic(one_broker, topic, 1, rf=1)
    broker = one_broker.brokers[1]
    broker.kill()
    write_offline(broker.log_dir / f"{topic}-0", transactions)
    broker.start()
    bootstrap = one_broker.kafka_bootstrap()
    committed = [b"plain-0", b"plain-1", b"committed-0", b"committed-1", b"plain-2"]
    everything = [
        b"plain-0",
        b"plain-1",
        b"committed-0",
        b"aborted-0",
        b"aborted-1",
        b"committed-1",
        b"plain-2",
        b"open-0",
        b"plain-3",
    ]
    assert read_to_end(bootstrap, topic, "read_committed") == committed
    assert read_to_end(bootstrap, topic, "read_uncommitted") == everything
    assert run(aiokafka_read(bootstrap, topic, "read_committed")) == (committed, 9)
    assert run(aiokafka_read(bootstrap, topic, "read_uncommitted")) == (everything, 11)

    broker.stop()
    write_offline(
        broker.log_dir / f"{topic}-0", lambda partition: end(partition, OPEN, ControlType.COMMIT)
    )
    broker.start()
    now_committed = [*committed, b"open-0", b"plain-3"]
    assert read_to_end(bootstrap, topic, "read_committed") == now_committed
    assert run(aiokafka_read(bootstrap, topic, "read_committed")) == (now_committed, 12)


def test_an_idempotent_producer_still_appends_after_transactions(
    one_broker: BrokerFactory,
) -> None:
    """The Kafka listener's produce path is untouched by the log's transactions."""
    bootstrap = one_broker.kafka_bootstrap()
    with kafka_producer({"bootstrap.servers": bootstrap, "enable.idempotence": True}) as producer:
        deliveries = Deliveries()
        producer.produce("transactions", b"after", partition=0, on_delivery=deliveries)
        flush(producer)
    assert [record.offset for record in deliveries.acked] == [12]
    assert read_to_end(bootstrap, "transactions", "read_committed")[-1] == b"after"
