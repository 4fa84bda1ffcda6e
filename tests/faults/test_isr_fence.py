"""The zombie-leader fence fires only when someone else wrote the leaderAndISR znode.

The writes below stand in for the faults they model, on the real znode: a write of
exactly the ISR the leader is about to propose is an earlier write of its own whose reply
was lost; a write at a newer leader epoch is a controller that decided and died before
telling anyone. Every broker has a long session so that pausing a follower shrinks the
ISR through the leader's own write, never through the controller.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace

import pytest
from kazoo.client import KazooClient

from brokerd.controller.zk_store import current_controller
from spark_replica.client import BrokerConnection
from spark_replica.errors import StaleControllerEpochError
from spark_replica.wire.native.controller_requests import (
    ControllerHeader,
    LeaderAndIsrRequest,
    PartitionLeaderState,
    TopicLeaderStates,
)
from spark_replica.zk import topic_store, znodes
from spark_replica.zk.session import connect
from tests.support import BrokerFactory, create, produce_acks_all, run, wait_for

pytestmark = pytest.mark.slow

CLUSTER = {"replica.lag.time.max.ms": "2000", "zookeeper.session.timeout.ms": "60000"}
# Well inside the session timeout: only the partition's own leader can make progress.
PAUSED_PRODUCE_DEADLINE_S = 20
TOPIC = "fence"


def state_of(zk: KazooClient) -> tuple[znodes.PartitionState, int]:
    found = topic_store.read_partition_state(zk, TOPIC, 0)
    assert found is not None
    return found.state, found.zk_version


@asynccontextmanager
async def cluster_with_full_isr(brokers: BrokerFactory) -> AsyncIterator[KazooClient]:
    for broker_id in (1, 2, 3):
        brokers.start(broker_id, **CLUSTER)
    zk = await asyncio.to_thread(connect, brokers.zk_connect)
    try:
        await create(brokers.bootstrap, TOPIC, rf=3, **{"min.insync.replicas": "2"})

        async def isr_full() -> bool:
            return len(state_of(zk)[0].isr) == 3

        await wait_for(isr_full, timeout_s=30)
        assert await wait_for(lambda: produce_acks_all(brokers.bootstrap, TOPIC, 0))
        yield zk
    finally:
        await asyncio.to_thread(zk.stop)


def paused_follower(zk: KazooClient, leader: int) -> int:
    """A follower whose pause the controller does not share."""
    controller = current_controller(zk)
    return next(b for b in (1, 2, 3) if b not in (leader, controller))


async def acks_all_while_paused(brokers: BrokerFactory, zk: KazooClient, follower: int) -> None:
    """Pause `follower`: the leader must shrink the ISR and go on taking acks=all writes;
    once resumed, the follower must be back in the ISR."""
    brokers.brokers[follower].pause()
    try:
        assert await wait_for(
            lambda: produce_acks_all(brokers.bootstrap, TOPIC, 0),
            timeout_s=PAUSED_PRODUCE_DEADLINE_S,
        )
    finally:
        brokers.brokers[follower].resume()

    async def isr_full() -> bool:
        return len(state_of(zk)[0].isr) == 3

    await wait_for(isr_full, timeout_s=30)


def test_an_isr_write_whose_reply_was_lost_is_adopted(brokers: BrokerFactory) -> None:
    async def scenario() -> None:
        async with cluster_with_full_isr(brokers) as zk:
            state, version = state_of(zk)
            follower = paused_follower(zk, state.leader)
            shrunk = replace(state, isr=[r for r in state.isr if r != follower])
            path = znodes.partition_state_path(TOPIC, 0)
            await asyncio.to_thread(zk.set, path, shrunk.encode(), version=version)
            await acks_all_while_paused(brokers, zk, follower)
            assert state_of(zk)[0].leader_epoch == state.leader_epoch, "no election was needed"

    run(scenario(), timeout_s=180)


def test_the_controller_repairs_a_leader_that_stepped_down(brokers: BrokerFactory) -> None:
    async def scenario() -> None:
        async with cluster_with_full_isr(brokers) as zk:
            state, version = state_of(zk)
            follower = paused_follower(zk, state.leader)
            newer = replace(state, leader_epoch=state.leader_epoch + 1)
            path = znodes.partition_state_path(TOPIC, 0)
            await asyncio.to_thread(zk.set, path, newer.encode(), version=version)
            await acks_all_while_paused(brokers, zk, follower)
            assert state_of(zk)[0].leader_epoch > newer.leader_epoch

    run(scenario(), timeout_s=180)


def test_leader_and_isr_at_the_current_epoch_is_ignored(brokers: BrokerFactory) -> None:
    async def scenario() -> None:
        async with cluster_with_full_isr(brokers) as zk:
            state, version = state_of(zk)
            leader = brokers.brokers[state.leader]
            controller_epoch = znodes.decode_controller_epoch(
                (await asyncio.to_thread(zk.get, znodes.CONTROLLER_EPOCH_PATH))[0]
            )
            registration = await asyncio.to_thread(zk.exists, znodes.broker_path(state.leader))
            assert registration is not None
            header = ControllerHeader(current_controller(zk), controller_epoch, registration.czxid)
            bogus = PartitionLeaderState(
                0, state.leader, state.leader_epoch, [state.leader], version + 100, [1, 2, 3]
            )
            conn = BrokerConnection(leader.host, leader.port)
            await conn.connect()
            try:
                response = await conn.send(
                    LeaderAndIsrRequest(header, False, [TopicLeaderStates(TOPIC, [bogus])])
                )
            finally:
                await conn.close()
            [answer] = response.topics[0].partitions
            assert answer.error_code == StaleControllerEpochError.code
            assert await wait_for(lambda: produce_acks_all(brokers.bootstrap, TOPIC, 0))
            follower = paused_follower(zk, state.leader)
            await acks_all_while_paused(brokers, zk, follower)

    run(scenario(), timeout_s=180)
