"""Replication through a real 3-broker cluster: ISR, high watermark, leader failover."""

from __future__ import annotations

import asyncio
import time

import pytest

from spark_replica.client import (
    BrokerConnection,
    Cluster,
    Consumer,
    Producer,
    ProducerConfig,
)
from spark_replica.errors import (
    DeliveryTimeoutError,
    FencedLeaderEpochError,
    OffsetOutOfRangeError,
    UnknownLeaderEpochError,
)
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.fetch import FetchPartition, FetchRequest, FetchTopic
from spark_replica.wire.native.list_offsets import LATEST_TIMESTAMP
from tests.support import (
    BrokerFactory,
    assert_replicas_identical,
    create,
    describe,
    leadership,
    read_everything,
    run,
    start_cluster,
    wait_for,
)

pytestmark = pytest.mark.slow


def test_rf3_topic_replicates_to_every_broker(brokers: BrokerFactory) -> None:
    start_cluster(brokers)
    bootstrap = brokers.bootstrap

    async def scenario() -> list[dict[str, object]]:
        await create(bootstrap, "replicated", partitions=3)
        cluster = Cluster(bootstrap)
        try:
            producer = Producer(cluster, ProducerConfig(acks=-1, batch_records=100))
            for partition in range(3):  # keyless records would stick to one partition
                values = [f"v{i}" for i in range(partition, 3000, 3)]
                await producer.send_records("replicated", values, partition=partition)
        finally:
            await cluster.close()

        async def all_in_sync() -> list[dict[str, object]] | None:
            described = await describe(bootstrap, "replicated")
            ok = all(
                sorted(p["isr"]) == [1, 2, 3]
                and p["high_watermark"] == 1000
                and p["log_end_offsets"] == {"1": 1000, "2": 1000, "3": 1000}
                for p in described
            )
            return described if ok else None

        return await wait_for(all_in_sync)

    described = run(scenario())
    assert sorted(p["leader"] for p in described) == [1, 2, 3], "leaders spread over brokers"
    for broker in brokers.brokers.values():
        for p in range(3):
            files = sorted((broker.log_dir / f"replicated-{p}").glob("*.log"))
            assert files and sum(f.stat().st_size for f in files) > 0


def test_leader_sigkill_during_acks_all_produce_loses_nothing(brokers: BrokerFactory) -> None:
    start_cluster(brokers)
    bootstrap = brokers.bootstrap
    acked: list[str] = []
    served: dict[int, bytes] = {}

    async def tail(done: asyncio.Event) -> None:
        """A consumer reading all along: whatever it is served must never be taken back."""
        cluster = Cluster(bootstrap)
        consumer = Consumer(cluster)
        try:
            consumer.assign([TopicPartition("failover", 0)])
            while not done.is_set():
                for chunk in await consumer.poll(max_wait_ms=100):
                    for n, value in enumerate(chunk.records.column("value").to_pylist()):
                        served[chunk.first_offset + n] = value
        finally:
            await cluster.close()

    async def scenario() -> int:
        await create(bootstrap, "failover", rf=3, **{"min.insync.replicas": "2"})
        leader = (await describe(bootstrap, "failover"))[0]["leader"]
        done = asyncio.Event()
        reader = asyncio.create_task(tail(done))
        cluster = Cluster(bootstrap)
        producer = Producer(
            cluster, ProducerConfig(acks=-1, batch_records=20, delivery_timeout_ms=60_000)
        )
        try:
            for batch in range(120):
                values = [f"b{batch}-{i}" for i in range(20)]
                await producer.send_records("failover", values, partition=0)
                acked.extend(values)
                if batch == 40:
                    await asyncio.to_thread(brokers.brokers[leader].kill)
        finally:
            done.set()
            await cluster.close()
            await reader
        return leader

    old_leader = run(scenario(), timeout_s=180)
    survivors = [(b.host, b.port) for b in brokers.brokers.values() if b.process is not None]
    rows = run(read_everything(survivors, "failover", len(acked)))
    values = [r["value"].decode() for r in rows]
    assert values == acked, "every acknowledged record, once, in order (idempotent producer)"
    final = {r["offset"]: r["value"] for r in rows}
    assert served, "the tailing consumer read records during the test"
    assert all(final.get(offset) == value for offset, value in served.items()), (
        "a consumer was served a record that is not in the final log (read above the HW)"
    )
    brokers.start(old_leader)

    async def rejoined() -> bool:
        described = await describe(brokers.bootstrap, "failover")
        return sorted(described[0]["isr"]) == [1, 2, 3]

    run(wait_for(rejoined, timeout_s=60))
    assert_replicas_identical(brokers, "failover-0")


def test_lagging_follower_leaves_and_rejoins_the_isr(brokers: BrokerFactory) -> None:
    # A long ZooKeeper session: the follower must leave the ISR by lag, not by expiry.
    start_cluster(brokers, **{"zookeeper.session.timeout.ms": "20000"})
    bootstrap = brokers.bootstrap

    async def scenario() -> None:
        await create(bootstrap, "laggy", rf=3, **{"min.insync.replicas": "3"})
        state = (await leadership(bootstrap, "laggy"))[0]
        follower = next(r for r in state["replicas"] if r != state["leader"])
        cluster = Cluster(bootstrap)
        strict = Producer(cluster, ProducerConfig(acks=-1, delivery_timeout_ms=1500))
        relaxed = Producer(cluster, ProducerConfig(acks=1))
        try:
            await strict.send_records("laggy", ["before"], partition=0)
            stopped_at = time.monotonic()
            brokers.brokers[follower].pause()
            try:

                async def shrunk() -> bool:
                    return follower not in (await leadership(bootstrap, "laggy"))[0]["isr"]

                await wait_for(shrunk, timeout_s=15)
                left_after = time.monotonic() - stopped_at
                with pytest.raises(DeliveryTimeoutError, match="not enough in-sync replicas"):
                    await strict.send_records("laggy", ["refused"], partition=0)
                acked = await relaxed.send_records("laggy", ["acks=1 still works"], partition=0)
                assert acked[0].offset >= 1
            finally:
                brokers.brokers[follower].resume()

            async def rejoined() -> bool:
                return follower in (await leadership(bootstrap, "laggy"))[0]["isr"]

            await wait_for(rejoined, timeout_s=15)
            await strict.send_records("laggy", ["after"], partition=0)
        finally:
            await cluster.close()
        assert left_after < 2.0 + 1.0 + 3.0, "left within the lag time plus one check interval"

    run(scenario())


def test_consumers_never_read_above_the_high_watermark(brokers: BrokerFactory) -> None:
    # Followers paused (still in the ISR for the lag time): acks=1 writes raise the
    # leader's LEO but not the HW, and no consumer may see them until they commit.
    start_cluster(brokers, **{"replica.lag.time.max.ms": "30000"})
    bootstrap = brokers.bootstrap

    async def scenario() -> None:
        await create(bootstrap, "watermark", rf=3)
        await produce_values(bootstrap, "watermark", ["committed"], acks=-1)
        state = (await leadership(bootstrap, "watermark"))[0]
        followers = [r for r in state["replicas"] if r != state["leader"]]
        leader = brokers.brokers[state["leader"]]
        leader_only = [(leader.host, leader.port)]
        tp = TopicPartition("watermark", 0)
        for follower in followers:
            brokers.brokers[follower].pause()
        try:
            await produce_values(
                leader_only, "watermark", [f"pending-{i}" for i in range(5)], acks=1
            )
            cluster = Cluster(leader_only)
            try:
                consumer = Consumer(cluster)
                consumer.assign([tp])
                latest = (await consumer.list_offsets([tp], LATEST_TIMESTAMP))[tp][0]
                assert latest == 1, "ListOffsets latest is the HW, not the LEO"
                consumer.seek(tp, 0)
                seen = [
                    v
                    for f in await consumer.poll(max_wait_ms=300)
                    for v in f.records.column("value").to_pylist()
                ]
                assert seen == [b"committed"]
                consumer.seek(tp, 1)
                assert await consumer.poll(max_wait_ms=300) == [], "[HW, LEO) answers empty"
                consumer.seek(tp, 7)
                with pytest.raises(OffsetOutOfRangeError):
                    await consumer.poll(max_wait_ms=0)
            finally:
                await cluster.close()
        finally:
            for follower in followers:
                brokers.brokers[follower].resume()
        rows = await read_everything(bootstrap, "watermark", 6)
        assert [r["value"] for r in rows] == [b"committed"] + [
            f"pending-{i}".encode() for i in range(5)
        ]

    run(scenario())


async def produce_values(
    bootstrap: list[tuple[str, int]], topic: str, values: list[str], acks: int
) -> None:
    cluster = Cluster(bootstrap)
    try:
        await Producer(cluster, ProducerConfig(acks=acks)).send_records(topic, values, partition=0)
    finally:
        await cluster.close()


def test_fetches_with_another_leader_epoch_are_fenced(brokers: BrokerFactory) -> None:
    start_cluster(brokers)
    bootstrap = brokers.bootstrap

    async def scenario() -> tuple[int, int, int]:
        await create(bootstrap, "fenced", rf=3)
        state = (await leadership(bootstrap, "fenced"))[0]
        brokers.brokers[state["leader"]].kill()
        alive = [(b.host, b.port) for b in brokers.brokers.values() if b.process is not None]

        async def new_leader() -> dict[str, object] | None:
            current = (await leadership(alive, "fenced"))[0]
            return current if current["leader"] not in (-1, state["leader"]) else None

        current = await wait_for(new_leader)
        leader = brokers.brokers[current["leader"]]
        conn = BrokerConnection(leader.host, leader.port)
        await conn.connect()
        try:
            codes = []
            for epoch in (0, 99, -1):
                request = FetchRequest(
                    0, 1, 1 << 20, [FetchTopic("fenced", [FetchPartition(0, 0, 1 << 20, epoch)])]
                )
                response = await conn.send(request)
                codes.append(response.topics[0].partitions[0].error_code)
            return codes[0], codes[1], codes[2]
        finally:
            await conn.close()

    stale, future, unchecked = run(scenario())
    assert stale == FencedLeaderEpochError.code
    assert future == UnknownLeaderEpochError.code
    assert unchecked == 0
