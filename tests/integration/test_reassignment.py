"""Partition reassignment through the CLI and the controller, with real processes.

A partition moves from brokers {1,2,3} to {2,3,4} while an acks=all producer keeps
writing: nothing acknowledged may be lost or doubled, only retriable errors may occur
(the producer retries those), and the replica left behind deletes its log. The second
test kills the controller while the move waits for the new replica to catch up.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from spark_replica.client import Cluster, Producer, ProducerConfig
from spark_replica.zk import topic_store, znodes
from spark_replica.zk.session import connect
from tests.support import (
    FAST_REPLICATION,
    BrokerFactory,
    controller_id,
    create,
    leadership,
    read_everything,
    replog,
    run,
    start_cluster,
    wait_for,
)

pytestmark = pytest.mark.slow

TOPIC = "moving"
TARGET = [2, 3, 4]


class SteadyProducer:
    """Writes numbered records to partition 0 with acks=all until stopped."""

    def __init__(self, bootstrap: list[tuple[str, int]]) -> None:
        self.bootstrap = bootstrap
        self.acked: list[str] = []
        self._stop = asyncio.Event()

    async def run(self) -> None:
        cluster = Cluster(self.bootstrap)
        producer = Producer(cluster, ProducerConfig(acks=-1, delivery_timeout_ms=60_000))
        try:
            n = 0
            while not self._stop.is_set():
                values = [f"v{n + i}" for i in range(50)]
                await producer.send_records(TOPIC, values, partition=0)
                self.acked.extend(values)
                n += len(values)
                await asyncio.sleep(0.02)
        finally:
            await cluster.close()

    def stop(self) -> None:
        self._stop.set()


def write_plan(tmp_path: Path) -> Path:
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {"version": 1, "partitions": [{"topic": TOPIC, "partition": 0, "replicas": TARGET}]}
        )
    )
    return plan


def assignment_in_zookeeper(zk_connect: str) -> list[int]:
    zk = connect(zk_connect)
    try:
        assignment = topic_store.read_assignment(zk, TOPIC)
        assert assignment is not None
        return assignment.partitions[0]
    finally:
        zk.stop()
        zk.close()


def reassignment_pending(zk_connect: str) -> bool:
    zk = connect(zk_connect)
    try:
        return zk.exists(znodes.REASSIGN_PARTITIONS_PATH) is not None
    finally:
        zk.stop()
        zk.close()


async def wait_until_moved(brokers: BrokerFactory, timeout_s: float = 60.0) -> None:
    bootstrap = [(b.host, b.port) for b in brokers.brokers.values() if b.process is not None]

    async def moved() -> bool:
        if await asyncio.to_thread(reassignment_pending, brokers.zk_connect):
            return False
        (state,) = await leadership(bootstrap, TOPIC)
        return state["replicas"] == TARGET and sorted(state["isr"]) == TARGET

    await wait_for(moved, timeout_s=timeout_s)


def start_three_then_four(brokers: BrokerFactory, **broker_4: str) -> None:
    """Create the topic while only 1-3 are up, so its replicas are exactly {1,2,3}."""
    start_cluster(brokers)
    run(create(brokers.bootstrap, TOPIC, partitions=1, rf=3))
    brokers.start(4, **{**FAST_REPLICATION, **broker_4})


def assert_old_replica_deleted(brokers: BrokerFactory, timeout_s: float = 15.0) -> None:
    directory = brokers.brokers[1].log_dir / f"{TOPIC}-0"
    deadline = time.monotonic() + timeout_s
    while directory.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not directory.exists(), "the removed replica kept its log"


def check_everything_once(brokers: BrokerFactory, acked: list[str]) -> None:
    alive = [(b.host, b.port) for b in brokers.brokers.values() if b.process is not None]
    rows = run(read_everything(alive, TOPIC, len(acked)))
    values = [r["value"].decode() for r in rows]
    assert len(values) == len(set(values)), "a record was written twice"
    assert set(acked) <= set(values), "an acknowledged record was lost"


def test_reassign_while_producing_with_acks_all(brokers: BrokerFactory, tmp_path: Path) -> None:
    start_three_then_four(brokers)
    producer = SteadyProducer(brokers.bootstrap)
    plan = write_plan(tmp_path)

    async def scenario() -> None:
        task = asyncio.create_task(producer.run())
        await asyncio.sleep(1.0)
        result = await asyncio.to_thread(
            replog, "reassign", "--plan", str(plan), "--zookeeper", brokers.zk_connect
        )
        assert result.returncode == 0, result.stderr.decode()
        await wait_until_moved(brokers)
        await asyncio.sleep(0.5)
        producer.stop()
        await task  # raises if the producer met a non-retriable error

    run(scenario(), timeout_s=120)
    assert assignment_in_zookeeper(brokers.zk_connect) == TARGET
    assert_old_replica_deleted(brokers)
    check_everything_once(brokers, producer.acked)
    status = replog(
        "reassign", "--status", "--plan", str(plan), "--json", "--zookeeper", brokers.zk_connect
    )
    assert status.returncode == 0, status.stderr.decode()
    (row,) = json.loads(status.stdout)
    assert (row["topic"], row["partition"], row["state"], row["replicas"]) == (
        TOPIC,
        0,
        "done",
        TARGET,
    )


def test_reassignment_survives_a_controller_kill(brokers: BrokerFactory, tmp_path: Path) -> None:
    # Broker 4 keeps its registration while paused, so the move waits on it, not on ZooKeeper.
    start_three_then_four(brokers, **{"zookeeper.session.timeout.ms": "30000"})
    producer = SteadyProducer(brokers.bootstrap)
    plan = write_plan(tmp_path)

    async def scenario() -> None:
        task = asyncio.create_task(producer.run())
        await asyncio.sleep(1.0)
        brokers.brokers[4].pause()
        try:
            result = await asyncio.to_thread(
                replog, "reassign", "--plan", str(plan), "--zookeeper", brokers.zk_connect
            )
            assert result.returncode == 0, result.stderr.decode()

            async def started() -> bool:
                current = await asyncio.to_thread(assignment_in_zookeeper, brokers.zk_connect)
                return current == [*TARGET, 1]

            await wait_for(started, timeout_s=20)
            status = await asyncio.to_thread(
                replog, "reassign", "--status", "--json", "--zookeeper", brokers.zk_connect
            )
            (row,) = json.loads(status.stdout)
            assert (row["partition"], row["state"], row["target"]) == (0, "moving", TARGET)
            zk = connect(brokers.zk_connect)
            try:
                victim = controller_id(zk)
                assert victim != 4
                brokers.brokers[victim].kill()

                async def new_controller() -> bool:
                    current = await asyncio.to_thread(controller_id, zk)
                    return current not in (victim, -1)

                await wait_for(new_controller, timeout_s=20)
            finally:
                zk.stop()
                zk.close()
        finally:
            brokers.brokers[4].resume()
        await asyncio.to_thread(brokers.start, victim)
        await wait_until_moved(brokers)
        producer.stop()
        await task

    run(scenario(), timeout_s=150)
    assert assignment_in_zookeeper(brokers.zk_connect) == TARGET
    assert_old_replica_deleted(brokers)
    check_everything_once(brokers, producer.acked)


def test_bad_plans_are_refused_and_leave_no_znode(brokers: BrokerFactory, tmp_path: Path) -> None:
    start_cluster(brokers)
    run(create(brokers.bootstrap, TOPIC, partitions=1, rf=3, **{"min.insync.replicas": "2"}))
    brokers.brokers[3].stop()

    def attempt(replicas: object, topic: str = TOPIC, partition: int = 0) -> str:
        plan = tmp_path / "bad.json"
        entry = {"topic": topic, "partition": partition, "replicas": replicas}
        plan.write_text(json.dumps({"version": 1, "partitions": [entry]}))
        result = replog("reassign", "--plan", str(plan), "--zookeeper", brokers.zk_connect)
        assert result.returncode != 0
        assert not reassignment_pending(brokers.zk_connect), "a refused plan left a znode"
        return result.stderr.decode()

    assert "broker 3 is down" in attempt([1, 2, 3])
    assert "broker 7 is unknown" in attempt([1, 2, 7])
    assert "lists a broker twice" in attempt([1, 2, 2])
    assert "min.insync.replicas=2" in attempt([1])
    assert "does not exist" in attempt([1, 2], topic="missing")
    assert "does not exist" in attempt([1, 2], partition=5)


def test_generate_proposes_and_a_second_plan_waits(brokers: BrokerFactory, tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"partitions": [{"topic": TOPIC, "partition": 0, "replicas": [1]}]}))
    # A plan still pending (no controller is up yet to carry it out) blocks a second one.
    zk = connect(brokers.zk_connect)
    try:
        zk.create(znodes.REASSIGN_PARTITIONS_PATH, plan.read_bytes(), makepath=True)
        refused = replog("reassign", "--plan", str(plan), "--zookeeper", brokers.zk_connect)
        assert refused.returncode != 0
        assert "still running" in refused.stderr.decode()
        zk.delete(znodes.REASSIGN_PARTITIONS_PATH)
    finally:
        zk.stop()
        zk.close()
    start_cluster(brokers)
    run(create(brokers.bootstrap, TOPIC, partitions=3, rf=2))
    result = replog(
        "reassign", "--generate", "--brokers", "1,2", "--topics", TOPIC,
        "--zookeeper", brokers.zk_connect,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr.decode()
    proposed = json.loads(result.stdout.decode().strip().splitlines()[-1])
    assert len(proposed["partitions"]) == 3
    assert all(sorted(e["replicas"]) == [1, 2] for e in proposed["partitions"])
    plan.write_text(json.dumps(proposed))
    started = replog("reassign", "--plan", str(plan), "--zookeeper", brokers.zk_connect)
    assert started.returncode == 0, started.stderr.decode()
    status = replog(
        "reassign", "--status", "--plan", str(plan), "--wait", "60", "--json",
        "--zookeeper", brokers.zk_connect,
    )  # fmt: skip
    assert status.returncode == 0, status.stdout.decode() + status.stderr.decode()
    assert [row["state"] for row in json.loads(status.stdout)] == ["done"] * 3


def test_an_unreadable_plan_is_dropped_by_the_controller(brokers: BrokerFactory) -> None:
    start_cluster(brokers)
    run(create(brokers.bootstrap, TOPIC, partitions=1, rf=3))
    zk = connect(brokers.zk_connect)
    try:
        zk.create(znodes.REASSIGN_PARTITIONS_PATH, b"not a plan", makepath=True)
        deadline = time.monotonic() + 20
        while zk.exists(znodes.REASSIGN_PARTITIONS_PATH) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not zk.exists(znodes.REASSIGN_PARTITIONS_PATH)
        controller = controller_id(zk)
    finally:
        zk.stop()
        zk.close()
    log = (brokers.brokers[controller].log_dir / "broker.log").read_text()
    assert "dropping an unreadable reassignment" in log
    assert "resigning" not in log
