"""The records of the internal `__consumer_offsets` topic, in Kafka's own layouts.

Each record's key says what it is about and its value what is stored; a null value is a
tombstone (the offset, or the whole group, is gone), which compaction keeps only for
delete.retention.ms. The key and value layouts are Kafka's (its OffsetCommitKey/Value,
GroupMetadataKey/Value schemas), so that Kafka's tools that read the topic, and the
cleaner's "last record per key" rule, see the same thing they would on Kafka:

- offset commit: key version 1 `(group string, topic string, partition int32)`; value
  version 3 `(offset int64, leader_epoch int32, metadata string, commit_timestamp int64)`;
- group metadata: key version 2 `(group string)`; value version 3 `(protocol_type string,
  generation int32, protocol string?, leader string?, current_state_timestamp int64,
  members [member_id, group_instance_id?, client_id, client_host, rebalance_timeout
  int32, session_timeout int32, subscription bytes, assignment bytes])`.

Older value versions Kafka wrote are read too (a log copied from a Kafka cluster); the
flexible versions (4+) are not, and are refused as what they are. Bytes read back come
from this broker's own log, but a damaged one must still fail as a ProtocolError, never
as an IndexError or a huge allocation: the Reader bounds every count by what is there.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from spark_replica.errors import ProtocolError
from spark_replica.topics import TopicPartition
from spark_replica.wire.primitives import Buffer, Reader, Writer, encode_utf8

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
GROUP_VALUE_VERSION = 3
NO_LEADER_EPOCH = -1
# The fixed parts of the records written on every commit, packed at once rather than
# field by field through a Writer: a commit of 50 partitions writes 100 of them.
_VERSION_AND_LENGTH = struct.Struct(">hh")
_LENGTH = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_OFFSET_VALUE_HEAD = struct.Struct(">hqih")


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group_id: str
    tp: TopicPartition


@dataclass(frozen=True, slots=True)
class GroupKey:
    group_id: str


@dataclass(frozen=True, slots=True)
class OffsetValue:
    offset: int
    leader_epoch: int = NO_LEADER_EPOCH
    metadata: str = ""
    commit_timestamp_ms: int = -1


@dataclass(frozen=True, slots=True)
class StoredMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int
    members: tuple[StoredMember, ...] = ()


def encode_offset_key(group_id: str, tp: TopicPartition) -> bytes:
    group = encode_utf8(group_id)
    topic = encode_utf8(tp.topic)
    return b"".join(
        (
            _VERSION_AND_LENGTH.pack(OFFSET_KEY_VERSION, len(group)),
            group,
            _LENGTH.pack(len(topic)),
            topic,
            _INT32.pack(tp.partition),
        )
    )


def encode_group_key(group_id: str) -> bytes:
    group = encode_utf8(group_id)
    return _VERSION_AND_LENGTH.pack(GROUP_KEY_VERSION, len(group)) + group


def encode_offset_value(value: OffsetValue) -> bytes:
    metadata = encode_utf8(value.metadata)
    return b"".join(
        (
            _OFFSET_VALUE_HEAD.pack(
                OFFSET_VALUE_VERSION, value.offset, value.leader_epoch, len(metadata)
            ),
            metadata,
            _INT64.pack(value.commit_timestamp_ms),
        )
    )


def encode_group_value(value: GroupValue) -> bytes:
    writer = Writer()
    writer.int16(GROUP_VALUE_VERSION)
    writer.required_string(value.protocol_type)
    writer.int32(value.generation)
    writer.string(value.protocol)
    writer.string(value.leader)
    writer.int64(value.current_state_timestamp_ms)
    writer.array_length(len(value.members))
    for member in value.members:
        writer.required_string(member.member_id)
        writer.string(member.group_instance_id)
        writer.required_string(member.client_id)
        writer.required_string(member.client_host)
        writer.int32(member.rebalance_timeout_ms)
        writer.int32(member.session_timeout_ms)
        writer.required_bytes(member.subscription)
        writer.required_bytes(member.assignment)
    return writer.getvalue()


def decode_key(data: Buffer) -> OffsetKey | GroupKey:
    """What a record of the offsets topic is about."""
    reader = Reader(data)
    version = reader.int16()
    if version in (0, OFFSET_KEY_VERSION):
        group_id = reader.required_string()
        topic = reader.required_string()
        key: OffsetKey | GroupKey = OffsetKey(group_id, TopicPartition(topic, reader.int32()))
    elif version == GROUP_KEY_VERSION:
        key = GroupKey(reader.required_string())
    else:
        raise ProtocolError(f"offsets topic key version {version} is not one replog reads")
    _end(reader, "key")
    return key


def decode_offset_value(data: Buffer) -> OffsetValue:
    reader = Reader(data)
    version = reader.int16()
    if not 0 <= version <= OFFSET_VALUE_VERSION:
        raise ProtocolError(f"offset commit value version {version} is not one replog reads")
    offset = reader.int64()
    leader_epoch = reader.int32() if version >= 3 else NO_LEADER_EPOCH
    metadata = reader.required_string()
    commit_timestamp_ms = reader.int64()
    if version == 1:
        reader.int64()  # the expire timestamp of version 1, which retention replaced
    _end(reader, "offset commit value")
    return OffsetValue(offset, leader_epoch, metadata, commit_timestamp_ms)


def decode_group_value(data: Buffer) -> GroupValue:
    reader = Reader(data)
    version = reader.int16()
    if not 0 <= version <= GROUP_VALUE_VERSION:
        raise ProtocolError(f"group metadata value version {version} is not one replog reads")
    protocol_type = reader.required_string()
    generation = reader.int32()
    protocol = reader.string()
    leader = reader.string()
    timestamp = reader.int64() if version >= 2 else -1
    count = reader.array_length(item_bytes=_MEMBER_MIN_BYTES)
    if count < 0:
        raise ProtocolError("group metadata value holds a null member array")
    members = []
    for _ in range(count):
        member_id = reader.required_string()
        instance = reader.string() if version >= 3 else None
        client_id = reader.required_string()
        client_host = reader.required_string()
        rebalance = reader.int32() if version >= 1 else -1
        session = reader.int32()
        if rebalance < 0:
            rebalance = session
        members.append(
            StoredMember(
                member_id,
                instance,
                client_id,
                client_host,
                rebalance_timeout_ms=rebalance,
                session_timeout_ms=session,
                subscription=_required_bytes(reader),
                assignment=_required_bytes(reader),
            )
        )
    _end(reader, "group metadata value")
    return GroupValue(protocol_type, generation, protocol, leader, timestamp, tuple(members))


# A member takes at least its three strings' lengths, two timeouts and two byte lengths.
_MEMBER_MIN_BYTES = 2 * 3 + 4 * 2 + 4 * 2


def _required_bytes(reader: Reader) -> bytes:
    data = reader.bytes_()
    if data is None:
        raise ProtocolError("group metadata value holds null member bytes")
    return data


def _end(reader: Reader, what: str) -> None:
    if reader.remaining():
        raise ProtocolError(f"offsets topic {what} has {reader.remaining()} bytes past its end")
