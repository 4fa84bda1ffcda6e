"""Issue 13's acceptance with aiokafka: an idempotent acks=all producer (gzip, keys,
headers) and a group consumer round trip a topic; the consumer commits part way, is
stopped, and a new member of the group resumes exactly at the commit."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from tests.kafka.clients import CLIENT_TIMEOUT_S, KafkaRecord, make_topic
from tests.support import BrokerFactory, run

pytestmark = pytest.mark.slow

RECORDS = 3_000
PARTITIONS = 3
BASE_TIMESTAMP_MS = 1_700_000_000_000


async def produce(bootstrap: str, topic: str) -> list[KafkaRecord]:
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        enable_idempotence=True,
        compression_type="gzip",
        linger_ms=5,
        request_timeout_ms=30_000,
    )
    await producer.start()
    try:
        sent = []
        for i in range(RECORDS):
            key = f"key-{i}".encode()
            value = None if i % 100 == 99 else f"value-{i}".encode()
            headers = [("seq", str(i).encode()), ("origin", b"aiokafka")]
            # Explicit timestamps: aiokafka's send futures give every record of a batch
            # the first record's timestamp (RecordMetadata), so those are not compared.
            timestamp = BASE_TIMESTAMP_MS + i
            future = await producer.send(
                topic, value=value, key=key, headers=headers, timestamp_ms=timestamp
            )
            sent.append((key, value, headers, timestamp, future))
        acked = []
        for key, value, headers, timestamp, future in sent:
            metadata = await asyncio.wait_for(future, CLIENT_TIMEOUT_S)
            acked.append(
                KafkaRecord(metadata.partition, metadata.offset, key, value, headers, timestamp)
            )
        return acked
    finally:
        await producer.stop()


async def read(consumer: AIOKafkaConsumer, count: int) -> list[KafkaRecord]:
    """At least `count` records (everything getmany hands over), within a deadline."""
    records: list[KafkaRecord] = []
    deadline = time.monotonic() + CLIENT_TIMEOUT_S
    while len(records) < count:
        assert time.monotonic() < deadline, f"only {len(records)} of {count} records"
        batches = await consumer.getmany(timeout_ms=500, max_records=500)
        for messages in batches.values():
            records += [
                KafkaRecord(m.partition, m.offset, m.key, m.value, list(m.headers), m.timestamp)
                for m in messages
            ]
    return records


def group_consumer(bootstrap: str, topic: str, group: str) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        heartbeat_interval_ms=500,
        session_timeout_ms=6000,
    )


async def round_trip(bootstrap: str, topic: str) -> None:
    acked = await produce(bootstrap, topic)
    assert len({r.key for r in acked}) == RECORDS
    group = f"group-{uuid.uuid4().hex[:8]}"
    first = group_consumer(bootstrap, topic, group)
    await first.start()
    try:
        first_part = await read(first, RECORDS // 3)
        await first.commit()
        committed = {p: await first.committed(TopicPartition(topic, p)) for p in range(PARTITIONS)}
    finally:
        await first.stop()
    for partition in range(PARTITIONS):
        offsets = [r.offset for r in first_part if r.partition == partition]
        if offsets:
            assert committed[partition] == max(offsets) + 1
        else:  # commit() commits the position: 0 where nothing was read yet
            assert committed[partition] in (0, None)

    second = group_consumer(bootstrap, topic, group)
    await second.start()
    try:
        rest = await read(second, RECORDS - len(first_part))
        assert not await second.getmany(timeout_ms=1000)
    finally:
        await second.stop()
    for partition, offset in committed.items():
        resumed = [r.offset for r in rest if r.partition == partition]
        if offset and resumed:
            assert min(resumed) == offset

    everything = first_part + rest
    assert len(everything) == RECORDS, "every record read exactly once"
    ordered = sorted(acked, key=lambda r: (r.partition, r.offset))
    assert sorted(everything, key=lambda r: (r.partition, r.offset)) == ordered


def test_aiokafka_producer_and_group_consumer_round_trip_and_resume(
    kafka_cluster: BrokerFactory,
) -> None:
    topic = f"aiokafka-{uuid.uuid4().hex[:8]}"
    make_topic(kafka_cluster, topic, PARTITIONS, rf=3)
    run(round_trip(kafka_cluster.kafka_bootstrap(), topic), timeout_s=240)
