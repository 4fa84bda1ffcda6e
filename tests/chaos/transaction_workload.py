"""The transactional load of a chaos schedule (`run.py --transactions`): confluent-kafka
transactional producers and read_committed readers on the brokers' Kafka listeners.

Each producer runs transactions of a few records (values unique in the schedule,
`t<n>-<transaction>-<record>`) one after another, remembering how each ended: committed
(and when the commit was asked), aborted, or unknown (the end was never answered). Every fifth
transaction is aborted on purpose once its records are acknowledged, and each commit is
asked only once they are: a reader that returns them earlier read an open transaction.
On an abortable error it aborts; on a fenced or fatal one it starts a new producer. Each reader
reads every partition from the start under read_committed and remembers each value with
when it was returned. librdkafka is a blocking client: each load runs on a thread of its
own, stopped by an event, every call bounded by a timeout.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from tests.chaos.transaction_checker import Outcome, Read, Transaction

RECORDS_PER_TRANSACTION = 5
CALL_TIMEOUT_S = 10.0
TRANSACTION_TIMEOUT_MS = 10_000
POLL_S = 0.2
PAUSE_S = 0.05
# Every this many transactions a producer aborts on purpose (after its records are
# acknowledged), so that there is aborted data for the readers to skip.
ABORT_EVERY = 5


def _producer(bootstrap: str, transactional_id: str) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id,
            "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
            "linger.ms": 5,
            "log_level": 0,
        }
    )


@dataclass
class TransactionalProducerLoad:
    index: int
    transactions: list[Transaction] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def run(self, bootstrap: str, topic: str, partitions: int, stop: threading.Event) -> None:
        transactional_id = f"chaos-{self.index}-{uuid.uuid4().hex[:6]}"
        producer: Producer | None = None
        while not stop.is_set():
            try:
                if producer is None:
                    producer = _producer(bootstrap, transactional_id)
                    producer.init_transactions(CALL_TIMEOUT_S)
                self._transaction(producer, topic, partitions)
            except KafkaException as exc:
                error = exc.args[0]
                self.errors.append(str(error.name()) if isinstance(error, KafkaError) else "?")
                if not isinstance(error, KafkaError) or not error.retriable():
                    producer = None
                time.sleep(PAUSE_S)

    def _transaction(self, producer: Producer, topic: str, partitions: int) -> None:
        number = len(self.transactions)
        values = tuple(
            f"t{self.index}-{number}-{i}".encode() for i in range(RECORDS_PER_TRANSACTION)
        )
        producer.begin_transaction()
        asked_at = None
        try:
            for i, value in enumerate(values):
                producer.produce(topic, value, partition=(number + i) % partitions)
            producer.flush(CALL_TIMEOUT_S)
            if number % ABORT_EVERY == ABORT_EVERY - 1:
                producer.abort_transaction(CALL_TIMEOUT_S)
                self.transactions.append(Transaction(values, Outcome.ABORTED))
                return
            asked_at = time.monotonic()
            producer.commit_transaction(CALL_TIMEOUT_S)
        except KafkaException as exc:
            error = exc.args[0]
            outcome = Outcome.UNKNOWN
            if isinstance(error, KafkaError) and error.txn_requires_abort():
                try:
                    producer.abort_transaction(CALL_TIMEOUT_S)
                    outcome = Outcome.ABORTED
                except KafkaException:
                    outcome = Outcome.UNKNOWN
            self.transactions.append(Transaction(values, outcome, asked_at))
            raise
        self.transactions.append(Transaction(values, Outcome.COMMITTED, asked_at))


@dataclass
class ReadCommittedLoad:
    reads: list[Read] = field(default_factory=list)

    def run(self, bootstrap: str, topic: str, partitions: int, stop: threading.Event) -> None:
        consumer = _reader(bootstrap, topic, partitions)
        try:
            while not stop.is_set():
                for message in consumer.consume(1000, POLL_S):
                    value = message.value()
                    if message.error() is None and value is not None:
                        self.reads.append(Read(value, time.monotonic()))
        finally:
            consumer.close()


def _reader(bootstrap: str, topic: str, partitions: int) -> Consumer:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"chaos-reader-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
            "log_level": 0,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    return consumer


def read_committed_all(
    bootstrap: str, topic: str, partitions: int, timeout_s: float
) -> list[bytes] | None:
    """Every value of every partition up to its last stable offset; None if some
    partition's end was not reached within `timeout_s`."""
    consumer = _reader(bootstrap, topic, partitions)
    values: list[bytes] = []
    ended: set[int] = set()
    deadline = time.monotonic() + timeout_s
    try:
        while len(ended) < partitions:
            if time.monotonic() > deadline:
                return None
            for message in consumer.consume(1000, POLL_S):
                error, value, partition = message.error(), message.value(), message.partition()
                if error is None and value is not None:
                    values.append(value)
                elif (
                    error is not None
                    and error.code() == KafkaError._PARTITION_EOF
                    and partition is not None
                ):
                    ended.add(partition)
        return values
    finally:
        consumer.close()
