"""Kafka's exactly-once loop through real brokers while they are SIGKILLed.

A confluent-kafka consume-transform-produce loop (a read_committed consumer of a group,
a transactional producer, send_offsets_to_transaction, commit) moves the input topic to
the output topic while another thread SIGKILLs and restarts, one at a time, the leader
of an input partition, the transaction coordinator of the loop's transactional id and
the leader of an output partition, waiting between kills for every ISR to be whole
again. The loop follows Kafka's error rules: an abortable error aborts the transaction
and rewinds the consumer to the group's committed offsets, a retriable one is retried,
and a fenced or fatal producer is replaced by a new one (whose InitProducerId aborts
what the old one left open).

A producer whose send_offsets_to_transaction never returns is replaced the same way,
and so is a consumer that answers COORDINATOR_NOT_AVAILABLE to every committed() call.
librdkafka (up to 2.16 at least, issues #5511 and #5456) can park the call's
TxnOffsetCommit for good: when the group's coordinator is killed, the Metadata answers
of the other brokers stop naming it (as Kafka's do for a broker that is gone) and
librdkafka decommissions its connection, yet keeps it cached as the group's
coordinator, waits for that connection to come up, never sends the request and ignores
the call's timeout. The brokers are asked nothing, so nothing they answer can end the
call: the loop gives up on it past the transaction timeout (the call's own cap), leaves
the producer blocked in it, and its successor's InitProducerId fences it and aborts its
transaction, as Kafka's rule for a zombie producer says. A consumer whose coordinator was
killed that way has been seen to answer COORDINATOR_NOT_AVAILABLE for minutes while a
broker had the group loaded and served others; a new consumer of the group finds it.

Every output value names its input record and the attempt (transaction) that wrote it,
so the check can tell a record written twice, one lost, and one of an aborted attempt.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from tests.kafka.clients import (
    CLIENT_TIMEOUT_S,
    POLL_S,
    coordinator_of,
    flush,
    leader_of,
    make_topic,
)
from tests.support import FAST_REPLICATION, BrokerFactory, leadership, module_brokers, run

pytestmark = pytest.mark.slow

RECORDS = 100_000
PARTITIONS = 4
BROKERS = [1, 2, 3]
MIN_ISR = 2
# Few transactions, each big: a transaction's fixed cost (AddPartitionsToTxn, EndTxn, the
# markers) is paid per transaction, not per record.
BATCH = 2_000
TRANSACTION_TIMEOUT_MS = 10_000
TRANSACTION_PARTITIONS = 3
# input leader, coordinator, output leader, coordinator again.
KILLS = 4
RUN_S = 120.0
# Every this many attempts the loop aborts on purpose, so that the output always holds
# aborted data for read_committed to skip.
ABORT_EVERY = 7
SEPARATOR = b"|"
# The codes a fenced producer reports: librdkafka's own, and the brokers' two.
FENCED = {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}
RETRIES = 20
# librdkafka caps send_offsets_to_transaction at transaction.timeout.ms: a call still
# running well past it is parked for good (see the top).
PARKED_S = 3 * TRANSACTION_TIMEOUT_MS / 1000
T = TypeVar("T")


@pytest.fixture(scope="module")
def cluster(zookeeper: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerFactory]:
    with module_brokers(
        zookeeper.connect_string,
        tmp_path_factory.mktemp("transactions-under-failures"),
        len(BROKERS),
        **FAST_REPLICATION,
        **{
            "transaction.state.log.num.partitions": str(TRANSACTION_PARTITIONS),
            "min.insync.replicas": str(MIN_ISR),
        },
    ) as brokers:
        yield brokers


def isr_whole(cluster: BrokerFactory, topics: list[str]) -> bool:
    try:
        for topic in topics:
            for partition in run(leadership(cluster.bootstrap, topic), timeout_s=10):
                isr = partition["isr"]
                assert isinstance(isr, list)
                if sorted(isr) != BROKERS or partition["leader"] not in BROKERS:
                    return False
    except Exception:
        return False
    return True


def wait_for_whole_isr(cluster: BrokerFactory, topics: list[str]) -> None:
    deadline = time.monotonic() + CLIENT_TIMEOUT_S
    while not isr_whole(cluster, topics):
        assert time.monotonic() < deadline, f"the ISR of {topics} never became {BROKERS}"
        time.sleep(0.3)


def kill_point(kill: int) -> int:
    """The input records committed before the kill numbered `kill` (from 0): the kills are
    spread evenly over the run."""
    return RECORDS * (kill + 1) // (KILLS + 1)


class Killer(threading.Thread):
    """SIGKILLs the chosen brokers one at a time and starts each again, waiting for every
    ISR to be whole before the next kill; records what it killed, and its failure.

    Each kill waits for the loop to reach its kill point, and the loop waits at the next
    point until that kill is made: however fast the loop runs, every kill falls inside
    the run."""

    def __init__(
        self,
        cluster: BrokerFactory,
        victims: list[Callable[[], int]],
        topics: list[str],
        progress: Callable[[], int],
    ) -> None:
        super().__init__(daemon=True)
        self.cluster, self.victims, self.topics = cluster, victims, topics
        self.progress = progress
        self.killed: list[int] = []
        self.failure: BaseException | None = None

    def allowed(self) -> int:
        """How far the loop may go before the next kill is made."""
        return RECORDS if len(self.killed) == KILLS else kill_point(len(self.killed))

    def run(self) -> None:
        try:
            deadline = time.monotonic() + RUN_S
            for kill, victim in enumerate(self.victims):
                while self.progress() < kill_point(kill):
                    assert time.monotonic() < deadline, f"kill point {kill} never reached"
                    time.sleep(0.05)
                broker_id = victim()
                self.cluster.brokers[broker_id].kill()
                self.killed.append(broker_id)
                self.cluster.brokers[broker_id].start()
                wait_for_whole_isr(self.cluster, self.topics)
        except BaseException as exc:
            self.failure = exc


class Aborted(Exception):
    """The loop aborted a transaction on purpose."""


class Parked(Exception):
    """A client call did not return in time and is left blocked."""


def bounded(call: Callable[[], T], timeout_s: float) -> T:
    """`call`'s outcome, run on a thread of its own; Parked if it has none within
    `timeout_s` (the thread is left blocked in it)."""
    outcome: list[T] = []
    failure: list[BaseException] = []

    def run_call() -> None:
        try:
            outcome.append(call())
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=run_call, name="client-call", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise Parked(f"no outcome in {timeout_s:.0f} s")
    if failure:
        raise failure[0]
    return outcome[0]


class Loop:
    """The consume-transform-produce loop, with Kafka's error rules."""

    def __init__(self, cluster: BrokerFactory, source: str, sink: str, transactional_id: str):
        self.cluster, self.source, self.sink = cluster, source, sink
        self.transactional_id = transactional_id
        self.partitions = [KafkaTopicPartition(source, p) for p in range(PARTITIONS)]
        self.group_id = f"ctp-{uuid.uuid4().hex[:8]}"
        # A new group has nothing committed: starting at offset 0 spares the consumer's
        # first OffsetFetch, which librdkafka may never send again if the group's
        # coordinator is still loading (see the top).
        self.consumer = self.new_consumer([0] * PARTITIONS)
        self.producer = self.new_producer()
        self.attempts = 0
        self.aborted: set[int] = set()
        self.producers = 1
        # Clients left blocked or wedged (see the top): never destroyed under a call.
        self.parked: list[Producer | Consumer] = []
        self.progress = 0

    def new_consumer(self, offsets: list[int]) -> Consumer:
        consumer = Consumer(
            {
                "bootstrap.servers": self.cluster.kafka_bootstrap(),
                "group.id": self.group_id,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
            }
        )
        consumer.assign(
            [KafkaTopicPartition(self.source, p, offset) for p, offset in enumerate(offsets)]
        )
        return consumer

    def new_producer(self) -> Producer:
        producer = Producer(
            {
                "bootstrap.servers": self.cluster.kafka_bootstrap(),
                "transactional.id": self.transactional_id,
                "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
                "linger.ms": 20,
            }
        )
        retried(lambda: producer.init_transactions(CLIENT_TIMEOUT_S))
        return producer

    def committed(self) -> list[KafkaTopicPartition]:
        try:
            return retried(lambda: self.consumer.committed(self.partitions, 10))
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.COORDINATOR_NOT_AVAILABLE:
                raise
        # A consumer wedged on a killed coordinator (see the top): a new one, at the
        # group's committed offsets.
        offsets = retried(self._fresh_committed)
        self.parked.append(self.consumer)
        self.consumer = self.new_consumer([max(tp.offset, 0) for tp in offsets])
        return offsets

    def _fresh_committed(self) -> list[KafkaTopicPartition]:
        """The group's committed offsets, asked by a consumer of its own."""
        asking = Consumer(
            {"bootstrap.servers": self.cluster.kafka_bootstrap(), "group.id": self.group_id}
        )
        try:
            return asking.committed(self.partitions, 10)
        finally:
            asking.close()

    def rewind(self) -> None:
        for tp in self.committed():
            self.consumer.seek(KafkaTopicPartition(self.source, tp.partition, max(tp.offset, 0)))

    def done(self) -> bool:
        return sum(max(tp.offset, 0) for tp in self.committed()) >= RECORDS

    def step(self, allowed: int) -> None:
        if self.progress >= allowed:
            time.sleep(0.05)
            return
        batch = [m for m in self.consumer.consume(BATCH, POLL_S) if m.error() is None]
        if not batch:
            return
        self.attempts += 1
        attempt = self.attempts
        try:
            self.transact(batch, attempt)
        except Aborted:
            self.aborted.add(attempt)
            self.rewind()
        except Parked:
            self.parked.append(self.producer)
            self.producer = self.new_producer()
            self.producers += 1
            self.aborted.add(attempt)
            self.rewind()
        except KafkaException as exc:
            error = exc.args[0]
            assert isinstance(error, KafkaError)
            if error.txn_requires_abort():
                retried(lambda: self.producer.abort_transaction(CLIENT_TIMEOUT_S))
                self.aborted.add(attempt)
            else:
                assert error.fatal() or error.code() in FENCED, error
                self.producer = self.new_producer()
                self.producers += 1
            self.rewind()

    def transact(self, batch: list[Any], attempt: int) -> None:
        self.producer.begin_transaction()
        tag = SEPARATOR + str(attempt).encode()
        for message in batch:
            self.produce(message.value() + tag, message.partition())
        positions = self.consumer.position(self.consumer.assignment())
        metadata = self.consumer.consumer_group_metadata()
        producer = self.producer
        retried(
            lambda: bounded(
                lambda: producer.send_offsets_to_transaction(positions, metadata, CLIENT_TIMEOUT_S),
                PARKED_S,
            )
        )
        if attempt % ABORT_EVERY == 0:
            retried(lambda: self.producer.abort_transaction(CLIENT_TIMEOUT_S))
            raise Aborted
        retried(lambda: self.producer.commit_transaction(CLIENT_TIMEOUT_S))
        self.progress = sum(max(tp.offset, 0) for tp in self.committed())

    def produce(self, value: bytes, partition: int) -> None:
        while True:
            try:
                self.producer.produce(self.sink, value, partition=partition)
                return
            except BufferError:
                self.producer.poll(0.05)

    def close(self) -> None:
        self.consumer.close()


def retried(call: Callable[[], T]) -> T:
    """`call` again while it fails with an error Kafka calls retriable (a coordinator or
    leader moving), a bounded number of times."""
    for _ in range(RETRIES - 1):
        try:
            return call()
        except KafkaException as exc:
            error = exc.args[0]
            if not (isinstance(error, KafkaError) and error.retriable()):
                raise
            time.sleep(POLL_S)
    return call()


def read_committed(cluster: BrokerFactory, topic: str, count: int) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap(),
            "group.id": f"check-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        }
    )
    values: list[bytes] = []
    ended: set[int] = set()
    try:
        consumer.assign([KafkaTopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        deadline = time.monotonic() + CLIENT_TIMEOUT_S
        while len(ended) < PARTITIONS or len(values) < count:
            assert time.monotonic() < deadline, f"{topic}: {len(values)} of {count} read"
            for message in consumer.consume(10_000, POLL_S):
                error = message.error()
                if error is not None and error.code() != KafkaError._PARTITION_EOF:
                    raise KafkaException(error)
                value, partition = message.value(), message.partition()
                assert partition is not None
                if error is not None:
                    ended.add(partition)
                elif value is not None:
                    values.append(value)
        return values
    finally:
        consumer.close()


def log_ends(cluster: BrokerFactory, topic: str) -> list[int]:
    consumer = Consumer({"bootstrap.servers": cluster.kafka_bootstrap(), "group.id": "ends"})
    try:
        return [
            consumer.get_watermark_offsets(KafkaTopicPartition(topic, p), timeout=10)[1]
            for p in range(PARTITIONS)
        ]
    finally:
        consumer.close()


def test_consume_transform_produce_is_exactly_once_while_brokers_are_killed(
    cluster: BrokerFactory,
) -> None:
    source, sink = f"in-{uuid.uuid4().hex[:8]}", f"out-{uuid.uuid4().hex[:8]}"
    transactional_id = f"ctp-{uuid.uuid4().hex[:8]}"
    for topic in (source, sink):
        make_topic(cluster, topic, PARTITIONS)
    inputs = [f"input-{i:06}".encode() for i in range(RECORDS)]
    plain = Producer({"bootstrap.servers": cluster.kafka_bootstrap(), "enable.idempotence": True})
    for i, value in enumerate(inputs):
        while True:
            try:
                plain.produce(source, value, partition=i % PARTITIONS)
                break
            except BufferError:
                plain.poll(0.05)
    flush(plain)

    loop = Loop(cluster, source, sink, transactional_id)
    bootstrap = cluster.kafka_bootstrap()
    coordinator = lambda: coordinator_of(cluster, transactional_id)  # noqa: E731
    killer = Killer(
        cluster,
        [
            lambda: leader_of(bootstrap, source, 0),
            coordinator,
            lambda: leader_of(bootstrap, sink, 1),
            coordinator,
        ],
        [source, sink, "__transaction_state"],
        lambda: loop.progress,
    )
    started = time.monotonic()
    try:
        killer.start()
        while not loop.done() or killer.is_alive():
            assert time.monotonic() - started < RUN_S, "the input was not all moved in time"
            loop.step(killer.allowed())
        committed = loop.committed()
    finally:
        loop.close()
        killer.join(CLIENT_TIMEOUT_S * 2)
    assert killer.failure is None, killer.failure
    assert len(killer.killed) == KILLS
    assert loop.aborted, "no transaction was aborted"

    output = read_committed(cluster, sink, RECORDS)
    origins = Counter(value.rsplit(SEPARATOR, 1)[0] for value in output)
    assert sorted(origins) == inputs, "records lost or foreign records read"
    assert [value for value, seen in origins.items() if seen > 1] == []
    from_aborted = [v for v in output if int(v.rsplit(SEPARATOR, 1)[1]) in loop.aborted]
    assert from_aborted == []
    offsets = [tp.offset for tp in sorted(committed, key=lambda tp: tp.partition)]
    assert offsets == log_ends(cluster, source)
