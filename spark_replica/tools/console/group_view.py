"""What the console's /api/groups says of one Kafka consumer group, from plain values.

As `replog groups describe` (and kafka-consumer-groups --describe) shows a group: its
state, its members, and per partition the committed offset, the log end, the lag (log
end minus committed, never negative: a log truncated below a commit has no lag) and
the member it is assigned to, read from the members' consumer-protocol assignments.
The same rules as the CLI's groups_plan; the console cannot import the CLI, which
imports the console. No I/O here.
"""

from __future__ import annotations

from collections.abc import Mapping

from spark_replica.client.kafka_admin import GroupDescription, GroupMember
from spark_replica.errors import ProtocolError
from spark_replica.topics import TopicPartition
from spark_replica.wire.kafka.consumer_protocol import CONSUMER_PROTOCOL_TYPE, decode_assignment


def owners(description: GroupDescription) -> dict[TopicPartition, GroupMember]:
    """Who consumes each partition; a group of another protocol type, or an assignment
    that does not decode, owns none."""
    owned: dict[TopicPartition, GroupMember] = {}
    if description.protocol_type != CONSUMER_PROTOCOL_TYPE:
        return owned
    for member in description.members:
        try:
            assignment = decode_assignment(member.assignment)
        except ProtocolError:
            continue
        for tp in assignment.partitions:
            owned[tp] = member
    return owned


def partition_lag(committed: int | None, log_end: int | None) -> int | None:
    if committed is None or log_end is None or committed < 0 or log_end < 0:
        return None
    return max(log_end - committed, 0)


def group_json(
    description: GroupDescription,
    committed: Mapping[TopicPartition, int],
    log_ends: Mapping[TopicPartition, int],
) -> dict[str, object]:
    """One group: one row per partition that has a commit or an owner, sorted."""
    owned = owners(description)
    rows = []
    for tp in sorted({*committed, *owned}):
        current = committed.get(tp)
        current = None if current is None or current < 0 else current
        end = log_ends.get(tp)
        member = owned.get(tp)
        rows.append(
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "current_offset": current,
                "log_end_offset": end,
                "lag": partition_lag(current, end),
                "consumer_id": None if member is None else member.member_id,
                "host": None if member is None else member.host,
                "client_id": None if member is None else member.client_id,
            }
        )
    lags = [row["lag"] for row in rows if isinstance(row["lag"], int)]
    return {
        "group": description.group_id,
        "state": description.state,
        "protocol_type": description.protocol_type,
        "protocol": description.protocol,
        "members": [
            {"consumer_id": m.member_id, "host": m.host, "client_id": m.client_id}
            for m in description.members
        ],
        "partitions": rows,
        "total_lag": sum(lags) if lags else None,
        "error": None,
    }
