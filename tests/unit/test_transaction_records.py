"""The transaction state topic's pure parts: Kafka's transactional id → partition rule and
the TransactionLogKey/Value layouts, both ways, checked against bytes laid out by hand
from Kafka's definitions, with every truncation a ProtocolError."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_replica.errors import ProtocolError
from spark_replica.topics import (
    INTERNAL_TOPICS,
    TRANSACTION_STATE_TOPIC,
    TopicPartition,
    is_internal,
    offsets_partition_for,
    transaction_partition_for,
)
from spark_replica.wire.kafka.transaction_records import (
    TransactionLogValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)

ONGOING = 1
VALUE = TransactionLogValue(
    producer_id=4001,
    producer_epoch=7,
    timeout_ms=60_000,
    status=ONGOING,
    partitions=(TopicPartition("in", 0), TopicPartition("out", 2), TopicPartition("out", 5)),
    last_update_timestamp_ms=1_700_000_000_500,
    start_timestamp_ms=1_700_000_000_000,
)


def kafka_string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


# VALUE as Kafka's TransactionLogValue version 0 lays it out, field by field.
VALUE_V0 = b"".join(
    [
        struct.pack(">h", 0),  # version
        struct.pack(">q", 4001),  # producer id
        struct.pack(">h", 7),  # producer epoch
        struct.pack(">i", 60_000),  # timeout
        struct.pack(">b", ONGOING),  # status
        struct.pack(">i", 2),  # two topics
        kafka_string("in") + struct.pack(">ii", 1, 0),
        kafka_string("out") + struct.pack(">iii", 2, 2, 5),
        struct.pack(">q", 1_700_000_000_500),  # last update
        struct.pack(">q", 1_700_000_000_000),  # start
    ]
)

# A version 1 value (flexible: compact strings and arrays, tagged fields) with the
# previous and next producer ids and the client's transaction version tagged.
VALUE_V1 = b"".join(
    [
        struct.pack(">h", 1),
        struct.pack(">q", 4001),
        struct.pack(">h", 7),
        struct.pack(">i", 60_000),
        struct.pack(">b", ONGOING),
        bytes([2]),  # one topic, as count + 1
        bytes([4]) + b"out" + bytes([3]) + struct.pack(">ii", 2, 5) + bytes([0]),
        struct.pack(">q", 1_700_000_000_500),
        struct.pack(">q", 1_700_000_000_000),
        bytes([3]),  # three tagged fields
        bytes([0, 8]) + struct.pack(">q", 3999),
        bytes([1, 8]) + struct.pack(">q", 4002),
        bytes([2, 2]) + struct.pack(">h", 1),
    ]
)


# (transactional id, its partition of 50) by Java's String.hashCode, printed by a JVM;
# the same rule as a group's, so the same partition as a group of that name.
@pytest.mark.parametrize(
    ("transactional_id", "partition"),
    [("", 0), ("a", 47), ("hello", 22), ("polygenelubricants", 0), ("ünï cøde", 13)],
)
def test_the_transactional_id_partition_is_kafkas(transactional_id: str, partition: int) -> None:
    assert transaction_partition_for(transactional_id, 50) == partition
    assert transaction_partition_for(transactional_id, 50) == offsets_partition_for(
        transactional_id, 50
    )


def test_the_topic_is_internal_and_needs_partitions() -> None:
    assert TRANSACTION_STATE_TOPIC == "__transaction_state"
    assert TRANSACTION_STATE_TOPIC in INTERNAL_TOPICS and is_internal(TRANSACTION_STATE_TOPIC)
    with pytest.raises(ValueError, match="__transaction_state has 0 partitions"):
        transaction_partition_for("tx", 0)


def test_the_key_is_kafkas_layout() -> None:
    assert encode_key("tx-1") == b"\x00\x00\x00\x04tx-1"
    assert decode_key(b"\x00\x00\x00\x04tx-1") == "tx-1"


def test_the_value_is_kafkas_version_0_layout() -> None:
    assert encode_value(VALUE) == VALUE_V0
    assert decode_value(VALUE_V0) == VALUE


def test_an_empty_transaction_stores_null_partitions() -> None:
    empty = TransactionLogValue(4001, 8, 60_000, 0, None, 5, -1)
    data = encode_value(empty)
    assert data[2 + 8 + 2 + 4 + 1 :][:4] == struct.pack(">i", -1)
    assert decode_value(data) == empty


def test_version_1_is_read_with_its_tagged_fields_and_written_when_asked() -> None:
    decoded = decode_value(VALUE_V1)
    assert decoded.partitions == (TopicPartition("out", 2), TopicPartition("out", 5))
    assert (decoded.previous_producer_id, decoded.next_producer_id) == (3999, 4002)
    assert decoded.client_transaction_version == 1
    assert encode_value(decoded, version=1) == VALUE_V1
    assert decode_value(encode_value(VALUE, version=1)) == VALUE


@pytest.mark.parametrize("data", [VALUE_V0, VALUE_V1], ids=["v0", "v1"])
def test_every_truncation_is_a_protocol_error(data: bytes) -> None:
    for end in range(len(data)):
        with pytest.raises(ProtocolError):
            decode_value(data[:end])
    key = encode_key("tx-1")
    for end in range(len(key)):
        with pytest.raises(ProtocolError):
            decode_key(key[:end])


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (VALUE_V0 + b"\x00", "1 bytes past its end"),
        (struct.pack(">h", 2) + VALUE_V0[2:], "value version 2 is not one replog reads"),
        (struct.pack(">h", -1) + VALUE_V0[2:], "value version -1"),
        (VALUE_V0[:17] + struct.pack(">i", 2**30) + VALUE_V0[21:], "array"),
    ],
    ids=["trailing byte", "newer version", "negative version", "huge array"],
)
def test_bad_values_are_named(data: bytes, message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        decode_value(data)


def test_bad_keys_are_named() -> None:
    with pytest.raises(ProtocolError, match="key version 1 is not one replog reads"):
        decode_key(b"\x00\x01\x00\x01t")
    with pytest.raises(ProtocolError, match="past its end"):
        decode_key(encode_key("t") + b"\x00")


@given(
    st.text(max_size=40),
    st.integers(0, 2**63 - 1),
    st.integers(-1, 2**15 - 1),
    st.integers(1, 2**31 - 1),
    st.integers(0, 7),
    st.none() | st.sets(st.tuples(st.text(min_size=1, max_size=10), st.integers(0, 2**31 - 1))),
    st.integers(-1, 2**62),
)
def test_records_round_trip(
    transactional_id: str,
    producer_id: int,
    epoch: int,
    timeout_ms: int,
    status: int,
    partitions: set[tuple[str, int]] | None,
    timestamp: int,
) -> None:
    assert decode_key(encode_key(transactional_id)) == transactional_id
    value = TransactionLogValue(
        producer_id,
        epoch,
        timeout_ms,
        status,
        None if partitions is None else tuple(sorted(TopicPartition(*p) for p in partitions)),
        timestamp,
        timestamp,
    )
    for version in (0, 1):
        assert decode_value(encode_value(value, version)) == value
