"""Topic deletion through the controller and growing a topic, with real processes."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from spark_replica.client import Admin, Cluster, Producer, ProducerConfig
from spark_replica.errors import InvalidPartitionsError, UnknownTopicOrPartitionError
from spark_replica.zk import topic_store, znodes
from spark_replica.zk.session import connect
from tests.support import (
    BrokerFactory,
    controller_id,
    create,
    leadership,
    produce,
    read_everything,
    replog,
    run,
    start_cluster,
    wait_for,
)

pytestmark = pytest.mark.slow


async def admin_call(
    bootstrap: list[tuple[str, int]], work: Callable[[Admin], Awaitable[object]]
) -> object:
    cluster = Cluster(bootstrap)
    try:
        return await work(Admin(cluster))
    finally:
        await cluster.close()


def test_delete_with_a_replica_down_then_recreate_fresh(brokers: BrokerFactory) -> None:
    start_cluster(brokers)
    bootstrap = brokers.bootstrap

    async def scenario() -> list[dict[str, object]]:
        await create(bootstrap, "doomed", partitions=2, rf=3)
        await produce(bootstrap, "doomed", [f"old-{i}" for i in range(30)])
        down = brokers.brokers[3]
        down.kill()
        alive = [(b.host, b.port) for i, b in brokers.brokers.items() if i != 3]
        await admin_call(alive, lambda admin: admin.delete_topic("doomed"))
        for broker_id in (1, 2):
            assert not list(brokers.brokers[broker_id].log_dir.glob("doomed-*"))
        assert list(down.log_dir.glob("doomed-*")), "the down broker still holds its copy"
        brokers.start(3)

        async def cleaned() -> bool:
            return not list(down.log_dir.glob("doomed-*"))

        await wait_for(cleaned, timeout_s=30)
        await create(brokers.bootstrap, "doomed", partitions=2, rf=3)
        await produce(brokers.bootstrap, "doomed", ["new"])
        return await read_everything(brokers.bootstrap, "doomed", 1)

    rows = run(scenario(), timeout_s=150)
    assert [(r["offset"], r["value"]) for r in rows] == [(0, b"new")], "fresh offsets"


def test_deletion_survives_a_controller_failover(brokers: BrokerFactory) -> None:
    start_cluster(brokers)
    bootstrap = brokers.bootstrap

    async def scenario() -> None:
        await create(bootstrap, "orphan", partitions=4, rf=3)
        zk = await asyncio.to_thread(connect, brokers.zk_connect)
        try:
            controller = await asyncio.to_thread(controller_id, zk)
            brokers.brokers[controller].kill()
            await asyncio.to_thread(topic_store.delete_topic, zk, "orphan")

            async def gone() -> bool:
                exists = await asyncio.to_thread(zk.exists, znodes.topic_path("orphan"))
                queued = await asyncio.to_thread(zk.exists, znodes.delete_topic_path("orphan"))
                return exists is None and queued is None

            await wait_for(gone, timeout_s=60)
        finally:
            await asyncio.to_thread(zk.stop)
        for broker_id, broker in brokers.brokers.items():
            if broker_id != controller:
                assert not list(broker.log_dir.glob("orphan-*"))

    run(scenario(), timeout_s=120)


def test_grow_a_topic_and_refuse_shrinking(brokers: BrokerFactory) -> None:
    start_cluster(brokers)
    bootstrap = brokers.bootstrap

    async def scenario() -> list[dict[str, object]]:
        await create(bootstrap, "growing", partitions=2, rf=2)
        await admin_call(bootstrap, lambda admin: admin.create_partitions("growing", 5))
        with pytest.raises(InvalidPartitionsError, match="only grow"):
            await admin_call(bootstrap, lambda admin: admin.create_partitions("growing", 3))
        with pytest.raises(UnknownTopicOrPartitionError):
            await admin_call(bootstrap, lambda admin: admin.delete_topic("never-was"))
        return await leadership(bootstrap, "growing")

    partitions = run(scenario())
    assert [p["partition"] for p in partitions] == [0, 1, 2, 3, 4]
    assert all(p["leader"] != -1 and len(p["replicas"]) == 2 for p in partitions)


def leaders_are_preferred(partitions: list[dict[str, object]]) -> bool:
    return all(p["leader"] == p["replicas"][0] for p in partitions)


def unbalance_by_restarting_broker_1(brokers: BrokerFactory, topic: str) -> None:
    """Restart broker 1: the partitions it preferred are led elsewhere until rebalanced."""
    brokers.brokers[1].stop()
    alive = [(b.host, b.port) for i, b in brokers.brokers.items() if i != 1]

    async def moved() -> bool:
        return all(p["leader"] != 1 for p in await leadership(alive, topic))

    run(wait_for(moved, timeout_s=30))
    brokers.start(1)

    async def back_in_sync() -> bool:
        return all(1 in p["isr"] for p in await leadership(brokers.bootstrap, topic))

    run(wait_for(back_in_sync, timeout_s=30))


def test_elect_leaders_returns_every_partition_to_its_preferred_leader(
    brokers: BrokerFactory,
) -> None:
    start_cluster(brokers, **{"auto.leader.rebalance.enable": "false"})
    run(create(brokers.bootstrap, "balanced", partitions=6, rf=3))
    assert leaders_are_preferred(run(leadership(brokers.bootstrap, "balanced")))
    unbalance_by_restarting_broker_1(brokers, "balanced")
    assert not leaders_are_preferred(run(leadership(brokers.bootstrap, "balanced")))
    elected = replog("elect-leaders", "--topic", "balanced", "--zookeeper", brokers.zk_connect)
    assert elected.returncode == 0, elected.stderr
    assert b"6 of 6 partitions led by their preferred replica" in elected.stdout
    assert leaders_are_preferred(run(leadership(brokers.bootstrap, "balanced")))


def test_automatic_rebalance_returns_leadership(brokers: BrokerFactory) -> None:
    start_cluster(brokers, **{"leader.imbalance.check.interval.seconds": "2"})
    run(create(brokers.bootstrap, "rebalanced", partitions=6, rf=3))
    unbalance_by_restarting_broker_1(brokers, "rebalanced")

    async def preferred_again() -> bool:
        return leaders_are_preferred(await leadership(brokers.bootstrap, "rebalanced"))

    run(wait_for(preferred_again, timeout_s=30))


def test_controlled_shutdown_moves_leadership_without_losing_acks(brokers: BrokerFactory) -> None:
    start_cluster(brokers)
    bootstrap = brokers.bootstrap
    partitions = 300  # each broker prefers, so leads, 100 of them
    acked: list[str] = []

    async def scenario() -> int:
        await create(
            bootstrap, "graceful", partitions=partitions, rf=3, **{"min.insync.replicas": "2"}
        )
        led = [p for p in await leadership(bootstrap, "graceful") if p["leader"] == 2]
        assert len(led) == 100, "broker 2 leads 100 partitions"
        cluster = Cluster(bootstrap)
        producer = Producer(cluster, ProducerConfig(acks=-1, delivery_timeout_ms=30_000))
        stopping = None
        try:
            for round_number in range(12):
                values = [f"r{round_number}-{i}" for i in range(partitions)]
                await producer.send_records("graceful", values, keys=values)
                acked.extend(values)
                if round_number == 4:
                    stopping = asyncio.create_task(asyncio.to_thread(brokers.brokers[2].stop))
        finally:
            await cluster.close()
        assert stopping is not None
        return await stopping

    exit_code = run(scenario(), timeout_s=180)
    assert exit_code == 0
    log = (brokers.brokers[1].log_dir / "broker.log").read_text()
    log += (brokers.brokers[3].log_dir / "broker.log").read_text()
    assert "controlled shutdown of broker 2: 300 partitions changed, 0 still led" in log
    own = (brokers.brokers[2].log_dir / "broker.log").read_text()
    assert "controlled shutdown done: this broker leads nothing" in own
    alive = [(b.host, b.port) for i, b in brokers.brokers.items() if i != 2]
    rows = run(read_everything(alive, "graceful", len(acked)))
    # Nothing acknowledged is lost, and the idempotent producer (acks=all) wrote each
    # record once even where it retried a batch whose answer was lost in the move.
    assert sorted(r["value"].decode() for r in rows) == sorted(acked)
