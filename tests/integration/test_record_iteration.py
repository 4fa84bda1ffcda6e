"""Records one at a time from a real broker: `async for` over a Consumer, and SyncConsumer.

Each partition must come back complete, in offset order, with its keys, values and
headers; breaking out and iterating again resumes at the next record; a seek (before or
while iterating) moves where the records come from.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from spark_replica.client import Cluster, Consumer, Producer, ProducerConfig
from spark_replica.client.consumer_records import ConsumerRecord
from spark_replica.client.sync_consumer import SyncConsumer
from spark_replica.errors import ClientClosedError
from spark_replica.records import build_batch
from spark_replica.tools.launcher.brokers import BrokerProcess
from spark_replica.topics import TopicPartition
from tests.support import create_topic, run

pytestmark = pytest.mark.slow

TOPIC = "per-record"
PARTITIONS = 3
BATCHES = 4
PER_BATCH = 50
PER_PARTITION = BATCHES * PER_BATCH
ITERATION_TIMEOUT_S = 60.0


def expected_record(partition: int, offset: int) -> tuple:
    """(partition, offset, key, value, headers) of the record produced at that place."""
    key = None if offset % 3 == 0 else f"k{offset}".encode()
    value = None if offset % 7 == 0 else f"p{partition}-{offset}".encode()
    headers = (("n", str(offset).encode()),) if offset % 2 else ()
    return partition, offset, key, value, headers


def as_tuple(record: ConsumerRecord) -> tuple:
    return record.partition, record.offset, record.key, record.value, record.headers


async def fill_topic(bootstrap: list[tuple[str, int]]) -> None:
    """Several batches per partition, so that iteration crosses batch and fetch boundaries."""
    await create_topic(bootstrap, TOPIC, partitions=PARTITIONS)
    cluster = Cluster(bootstrap)
    try:
        producer = Producer(cluster, ProducerConfig(acks=-1))
        for partition in range(PARTITIONS):
            for batch in range(BATCHES):
                rows = [expected_record(partition, batch * PER_BATCH + n) for n in range(PER_BATCH)]
                await producer.send_batch(
                    TOPIC,
                    partition,
                    build_batch(
                        [row[3] for row in rows],
                        keys=[row[2] for row in rows],
                        headers=[list(row[4]) for row in rows],
                    ),
                )
    finally:
        await cluster.close()


def assert_complete_and_in_order(records: list[ConsumerRecord], start: int = 0) -> None:
    by_partition: dict[int, list[tuple]] = {p: [] for p in range(PARTITIONS)}
    for record in records:
        assert record.topic == TOPIC
        by_partition[record.partition].append(as_tuple(record))
    for partition, got in by_partition.items():
        assert got == [expected_record(partition, o) for o in range(start, PER_PARTITION)]


async def take(records: AsyncIterator[ConsumerRecord], count: int) -> list[ConsumerRecord]:
    taken: list[ConsumerRecord] = []
    async for record in records:
        taken.append(record)
        if len(taken) == count:
            break
    return taken


def test_async_for_reads_every_partition_in_order_and_resumes_after_break(
    broker: BrokerProcess,
) -> None:
    bootstrap = [(broker.host, broker.port)]
    run(fill_topic(bootstrap))
    tp0 = TopicPartition(TOPIC, 0)

    async def scenario() -> None:
        cluster = Cluster(bootstrap)
        try:
            consumer = Consumer(cluster)
            await consumer.assign_topic(TOPIC)
            await consumer.seek_to_beginning()
            first = await take(consumer, 10)
            # Whatever the first round fetched, the positions name the next record.
            seen = {p: sum(r.partition == p for r in first) for p in range(PARTITIONS)}
            assert {p: consumer.position(TopicPartition(TOPIC, p)) for p in seen} == seen
            rest = await take(consumer, PARTITIONS * PER_PARTITION - 10)
            assert_complete_and_in_order(first + rest)

            consumer.seek(tp0, 120)
            again = await take(consumer.records(idle_timeout_s=1.0), PER_PARTITION)
            assert [as_tuple(r) for r in again] == [expected_record(0, o) for o in range(120, 200)]
            assert consumer.position(tp0) == PER_PARTITION

            # A seek in the loop body: the records already fetched after it are dropped.
            consumer.seek(tp0, 0)
            offsets = []
            async for record in consumer.records(idle_timeout_s=1.0):
                offsets.append(record.offset)
                if record.offset == 5:
                    consumer.seek(tp0, 190)
            assert offsets == [*range(6), *range(190, 200)]
        finally:
            await cluster.close()

    run(asyncio.wait_for(scenario(), ITERATION_TIMEOUT_S))


def test_sync_consumer_iterates_polls_and_resumes_after_seek(broker: BrokerProcess) -> None:
    bootstrap = [(broker.host, broker.port)]
    run(fill_topic(bootstrap))
    tp1 = TopicPartition(TOPIC, 1)

    with SyncConsumer(f"{broker.host}:{broker.port}", client_id="sync-test") as consumer:
        assert consumer.assign_topic(TOPIC) == [TopicPartition(TOPIC, p) for p in range(3)]
        consumer.seek_to_beginning()
        records = list(consumer.records(idle_timeout_s=1.0))
        assert_complete_and_in_order(records)
        assert all(consumer.position(tp) == PER_PARTITION for tp in consumer.assignment())

        consumer.assign([tp1])
        consumer.seek(tp1, 30)
        first_three = []
        for record in consumer:
            first_three.append(record.offset)
            if len(first_three) == 3:
                break
        assert first_three == [30, 31, 32]
        assert consumer.position(tp1) == 33
        resumed = [r.offset for r in consumer.records(idle_timeout_s=1.0)]
        assert resumed == list(range(33, PER_PARTITION))

        consumer.seek(tp1, 190)
        polled = consumer.poll(timeout=5.0)
        assert [as_tuple(r) for r in polled] == [expected_record(1, o) for o in range(190, 200)]
        assert consumer.poll(timeout=0.1) == []
        consumer.seek(tp1, 199)
        (chunk,) = consumer.poll_batches(timeout=5.0)
        assert (chunk.tp, chunk.first_offset, chunk.records.num_rows) == (tp1, 199, 1)

    with pytest.raises(ClientClosedError):
        consumer.poll(timeout=0.1)
    with pytest.raises(ClientClosedError):
        consumer.seek(tp1, 0)
    consumer.close()
