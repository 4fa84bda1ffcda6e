"""The Kafka listener's DescribeProducers handler over a stand-in broker: Read on the topic
is needed (Describe is not enough: TOPIC_AUTHORIZATION_FAILED for every partition of a
refused topic, the other topics served), and each partition gets its own answer: the
producers a replica (leader or follower) knows, NOT_LEADER_OR_FOLLOWER from a broker
without a replica, UNKNOWN_TOPIC_OR_PARTITION for what the cluster does not have.
Through real brokers: tests/kafka/test_transaction_coordinator.py."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from brokerd.kafka.describe_producers import handle_describe_producers
from brokerd.kafka.request import KafkaRequest
from brokerd.replication.producer_state import ProducerStateManager
from spark_replica.security.acl import (
    AclBinding,
    AclEntry,
    Authorizer,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)
from spark_replica.topics import TopicPartition
from spark_replica.wire.schema import Data
from tests.unit.test_producer_state_transactions import data

TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER = 29, 3, 6
APP = "User:app"


class StandInPartition:
    """What the handler asks of a replica, leader or follower: its producer state."""

    def __init__(self) -> None:
        self.producer_state = ProducerStateManager()


def broker(authorizer: Authorizer | None) -> Any:
    led, followed = StandInPartition(), StandInPartition()
    led.producer_state.record(data(0, 0, 3, pid=7, epoch=1, txn=False), 0)
    led.producer_state.record(data(3, 0, 2, pid=8, epoch=1), 3)
    followed.producer_state.record(data(0, 0, 3, pid=7, epoch=1, txn=False), 0)
    hosted = {TopicPartition("t", 0): led, TopicPartition("t", 1): followed}
    known = {*hosted, TopicPartition("t", 2), TopicPartition("u", 0)}
    return SimpleNamespace(
        authorizer=authorizer,
        replicas=SimpleNamespace(partitions=hosted, config=SimpleNamespace(broker_id=1)),
        metadata=SimpleNamespace(partitions=known),
    )


def allowing(operation: Operation, topic: str) -> Authorizer:
    authorizer = Authorizer(frozenset())
    pattern = ResourcePattern(ResourceType.TOPIC, topic, PatternType.LITERAL)
    authorizer.replace_all([AclBinding(pattern, AclEntry(APP, "*", operation, Permission.ALLOW))])
    return authorizer


def describe(ctx: Any, **topics: list[int]) -> dict[tuple[str, int], Data]:
    body = Data(topics=[Data(name=name, partition_indexes=p) for name, p in topics.items()])
    request = KafkaRequest(61, 0, 1, "test", "127.0.0.1", APP, body)
    answer = asyncio.run(handle_describe_producers(ctx, request))
    return {(t.name, p.partition_index): p for t in answer.topics for p in t.partitions}


def test_each_partition_is_answered_on_its_own() -> None:
    answered = describe(broker(None), t=[0, 1, 2, 9], u=[0])
    leader = answered["t", 0]
    assert leader.error_code == 0 and leader.error_message is None
    assert [
        (p.producer_id, p.producer_epoch, p.last_sequence, p.current_txn_start_offset)
        for p in leader.active_producers
    ] == [(7, 1, 2, -1), (8, 1, 1, 3)]
    follower = answered["t", 1]  # answers from its own copy of the state, as in Kafka
    assert [(p.producer_id, p.last_sequence) for p in follower.active_producers] == [(7, 2)]
    assert follower.error_code == 0
    codes = {
        where: p.error_code for where, p in answered.items() if where not in (("t", 0), ("t", 1))
    }
    assert codes == {
        ("t", 2): NOT_LEADER_OR_FOLLOWER,  # hosted elsewhere
        ("t", 9): UNKNOWN_TOPIC_OR_PARTITION,
        ("u", 0): NOT_LEADER_OR_FOLLOWER,
    }
    assert all(answered[where].active_producers == [] for where in codes)


def test_read_on_the_topic_is_needed() -> None:
    answered = describe(broker(allowing(Operation.READ, "t")), t=[0], u=[0])
    assert answered["t", 0].error_code == 0
    refused = answered["u", 0]
    assert (refused.error_code, refused.active_producers) == (TOPIC_AUTHORIZATION_FAILED, [])
    assert "Read" in refused.error_message
    describe_only = describe(broker(allowing(Operation.DESCRIBE, "t")), t=[0, 1])
    assert {p.error_code for p in describe_only.values()} == {TOPIC_AUTHORIZATION_FAILED}
