"""Network partitions between separate hosts: packets dropped silently, nothing refused.

Every topic has three replicas and min.insync.replicas=2, every producer acks=all with a
bounded delivery timeout. Whatever the partition, an acknowledged record is never lost or
duplicated, a reader never sees a record that later vanishes, and once the network heals
every replica holds the same log. Topics are named so that their preferred leader is a
chosen broker (never the controller, unless the test is about the controller).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import zlib
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from spark_replica.client import Admin, BrokerConnection, Cluster, Producer, ProducerConfig
from spark_replica.errors import ReplogError
from spark_replica.reassignment import assign_replicas
from spark_replica.records import build_batch
from spark_replica.wire.native.produce import ProducePartition, ProduceRequest, ProduceTopic
from spark_replica.zk import topic_store, znodes
from spark_replica.zk.session import connect
from tests.support import (
    create,
    leadership,
    produce_acks_all,
    replica_records,
    run,
    wait_for,
)
from tests.support_netns import REPLOG_PORT, NetnsCluster

pytestmark = pytest.mark.slow

REPO = Path(__file__).absolute().parents[2]
MIN_ISR = {"min.insync.replicas": "2"}
BROKERS = [1, 2, 3]
# Long enough to ride out a failover (session expiry, election, metadata refresh).
FAILOVER_DELIVERY_MS = 20_000
# A write that cannot be acknowledged is given up on after this.
DOOMED_DELIVERY_MS = 4_000

Netns = Callable[..., NetnsCluster]


def topic_led_by(leader: int, prefix: str) -> str:
    """A topic name whose one partition's preferred leader is `leader` (the assignment
    starts at the name's CRC, as topic_store.create_topic does)."""
    for n in range(100):
        name = f"{prefix}-{n}"
        replicas = assign_replicas(BROKERS, 1, 3, start=zlib.crc32(name.encode()))
        if replicas[0][0] == leader:
            return name
    raise AssertionError(f"no name found for leader {leader}")


@contextlib.contextmanager
def zookeeper(cluster: NetnsCluster) -> Iterator[KazooClient]:
    zk = connect(cluster.zk_connect)
    try:
        yield zk
    finally:
        zk.stop()
        zk.close()


async def state(zk: KazooClient, topic: str) -> znodes.PartitionState:
    found = await asyncio.to_thread(topic_store.read_partition_state, zk, topic, 0)
    assert found is not None
    return found.state


async def until_state(
    zk: KazooClient,
    topic: str,
    check: Callable[[znodes.PartitionState], bool],
    timeout_s: float = 20,
) -> znodes.PartitionState:
    async def matches() -> znodes.PartitionState | None:
        current = await state(zk, topic)
        return current if check(current) else None

    found: znodes.PartitionState = await wait_for(matches, timeout_s=timeout_s)
    return found


async def acks_all(
    bootstrap: list[tuple[str, int]],
    topic: str,
    values: list[str],
    delivery_timeout_ms: int = FAILOVER_DELIVERY_MS,
) -> list[str]:
    """Send `values` to partition 0 with acks=all; the ones acknowledged."""
    cluster = Cluster(bootstrap)
    config = ProducerConfig(
        acks=-1,
        delivery_timeout_ms=delivery_timeout_ms,
        request_timeout_ms=3_000,
        max_block_ms=delivery_timeout_ms,
    )
    try:
        producer = Producer(cluster, config)
        futures = [await producer.send_future(topic, v, partition=0) for v in values]
        await producer.flush()
        return [v for v, f in zip(values, futures, strict=True) if f.exception() is None]
    finally:
        await cluster.close()


def on_host(cluster: NetnsCluster, broker_id: int, *args: str) -> subprocess.Popen[bytes]:
    """replog's client (tests.netns.host_client) on broker `broker_id`'s host, talking to
    that broker, which it reaches whatever is cut."""
    host = cluster.broker(broker_id).host
    command = [sys.executable, "-m", "tests.netns.host_client", args[0], host, str(REPLOG_PORT)]
    return subprocess.Popen(
        [*cluster.network.exec_prefix(f"broker-{broker_id}"), *command, *args[1:]],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


async def outcome(process: subprocess.Popen[bytes], timeout_s: float = 30) -> object:
    try:
        out, err = await asyncio.to_thread(process.communicate, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise
    assert process.returncode == 0, err.decode()
    return json.loads(out)


def final_logs(cluster: NetnsCluster, topic: str) -> dict[int, list[bytes]]:
    """Stop everything (healed first), then each replica's records as its files hold them."""
    cluster.stop_all()
    return {
        broker_id: [value for _, value in replica_records(broker.log_dir / f"{topic}-0")]
        for broker_id, broker in cluster.brokers.items()
    }


def assert_identical_holding(logs: dict[int, list[bytes]], acknowledged: list[str]) -> None:
    first = logs[BROKERS[0]]
    for broker_id, values in logs.items():
        assert values == first, f"broker {broker_id}'s log differs from broker {BROKERS[0]}'s"
    held = [v.decode() for v in first]
    for value in acknowledged:
        assert held.count(value) == 1, f"acknowledged {value!r} held {held.count(value)} times"


async def full_isr(zk: KazooClient, topic: str, timeout_s: float = 20) -> znodes.PartitionState:
    return await until_state(zk, topic, lambda s: len(s.isr) == 3, timeout_s)


async def create_with_min_isr(bootstrap: list[tuple[str, int]], topic: str) -> None:
    cluster = Cluster(bootstrap)
    try:
        await Admin(cluster).create_topic(topic, 1, 3, MIN_ISR)
    finally:
        await cluster.close()


def started(
    netns_cluster: Netns, prefix: str, leader_is_controller: bool = False
) -> tuple[NetnsCluster, str, int]:
    """A three-broker cluster and a topic led by a broker that is (not) the controller."""
    cluster = netns_cluster(3)
    controller = cluster.controller_id()
    assert controller is not None
    leader = controller if leader_is_controller else next(b for b in BROKERS if b != controller)
    topic = topic_led_by(leader, prefix)
    run(create_with_min_isr(cluster.bootstrap, topic))
    run(every_broker_knows(cluster, topic, leader))
    return cluster, topic, leader


async def every_broker_knows(cluster: NetnsCluster, topic: str, leader: int) -> None:
    """Wait until each broker's metadata names `leader`. The ISR in ZooKeeper is full from
    the topic's creation, before the controller's LeaderAndIsr reaches anyone; a broker
    answers metadata only after the LeaderAndIsr sent to it before, so a cut made after
    this leaves no broker without its part (a cut made before left a leader that never
    learnt it leads, and a CI run saw no write acknowledged)."""
    for broker_id in BROKERS:
        address = [(cluster.broker(broker_id).host, REPLOG_PORT)]

        async def knows(address: list[tuple[str, int]] = address) -> bool:
            return (await leadership(address, topic))[0]["leader"] == leader

        await wait_for(knows, timeout_s=20)


def scenario(coroutine: Awaitable[None], timeout_s: float = 90) -> None:
    async def whole() -> None:
        await coroutine

    run(whole(), timeout_s=timeout_s)


async def direct_write(cluster: NetnsCluster, broker_id: int, topic: str, value: str) -> bool:
    """One acks=all write sent to `broker_id` itself, whatever the metadata says; whether
    it was acknowledged."""
    conn = BrokerConnection(cluster.broker(broker_id).host, REPLOG_PORT)
    try:
        await conn.connect()
        request = ProduceRequest(
            -1, 2_000, [ProduceTopic(topic, [ProducePartition(0, build_batch([value]))])]
        )
        response = await conn.send(request, timeout_s=10)
        return response.topics[0].partitions[0].error_code == 0
    except ReplogError:
        return False
    finally:
        await conn.close()


def test_a_leader_cut_from_everyone_acknowledges_nothing_and_truncates(
    netns_cluster: Netns,
) -> None:
    cluster, topic, old = started(netns_cluster, "isolated")
    acknowledged: list[str] = []

    async def steps() -> None:
        with zookeeper(cluster) as zk:
            await full_isr(zk, topic)
            before = [f"before-{i}" for i in range(20)]
            acknowledged.extend(await acks_all(cluster.bootstrap, topic, before))
            assert acknowledged == before

            cluster.cut_all(old)
            # Producers on the leader's own host still reach it, and nothing else. One
            # without idempotence appends at once; an idempotent one first asks in vain
            # for a producer id elsewhere, which counts against its delivery timeout.
            orphans = [f"orphan-{i}" for i in range(5)]
            stalled = [f"stalled-{i}" for i in range(5)]
            timeout = ["--timeout-ms", str(DOOMED_DELIVERY_MS)]
            plain = ["--no-idempotence", *orphans]
            writers = [
                on_host(cluster, old, "produce", topic, *timeout, *plain),
                on_host(cluster, old, "produce", topic, *timeout, *stalled),
            ]
            moved = await until_state(zk, topic, lambda s: s.leader not in (-1, old))
            assert old not in moved.isr
            for writer in writers:
                written = await outcome(writer)
                assert isinstance(written, dict)
                assert written["acknowledged"] == [], "the isolated leader acknowledged a write"
                assert written["seconds"] < DOOMED_DELIVERY_MS / 1000 + 3
            old_log = cluster.broker(old).log_dir / f"{topic}-0"
            held = {v.decode() for _, v in replica_records(old_log)}
            assert set(orphans) <= held, "the isolated leader appended the orphans"
            read = await outcome(on_host(cluster, old, "read", topic, "--timeout-ms", "1500"))
            assert read == before, "a reader of the isolated leader saw beyond its HW"

            after = [f"after-{i}" for i in range(20)]
            acknowledged.extend(await acks_all(cluster.bootstrap, topic, after))
            assert acknowledged == before + after

            cluster.heal()
            rejoined = await full_isr(zk, topic, timeout_s=30)
            assert rejoined.leader == moved.leader

    scenario(steps())
    logs = final_logs(cluster, topic)
    assert_identical_holding(logs, acknowledged)
    assert [v.decode() for v in logs[old]] == acknowledged, "the orphans were not truncated"


def test_b_a_broker_cut_from_zookeeper_stops_leading_and_rejoins(netns_cluster: Netns) -> None:
    cluster, topic, cut_off = started(netns_cluster, "no-zk")
    acknowledged: list[str] = []

    async def steps() -> None:
        with zookeeper(cluster) as zk:
            await full_isr(zk, topic)
            before = [f"before-{i}" for i in range(10)]
            acknowledged.extend(await acks_all(cluster.bootstrap, topic, before))

            cluster.cut(cut_off, "zookeeper")
            moved = await until_state(zk, topic, lambda s: s.leader not in (-1, cut_off))
            assert cut_off not in moved.isr
            # It still believes it leads, but nobody follows it any more.
            assert not await direct_write(cluster, cut_off, topic, "to-the-cut-off-leader")
            after = [f"after-{i}" for i in range(10)]
            acknowledged.extend(await acks_all(cluster.bootstrap, topic, after))
            assert acknowledged == before + after, "the clients did not fail over"

            cluster.heal()
            rejoined = await full_isr(zk, topic, timeout_s=30)
            assert rejoined.leader == moved.leader

    scenario(steps())
    logs = final_logs(cluster, topic)
    assert_identical_holding(logs, acknowledged)
    assert b"to-the-cut-off-leader" not in logs[cut_off]


def test_c_a_controller_cut_from_the_brokers_converges_after_heal(netns_cluster: Netns) -> None:
    """The controller still has ZooKeeper, so it sees a killed leader's session expire and
    elects another, but cannot tell anyone: the partition has a leader in ZooKeeper that
    does not know it leads, and no write is acknowledged until the network heals. Its
    requests are retried, not stuck on the dead connections, so all converges then."""
    cluster, topic, leader = started(netns_cluster, "headless")
    controller = cluster.controller_id()
    assert controller is not None
    heir = next(b for b in BROKERS if b not in (leader, controller))
    acknowledged: list[str] = []

    async def steps() -> None:
        with zookeeper(cluster) as zk:
            await full_isr(zk, topic)
            for broker_id in BROKERS:
                if broker_id != controller:
                    cluster.cut(controller, broker_id)
            # Existing leaders go on serving (the controller, a follower, drops out of
            # the ISR: the leader writes that to ZooKeeper itself).
            before = [f"before-{i}" for i in range(10)]
            acknowledged.extend(await acks_all(cluster.bootstrap, topic, before))
            assert acknowledged == before

            cluster.kill(leader)
            elected = await until_state(zk, topic, lambda s: s.leader not in (-1, leader))
            assert elected.leader == heir
            assert not await produce_acks_all(cluster.bootstrap, topic, 0), (
                "the heir cannot know it leads before the network heals"
            )

            cluster.heal()
            after = [f"after-{i}" for i in range(10)]
            acknowledged.extend(await acks_all(cluster.bootstrap, topic, after))
            assert acknowledged == before + after
            # The controller is not wedged: a new topic gets its leaders.
            await create(cluster.bootstrap, f"{topic}-later", rf=2)

            cluster.restart(leader)
            await full_isr(zk, topic, timeout_s=30)

    scenario(steps())
    assert_identical_holding(final_logs(cluster, topic), acknowledged)


def test_d_a_follower_cut_one_way_from_its_leader_leaves_and_rejoins_the_isr(
    netns_cluster: Netns,
) -> None:
    cluster, topic, leader = started(netns_cluster, "one-way")
    controller = cluster.controller_id()
    follower = next(b for b in BROKERS if b not in (leader, controller))
    acknowledged: list[str] = []

    async def steps() -> None:
        with zookeeper(cluster) as zk:
            await full_isr(zk, topic)
            cluster.cut(follower, leader, one_way=True)
            shrunk = await until_state(zk, topic, lambda s: follower not in s.isr)
            assert shrunk.leader == leader and len(shrunk.isr) == 2
            during = [f"during-{i}" for i in range(20)]
            acknowledged.extend(await acks_all(cluster.bootstrap, topic, during))
            assert acknowledged == during

            cluster.heal()
            rejoined = await full_isr(zk, topic, timeout_s=30)
            assert rejoined.leader == leader

    scenario(steps())
    assert_identical_holding(final_logs(cluster, topic), acknowledged)


def test_e_a_broker_that_registered_again_while_the_controller_was_away_rejoins(
    netns_cluster: Netns,
) -> None:
    """Chaos --netns seed 2045: while the controller was cut from ZooKeeper and ZooKeeper
    restarted, a broker died and registered again under a new broker epoch, with the
    same id. The controller's connection came back within its session, and the list of
    broker ids was the same as before it left, so it never saw the new registration and
    never told the new broker what to follow: it stayed out of every ISR."""
    cluster = netns_cluster(3, **{"zookeeper.session.timeout.ms": "20000"})
    controller = cluster.controller_id()
    assert controller is not None
    victim = next(b for b in BROKERS if b != controller)
    # The victim's own sessions are short, so that its dead registration goes, and the
    # new one appears, well within the controller's session.
    cluster.broker(victim).stop()
    cluster.broker(victim).overrides["zookeeper.session.timeout.ms"] = "3000"
    cluster.restart(victim)
    topic = topic_led_by(victim, "re-registered")
    run(create_with_min_isr(cluster.bootstrap, topic))
    assert cluster.zookeeper is not None

    async def steps() -> None:
        with zookeeper(cluster) as zk:
            await full_isr(zk, topic)
        cluster.kill(victim)
        with zookeeper(cluster) as zk:
            await until_state(zk, topic, lambda s: victim not in s.isr and s.leader != victim)
        cut_at = asyncio.get_running_loop().time()
        cluster.cut(controller, "zookeeper")
        # The restart drops every session's connection, the controller's among them.
        await asyncio.to_thread(cluster.zookeeper.stop)
        await asyncio.to_thread(cluster.zookeeper.start)
        await asyncio.to_thread(cluster.restart, victim)  # registers anew
        # The controller's client gives its connection up two thirds of a session after
        # it last heard from ZooKeeper, so it reconnects once healed after that, and
        # within the session ZooKeeper gave it anew when it restarted.
        await asyncio.sleep(max(0.0, cut_at + 15 - asyncio.get_running_loop().time()))
        cluster.heal()
        with zookeeper(cluster) as zk:
            back = await full_isr(zk, topic, timeout_s=30)
        assert victim in back.isr

    scenario(steps(), timeout_s=120)
