"""A consumer group's lag, as `replog groups describe` and the console both show it.

Pure functions of plain values (the description, committed offsets and log ends read
from the cluster are passed in), so the rules are written and tested once, without a
broker. They follow kafka-consumer-groups: lag is the log end minus the committed offset,
never negative (a log truncated below a commit has no lag) and unknown without both; a
partition's owner is the member whose consumer-protocol assignment names it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from spark_replica.client.kafka_admin import GroupDescription
from spark_replica.errors import ProtocolError
from spark_replica.topics import TopicPartition
from spark_replica.wire.kafka.consumer_protocol import CONSUMER_PROTOCOL_TYPE, decode_assignment


@dataclass(frozen=True, slots=True)
class Owner:
    """The member a partition is assigned to, as DescribeGroups names it."""

    consumer_id: str
    host: str
    client_id: str


@dataclass(frozen=True, slots=True)
class PartitionLag:
    topic: str
    partition: int
    current_offset: int | None  # None: nothing committed
    log_end_offset: int | None  # None: unknown (no leader answered)
    lag: int | None
    owner: Owner | None

    def as_json(self) -> dict[str, object]:
        owner = self.owner
        return {
            "topic": self.topic,
            "partition": self.partition,
            "current_offset": self.current_offset,
            "log_end_offset": self.log_end_offset,
            "lag": self.lag,
            "consumer_id": None if owner is None else owner.consumer_id,
            "host": None if owner is None else owner.host,
            "client_id": None if owner is None else owner.client_id,
        }


def lag(committed: int | None, log_end: int | None) -> int | None:
    if committed is None or log_end is None or committed < 0 or log_end < 0:
        return None
    return max(log_end - committed, 0)


def owners(description: GroupDescription) -> dict[TopicPartition, Owner]:
    """Who consumes each partition, from the members' consumer-protocol assignments
    (a group of another protocol type, or an assignment that does not decode, has none)."""
    owned: dict[TopicPartition, Owner] = {}
    if description.protocol_type != CONSUMER_PROTOCOL_TYPE:
        return owned
    for member in description.members:
        try:
            assignment = decode_assignment(member.assignment)
        except ProtocolError:
            continue
        for tp in assignment.partitions:
            owned[tp] = Owner(member.member_id, member.host, member.client_id)
    return owned


def lag_rows(
    committed: Mapping[TopicPartition, int],
    log_ends: Mapping[TopicPartition, int],
    owned: Mapping[TopicPartition, Owner],
) -> list[PartitionLag]:
    """One row per partition that has a commit or an owner, sorted by topic and partition."""
    rows = []
    for tp in sorted({*committed, *owned}):
        current = committed.get(tp)
        current = None if current is None or current < 0 else current
        end = log_ends.get(tp)
        rows.append(
            PartitionLag(tp.topic, tp.partition, current, end, lag(current, end), owned.get(tp))
        )
    return rows


def group_json(description: GroupDescription, rows: list[PartitionLag]) -> dict[str, object]:
    """The group as `groups describe --json` prints it and the console serves it."""
    return {
        "group": description.group_id,
        "state": description.state,
        "protocol_type": description.protocol_type,
        "protocol": description.protocol,
        "members": [
            {"consumer_id": m.member_id, "host": m.host, "client_id": m.client_id}
            for m in description.members
        ],
        "partitions": [row.as_json() for row in rows],
    }
