"""Groups as Kafka's admin tools see them (confluent-kafka's AdminClient against real
brokers): listed, described with members and assignments, deleted only once empty; and
static members that restart without a rebalance."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.support import BrokerFactory, create_topic, produce, run

pytestmark = pytest.mark.slow

GROUP_OVERRIDES = {
    "group.min.session.timeout.ms": "1000",
    "group.initial.rebalance.delay.ms": "0",
}
DEADLINE_S = 45.0


def consumer(bootstrap: str, group: str, **extra: str | int) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "session.timeout.ms": 2_000,
            "heartbeat.interval.ms": 300,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **extra,
        }
    )


def poll_until(consumers: list[Consumer], done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not done():
        assert time.monotonic() < deadline, "the group did not settle in time"
        for c in consumers:
            c.poll(0.1)


@pytest.fixture
def admin(brokers: BrokerFactory) -> Iterator[AdminClient]:
    brokers.start(1, **GROUP_OVERRIDES)
    yield AdminClient({"bootstrap.servers": brokers.kafka_bootstrap()})


def test_list_describe_and_delete(brokers: BrokerFactory, admin: AdminClient) -> None:
    run(create_topic(brokers.bootstrap, "admin", partitions=2))
    run(produce(brokers.bootstrap, "admin", ["a", "b"]))
    member = consumer(brokers.kafka_bootstrap(), "watched", **{"client.id": "watcher"})
    try:
        member.subscribe(["admin"])
        poll_until([member], lambda: len(member.assignment()) == 2)
        member.commit(offsets=[TopicPartition("admin", 0, 1)], asynchronous=False)

        listed = admin.list_consumer_groups().result(timeout=20)
        assert [(g.group_id, g.state) for g in listed.valid] == [
            ("watched", ConsumerGroupState.STABLE)
        ]
        described = admin.describe_consumer_groups(["watched"])["watched"].result(timeout=20)
        assert described.state == ConsumerGroupState.STABLE
        assert described.partition_assignor == "range"
        (only,) = described.members
        assert only.client_id == "watcher"
        assert {tp.partition for tp in only.assignment.topic_partitions} == {0, 1}

        refused = admin.delete_consumer_groups(["watched"])["watched"]
        with pytest.raises(KafkaException, match="NON_EMPTY_GROUP"):
            refused.result(timeout=20)
    finally:
        member.close()

    listed = admin.list_consumer_groups().result(timeout=20)
    assert [(g.group_id, g.state) for g in listed.valid] == [("watched", ConsumerGroupState.EMPTY)]
    admin.delete_consumer_groups(["watched"])["watched"].result(timeout=20)
    assert admin.list_consumer_groups().result(timeout=20).valid == []
    gone = admin.delete_consumer_groups(["watched"])["watched"]
    with pytest.raises(KafkaException, match="GROUP_ID_NOT_FOUND"):
        gone.result(timeout=20)


def test_static_members_restart_without_a_rebalance(
    brokers: BrokerFactory, admin: AdminClient
) -> None:
    """Both members restart in turn, so the group's leader (whichever joined first) is
    among them: neither restart may revoke anything from the member that stays."""
    run(create_topic(brokers.bootstrap, "static", partitions=2))
    revoked: list[str] = []

    def member(instance: str) -> Consumer:
        started = consumer(
            brokers.kafka_bootstrap(),
            "statics",
            **{"group.instance.id": instance, "session.timeout.ms": 10_000},
        )
        started.subscribe(["static"], on_revoke=lambda c, tps: revoked.append(instance))
        return started

    members = {"one": member("one"), "two": member("two")}
    try:
        poll_until(
            list(members.values()),
            lambda: all(len(m.assignment()) == 1 for m in members.values()),
        )
        for restarting, staying in (("two", "one"), ("one", "two")):
            kept = {tp.partition for tp in members[restarting].assignment()}
            before = admin.describe_consumer_groups(["statics"])["statics"].result(timeout=20)
            # A static member's close does not leave the group: its session stands for it.
            # (The closing consumer revokes its own partitions locally; that is not a
            # rebalance, so it is forgotten.)
            members[restarting].close()
            revoked.clear()
            members[restarting] = member(restarting)
            back = members[restarting]
            poll_until(list(members.values()), lambda b=back: len(b.assignment()) == 1)
            assert {tp.partition for tp in back.assignment()} == kept
            for _ in range(10):  # the other member keeps its partition: no rebalance at all
                members[staying].poll(0.1)
            assert revoked == [] and len(members[staying].assignment()) == 1
            after = admin.describe_consumer_groups(["statics"])["statics"].result(timeout=20)
            assert {m.group_instance_id for m in after.members} == {"one", "two"}
            assert {m.member_id for m in after.members} != {m.member_id for m in before.members}
    finally:
        for m in members.values():
            m.close()
