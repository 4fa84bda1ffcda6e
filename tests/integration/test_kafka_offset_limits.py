"""Committed offsets kept within bounds, through a real broker, ZooKeeper and real clients:
large commits never cost the broker its ZooKeeper session, oversized metadata is refused
per partition, commits are fenced by the coordinator that loaded the group, a deleted
topic's offsets go with it, an empty group's offsets expire, and a starting broker
claims no group before the controller's metadata names it."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaPartition
from kazoo.client import KazooClient

from brokerd.groups.coordinator_choice import coordinator_for
from spark_replica.client import Admin, Cluster
from spark_replica.client.kafka_admin import FIND_COORDINATOR, OFFSET_COMMIT, OFFSET_FETCH
from spark_replica.client.kafka_connection import KafkaConnection
from spark_replica.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    NotCoordinatorError,
    OffsetMetadataTooLargeError,
)
from spark_replica.security.settings import SecurityConfig
from spark_replica.tools.launcher.brokers import BrokerProcess
from spark_replica.wire.schema import Data
from spark_replica.zk.session import connect
from tests.support import BrokerFactory, create_topic, produce, run, wait_until

pytestmark = pytest.mark.slow

TIMEOUT_S = 10.0
# Each of these JSON-escapes to six bytes ("\u0001"): 4 KiB of them is 24 KiB stored.
SIX_FOLD = "\x01"


@pytest.fixture
def zk(zk_connect: str) -> Iterator[KazooClient]:
    client = connect(zk_connect)
    try:
        yield client
    finally:
        client.stop()
        client.close()


async def _call(broker: BrokerProcess, api: tuple[int, int], body: Data) -> Data:
    connection = KafkaConnection(
        (broker.host, broker.kafka_port), SecurityConfig(), "offset-limits", TIMEOUT_S
    )
    await connection.connect()
    try:
        return await connection.call(api, body)
    finally:
        await connection.close()


def commit(
    broker: BrokerProcess, group: str, topic: str, metadata: dict[int, str], offset: int = 7
) -> dict:
    """A simple commit (no member, generation -1) of `offset` on each partition: the error
    code of each partition."""
    partitions = [
        Data(partition_index=p, committed_offset=offset, committed_metadata=m)
        for p, m in sorted(metadata.items())
    ]
    body = Data(
        group_id=group,
        generation_id=-1,
        member_id="",
        topics=[Data(name=topic, partitions=partitions)],
    )
    answer = run(_call(broker, OFFSET_COMMIT, body))
    return {p.partition_index: p.error_code for t in answer.topics for p in t.partitions}


def fetch_error(broker: BrokerProcess, group: str) -> int:
    return int(run(_call(broker, OFFSET_FETCH, Data(group_id=group, topics=None))).error_code)


def committed(broker: BrokerProcess, group: str) -> dict[tuple[str, int], tuple[int, str]]:
    answer = run(_call(broker, OFFSET_FETCH, Data(group_id=group, topics=None)))
    assert answer.error_code == 0
    return {
        (t.name, p.partition_index): (p.committed_offset, p.metadata)
        for t in answer.topics
        for p in t.partitions
    }


def session_losses(broker: BrokerProcess) -> list[str]:
    text = (broker.log_dir / "broker.log").read_text(errors="replace")
    return [
        line
        for line in text.splitlines()
        if "Connection dropped" in line or "connection lost" in line or "has expired" in line
    ]


def test_large_commits_keep_the_session_and_metadata_is_bounded_per_partition(
    brokers: BrokerFactory, zk: KazooClient
) -> None:
    broker = brokers.start(1)
    run(create_topic(brokers.bootstrap, "wide", partitions=60))
    owner_before = zk.exists("/brokers/ids/1").ephemeralOwner
    for text in ("m", SIX_FOLD):
        metadata = {p: text * 4096 for p in range(60)}
        assert commit(broker, f"g-{ord(text)}", "wide", metadata) == dict.fromkeys(range(60), 0)
        stored = committed(broker, f"g-{ord(text)}")
        assert stored == {("wide", p): (7, text * 4096) for p in range(60)}
    over = commit(broker, "g-over", "wide", {0: "m" * 4097, 1: "m" * 4096})
    assert over == {0: OffsetMetadataTooLargeError.code, 1: 0}
    assert committed(broker, "g-over") == {("wide", 1): (7, "m" * 4096)}
    assert session_losses(broker) == []
    assert zk.exists("/brokers/ids/1").ephemeralOwner == owner_before

    # Another coordinator loading the group (its claim bumps the group's znode) fences
    # this one: its next commit is NOT_COORDINATOR and writes nothing; once the group is
    # found again (here: the same broker) the commit goes through.
    zk.set("/consumers/g-over/offsets", b'{"version":1,"coordinator":2}')
    assert commit(broker, "g-over", "wide", {1: "late"}) == {1: NotCoordinatorError.code}
    assert committed(broker, "g-over") == {("wide", 1): (7, "m" * 4096)}
    assert commit(broker, "g-over", "wide", {1: "again"}) == {1: 0}
    assert committed(broker, "g-over") == {("wide", 1): (7, "again")}


async def _recreate(bootstrap: list[tuple[str, int]], topic: str) -> None:
    cluster = Cluster(bootstrap)
    try:
        await Admin(cluster).delete_topic(topic)
        await Admin(cluster).create_topic(topic, 1, 1, {})
    finally:
        await cluster.close()


def test_a_deleted_topics_offsets_go_with_it(brokers: BrokerFactory, zk: KazooClient) -> None:
    broker = brokers.start(1, **{"group.initial.rebalance.delay.ms": "0"})
    run(create_topic(brokers.bootstrap, "reborn"))
    run(produce(brokers.bootstrap, "reborn", [f"old{i}" for i in range(5)]))
    assert commit(broker, "old-group", "reborn", {0: ""}, offset=3) == {0: 0}
    run(_recreate(brokers.bootstrap, "reborn"))
    assert zk.exists("/consumers/old-group/offsets/reborn") is None
    run(produce(brokers.bootstrap, "reborn", [f"new{i}" for i in range(5)]))
    consumer = Consumer(
        {
            "bootstrap.servers": brokers.kafka_bootstrap(),
            "group.id": "old-group",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe(["reborn"])
        read: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 30
        while len(read) < 5 and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                read.append((message.offset(), message.value()))
    finally:
        consumer.close()
    assert read == [(i, f"new{i}".encode()) for i in range(5)]


def test_an_empty_groups_offsets_expire_and_a_consuming_groups_stay(
    brokers: BrokerFactory, zk: KazooClient
) -> None:
    retention_s = 2.0
    broker = brokers.start(
        1,
        **{
            "offsets.retention.ms": str(int(retention_s * 1000)),
            "offsets.retention.check.interval.ms": "200",
            "group.initial.rebalance.delay.ms": "0",
        },
    )
    run(create_topic(brokers.bootstrap, "kept"))
    run(create_topic(brokers.bootstrap, "unsubscribed"))
    run(produce(brokers.bootstrap, "kept", ["v"]))
    assert commit(broker, "standalone", "kept", {0: ""}, offset=1) == {0: 0}
    member = Consumer(
        {
            "bootstrap.servers": brokers.kafka_bootstrap(),
            "group.id": "members",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        member.subscribe(["kept"])
        deadline = time.monotonic() + 30
        message = None
        while message is None or message.error() is not None:
            assert time.monotonic() < deadline, "the member read nothing"
            message = member.poll(0.2)
        offsets = [KafkaPartition("kept", 0, 1), KafkaPartition("unsubscribed", 0, 0)]
        member.commit(offsets=offsets, asynchronous=False)
        wait_until(
            lambda: zk.exists("/consumers/standalone") is None,
            "the standalone group's offsets expired",
            timeout_s=10 * retention_s,
        )
        # A Stable group loses the offsets of topics it does not subscribe to a retention
        # after their commit, and keeps those it subscribes to (committed together).
        wait_until(
            lambda: zk.exists("/consumers/members/offsets/unsubscribed") is None,
            "the offset of a topic no member subscribes to expired",
            timeout_s=10 * retention_s,
        )
        assert committed(broker, "members") == {("kept", 0): (1, "")}
    finally:
        member.close()
    wait_until(
        lambda: zk.exists("/consumers/members") is None,
        "the emptied group's offsets expired",
        timeout_s=10 * retention_s,
    )
    assert committed(broker, "members") == {}


def test_a_starting_broker_claims_no_group_before_the_controllers_metadata(
    brokers: BrokerFactory,
) -> None:
    # A session timeout long enough that the paused controller stays the controller.
    first = brokers.start(1, **{"zookeeper.session.timeout.ms": "15000"})
    run(create_topic(brokers.bootstrap, "held"))
    assert commit(first, "held-group", "held", {0: ""}, offset=4) == {0: 0}
    first.pause()
    try:
        second = brokers.start(2)
        found = run(_call(second, FIND_COORDINATOR, Data(key="held-group", key_type=0)))
        assert found.error_code == CoordinatorNotAvailableError.code
        assert fetch_error(second, "held-group") == CoordinatorLoadInProgressError.code
    finally:
        first.resume()
    expected = coordinator_for("held-group", [1, 2])

    def settled() -> bool:
        found = run(_call(second, FIND_COORDINATOR, Data(key="held-group", key_type=0)))
        return found.error_code == 0 and found.node_id == expected

    wait_until(settled, "broker 2 answers FindCoordinator once it has the metadata")
    owner = brokers.brokers[expected]
    assert committed(owner, "held-group") == {("held", 0): (4, "")}
