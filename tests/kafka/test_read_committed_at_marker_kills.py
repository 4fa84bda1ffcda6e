"""read_committed readers while brokers die between EndTxn's answer and the markers.

The coordinator answers EndTxn once the transaction's outcome is in its own log, and
writes the markers afterwards. Each case opens that window on purpose: the partition's
leader is paused (SIGSTOP) before the transaction ends, so its marker cannot land, and
then a broker is SIGKILLed inside the window and started again:

1. the leader, after a commit: the marker must reach the new leader;
2. the leader, after an abort: the aborted records must never be served;
3. the coordinator, after a commit (the leader resumed only once the coordinator is
   dead): the new coordinator must finish the markers from its log.

Two read_committed readers poll the partition throughout: confluent-kafka's consumer and
replog's native one. Neither may return a record before its transaction's EndTxn was
answered (an open transaction), nor any record of an aborted one; both must return every
committed record once its marker lands, each once.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import KafkaError, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from spark_replica.client import Cluster, Consumer, ConsumerConfig
from spark_replica.topics import TRANSACTION_STATE_TOPIC
from tests.kafka.clients import CLIENT_TIMEOUT_S, POLL_S, coordinator_of, leader_of, make_topic
from tests.support import FAST_REPLICATION, BrokerFactory, leadership, module_brokers, rows_of, run

pytestmark = pytest.mark.slow

RECORDS_PER_TRANSACTION = 50
TRANSACTION_PARTITIONS = 3
TRANSACTION_TIMEOUT_MS = 60_000
# How long the paused leader keeps the marker from landing before the kill.
WINDOW_S = 1.0


@pytest.fixture(scope="module")
def cluster(zookeeper: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerFactory]:
    with module_brokers(
        zookeeper.connect_string,
        tmp_path_factory.mktemp("marker-kills"),
        3,
        **FAST_REPLICATION,
        **{
            "transaction.state.log.num.partitions": str(TRANSACTION_PARTITIONS),
            "min.insync.replicas": "2",
        },
    ) as brokers:
        yield brokers


class Seen:
    """Every value a reader returned, with when it first returned it."""

    def __init__(self) -> None:
        self.at: dict[bytes, float] = {}
        self.duplicates: list[bytes] = []
        self.failure: BaseException | None = None

    def add(self, value: bytes) -> None:
        if value in self.at:
            self.duplicates.append(value)
        else:
            self.at[value] = time.monotonic()


class KafkaReader(threading.Thread):
    def __init__(self, cluster: BrokerFactory, topic: str, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.stop = cluster.kafka_bootstrap(), topic, stop
        self.seen = Seen()

    def run(self) -> None:
        consumer = KafkaConsumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"reader-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
            }
        )
        try:
            consumer.assign([KafkaTopicPartition(self.topic, 0, 0)])
            while not self.stop.is_set():
                for message in consumer.consume(1000, POLL_S):
                    error, value = message.error(), message.value()
                    if error is None and value is not None:
                        self.seen.add(value)
                    elif error is not None and not error.retriable():
                        assert error.code() != KafkaError._FATAL, error
        except BaseException as exc:
            self.seen.failure = exc
        finally:
            consumer.close()


class NativeReader(threading.Thread):
    def __init__(self, cluster: BrokerFactory, topic: str, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.stop = cluster.bootstrap, topic, stop
        self.seen = Seen()

    def run(self) -> None:
        try:
            asyncio.run(self.read())
        except BaseException as exc:
            self.seen.failure = exc

    async def read(self) -> None:
        client = Cluster(self.bootstrap)
        try:
            consumer = Consumer(client, ConsumerConfig(isolation_level="read_committed"))
            await consumer.assign_topic(self.topic)
            await consumer.seek_to_beginning()
            while not self.stop.is_set():
                for row in rows_of(await consumer.poll(max_wait_ms=200)):
                    value = row["value"]
                    assert isinstance(value, bytes)
                    self.seen.add(value)
        finally:
            await client.close()


def transactional_id_away_from(cluster: BrokerFactory, leader: int) -> str:
    """A transactional id whose coordinator is not `leader`: pausing the leader must
    not stop the coordinator."""
    for _ in range(50):
        candidate = f"marker-{uuid.uuid4().hex[:8]}"
        if coordinator_of(cluster, candidate) != leader:
            return candidate
    raise AssertionError(f"every transactional id tried is coordinated by broker {leader}")


def wait_fully_in_sync(cluster: BrokerFactory, topics: list[str]) -> None:
    """Until every replica of the topics is in its partition's ISR. A broker restarted by
    an earlier case may still be catching up; pausing another one then would leave a
    partition below min.insync.replicas, and EndTxn would wait on that, not on markers."""
    deadline = time.monotonic() + CLIENT_TIMEOUT_S
    while True:
        lagging = [
            (topic, p["partition"])
            for topic in topics
            for p in run(leadership(cluster.bootstrap, topic))
            if sorted(p["isr"]) != sorted(p["replicas"])
        ]
        if not lagging:
            return
        assert time.monotonic() < deadline, f"replicas never back in sync: {lagging}"
        time.sleep(POLL_S)


def write(producer: Producer, topic: str, name: str) -> list[bytes]:
    values = [f"{name}-{i:03}".encode() for i in range(RECORDS_PER_TRANSACTION)]
    producer.begin_transaction()
    for value in values:
        producer.produce(topic, value, partition=0)
    assert producer.flush(CLIENT_TIMEOUT_S) == 0
    return values


def wait_for(seen: list[Seen], values: list[bytes]) -> None:
    deadline = time.monotonic() + CLIENT_TIMEOUT_S
    while not all(set(values) <= s.at.keys() for s in seen):
        assert all(s.failure is None for s in seen), [s.failure for s in seen]
        assert time.monotonic() < deadline, "committed records never read"
        time.sleep(POLL_S)


@pytest.mark.parametrize("case", ["leader-after-commit", "leader-after-abort", "coordinator"])
def test_read_committed_never_returns_open_or_aborted_records(
    cluster: BrokerFactory, case: str
) -> None:
    topic = f"marker-{case}-{uuid.uuid4().hex[:6]}"
    make_topic(cluster, topic, 1)
    bootstrap = cluster.kafka_bootstrap()
    transactional_id = transactional_id_away_from(cluster, leader_of(bootstrap, topic, 0))
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id,
            "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
        }
    )
    producer.init_transactions(CLIENT_TIMEOUT_S)
    stop = threading.Event()
    readers: list[KafkaReader | NativeReader] = [
        KafkaReader(cluster, topic, stop),
        NativeReader(cluster, topic, stop),
    ]
    for reader in readers:
        reader.start()
    try:
        before = write(producer, topic, "before")
        producer.commit_transaction(CLIENT_TIMEOUT_S)
        wait_for([r.seen for r in readers], before)

        leader = cluster.brokers[leader_of(bootstrap, topic, 0)]
        coordinator = coordinator_of(cluster, transactional_id)
        inside = write(producer, topic, "inside")
        wait_fully_in_sync(cluster, [topic, TRANSACTION_STATE_TOPIC])
        leader.pause()
        try:
            if case == "leader-after-abort":
                producer.abort_transaction(CLIENT_TIMEOUT_S)
            else:
                producer.commit_transaction(CLIENT_TIMEOUT_S)
            answered = time.monotonic()
            time.sleep(WINDOW_S)
            if case == "coordinator":
                cluster.brokers[coordinator].kill()
                leader.resume()
                cluster.brokers[coordinator].start()
            else:
                leader.kill()
                leader.start()
        finally:
            leader.resume()

        after = write(producer, topic, "after")
        producer.commit_transaction(CLIENT_TIMEOUT_S)
        committed = before + after if case == "leader-after-abort" else before + inside + after
        wait_for([r.seen for r in readers], committed)
        time.sleep(WINDOW_S)
    finally:
        stop.set()
        for reader in readers:
            reader.join(CLIENT_TIMEOUT_S)
    for reader in readers:
        seen = reader.seen
        assert seen.failure is None, seen.failure
        assert seen.duplicates == []
        assert sorted(seen.at) == sorted(committed), type(reader).__name__
        early = [v for v in inside if v in seen.at and seen.at[v] < answered]
        assert early == [], f"{type(reader).__name__} read an open transaction"
