"""The consumer protocol's member assignment: what a group's leader gave each member.

A group coordinator treats assignments as opaque bytes (assignors run in the clients);
tools that show who consumes what decode them. The layout is the same in every version:
version int16, then [topic string, [partition int32]], then user data bytes (nullable)
and, from version 1, nothing a tool needs (v3's rack lists belong to the subscription).
Anything malformed raises ProtocolError, as every other decoder of peer bytes does.
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_replica.errors import ProtocolError
from spark_replica.topics import TopicPartition
from spark_replica.wire.primitives import Buffer, Reader, Writer

CONSUMER_PROTOCOL_TYPE = "consumer"


@dataclass(frozen=True, slots=True)
class MemberAssignment:
    version: int
    partitions: list[TopicPartition]
    user_data: bytes | None = None


def decode_assignment(data: Buffer) -> MemberAssignment:
    """An assignment as a member received it in SyncGroup; empty bytes: nothing assigned
    (a member that has not yet synced)."""
    if len(data) == 0:
        return MemberAssignment(0, [])
    reader = Reader(data)
    version = reader.int16()
    if version < 0:
        raise ProtocolError(f"consumer assignment version {version} is negative")
    partitions: list[TopicPartition] = []
    for _ in range(_count(reader)):
        topic = reader.required_string()
        partitions.extend(TopicPartition(topic, reader.int32()) for _ in range(_count(reader)))
    user_data = reader.bytes_() if reader.remaining() else None
    return MemberAssignment(version, partitions, user_data)


def encode_assignment(assignment: MemberAssignment) -> bytes:
    """The inverse of decode_assignment (tests and tools that act as a group's leader)."""
    writer = Writer()
    writer.int16(assignment.version)
    by_topic: dict[str, list[int]] = {}
    for tp in assignment.partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    writer.array_length(len(by_topic))
    for topic, partitions in by_topic.items():
        writer.required_string(topic)
        writer.array_length(len(partitions))
        for partition in partitions:
            writer.int32(partition)
    writer.bytes_(assignment.user_data)
    return writer.getvalue()


def _count(reader: Reader) -> int:
    count = reader.array_length()
    if count < 0:
        raise ProtocolError("a consumer assignment holds a null array")
    return count
