"""Committed offsets kept within bounds, through a real broker and real clients: large
commits are stored whole, oversized metadata is refused per partition, a deleted topic's
offsets go with it, and an empty group's offsets expire."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaPartition

from spark_replica.client import Admin, Cluster
from spark_replica.errors import OffsetMetadataTooLargeError
from tests.support import BrokerFactory, create_topic, produce, run, wait_until
from tests.support_groups import commit, committed

pytestmark = pytest.mark.slow

# Each of these JSON-escapes to six bytes ("\u0001"): 4 KiB of them is 24 KiB stored.
SIX_FOLD = "\x01"


def test_large_commits_are_stored_and_metadata_is_bounded_per_partition(
    brokers: BrokerFactory,
) -> None:
    broker = brokers.start(1)
    run(create_topic(brokers.bootstrap, "wide", partitions=60))
    for text in ("m", SIX_FOLD):
        metadata = {p: text * 4096 for p in range(60)}
        assert commit(broker, f"g-{ord(text)}", "wide", metadata) == dict.fromkeys(range(60), 0)
        stored = committed(broker, f"g-{ord(text)}")
        assert stored == {("wide", p): (7, text * 4096) for p in range(60)}
    over = commit(broker, "g-over", "wide", {0: "m" * 4097, 1: "m" * 4096})
    assert over == {0: OffsetMetadataTooLargeError.code, 1: 0}
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


def test_a_deleted_topics_offsets_go_with_it(brokers: BrokerFactory) -> None:
    broker = brokers.start(1, **{"group.initial.rebalance.delay.ms": "0"})
    run(create_topic(brokers.bootstrap, "reborn"))
    run(produce(brokers.bootstrap, "reborn", [f"old{i}" for i in range(5)]))
    assert commit(broker, "old-group", "reborn", {0: ""}, offset=3) == {0: 0}
    run(_recreate(brokers.bootstrap, "reborn"))
    wait_until(
        lambda: committed(broker, "old-group") == {},
        "the deleted topic's committed offset went with it",
    )
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
    brokers: BrokerFactory,
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
            lambda: committed(broker, "standalone") == {},
            "the standalone group's offsets expired",
            timeout_s=10 * retention_s,
        )
        # A Stable group loses the offsets of topics it does not subscribe to a retention
        # after their commit, and keeps those it subscribes to (committed together).
        wait_until(
            lambda: ("unsubscribed", 0) not in committed(broker, "members"),
            "the offset of a topic no member subscribes to expired",
            timeout_s=10 * retention_s,
        )
        assert committed(broker, "members") == {("kept", 0): (1, "")}
    finally:
        member.close()
    wait_until(
        lambda: committed(broker, "members") == {},
        "the emptied group's offsets expired",
        timeout_s=10 * retention_s,
    )
    assert committed(broker, "members") == {}
