"""The client layer the Spark connector stands on, against real brokers: sending at chosen
sequences, exact range reads (lost records reported, leader changes followed) and
offset lookups."""

from __future__ import annotations

import pyarrow as pa
import pytest

from spark_replica.client import (
    EARLIEST,
    LATEST,
    Cluster,
    Consumer,
    ConsumerConfig,
    FetchedRecords,
    RecordsLost,
    SendOutcome,
    SequencedProducer,
    list_offsets,
)
from spark_replica.errors import RecordsLostError, TimeoutExpiredError
from spark_replica.topics import TopicPartition
from tests.support import BrokerFactory, create, create_topic, leadership, run, start_cluster

pytestmark = pytest.mark.slow

PRODUCER_ID = 4242


def values(first: int, count: int) -> pa.RecordBatch:
    """Records whose values are their intended offsets."""
    return pa.RecordBatch.from_pydict(
        {"value": pa.array([str(first + i).encode() for i in range(count)], pa.binary())}
    )


async def write(cluster: Cluster, tp: TopicPartition, batches: int, size: int) -> None:
    producer = SequencedProducer(cluster, PRODUCER_ID, 0)
    for n in range(batches):
        assert await producer.send(tp, values(n * size, size), n * size) is SendOutcome.WRITTEN


async def read(consumer: Consumer, tp: TopicPartition, start: int, end: int) -> list[int]:
    offsets = []
    async for fetched in consumer.read_range(tp, start, end, progress_timeout_ms=30_000):
        assert isinstance(fetched, FetchedRecords)
        assert [int(v) for v in fetched.records.column("value").to_pylist()] == list(
            range(fetched.first_offset, fetched.next_offset)
        )
        offsets += range(fetched.first_offset, fetched.next_offset)
    return offsets


def test_sequenced_sends_get_the_leaders_verdicts(brokers: BrokerFactory) -> None:
    broker = brokers.start(1)
    bootstrap = [(broker.host, broker.port)]
    tp = TopicPartition("sequenced", 0)

    async def scenario() -> None:
        await create_topic(bootstrap, tp.topic)
        cluster = Cluster(bootstrap)
        try:
            producer = SequencedProducer(cluster, PRODUCER_ID, 3)
            assert await producer.send(tp, values(0, 4), 0) is SendOutcome.WRITTEN
            # A retry of a recent batch is answered as written, not appended again.
            assert await producer.send(tp, values(0, 4), 0) is SendOutcome.WRITTEN
            assert await producer.send(tp, values(9, 2), 9) is SendOutcome.OUT_OF_ORDER
            for n in range(1, 7):
                assert await producer.send(tp, values(4 * n, 4), 4 * n) is SendOutcome.WRITTEN
            # Older than the producer's last five batches: a duplicate by sequence.
            assert await producer.send(tp, values(0, 4), 0) is SendOutcome.DUPLICATE
            newer = SequencedProducer(cluster, PRODUCER_ID, 4)
            assert await newer.send(tp, values(28, 1), 0) is SendOutcome.WRITTEN
            assert await producer.send(tp, values(28, 1), 28) is SendOutcome.FENCED
            assert await read(Consumer(cluster), tp, 0, 29) == list(range(29))
        finally:
            await cluster.close()

    run(scenario())


def test_range_reads_are_exact_and_report_lost_records(brokers: BrokerFactory) -> None:
    broker = brokers.start(1)
    bootstrap = [(broker.host, broker.port)]
    tp = TopicPartition("ranges", 0)

    async def scenario() -> None:
        await create_topic(bootstrap, tp.topic)
        cluster = Cluster(bootstrap)
        try:
            await write(cluster, tp, batches=10, size=10)
            consumer = Consumer(cluster)
            assert await read(consumer, tp, 15, 87) == list(range(15, 87))
            # Past the log end: the log was truncated below what was planned.
            with pytest.raises(RecordsLostError, match="truncated to 100") as lost:
                await read(consumer, tp, 150, 160)
            assert (lost.value.start, lost.value.end) == (150, 160)
            skipped: list[RecordsLost] = []
            reader = consumer.read_range(tp, 150, 160, on_lost=skipped.append)
            assert [f async for f in reader] == []
            assert [(s.start, s.end) for s in skipped] == [(150, 160)]
        finally:
            await cluster.close()

    run(scenario())


def test_list_offsets_answers_what_it_can_and_names_what_it_cannot(
    brokers: BrokerFactory,
) -> None:
    broker = brokers.start(1)
    bootstrap = [(broker.host, broker.port)]
    tp, missing = TopicPartition("listed", 0), TopicPartition("no-such-topic", 0)

    async def scenario() -> None:
        await create_topic(bootstrap, tp.topic)
        cluster = Cluster(bootstrap)
        try:
            await write(cluster, tp, batches=3, size=5)
            assert (await list_offsets(cluster, [tp], EARLIEST, wait_s=5))[tp][0] == 0
            assert (await list_offsets(cluster, [tp], LATEST, wait_s=5))[tp][0] == 15
            ends = await list_offsets(cluster, [tp], LATEST, wait_s=5, log_end=True)
            assert ends[tp][0] == 15
            partial = await list_offsets(cluster, [tp, missing], LATEST, wait_s=1, partial=True)
            assert set(partial) == {tp}
            with pytest.raises(TimeoutExpiredError, match="no-such-topic-0"):
                await list_offsets(cluster, [tp, missing], LATEST, wait_s=1)
        finally:
            await cluster.close()

    run(scenario())


def test_a_range_read_follows_a_killed_leader(brokers: BrokerFactory) -> None:
    start_cluster(brokers)
    bootstrap = brokers.bootstrap
    tp = TopicPartition("failover-range", 0)

    async def scenario() -> None:
        await create(bootstrap, tp.topic)
        cluster = Cluster(bootstrap)
        try:
            await write(cluster, tp, batches=40, size=50)
            # Small fetches, so that the read takes many of them.
            consumer = Consumer(cluster, ConsumerConfig(partition_max_bytes=4096))
            reader = consumer.read_range(tp, 0, 2000, progress_timeout_ms=60_000)
            offsets = []
            killed = False
            async for fetched in reader:
                offsets += range(fetched.first_offset, fetched.next_offset)
                if not killed and len(offsets) >= 200:
                    leader = (await leadership(bootstrap, tp.topic))[0]["leader"]
                    assert isinstance(leader, int)
                    brokers.brokers[leader].kill()
                    killed = True
            assert killed
            assert offsets == list(range(2000))
        finally:
            await cluster.close()

    run(scenario(), timeout_s=150)
