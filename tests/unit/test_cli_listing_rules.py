"""The rules behind the CLI listings, with plain values: kafka-topics' describe filters,
a reassignment's per-partition state, elect-leaders' verdict and the ACL rows."""

from __future__ import annotations

from spark_replica.client import PartitionDescription
from spark_replica.reassignment import PartitionMove
from spark_replica.security.acl import (
    AclBinding,
    AclEntry,
    Operation,
    Permission,
    ResourcePattern,
    ResourceType,
)
from spark_replica.tools.cli.acls import acl_rows
from spark_replica.tools.cli.elect_leaders import misplaced
from spark_replica.tools.cli.reassign import move_status
from spark_replica.tools.cli.topics import (
    UNAVAILABLE,
    UNDER_MIN_ISR,
    UNDER_REPLICATED,
    describe_json,
    min_insync_replicas,
    select,
)
from spark_replica.topics import TopicPartition

LIVE = {1, 2}


def partition(
    number: int, leader: int, replicas: list[int], isr: list[int]
) -> PartitionDescription:
    return PartitionDescription(number, leader, 3, replicas, isr, 10, {r: 10 for r in replicas})


DESCRIBED = {
    "healthy": [partition(0, 1, [1, 2], [1, 2])],
    "shrunk": [partition(0, 1, [1, 3], [1]), partition(1, 2, [2, 1], [2, 1])],
    "offline": [partition(0, -1, [3], [3])],
    "stale": [partition(0, 3, [3, 1], [3, 1])],
}


def chosen(only: str | None, min_insync: dict[str, int] | None = None) -> list[tuple[str, int]]:
    return [(t, p.partition) for t, p in select(DESCRIBED, only, LIVE, min_insync or {})]


def test_no_filter_keeps_everything_in_topic_order() -> None:
    assert chosen(None) == [
        ("healthy", 0),
        ("offline", 0),
        ("shrunk", 0),
        ("shrunk", 1),
        ("stale", 0),
    ]


def test_under_replicated_is_an_isr_smaller_than_the_replicas() -> None:
    assert chosen(UNDER_REPLICATED) == [("shrunk", 0)]


def test_unavailable_is_no_leader_or_a_leader_that_is_not_live() -> None:
    assert chosen(UNAVAILABLE) == [("offline", 0), ("stale", 0)]


def test_under_min_isr_is_no_leader_or_an_isr_below_the_topics_setting() -> None:
    assert chosen(UNDER_MIN_ISR) == [("offline", 0)]
    assert chosen(UNDER_MIN_ISR, {"shrunk": 2, "healthy": 3}) == [
        ("healthy", 0),
        ("offline", 0),
        ("shrunk", 0),
    ]
    assert min_insync_replicas({"min.insync.replicas": "3"}) == 3
    assert min_insync_replicas({}) == 1


def test_describe_json_names_the_topic_and_offline_replicas_per_partition() -> None:
    document = describe_json(select(DESCRIBED, UNAVAILABLE, LIVE, {}), LIVE, {})
    assert [t["topic"] for t in document] == ["offline", "stale"]
    stale = document[1]["partitions"][0]
    assert stale["topic"] == "stale" and stale["leader"] == 3
    assert stale["replicas"] == [3, 1] and stale["isr"] == [3, 1]
    assert stale["offline_replicas"] == [3] and stale["high_watermark"] == 10
    assert stale["log_end_offsets"] == {"3": 10, "1": 10}


def test_reassignment_states() -> None:
    move = PartitionMove(TopicPartition("t", 0), (2, 3))
    catching_up = PartitionDescription(0, 1, 1, [1, 2, 3], [1, 2], 10, {1: 10, 2: 10, 3: 5})
    moving = move_status(move, catching_up, running=True)
    assert (moving.state, moving.progress) == ("moving", 0.75)
    done = move_status(move, partition(0, 2, [2, 3], [2, 3]), running=False)
    assert (done.state, done.progress, done.replicas) == ("done", None, [2, 3])
    stopped = move_status(move, partition(0, 1, [1, 2], [1, 2]), running=False)
    assert stopped.state == "not running"
    missing = move_status(move, None, running=True)
    assert (missing.state, missing.replicas) == ("does not exist", None)
    assert missing.as_json()["target"] == [2, 3]


def test_a_partition_without_a_leader_is_not_led_by_its_preferred_replica() -> None:
    leaders = {("t", 0): (1, 1), ("t", 1): (2, 1), ("t", 2): (-1, -1)}
    assert misplaced(leaders) == [("t", 1), ("t", 2)]


def test_acl_rows_one_per_acl_in_kafkas_operation_order() -> None:
    topic = ResourcePattern(ResourceType.TOPIC, "orders")
    bindings = [
        AclBinding(topic, AclEntry("User:bob", "*", operation, Permission.ALLOW))
        for operation in (Operation.DESCRIBE, Operation.READ)
    ]
    assert acl_rows(bindings) == [
        ["Topic", "Literal", "orders", "User:bob", "Allow", "Read", "*"],
        ["Topic", "Literal", "orders", "User:bob", "Allow", "Describe", "*"],
    ]
