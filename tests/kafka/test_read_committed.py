"""read_committed on the Kafka listener, with confluent-kafka and aiokafka consumers.

1. A topic without transactions reads the same under read_committed as under
   read_uncommitted: everything, up to the HW.
2. A log holding transactions (committed, aborted, one still open) reads, under
   read_committed, only the committed records, up to the last stable offset; under
   read_uncommitted every data record. Without a transaction coordinator yet, the
   transactions are written into the killed leader's partition directory through the
   log's own classes (the markers through Partition.append_markers, the path the
   coordinator will take); the broker then recovers that log on start, rebuilding the
   aborted-transaction index of the recovered segment from the log. Ending the open
   transaction (broker stopped again) moves the LSO past it after the next start, and an
   idempotent producer appends after it as before.
3. Replicated: the followers of an RF 3 topic copy such a log from its leader, markers
   included; once the leader is SIGKILLed, the new leader serves the same committed
   records and the same LSO at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from brokerd.log import Log, LogConfig
from brokerd.replication.partition import Partition, TxnMarker
from spark_replica.records import TRANSACTIONAL_FLAG, ControlType, build_batch
from spark_replica.tools.launcher.zookeeper import EmbeddedZooKeeper
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.produce import ACKS_LEADER
from tests.kafka.clients import (
    CLIENT_TIMEOUT_S,
    Deliveries,
    aiokafka_read,
    flush,
    kafka_producer,
    make_topic,
    read_to_end,
    wait_for_topic,
)
from tests.support import FAST_REPLICATION, BrokerFactory, leadership, module_brokers, run

pytestmark = pytest.mark.slow

PLAIN_RECORDS = 500
# Producer ids of the three transactions: far above those the brokers hand out, which
# would otherwise be taken for these producers' retries.
COMMITTED, ABORTED, OPEN = 2**40 + 1, 2**40 + 2, 2**40 + 3


COMMITTED_VALUES = [b"plain-0", b"plain-1", b"committed-0", b"committed-1", b"plain-2"]
EVERY_VALUE = [
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
LAST_STABLE_OFFSET = 9  # producer OPEN's first offset
LOG_END_OFFSET = 11


@pytest.fixture(scope="module")
def cluster(
    zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerFactory]:
    with module_brokers(
        zookeeper.connect_string,
        tmp_path_factory.mktemp("read-committed"),
        count=3,
        **FAST_REPLICATION,
    ) as brokers:
        yield brokers


def test_a_topic_without_transactions_reads_whole_under_read_committed(
    cluster: BrokerFactory,
) -> None:
    topic = "plain"
    make_topic(cluster, topic, 1, rf=1)
    bootstrap = cluster.kafka_bootstrap()
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


def isr_of(brokers: BrokerFactory, topic: str) -> tuple[int, list[int]]:
    (partition,) = run(leadership(brokers.bootstrap, topic))
    leader, isr = partition["leader"], partition["isr"]
    assert isinstance(leader, int) and isinstance(isr, list)
    return leader, sorted(isr)


def wait_for_isr(brokers: BrokerFactory, topic: str, isr: list[int], leader: int = -1) -> None:
    deadline = time.monotonic() + CLIENT_TIMEOUT_S
    while time.monotonic() < deadline:
        found = isr_of(brokers, topic)
        if found[1] == isr and (leader < 0 or found[0] == leader):
            return
        time.sleep(0.2)
    raise AssertionError(f"{topic}: ISR {isr_of(brokers, topic)} never became {isr}")


def test_read_committed_stops_at_the_lso_and_drops_aborted_records(
    cluster: BrokerFactory,
) -> None:
    topic = "transactions"
    make_topic(cluster, topic, 1, rf=1)
    bootstrap = cluster.kafka_bootstrap()
    broker = cluster.brokers[isr_of(cluster, topic)[0]]
    broker.kill()
    write_offline(broker.log_dir / f"{topic}-0", transactions)
    broker.start()
    wait_for_topic(bootstrap, topic, 1)
    assert read_to_end(bootstrap, topic, "read_committed") == COMMITTED_VALUES
    assert read_to_end(bootstrap, topic, "read_uncommitted") == EVERY_VALUE
    assert run(aiokafka_read(bootstrap, topic, "read_committed")) == (
        COMMITTED_VALUES,
        LAST_STABLE_OFFSET,
    )
    assert run(aiokafka_read(bootstrap, topic, "read_uncommitted")) == (
        EVERY_VALUE,
        LOG_END_OFFSET,
    )

    broker.stop()
    write_offline(
        broker.log_dir / f"{topic}-0", lambda partition: end(partition, OPEN, ControlType.COMMIT)
    )
    broker.start()
    wait_for_topic(bootstrap, topic, 1)
    now_committed = [*COMMITTED_VALUES, b"open-0", b"plain-3"]
    assert read_to_end(bootstrap, topic, "read_committed") == now_committed
    assert run(aiokafka_read(bootstrap, topic, "read_committed")) == (now_committed, 12)

    # The Kafka listener's produce path appends after the transactions as before.
    with kafka_producer({"bootstrap.servers": bootstrap, "enable.idempotence": True}) as producer:
        deliveries = Deliveries()
        producer.produce(topic, b"after", partition=0, on_delivery=deliveries)
        flush(producer)
    assert [record.offset for record in deliveries.acked] == [12]
    assert read_to_end(bootstrap, topic, "read_committed") == [*now_committed, b"after"]


def test_a_new_leader_serves_the_same_committed_records_and_lso(cluster: BrokerFactory) -> None:
    topic = "replicated-transactions"
    make_topic(cluster, topic, 1, rf=3)
    bootstrap = cluster.kafka_bootstrap()
    leader = cluster.brokers[isr_of(cluster, topic)[0]]
    followers = [b for b in cluster.brokers.values() if b is not leader]
    for follower in followers:
        follower.stop()
    wait_for_isr(cluster, topic, [leader.broker_id])
    leader.kill()
    write_offline(leader.log_dir / f"{topic}-0", transactions)
    leader.start()
    for follower in followers:
        follower.start()
    wait_for_isr(cluster, topic, [1, 2, 3], leader=leader.broker_id)
    assert read_to_end(bootstrap, topic, "read_committed") == COMMITTED_VALUES

    leader.kill()
    new_leader = isr_of(cluster, topic)[0]
    deadline = time.monotonic() + CLIENT_TIMEOUT_S
    while new_leader in (leader.broker_id, -1) and time.monotonic() < deadline:
        time.sleep(0.2)
        new_leader = isr_of(cluster, topic)[0]
    assert new_leader not in (leader.broker_id, -1)
    assert read_to_end(bootstrap, topic, "read_committed") == COMMITTED_VALUES
    assert read_to_end(bootstrap, topic, "read_uncommitted") == EVERY_VALUE
    assert run(aiokafka_read(bootstrap, topic, "read_committed")) == (
        COMMITTED_VALUES,
        LAST_STABLE_OFFSET,
    )
    leader.start()
