"""One consumer group as /api/groups shows it, from plain values: rows for committed and
assigned partitions, lag never negative and unknown without a commit or a log end, the
owner read from the member's assignment, and the total lag."""

from __future__ import annotations

from spark_replica.client.kafka_admin import GroupDescription, GroupMember
from spark_replica.tools.console.group_view import group_json
from spark_replica.topics import TopicPartition
from spark_replica.wire.kafka.consumer_protocol import MemberAssignment, encode_assignment

T0, T1, T2 = (TopicPartition("t", p) for p in (0, 1, 2))


def member(name: str, *partitions: TopicPartition) -> GroupMember:
    return GroupMember(
        name,
        f"{name}-client",
        "/10.0.0.1",
        encode_assignment(MemberAssignment(0, list(partitions))),
    )


def test_rows_for_committed_and_assigned_partitions_with_owners() -> None:
    description = GroupDescription("g", "Stable", "consumer", "range", [member("a", T0, T2)])
    document = group_json(description, {T0: 10, T1: 4}, {T0: 10, T1: 10, T2: 7})
    assert (document["group"], document["state"], document["total_lag"]) == ("g", "Stable", 6)
    assert document["members"] == [
        {"consumer_id": "a", "host": "/10.0.0.1", "client_id": "a-client"}
    ]
    rows = [
        (r["partition"], r["current_offset"], r["log_end_offset"], r["lag"], r["consumer_id"])
        for r in document["partitions"]
    ]
    assert rows == [(0, 10, 10, 0, "a"), (1, 4, 10, 6, None), (2, None, 7, None, "a")]


def test_a_group_of_another_protocol_owns_nothing_and_has_no_lag_without_commits() -> None:
    description = GroupDescription("c", "Stable", "connect", "x", [member("a", T0)])
    document = group_json(description, {}, {})
    assert (document["partitions"], document["total_lag"]) == ([], None)
