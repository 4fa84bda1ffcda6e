"""Replication through a real 3-broker cluster: ISR, high watermark, leader failover."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from spark_replica.client import (
    Admin,
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
    ReplogError,
    UnknownLeaderEpochError,
)
from spark_replica.protocol.fetch import FetchPartition, FetchRequest, FetchTopic
from spark_replica.protocol.list_offsets import LATEST_TIMESTAMP
from spark_replica.records import decode_payload, iter_batches
from spark_replica.topics import TopicPartition
from tests.integration.test_produce_consume import rows_of
from tests.support import BrokerFactory, run

pytestmark = pytest.mark.slow

FAST_REPLICATION = {"replica.lag.time.max.ms": "2000"}


def start_cluster(brokers: BrokerFactory, count: int = 3, **overrides: str) -> None:
    for broker_id in range(1, count + 1):
        brokers.start(broker_id, **{**FAST_REPLICATION, **overrides})


async def describe(bootstrap: list[tuple[str, int]], topic: str) -> list[dict[str, object]]:
    cluster = Cluster(bootstrap)
    try:
        described = await Admin(cluster).describe([topic])
        return [p.as_json() for p in described[topic]]
    finally:
        await cluster.close()


async def leadership(bootstrap: list[tuple[str, int]], topic: str) -> list[dict[str, object]]:
    """Leader, epoch, replicas and ISR per partition from metadata alone.

    Unlike describe() this asks no partition leader anything, so it cannot hang on a
    leader that is paused.
    """
    cluster = Cluster(bootstrap)
    try:
        metadata = await cluster.ensure_topic(topic)
        partitions = sorted(metadata.partitions, key=lambda p: p.partition)
        return [
            {
                "partition": p.partition,
                "leader": p.leader,
                "isr": list(p.isr),
                "replicas": list(p.replicas),
            }
            for p in partitions
        ]
    finally:
        await cluster.close()


async def wait_for(check, timeout_s: float = 30.0, interval_s: float = 0.2):
    """Poll an async check until it returns something truthy, or fail at the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            value = await check()
        except ReplogError as exc:
            if not exc.retriable or time.monotonic() > deadline:
                raise
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_s} s (last: {value!r})")
        await asyncio.sleep(interval_s)


async def create(
    bootstrap: list[tuple[str, int]], topic: str, partitions: int = 1, rf: int = 3, **configs: str
) -> None:
    cluster = Cluster(bootstrap)
    try:
        await Admin(cluster).create_topic(topic, partitions, rf, configs)
    finally:
        await cluster.close()


async def read_everything(
    bootstrap: list[tuple[str, int]], topic: str, expected: int
) -> list[dict[str, object]]:
    cluster = Cluster(bootstrap)
    try:
        consumer = Consumer(cluster)
        await consumer.assign_topic(topic)
        await consumer.seek_to_beginning()
        fetched = []
        seen = 0
        deadline = time.monotonic() + 30
        while seen < expected and time.monotonic() < deadline:
            for chunk in await consumer.poll(max_wait_ms=200):
                fetched.append(chunk)
                seen += chunk.records.num_rows
        return rows_of(fetched)
    finally:
        await cluster.close()


def test_rf3_topic_replicates_to_every_broker(brokers: BrokerFactory) -> None:
    start_cluster(brokers)
    bootstrap = brokers.bootstrap

    async def scenario() -> list[dict[str, object]]:
        await create(bootstrap, "replicated", partitions=3)
        cluster = Cluster(bootstrap)
        try:
            producer = Producer(cluster, ProducerConfig(acks=-1, batch_records=100))
            await producer.send_records("replicated", [f"v{i}" for i in range(3000)])
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


def replica_records(log_dir: Path) -> list[tuple[int, bytes]]:
    """(offset, value) of every record in a partition directory, read from the files."""
    records = []
    for segment in sorted(log_dir.glob("*.log")):
        for header, batch in iter_batches(segment.read_bytes()):
            values = decode_payload(batch).column("value").to_pylist()
            records.extend((header.base_offset + i, v) for i, v in enumerate(values))
    return records


def assert_replicas_identical(brokers: BrokerFactory, partition_dir: str) -> None:
    """Stop every broker cleanly, then compare what each holds on disk."""
    brokers.stop_all()
    held = {b: replica_records(p.log_dir / partition_dir) for b, p in brokers.brokers.items()}
    first = next(iter(held.values()))
    assert first, "the partition holds records"
    for broker_id, records in held.items():
        assert records == first, f"broker {broker_id} differs"


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
