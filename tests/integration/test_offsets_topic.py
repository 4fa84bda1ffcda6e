"""Consumer groups on the `__consumer_offsets` topic, through real brokers and clients:
the topic is made on first use as Kafka makes it, a broker's restart moves only the
groups of the offsets partitions it led, a coordinator's death keeps a static member's
generation (no rebalance), and offsets an earlier version kept in ZooKeeper move over."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaPartition
from kazoo.client import KazooClient

from spark_replica.client import Admin, Cluster
from spark_replica.errors import InvalidTopicError
from spark_replica.topics import OFFSETS_TOPIC, TopicPartition, offsets_partition_for
from spark_replica.zk import group_store, topic_store
from tests.support import (
    BrokerFactory,
    create,
    create_topic,
    leadership,
    produce,
    run,
    start_cluster,
    wait_until,
)
from tests.support_groups import commit, committed, find_coordinator

pytestmark = pytest.mark.slow

GROUP_OVERRIDES = {
    "group.min.session.timeout.ms": "1000",
    "group.initial.rebalance.delay.ms": "0",
}
GROUPS = 30


def test_the_offsets_topic_is_made_on_first_use_and_a_restart_moves_only_its_groups(
    brokers: BrokerFactory, zk: KazooClient
) -> None:
    start_cluster(brokers, 3, **GROUP_OVERRIDES)
    run(create(brokers.bootstrap, "data", partitions=2, rf=3))
    first = brokers.brokers[1]
    groups = [f"group-{i}" for i in range(GROUPS)]
    coordinators = {g: find_coordinator(first, g) for g in groups}
    for offset, group in enumerate(groups):
        owner = brokers.brokers[coordinators[group]]
        assert commit(owner, group, "data", {0: "a", 1: "b"}, offset=offset) == {0: 0, 1: 0}

    # Made as Kafka makes it: 50 partitions, 3 copies, compacted.
    partitions = run(leadership(brokers.bootstrap, OFFSETS_TOPIC))
    assert len(partitions) == 50
    assert {len(p["replicas"]) for p in partitions} == {3}
    for group in groups:
        leader = partitions[offsets_partition_for(group, 50)]["leader"]
        assert coordinators[group] == leader
    assert topic_store.read_topic_config(zk, OFFSETS_TOPIC)["cleanup.policy"] == "compact"
    # The brokers' own: clients read it, but cannot write to it.
    with pytest.raises(InvalidTopicError, match="brokers' own topic"):
        run(produce(brokers.bootstrap, OFFSETS_TOPIC, ["forged"]))
    with pytest.raises(InvalidTopicError, match="cannot be deleted"):
        run(_delete(brokers.bootstrap, OFFSETS_TOPIC))

    restarted = 2
    led_by_it = {g for g, c in coordinators.items() if c == restarted}
    assert led_by_it and len(led_by_it) < GROUPS
    brokers.brokers[restarted].stop()
    moved = _coordinators_once_settled(brokers, groups, exclude=restarted)
    assert {g for g in groups if moved[g] != coordinators[g]} == led_by_it
    brokers.brokers[restarted].start()
    after = _coordinators_once_settled(brokers, groups, exclude=None)
    assert {g for g in groups if after[g] != coordinators[g]} <= led_by_it
    for offset, group in enumerate(groups):
        owner = brokers.brokers[after[group]]
        assert committed(owner, group) == {("data", 0): (offset, "a"), ("data", 1): (offset, "b")}


async def _delete(bootstrap: list[tuple[str, int]], topic: str) -> None:
    cluster = Cluster(bootstrap)
    try:
        await Admin(cluster).delete_topic(topic)
    finally:
        await cluster.close()


def _coordinators_once_settled(
    brokers: BrokerFactory, groups: list[str], exclude: int | None
) -> dict[str, int]:
    """Each group's coordinator as every running broker answers it, once they agree and
    none names `exclude`."""
    running = [b for i, b in brokers.brokers.items() if i != exclude]
    deadline = time.monotonic() + 60
    while True:
        answers = [{g: find_coordinator(b, g) for g in groups} for b in running]
        agreed = all(a == answers[0] for a in answers)
        if agreed and exclude not in answers[0].values():
            return answers[0]
        assert time.monotonic() < deadline, answers
        time.sleep(0.3)


def test_a_static_member_keeps_its_generation_across_the_coordinators_death(
    brokers: BrokerFactory,
) -> None:
    start_cluster(brokers, 3, **GROUP_OVERRIDES)
    run(create(brokers.bootstrap, "steady", partitions=2, rf=3))
    run(produce(brokers.bootstrap, "steady", [f"v{i}" for i in range(20)]))
    assignments: list[list[tuple[str, int]]] = []
    member = Consumer(
        {
            "bootstrap.servers": brokers.kafka_bootstrap(),
            "group.id": "steady-group",
            "group.instance.id": "instance-1",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 300,
        }
    )
    try:
        member.subscribe(
            ["steady"],
            on_assign=lambda _, parts: assignments.append(
                sorted((p.topic, p.partition) for p in parts)
            ),
        )
        _poll_until(member, lambda: len(assignments) == 1, "the first assignment")
        member.commit(offsets=[KafkaPartition("steady", 0, 5)], asynchronous=False)
        coordinator = find_coordinator(brokers.brokers[1], "steady-group")
        brokers.brokers[coordinator].kill()
        survivor = next(b for i, b in brokers.brokers.items() if i != coordinator)
        wait_until(
            lambda: find_coordinator(survivor, "steady-group") != coordinator,
            "another broker coordinates the group",
            timeout_s=30,
        )
        # Heartbeats at the old generation reach the new coordinator and are accepted:
        # no rebalance, so no second assignment, for several session timeouts.
        end = time.monotonic() + 8
        while time.monotonic() < end:
            member.poll(0.2)
        assert len(assignments) == 1, assignments
        member.commit(offsets=[KafkaPartition("steady", 0, 9)], asynchronous=False)
        assert member.committed([KafkaPartition("steady", 0)], timeout=10)[0].offset == 9
    finally:
        member.close()


def _poll_until(member: Consumer, done, what: str, timeout_s: float = 45.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        member.poll(0.2)


def test_offsets_kept_in_zookeeper_by_an_earlier_version_move_to_the_topic(
    brokers: BrokerFactory, zk: KazooClient
) -> None:
    # Loads read 200 bytes at a time: the restart below replays the partition in pieces.
    broker = brokers.start(1, **GROUP_OVERRIDES, **{"offsets.load.buffer.size": "200"})
    run(create_topic(brokers.bootstrap, "legacy-data", partitions=2))
    planted = {
        "old-group": {0: 11, 1: 12},
        "older/group": {0: 3},
    }
    for group, offsets in planted.items():
        for partition, offset in offsets.items():
            value = {"version": 1, "offset": offset, "metadata": "zk", "commit_timestamp": 5}
            path = group_store.offset_path(group, TopicPartition("legacy-data", partition))
            zk.create(path, json.dumps(value).encode(), makepath=True)
    for group, offsets in planted.items():
        assert committed(broker, group) == {
            ("legacy-data", p): (offset, "zk") for p, offset in offsets.items()
        }
        assert zk.exists(group_store.group_path(group)) is None
    # Moved, not copied: a later commit is what the group has, after a restart too.
    assert commit(broker, "old-group", "legacy-data", {0: "new"}, offset=40) == {0: 0}
    for offset in range(20):
        assert commit(broker, "busy", "legacy-data", {1: "m"}, offset=offset) == {1: 0}
    broker.stop()
    broker.start()
    assert committed(broker, "old-group") == {
        ("legacy-data", 0): (40, "new"),
        ("legacy-data", 1): (12, "zk"),
    }
    assert committed(broker, "busy") == {("legacy-data", 1): (19, "m")}
