"""Issue 13's acceptance with confluent-kafka (librdkafka), as a team's service uses it.

1. An idempotent acks=all producer (lz4, keys, headers) sends 100,000 records to an RF 3
   topic while one partition's leader is SIGKILLed; a consumer in a group reads half,
   commits and closes; a second consumer of the group resumes from that commit. Every
   acknowledged record is read exactly once, with the key, value and headers sent and the
   timestamp, partition and offset its delivery report gave.
2. Two consumers in one group split the partitions, each reading only its own; when one
   leaves, the other is given every partition and resumes from the leaver's commits.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from tests.kafka.clients import (
    CLIENT_TIMEOUT_S,
    POLL_S,
    Deliveries,
    Headers,
    KafkaRecord,
    at_least,
    by_key,
    consume,
    flush,
    kafka_consumer,
    kafka_producer,
    leader_of,
    make_topic,
    produce_all,
    record_of,
)
from tests.support import BrokerFactory

pytestmark = pytest.mark.slow

RECORDS = 100_000
PARTITIONS = 3
GROUP_PARTITIONS = 4
PER_PARTITION = 10
# Fast rejoins so that rebalances take about a second, not the default three.
GROUP_CLIENT = {"heartbeat.interval.ms": 500, "session.timeout.ms": 6000}


def headers_of(i: int) -> Headers:
    headers: Headers = [("seq", str(i).encode()), ("origin", b"confluent-kafka")]
    if i % 7 == 0:
        headers.append(("nothing", None))
    return headers


def wait_for_deliveries(producer: Producer, deliveries: Deliveries) -> None:
    """Until the first delivery reports are in (polling as often as possible)."""
    deadline = time.monotonic() + CLIENT_TIMEOUT_S
    while not deliveries.acked:
        assert time.monotonic() < deadline, f"nothing acknowledged in {CLIENT_TIMEOUT_S} s"
        producer.poll(0.001)


def consumer_config(bootstrap: str, group: str) -> dict[str, object]:
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        **GROUP_CLIENT,
    }


def test_idempotent_producer_through_a_leader_kill_then_group_consumer_resumes_from_commit(
    kafka_cluster: BrokerFactory,
) -> None:
    topic = f"acceptance-{uuid.uuid4().hex[:8]}"
    make_topic(kafka_cluster, topic, PARTITIONS, rf=3)
    bootstrap = kafka_cluster.kafka_bootstrap()
    config = {
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "enable.idempotence": True,
        "compression.type": "lz4",
        "linger.ms": 5,
        "message.timeout.ms": 120_000,
    }
    deliveries = Deliveries()
    victim = leader_of(bootstrap, topic, 0)
    with kafka_producer(config) as producer:
        for i in range(RECORDS):
            produce_all(
                producer,
                lambda i=i: producer.produce(
                    topic,
                    key=f"key-{i}".encode(),
                    value=f"value-{i:06d}-".encode() * 4,
                    headers=headers_of(i),
                    on_delivery=deliveries,
                ),
            )
            if i % 1000 == 0:
                producer.poll(0)
            if i == RECORDS // 2:
                # Killed as soon as the first records are acknowledged, with the rest of
                # the first half queued or in flight: those are retried to the new leader
                # with their sequences, and the second half goes there.
                wait_for_deliveries(producer, deliveries)
                kafka_cluster.brokers[victim].kill()
        flush(producer, timeout_s=120)
    assert deliveries.failed == []
    assert leader_of(bootstrap, topic, 0) not in (victim, -1), "partition 0 moved"
    acked = by_key(deliveries.acked)
    assert len(acked) == RECORDS
    assert {r.partition for r in acked.values()} == set(range(PARTITIONS))

    group = f"group-{uuid.uuid4().hex[:8]}"
    with kafka_consumer(consumer_config(bootstrap, group)) as first:
        first.subscribe([topic])
        first_half = consume(first, at_least(RECORDS // 2), timeout_s=CLIENT_TIMEOUT_S)
        positions = first.commit(asynchronous=False) or []
    # A partition the first consumer read nothing of has no position to commit (-1001).
    committed = {tp.partition: tp.offset for tp in positions if tp.offset >= 0}
    assert committed, "the first consumer committed its positions"
    for partition in range(PARTITIONS):
        read = [r.offset for r in first_half if r.partition == partition]
        assert committed.get(partition) == (max(read) + 1 if read else None)

    with kafka_consumer(consumer_config(bootstrap, group)) as second:
        second.subscribe([topic])
        rest = RECORDS - len(first_half)
        second_half = consume(second, at_least(rest), timeout_s=CLIENT_TIMEOUT_S)
        for partition, offset in committed.items():
            resumed = [r.offset for r in second_half if r.partition == partition]
            if resumed:
                assert min(resumed) == offset, f"partition {partition} resumed elsewhere"
        assert not second.consume(num_messages=1, timeout=1.0)

    read = by_key(first_half + second_half)
    assert read.keys() == acked.keys()
    for key, record in acked.items():
        # Delivery reports carry no headers: those sent are compared instead.
        i = int(key.removeprefix(b"key-"))
        assert read[key] == dataclasses.replace(record, headers=headers_of(i)), key


def assignment_of(consumer: Consumer) -> set[int]:
    return {tp.partition for tp in consumer.assignment()}


def poll_until(
    consumers: list[Consumer], done: Callable[[list[list[KafkaRecord]]], bool], what: str
) -> list[list[KafkaRecord]]:
    """Poll every consumer in turn (each must poll to take part in a rebalance) until
    `done(read)` holds; return the records each one read meanwhile."""
    read: list[list[KafkaRecord]] = [[] for _ in consumers]
    deadline = time.monotonic() + CLIENT_TIMEOUT_S
    while not done(read):
        assert time.monotonic() < deadline, f"not within {CLIENT_TIMEOUT_S} s: {what}"
        for n, consumer in enumerate(consumers):
            for message in consumer.consume(num_messages=1000, timeout=POLL_S / 2):
                error = message.error()
                if error is not None and error.code() == KafkaError._PARTITION_EOF:
                    continue
                assert error is None, error
                read[n].append(record_of(message))
    return read


def produce_per_partition(bootstrap: str, topic: str, tag: str) -> set[bytes]:
    """PER_PARTITION records into each partition, acks=all; their keys."""
    deliveries = Deliveries()
    with kafka_producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5}
    ) as producer:
        for partition in range(GROUP_PARTITIONS):
            for n in range(PER_PARTITION):
                key = f"{tag}-{partition}-{n}".encode()
                producer.produce(
                    topic, key=key, value=key, partition=partition, on_delivery=deliveries
                )
        flush(producer)
    assert deliveries.failed == []
    return {r.key for r in deliveries.acked if r.key is not None}


def commit_read(consumer: Consumer, topic: str, read: list[KafkaRecord]) -> None:
    """Commit the position after the last record read of each partition, synchronously."""
    ends: dict[int, int] = {}
    for record in read:
        ends[record.partition] = max(ends.get(record.partition, 0), record.offset + 1)
    if ends:
        offsets = [TopicPartition(topic, p, o) for p, o in ends.items()]
        consumer.commit(offsets=offsets, asynchronous=False)


def test_two_consumers_split_the_partitions_and_the_one_left_gets_all(
    kafka_cluster: BrokerFactory,
) -> None:
    topic = f"split-{uuid.uuid4().hex[:8]}"
    make_topic(kafka_cluster, topic, GROUP_PARTITIONS, rf=3)
    bootstrap = kafka_cluster.kafka_bootstrap()
    everything = set(range(GROUP_PARTITIONS))
    config = consumer_config(bootstrap, f"group-{uuid.uuid4().hex[:8]}")
    with kafka_consumer(config) as one, kafka_consumer(config) as two:
        one.subscribe([topic])
        poll_until([one], lambda _: assignment_of(one) == everything, "the first gets all")
        two.subscribe([topic])
        poll_until(
            [one, two],
            lambda _: (
                bool(assignment_of(two))
                and assignment_of(one) | assignment_of(two) == everything
                and not assignment_of(one) & assignment_of(two)
            ),
            "the two split the partitions",
        )
        assert assignment_of(one) and assignment_of(two)

        first_keys = produce_per_partition(bootstrap, topic, "split")
        read = poll_until(
            [one, two],
            lambda r: len(r[0]) + len(r[1]) >= len(first_keys),
            "the two read what was produced",
        )
        for consumer, records in zip((one, two), read, strict=True):
            assert {r.partition for r in records} <= assignment_of(consumer)
            commit_read(consumer, topic, records)
        assert {r.key for r in read[0] + read[1]} == first_keys
        assert len(read[0]) + len(read[1]) == len(first_keys)

        two.close()
        poll_until([one], lambda _: assignment_of(one) == everything, "the one left gets all")
        later_keys = produce_per_partition(bootstrap, topic, "later")
        (after,) = poll_until(
            [one], lambda r: len(r[0]) >= len(later_keys), "the one left reads everything"
        )
        assert {r.key for r in after} == later_keys, "resumed from the commits, exactly"
        assert {r.partition for r in after} == everything
