"""The offsets topic's pure parts: Kafka's group → partition rule (checked against Java's
String.hashCode), the record layouts both ways, replaying records into what each group
stored, and a group's membership stored and restored."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from brokerd.groups.group_records import group_value, restore_group
from brokerd.groups.members import GroupLimits, GroupState, JoinRequest
from brokerd.groups.membership import Group
from brokerd.groups.stored_groups import StoredGroups
from spark_replica.errors import ProtocolError
from spark_replica.topics import TopicPartition, java_string_hash, offsets_partition_for
from spark_replica.wire.kafka.offsets_records import (
    GroupKey,
    GroupValue,
    OffsetKey,
    OffsetValue,
    StoredMember,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
)
from spark_replica.wire.primitives import Writer

# (text, Java's "text".hashCode(), its offsets partition of 50), printed by a JVM.
JAVA_HASHES = [
    ("", 0, 0),
    ("a", 97, 47),
    ("hello", 99162322, 22),
    ("console-consumer-12345", 158455506, 6),
    ("ünï cøde", -1772126663, 13),
    ("\U0001f600emoji", -1233692477, 27),
    ("polygenelubricants", -(2**31), 0),
    ("DESIGNING WORKHOUSES", -(2**31), 0),
]
TP = TopicPartition("orders", 3)


@pytest.mark.parametrize(("text", "java_hash", "partition"), JAVA_HASHES)
def test_the_group_partition_is_kafkas(text: str, java_hash: int, partition: int) -> None:
    assert java_string_hash(text) == java_hash
    assert offsets_partition_for(text, 50) == partition


def test_a_partition_count_below_one_is_refused() -> None:
    with pytest.raises(ValueError):
        offsets_partition_for("g", 0)


@given(st.text(), st.text(min_size=1), st.integers(0, 2**31 - 1), st.integers(-1, 2**62))
def test_offset_records_round_trip(group: str, topic: str, partition: int, offset: int) -> None:
    tp = TopicPartition(topic, partition)
    assert decode_key(encode_offset_key(group, tp)) == OffsetKey(group, tp)
    value = OffsetValue(offset, 4, "meta", 123)
    assert decode_offset_value(encode_offset_value(value)) == value


def test_group_records_round_trip() -> None:
    value = GroupValue(
        "consumer",
        7,
        "range",
        "m-1",
        99,
        (
            StoredMember("m-1", "i-1", "client", "/10.0.0.1", 30000, 10000, b"sub", b"asg"),
            StoredMember("m-2", None, "client", "/10.0.0.2", 30000, 6000, b"", b""),
        ),
    )
    assert decode_key(encode_group_key("g")) == GroupKey("g")
    assert decode_group_value(encode_group_value(value)) == value


def test_version_one_offset_values_kafka_wrote_are_read() -> None:
    writer = Writer()
    writer.int16(1)
    writer.int64(42)
    writer.required_string("m")
    writer.int64(1000)
    writer.int64(2000)  # the expire timestamp
    assert decode_offset_value(writer.getvalue()) == OffsetValue(42, -1, "m", 1000)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00\x07abc",  # unknown key version
        encode_offset_key("g", TP) + b"x",  # bytes past the end
        b"\x00\x01\x7f\xffg",  # a string longer than what is there
    ],
)
def test_bad_keys_are_protocol_errors(data: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode_key(data)


def test_a_member_count_beyond_the_bytes_is_refused_before_allocating() -> None:
    writer = Writer()
    writer.int16(3)
    writer.required_string("consumer")
    writer.int32(1)
    writer.string(None)
    writer.string(None)
    writer.int64(0)
    writer.int32(2**31 - 1)
    with pytest.raises(ProtocolError):
        decode_group_value(writer.getvalue())


def test_replay_keeps_the_last_record_per_key_and_tombstones_remove() -> None:
    other = TopicPartition("orders", 4)
    stored = StoredGroups()
    metadata = GroupValue("consumer", 1, None, None, 5)
    stored.replay(
        [
            (encode_offset_key("g", TP), encode_offset_value(OffsetValue(1))),
            (encode_offset_key("g", other), encode_offset_value(OffsetValue(2))),
            (encode_offset_key("g", TP), encode_offset_value(OffsetValue(3))),
            (encode_group_key("g"), encode_group_value(metadata)),
            (encode_offset_key("g", other), None),
            (encode_offset_key("h", TP), encode_offset_value(OffsetValue(9))),
            (encode_offset_key("h", TP), None),
            (b"\x00\x09junk", b""),
            (None, b""),
        ]
    )
    assert stored.offsets_of("g") == {TP: OffsetValue(3)}
    assert stored.metadata_of("g") == metadata
    assert "h" not in stored.groups
    assert stored.skipped == 2
    stored.replay([(encode_group_key("g"), None), (encode_offset_key("g", TP), None)])
    assert stored.groups == {}


def _join(group: Group, member_id: str, instance: str | None, now: float) -> str:
    request = JoinRequest(
        member_id=member_id,
        group_instance_id=instance,
        client_id="c",
        client_host="/h",
        session_timeout_ms=10_000,
        rebalance_timeout_ms=20_000,
        protocol_type="consumer",
        protocols=[("range", b"sub-" + (instance or "dyn").encode())],
        require_known_member_id=False,
    )
    return group.join(request, now).member_id


def test_a_stable_group_is_restored_with_its_generation_and_static_members() -> None:
    group = Group("g", GroupLimits())
    first = _join(group, "", "static-1", 0.0)
    second = _join(group, "", None, 0.0)
    _join(group, first, "static-1", 1.0)  # the first member rejoins: the join completes
    group.sync(first, group.generation, "static-1", {first: b"a1", second: b"a2"}, 2.0)
    assert group.state is GroupState.STABLE
    stored = decode_group_value(encode_group_value(group_value(group, 77)))
    restored = restore_group("g", stored, GroupLimits(), 5_000.0)
    assert restored.state is GroupState.STABLE
    assert restored.generation == group.generation
    assert restored.leader == group.leader
    assert restored.protocol_name == "range"
    assert restored.static_members == {"static-1": first}
    assert {m: r.assignment for m, r in restored.members.items()} == {first: b"a1", second: b"a2"}
    assert restored.heartbeat(second, group.generation, None, 5_001.0) is None


def test_an_empty_group_is_restored_empty_with_its_generation() -> None:
    stored = GroupValue("consumer", 4, None, None, 1)
    restored = restore_group("g", stored, GroupLimits(), 0.0)
    assert restored.state is GroupState.EMPTY
    assert restored.generation == 4
    assert restored.members == {}
