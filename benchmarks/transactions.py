"""Kafka transactions through replog's Kafka listener: transactional produce against
idempotent produce, and read_committed consume against read_uncommitted, same run; one
JSON line.

Starts an embedded ZooKeeper and brokers 1..3, each with a Kafka-protocol listener on a
free port (``_cluster.local_cluster(kafka=True)``), creates a topic of ``--partitions``
partitions with replication factor 3, and stops every process it started at the end,
each by its own PID.

Produce: confluent-kafka (librdkafka) producers with ``acks=all``, idempotence and
``linger.ms`` (``--linger-ms``, 5), one ``produce()`` per record of ``--record-bytes``
(100) random bytes, keyless (librdkafka's sticky partitioner). The idempotent phase sends
``--records`` and flushes; the transactional phase (``transactional.id``, one transaction
per ``--transaction-ms`` (100) of producing, as the issue asks: begin, produce for that
long, commit) sends as many. Each of ``--rounds`` (2) runs both phases, each going
first every other round, each with a fresh producer whose set-up (connections, producer
id, ``init_transactions``) is untimed; each mode's figure is the median of its rounds, in
records/s from the first ``produce()`` to the end of ``flush()`` or of the last
``commit_transaction()``: every record acknowledged by its ISR, and the transactional
ones committed. A failed delivery fails the run.

Consume: a confluent-kafka ``Consumer`` with every partition assigned from offset 0 reads
all records produced, under ``isolation.level`` read_uncommitted and read_committed in
turn (``--rounds`` times, each first every other round: the listener's fetch cache
favours the second reader), touching each value. Each read ends at the last record, not at
the markers after it; the figure is records over the time from the first ``consume()``
call to the last record, median of the rounds.

``broker_cpu_s`` fields are the three brokers' CPU seconds (user + system) of each
mode's rounds together.

Goals (issue 28): transactional / idempotent produce >= 0.8; read_committed /
read_uncommitted consume >= 0.9.

Run from the repository root::

    .venv/bin/python benchmarks/transactions.py
    .venv/bin/python benchmarks/transactions.py --records 50000 --rounds 1
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import time
import uuid
from collections.abc import Iterator

from _cluster import LocalCluster, local_cluster
from _common import emit, positive_int
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from kafka_clients import (
    METADATA_TIMEOUT_S,
    PHASE_TIMEOUT_S,
    REPLICATION_FACTOR,
    TOPIC,
    Phase,
    consume,
    create_topic,
    kafka_bootstrap,
    wait_for_leaders,
)

BROKERS = 3
DISTINCT_VALUES = 1_000
TRANSACTION_TIMEOUT_MS = 60_000
GOAL_PRODUCE_RATIO = 0.8
GOAL_CONSUME_RATIO = 0.9
IDEMPOTENT = "idempotent"
TRANSACTIONAL = "transactional"
READ_UNCOMMITTED = "read_uncommitted"
READ_COMMITTED = "read_committed"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=positive_int, default=200_000, help="per round")
    parser.add_argument("--record-bytes", type=positive_int, default=100, help="(100)")
    parser.add_argument("--partitions", type=positive_int, default=3, help="(3)")
    parser.add_argument("--linger-ms", type=int, default=5, help="librdkafka linger.ms (5)")
    parser.add_argument(
        "--transaction-ms", type=positive_int, default=100, help="one transaction per (100)"
    )
    parser.add_argument("--rounds", type=positive_int, default=2, help="per mode (2)")
    return parser.parse_args(argv)


class Delivery:
    """Counts failed deliveries; a run with any fails."""

    def __init__(self) -> None:
        self.failures: list[KafkaError] = []

    def __call__(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            self.failures.append(error)

    def check(self) -> None:
        if self.failures:
            raise RuntimeError(f"{len(self.failures)} records failed: {self.failures[:3]}")


def _send(producer: Producer, value: bytes, report: Delivery, deadline: float) -> None:
    while True:
        try:
            producer.produce(TOPIC, value, on_delivery=report)
            return
        except BufferError:
            if time.monotonic() > deadline:
                raise TimeoutError("produce stalled") from None
            producer.poll(0.001)


def produce_idempotent(producer: Producer, count: int, values: list[bytes]) -> None:
    report = Delivery()
    deadline = time.monotonic() + PHASE_TIMEOUT_S
    for n in range(count):
        _send(producer, values[n % DISTINCT_VALUES], report, deadline)
    remaining = producer.flush(max(0.0, deadline - time.monotonic()))
    if remaining:
        raise TimeoutError(f"{remaining} records unacknowledged")
    report.check()


def produce_transactional(
    producer: Producer, count: int, values: list[bytes], transaction_s: float
) -> int:
    """`count` records in transactions of `transaction_s` of producing each; returns how
    many transactions were committed."""
    report = Delivery()
    deadline = time.monotonic() + PHASE_TIMEOUT_S
    committed = 0
    n = 0
    while n < count:
        producer.begin_transaction()
        ends = time.monotonic() + transaction_s
        while n < count and (n % 256 or time.monotonic() < ends):
            _send(producer, values[n % DISTINCT_VALUES], report, deadline)
            n += 1
        producer.commit_transaction(max(1.0, deadline - time.monotonic()))
        committed += 1
    report.check()
    return committed


class Timings:
    """Per mode: each round's records/s, and the brokers' CPU over all its rounds."""

    def __init__(self, broker_pids: list[int]) -> None:
        self.broker_pids = broker_pids
        self.rates: dict[str, list[float]] = {}
        self.broker_cpu: dict[str, float] = {}

    @contextlib.contextmanager
    def timed(self, mode: str, records: int) -> Iterator[None]:
        with Phase(self.broker_pids) as phase:
            yield
        self.rates.setdefault(mode, []).append(records / phase.seconds)
        self.broker_cpu[mode] = self.broker_cpu.get(mode, 0.0) + phase.broker_cpu

    def median(self, mode: str) -> float:
        return statistics.median(self.rates[mode])


def run(args: argparse.Namespace) -> dict[str, object]:
    values = [os.urandom(args.record_bytes) for _ in range(DISTINCT_VALUES)]
    transactions = 0
    with local_cluster(BROKERS, kafka=True) as cluster:
        bootstrap = prepare(cluster, args.partitions)
        timings = Timings([b.pid for b in cluster.brokers if b.pid is not None])
        base = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": args.linger_ms}
        for round_number in range(args.rounds):
            for mode in in_turn((IDEMPOTENT, TRANSACTIONAL), round_number):
                if mode == IDEMPOTENT:
                    idempotent = Producer({**base, "enable.idempotence": True})
                    produce_idempotent(idempotent, 1, values)  # set-up, untimed
                    with timings.timed(IDEMPOTENT, args.records):
                        produce_idempotent(idempotent, args.records, values)
                    continue
                transactional = Producer(
                    {
                        **base,
                        "transactional.id": f"bench-{uuid.uuid4().hex[:8]}",
                        "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
                    }
                )
                transactional.init_transactions(METADATA_TIMEOUT_S)
                with timings.timed(TRANSACTIONAL, args.records):
                    transactions += produce_transactional(
                        transactional, args.records, values, args.transaction_ms / 1000
                    )
        total = args.rounds * (2 * args.records + 1)
        for round_number in range(args.rounds):
            for isolation in in_turn((READ_UNCOMMITTED, READ_COMMITTED), round_number):
                consumer = Consumer(
                    {
                        "bootstrap.servers": bootstrap,
                        "group.id": f"bench-{uuid.uuid4().hex[:8]}",
                        "enable.auto.commit": False,
                        "isolation.level": isolation,
                        "fetch.queue.backoff.ms": 10,
                    }
                )
                try:
                    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(args.partitions)])
                    with timings.timed(isolation, total):
                        consume(consumer, total, on_first=lambda: None)
                finally:
                    consumer.close()

    idempotent_rate = timings.median(IDEMPOTENT)
    transactional_rate = timings.median(TRANSACTIONAL)
    uncommitted_rate = timings.median(READ_UNCOMMITTED)
    committed_rate = timings.median(READ_COMMITTED)
    return {
        "bench": "transactions",
        "client": "confluent-kafka",
        "records_per_round": args.records,
        "rounds": args.rounds,
        "record_bytes": args.record_bytes,
        "partitions": args.partitions,
        "replication_factor": REPLICATION_FACTOR,
        "brokers": BROKERS,
        "transaction_ms": args.transaction_ms,
        "transactions": transactions,
        "idempotent_records_per_s": round(idempotent_rate),
        "transactional_records_per_s": round(transactional_rate),
        "produce_ratio": round(transactional_rate / idempotent_rate, 3),
        "read_uncommitted_records_per_s": round(uncommitted_rate),
        "read_committed_records_per_s": round(committed_rate),
        "consume_ratio": round(committed_rate / uncommitted_rate, 3),
        "broker_cpu_s": {mode: round(cpu, 2) for mode, cpu in timings.broker_cpu.items()},
        "goal_produce_ratio": GOAL_PRODUCE_RATIO,
        "goal_consume_ratio": GOAL_CONSUME_RATIO,
    }


def in_turn(modes: tuple[str, str], round_number: int) -> tuple[str, str]:
    """The two modes in the order of this round: each goes first every other round, so
    that neither always meets a cold cluster or a warm cache."""
    return modes if round_number % 2 == 0 else (modes[1], modes[0])


def prepare(cluster: LocalCluster, partitions: int) -> str:
    asyncio.run(asyncio.wait_for(create_topic(cluster, partitions), METADATA_TIMEOUT_S))
    bootstrap = kafka_bootstrap(cluster)
    wait_for_leaders(bootstrap, partitions)
    return bootstrap


def main(argv: list[str] | None = None) -> None:
    emit(run(parse_args(argv)))


if __name__ == "__main__":
    main()
