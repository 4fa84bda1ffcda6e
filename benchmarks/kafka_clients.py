"""Kafka's own client against replog's Kafka listener: confluent-kafka produce and consume
rates on a 3-broker cluster; one JSON line.

Starts an embedded ZooKeeper and brokers 1..3, each with a Kafka-protocol listener on a
free port (``_cluster.local_cluster(kafka=True)``), creates a topic of ``--partitions``
partitions with replication factor 3 through the replog listener, and stops every process
it started at the end, each by its own PID.

Produce: one confluent-kafka (librdkafka) ``Producer`` with ``acks=all``, ``linger.ms``
(``--linger-ms``, 5), librdkafka's default batch sizes and no compression, calls
``produce()`` once per record: keyless records (librdkafka's sticky partitioner) of
``--record-bytes`` (100) random bytes from a pool of distinct values. ``--warmup-records``
are sent and flushed first, untimed (connections, metadata, producer id). The timed
figure is ``--records`` over the time from the first ``produce()`` to the end of
``flush()``: every record acknowledged by the ISR of its partition. A record whose
delivery report carries an error fails the run.

Consume: a confluent-kafka ``Consumer`` in a fresh group (``subscribe``, the default) or
with every partition assigned from offset 0 (``--consumer assign``) reads all records
produced (warm-up included) with ``consume(num_messages=10000)``, touching each value's
length. The timed figure is records over the time from the first ``consume()`` call
(group join included for ``subscribe``) until the last record arrives. The consumer's
``fetch.queue.backoff.ms`` is ``--fetch-queue-backoff-ms`` (10; librdkafka's default is
1000): when the brokers fill librdkafka's local queue (``queued.min.messages``) faster
than this loop drains it, librdkafka stops fetching for that long, and with the default
the run mostly measures that pause (about a second idle per fill), not the brokers.

``broker_cpu_s`` is the CPU time (user + system) of the three broker processes in each
timed phase, ``client_cpu_s`` this process's (librdkafka's threads included).

Goal (issue 13): produce >= 300,000 records/s and consume >= 300,000 records/s.

Run from the repository root::

    .venv/bin/python benchmarks/kafka_clients.py
    .venv/bin/python benchmarks/kafka_clients.py --records 200000 --consumer assign
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
import uuid
from collections.abc import Callable

from _cluster import LocalCluster, local_cluster
from _common import MB, emit, positive_int, process_cpu_seconds
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from spark_replica.client import Admin, Cluster

BROKERS = 3
REPLICATION_FACTOR = 3
TOPIC = "kafka-clients"
DISTINCT_VALUES = 1_000
CONSUME_BATCH = 10_000
# consume() returns when it has CONSUME_BATCH records or at this timeout, so the last,
# smaller batch is late by at most this much.
POLL_S = 0.05
METADATA_TIMEOUT_S = 60.0
PHASE_TIMEOUT_S = 300.0
GOAL_RECORDS_PER_S = 300_000


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=positive_int, default=1_000_000, help="timed (1000000)")
    parser.add_argument("--warmup-records", type=positive_int, default=20_000, help="(20000)")
    parser.add_argument("--record-bytes", type=positive_int, default=100, help="value bytes (100)")
    parser.add_argument("--partitions", type=positive_int, default=3, help="(3)")
    parser.add_argument("--linger-ms", type=int, default=5, help="librdkafka linger.ms (5)")
    parser.add_argument(
        "--consumer", choices=["subscribe", "assign"], default="subscribe", help="(subscribe)"
    )
    parser.add_argument(
        "--fetch-queue-backoff-ms", type=int, default=10, help="consumer setting (10)"
    )
    return parser.parse_args(argv)


async def create_topic(cluster: LocalCluster, partitions: int) -> None:
    client = Cluster(cluster.bootstrap)
    try:
        await Admin(client).create_topic(TOPIC, partitions, REPLICATION_FACTOR)
    finally:
        await client.close()


def kafka_bootstrap(cluster: LocalCluster) -> str:
    return ",".join(f"{b.host}:{b.kafka_port}" for b in cluster.brokers)


def wait_for_leaders(bootstrap: str, partitions: int) -> None:
    """Until the Kafka listener's metadata names a leader for every partition."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + METADATA_TIMEOUT_S
    while time.monotonic() < deadline:
        topic = admin.list_topics(topic=TOPIC, timeout=10).topics.get(TOPIC)
        if (
            topic is not None
            and topic.error is None
            and len(topic.partitions) == partitions
            and all(p.leader >= 0 for p in topic.partitions.values())
        ):
            return
        time.sleep(0.2)
    raise TimeoutError(f"{TOPIC}: no leader for every partition within {METADATA_TIMEOUT_S} s")


def cpu_seconds(pids: list[int]) -> float:
    return sum(sum(process_cpu_seconds(pid)) for pid in pids)


def client_cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


class Phase:
    """Wall time and CPU (brokers, this process) of one timed phase."""

    def __init__(self, broker_pids: list[int]) -> None:
        self.broker_pids = broker_pids

    def __enter__(self) -> Phase:
        self.started = time.perf_counter()
        self.broker_cpu = cpu_seconds(self.broker_pids)
        self.client_cpu = client_cpu_seconds()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.started
        self.broker_cpu = cpu_seconds(self.broker_pids) - self.broker_cpu
        self.client_cpu = client_cpu_seconds() - self.client_cpu


def produce(producer: Producer, count: int, values: list[bytes]) -> None:
    """`count` produce() calls, one record each; flush until every one is acknowledged."""
    failures: list[KafkaError] = []

    def report(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            failures.append(error)

    deadline = time.monotonic() + PHASE_TIMEOUT_S
    send = producer.produce
    for n in range(count):
        value = values[n % DISTINCT_VALUES]
        while True:
            try:
                send(TOPIC, value, on_delivery=report)
                break
            except BufferError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"produce stalled after {n} records") from None
                producer.poll(0.001)
    remaining = producer.flush(max(0.0, deadline - time.monotonic()))
    if remaining or failures:
        raise RuntimeError(
            f"{remaining} records unacknowledged, {len(failures)} failed: {failures[:3]}"
        )


def consume(consumer: Consumer, count: int, on_first: Callable[[], None]) -> int:
    """Read `count` records; return the value bytes seen. `on_first` runs before the
    first consume() call, so that the timed phase includes the group join."""
    on_first()
    seen = 0
    value_bytes = 0
    deadline = time.monotonic() + PHASE_TIMEOUT_S
    while seen < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"consumed only {seen} of {count} records")
        for message in consumer.consume(num_messages=CONSUME_BATCH, timeout=POLL_S):
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    continue
                raise RuntimeError(f"consumer error: {error}")
            value_bytes += len(message.value())
            seen += 1
    return value_bytes


def run(args: argparse.Namespace) -> dict[str, object]:
    values = [os.urandom(args.record_bytes) for _ in range(DISTINCT_VALUES)]
    with local_cluster(BROKERS, kafka=True) as cluster:
        asyncio.run(asyncio.wait_for(create_topic(cluster, args.partitions), METADATA_TIMEOUT_S))
        bootstrap = kafka_bootstrap(cluster)
        wait_for_leaders(bootstrap, args.partitions)
        pids = [b.pid for b in cluster.brokers if b.pid is not None]

        producer = Producer(
            {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": args.linger_ms}
        )
        produce(producer, args.warmup_records, values)
        with Phase(pids) as produced:
            produce(producer, args.records, values)

        total = args.warmup_records + args.records
        config: dict[str, object] = {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "fetch.queue.backoff.ms": args.fetch_queue_backoff_ms,
        }
        consumer = Consumer(config)

        def start() -> None:
            if args.consumer == "subscribe":
                consumer.subscribe([TOPIC])
            else:
                consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(args.partitions)])

        try:
            with Phase(pids) as consumed:
                value_bytes = consume(consumer, total, start)
        finally:
            consumer.close()

    return {
        "bench": "kafka_clients",
        "client": "confluent-kafka",
        "records": args.records,
        "warmup_records": args.warmup_records,
        "record_bytes": args.record_bytes,
        "partitions": args.partitions,
        "replication_factor": REPLICATION_FACTOR,
        "brokers": BROKERS,
        "acks": "all",
        "linger_ms": args.linger_ms,
        "consumer": args.consumer,
        "fetch_queue_backoff_ms": args.fetch_queue_backoff_ms,
        "produce_records_per_s": round(args.records / produced.seconds),
        "produce_mb_per_s": round(args.records * args.record_bytes / MB / produced.seconds, 1),
        "produce_seconds": round(produced.seconds, 3),
        "produce_broker_cpu_s": round(produced.broker_cpu, 2),
        "produce_client_cpu_s": round(produced.client_cpu, 2),
        "consume_records": total,
        "consume_records_per_s": round(total / consumed.seconds),
        "consume_mb_per_s": round(value_bytes / MB / consumed.seconds, 1),
        "consume_seconds": round(consumed.seconds, 3),
        "consume_broker_cpu_s": round(consumed.broker_cpu, 2),
        "consume_client_cpu_s": round(consumed.client_cpu, 2),
        "goal_records_per_s": GOAL_RECORDS_PER_S,
    }


def main(argv: list[str] | None = None) -> None:
    emit(run(parse_args(argv)))


if __name__ == "__main__":
    main()
