"""Brokers that come back: the controller re-elects and tells every replica.

A leader that died as the last ISR member, and a broker that restarted faster than the
controller noticed, must both end with a bumped leader epoch, every replica fetching,
the ISR full again and acks=all writes accepted (with min.insync.replicas=2).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from brokerd.controller.zk_store import current_controller
from spark_replica.client import Cluster, Consumer, Producer, ProducerConfig
from spark_replica.topics import TopicPartition
from spark_replica.zk import topic_store, znodes
from spark_replica.zk.session import connect
from tests.support import (
    FAST_REPLICATION,
    BrokerFactory,
    create,
    produce_acks_all,
    run,
    wait_for,
)

pytestmark = pytest.mark.slow

# Long enough that a controller paused for a few seconds keeps its session.
PATIENT_SESSION = {"zookeeper.session.timeout.ms": "30000"}
# Outlasts a broker's restart, yet expires soon after the frozen controller is killed.
FROZEN_CONTROLLER_SESSION = {"zookeeper.session.timeout.ms": "20000"}
MIN_ISR_2 = {"min.insync.replicas": "2"}
BATCHES = 20
BATCH_RECORDS = 10


def partition_state(zk: KazooClient, topic: str, partition: int = 0) -> znodes.PartitionState:
    found = topic_store.read_partition_state(zk, topic, partition)
    assert found is not None, f"{topic}-{partition} has no leaderAndISR state"
    return found.state


async def produce_batches(
    bootstrap: list[tuple[str, int]], topic: str, partition: int
) -> list[bytes]:
    """Acknowledged acks=all writes, one batch at a time; the values, in offset order."""
    cluster = Cluster(bootstrap)
    values = [f"b{b}-r{r}".encode() for b in range(BATCHES) for r in range(BATCH_RECORDS)]
    try:
        producer = Producer(cluster, ProducerConfig(acks=-1, batch_records=BATCH_RECORDS))
        for start in range(0, len(values), BATCH_RECORDS):
            await producer.send_records(
                topic, values[start : start + BATCH_RECORDS], partition=partition
            )
    finally:
        await cluster.close()
    return values


def cut_half_of_active_segment(partition_dir: Path) -> None:
    """A machine crash: the unflushed second half of the log never reached the disk."""
    segment = sorted(partition_dir.glob("*.log"))[-1]
    with segment.open("r+b") as file:
        file.truncate(segment.stat().st_size // 2)


async def read_partition(
    bootstrap: list[tuple[str, int]], topic: str, partition: int, expected: int
) -> list[dict[str, object]]:
    """Every record of one partition, read from its leader until `expected` have come
    (the leader may be moving still: retriable errors are retried)."""
    cluster = Cluster(bootstrap)
    try:
        consumer = Consumer(cluster)
        consumer.assign([TopicPartition(topic, partition)])
        await wait_for(seek_to_beginning(consumer, topic), timeout_s=30)
        rows: list[dict[str, object]] = []
        deadline = time.monotonic() + 30
        while len(rows) < expected and time.monotonic() < deadline:
            for chunk in await consumer.poll(max_wait_ms=200):
                rows.extend(chunk.records.to_pylist())
        return rows
    finally:
        await cluster.close()


def seek_to_beginning(consumer: Consumer, topic: str) -> Callable[[], Awaitable[bool]]:
    """A check for wait_for: seek, asking for the leader afresh each time."""

    async def seek() -> bool:
        await consumer.cluster.refresh([topic])
        await consumer.seek_to_beginning()
        return True

    return seek


async def wait_unregistered(zk: KazooClient, broker_id: int, timeout_s: float = 30) -> None:
    path = znodes.broker_path(broker_id)

    async def gone() -> bool:
        return await asyncio.to_thread(zk.exists, path) is None

    await wait_for(gone, timeout_s=timeout_s)


async def wait_isr_full(zk: KazooClient, topic: str, partition: int) -> None:
    async def isr_full() -> bool:
        return len(partition_state(zk, topic, partition).isr) == 3

    await wait_for(isr_full, timeout_s=30)


async def cluster_under_controller_1(
    brokers: BrokerFactory, zk: KazooClient, topic: str
) -> tuple[list[tuple[str, int]], int]:
    """Once broker 1 (started by the test) is the controller, start brokers 2 and 3 and
    create `topic` (3 partitions, RF 3, min ISR 2); return the bootstrap and a partition
    that broker 1 does not lead, once its ISR is full."""

    async def controller_is_1() -> bool:
        return await asyncio.to_thread(current_controller, zk) == 1

    await wait_for(controller_is_1, timeout_s=30)
    for broker_id in (2, 3):
        brokers.start(broker_id, **FAST_REPLICATION)
    bootstrap = brokers.bootstrap
    await create(bootstrap, topic, partitions=3, rf=3, **MIN_ISR_2)
    partition = next(p for p in range(3) if partition_state(zk, topic, p).leader != 1)
    await wait_isr_full(zk, topic, partition)
    return bootstrap, partition


def test_last_isr_leader_returning_after_its_followers_refills_the_isr(
    brokers: BrokerFactory,
) -> None:
    for broker_id in (1, 2, 3):
        brokers.start(broker_id, **FAST_REPLICATION)
    bootstrap = brokers.bootstrap

    async def scenario() -> None:
        zk = await asyncio.to_thread(connect, brokers.zk_connect)
        try:
            await create(bootstrap, "wedge", rf=3, **MIN_ISR_2)
            assert await wait_for(lambda: produce_acks_all(bootstrap, "wedge", 0))
            leader = partition_state(zk, "wedge").leader
            followers = [b for b in (1, 2, 3) if b != leader]
            for follower in followers:
                brokers.brokers[follower].kill()

            async def only_leader_in_isr() -> bool:
                return partition_state(zk, "wedge").isr == [leader]

            await wait_for(only_leader_in_isr, timeout_s=30)
            brokers.brokers[leader].kill()
            await wait_unregistered(zk, leader)
            for follower in followers:
                brokers.start(follower)
            brokers.start(leader)
            assert await wait_for(lambda: produce_acks_all(bootstrap, "wedge", 0), timeout_s=45)

            async def isr_full() -> bool:
                return sorted(partition_state(zk, "wedge").isr) == [1, 2, 3]

            await wait_for(isr_full, timeout_s=30)
        finally:
            await asyncio.to_thread(zk.stop)

    run(scenario(), timeout_s=180)


def test_a_broker_restarted_before_the_controller_looked_is_failed_over(
    brokers: BrokerFactory,
) -> None:
    """SIGKILL and restart a leader while the controller is paused: the controller then
    sees the broker's registration replaced (gone and back at once) and must handle it
    as a failure followed by a start-up, not as nothing."""
    controller = brokers.start(1, **FAST_REPLICATION, **PATIENT_SESSION)

    async def scenario() -> None:
        zk = await asyncio.to_thread(connect, brokers.zk_connect)
        try:
            bootstrap, partition = await cluster_under_controller_1(brokers, zk, "bounce")
            before = partition_state(zk, "bounce", partition)
            victim = brokers.brokers[before.leader]
            controller.pause()
            try:
                victim.kill()
                started = time.monotonic()
                brokers.start(before.leader)
                assert time.monotonic() - started < 20, "the controller's session must last"
            finally:
                controller.resume()

            async def failed_over() -> bool:
                state = partition_state(zk, "bounce", partition)
                return state.leader_epoch > before.leader_epoch and state.leader != before.leader

            await wait_for(failed_over, timeout_s=30)
            assert await wait_for(lambda: produce_acks_all(bootstrap, "bounce", partition))
            await wait_isr_full(zk, "bounce", partition)
        finally:
            await asyncio.to_thread(zk.stop)

    run(scenario(), timeout_s=180)


def test_a_leader_restarted_with_a_torn_tail_is_not_trusted_by_the_next_controller(
    brokers: BrokerFactory,
) -> None:
    """The leader crashes losing its unflushed tail and restarts while the controller is
    frozen; the controller then dies, and its successor reads a state written before the
    restart that still names the restarted broker as leader. Keeping it would make the
    other replicas truncate to its shorter log: it must be failed over instead."""
    controller = brokers.start(1, **FAST_REPLICATION, **FROZEN_CONTROLLER_SESSION)

    async def scenario() -> None:
        zk = await asyncio.to_thread(connect, brokers.zk_connect)
        try:
            bootstrap, partition = await cluster_under_controller_1(brokers, zk, "torn")
            acknowledged = await produce_batches(bootstrap, "torn", partition)
            leader = partition_state(zk, "torn", partition).leader
            controller.pause()
            brokers.brokers[leader].kill()
            cut_half_of_active_segment(brokers.brokers[leader].log_dir / f"torn-{partition}")
            started = time.monotonic()
            brokers.start(leader)
            assert time.monotonic() - started < 15, "the controller's session must last"
            controller.kill()

            async def new_controller() -> bool:
                return await asyncio.to_thread(current_controller, zk) not in (-1, 1)

            await wait_for(new_controller, timeout_s=45)
            rows = await read_partition(bootstrap, "torn", partition, len(acknowledged))
            assert [row["value"] for row in rows] == acknowledged
        finally:
            await asyncio.to_thread(zk.stop)

    run(scenario(), timeout_s=180)
