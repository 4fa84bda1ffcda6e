"""A real three-node ZooKeeper ensemble under three real brokers (RF 3, min.insync.replicas
2, acks=all): one node killed, the cluster still elects leaders; two killed, the brokers
keep serving the leaders they have, and take up elections again when the quorum returns.
Nothing acknowledged is lost."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from spark_replica.client import Cluster, Producer, ProducerConfig
from spark_replica.tools.launcher.ensemble import ZooKeeperEnsemble
from spark_replica.zk import znodes
from spark_replica.zk.kazoo_errors import read_if_present
from spark_replica.zk.session import connect
from tests.support import BrokerFactory, leadership, read_everything, run, start_cluster, wait_for

pytestmark = pytest.mark.slow

TOPIC = "ensemble"
PARTITIONS = 3
TICK_MS = 200
# Longer than the brokers' session timeout (3 s), so a broker whose client stops trying
# to reconnect would have its session expire once the quorum is back.
QUORUM_LOST_S = 8.0
SESSION_TIMEOUT_S = 3.0  # tests.support.TEST_BROKER_OVERRIDES


@pytest.fixture
def ensemble(tmp_path: Path) -> Iterator[ZooKeeperEnsemble]:
    nodes = ZooKeeperEnsemble.on_free_ports(tmp_path / "zookeeper", 3, tick_ms=TICK_MS)
    nodes.start()
    try:
        yield nodes
    finally:
        nodes.stop()


@pytest.fixture
def cluster(ensemble: ZooKeeperEnsemble, tmp_path: Path) -> Iterator[BrokerFactory]:
    factory = BrokerFactory(ensemble.connect_string, tmp_path)
    try:
        start_cluster(factory)
        yield factory
    finally:
        factory.stop_all()


async def leaders(bootstrap: list[tuple[str, int]]) -> dict[int, int]:
    """partition -> leader, once every partition has one."""

    async def elected() -> dict[int, int] | None:
        found = {int(p["partition"]): int(p["leader"]) for p in await leadership(bootstrap, TOPIC)}  # type: ignore[call-overload]
        return found if len(found) == PARTITIONS and -1 not in found.values() else None

    return await wait_for(elected, timeout_s=20)


async def send(producer: Producer, values: list[str], acknowledged: list[str]) -> None:
    """acks=all to every partition; the values are acknowledged only if all are."""
    for partition in range(PARTITIONS):
        batch = [f"{value}-p{partition}" for value in values]
        await producer.send_records(TOPIC, batch, partition=partition)
        acknowledged.extend(batch)


async def create_topic(bootstrap: list[tuple[str, int]]) -> None:
    from spark_replica.client import Admin

    admin_cluster = Cluster(bootstrap)
    try:
        await Admin(admin_cluster).create_topic(TOPIC, PARTITIONS, 3, {"min.insync.replicas": "2"})
    finally:
        await admin_cluster.close()
    await leaders(bootstrap)


def broker_epochs(connect_string: str) -> dict[int, int]:
    """broker id -> czxid of its registration: a new one means its session was lost."""
    zk = connect(connect_string)
    try:
        epochs = {}
        for broker_id in (1, 2, 3):
            found = read_if_present(zk, znodes.broker_path(broker_id))
            if found is not None:
                epochs[broker_id] = found[1].czxid
        return epochs
    finally:
        zk.stop()
        zk.close()


def producer_for(bootstrap: list[tuple[str, int]]) -> tuple[Cluster, Producer]:
    cluster = Cluster(bootstrap)
    return cluster, Producer(cluster, ProducerConfig(acks=-1, delivery_timeout_ms=20_000))


async def assert_nothing_lost(bootstrap: list[tuple[str, int]], acknowledged: list[str]) -> None:
    rows = await read_everything(bootstrap, TOPIC, len(acknowledged))
    read = [bytes(row["value"]).decode() for row in rows]  # type: ignore[arg-type]
    assert sorted(read) == sorted(acknowledged)


async def kill_until_failed_over(cluster: BrokerFactory, victim: int) -> list[tuple[str, int]]:
    """Kill broker `victim`; once no partition names it leader, the survivors' addresses."""
    cluster.brokers[victim].kill()
    survivors = [(b.host, b.port) for i, b in cluster.brokers.items() if i != victim]

    async def moved() -> dict[int, int] | None:
        now = await leaders(survivors)
        return now if victim not in now.values() else None

    await wait_for(moved, timeout_s=20)
    return survivors


def test_one_zookeeper_node_killed_the_cluster_keeps_electing_leaders(
    ensemble: ZooKeeperEnsemble, cluster: BrokerFactory
) -> None:
    bootstrap = cluster.bootstrap

    async def scenario() -> None:
        await create_topic(bootstrap)
        client, producer = producer_for(bootstrap)
        acknowledged: list[str] = []
        try:
            await send(producer, ["before"], acknowledged)
            zk_leader = ensemble.leader()
            assert zk_leader is not None
            ensemble.kill_node(zk_leader)
            before = await leaders(bootstrap)
            survivors = await kill_until_failed_over(cluster, before[0])
            await send(producer, ["after"], acknowledged)
        finally:
            await producer.close()
            await client.close()
        await assert_nothing_lost(survivors, acknowledged)

    run(scenario(), timeout_s=60)


def test_two_zookeeper_nodes_killed_brokers_serve_their_leaders_and_recover(
    ensemble: ZooKeeperEnsemble, cluster: BrokerFactory
) -> None:
    bootstrap = cluster.bootstrap

    async def scenario() -> None:
        await create_topic(bootstrap)
        client, producer = producer_for(bootstrap)
        acknowledged: list[str] = []
        try:
            await send(producer, ["before"], acknowledged)
            before = await leaders(bootstrap)
            epochs = await asyncio.to_thread(broker_epochs, ensemble.connect_string)
            zk_leader = ensemble.leader()
            assert zk_leader is not None
            lost = [zk_leader, next(n for n in ensemble.processes if n != zk_leader)]
            for myid in lost:
                ensemble.kill_node(myid)
            outage_ends = time.monotonic() + QUORUM_LOST_S
            round_number = 0
            while time.monotonic() < outage_ends:
                await send(producer, [f"quorum-lost-{round_number}"], acknowledged)
                round_number += 1
                await asyncio.sleep(0.5)
            assert all(
                b.process is not None and b.process.poll() is None for b in cluster.brokers.values()
            )
            assert await leaders(bootstrap) == before
            await assert_nothing_lost(bootstrap, acknowledged)
            for myid in lost:
                ensemble.start_node(myid)
            await asyncio.to_thread(ensemble.wait_for_quorum, 20)
            # Every broker kept its session through the outage: once a session timeout has
            # passed on the new leader, the registrations are still the same znodes.
            await asyncio.sleep(SESSION_TIMEOUT_S + 1)
            assert await asyncio.to_thread(broker_epochs, ensemble.connect_string) == epochs
            survivors = await kill_until_failed_over(cluster, before[0])
            await send(producer, ["quorum-back"], acknowledged)
        finally:
            await producer.close()
            await client.close()
        await assert_nothing_lost(survivors, acknowledged)

    run(scenario(), timeout_s=90)
