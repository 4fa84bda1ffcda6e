"""Brokers that come back: the controller re-elects and tells every replica.

A leader that died as the last ISR member, and a broker that restarted faster than the
controller noticed, must both end with a bumped leader epoch, every replica fetching,
the ISR full again and acks=all writes accepted (with min.insync.replicas=2).
"""

from __future__ import annotations

import asyncio
import time

import pytest
from kazoo.client import KazooClient

from brokerd.controller.zk_store import current_controller
from spark_replica.zk import topic_store, znodes
from spark_replica.zk.session import connect
from tests.integration.test_replication import create, wait_for
from tests.support import BrokerFactory, produce_acks_all, run

pytestmark = pytest.mark.slow

FAST_REPLICATION = {"replica.lag.time.max.ms": "2000"}
# Long enough that a controller paused for a few seconds keeps its session.
PATIENT_SESSION = {"zookeeper.session.timeout.ms": "30000"}
MIN_ISR_2 = {"min.insync.replicas": "2"}


def partition_state(zk: KazooClient, topic: str, partition: int = 0) -> znodes.PartitionState:
    found = topic_store.read_partition_state(zk, topic, partition)
    assert found is not None, f"{topic}-{partition} has no leaderAndISR state"
    return found[0]


async def wait_unregistered(zk: KazooClient, broker_id: int, timeout_s: float = 30) -> None:
    path = znodes.broker_path(broker_id)

    async def gone() -> bool:
        return await asyncio.to_thread(zk.exists, path) is None

    await wait_for(gone, timeout_s=timeout_s)


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

            async def controller_is_1() -> bool:
                return await asyncio.to_thread(current_controller, zk) == 1

            await wait_for(controller_is_1, timeout_s=30)
            for broker_id in (2, 3):
                brokers.start(broker_id, **FAST_REPLICATION)
            bootstrap = brokers.bootstrap
            await create(bootstrap, "bounce", partitions=3, rf=3, **MIN_ISR_2)
            partition = next(p for p in range(3) if partition_state(zk, "bounce", p).leader != 1)

            async def isr_full() -> bool:
                return len(partition_state(zk, "bounce", partition).isr) == 3

            await wait_for(isr_full, timeout_s=30)
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
            await wait_for(isr_full, timeout_s=30)
        finally:
            await asyncio.to_thread(zk.stop)

    run(scenario(), timeout_s=180)
