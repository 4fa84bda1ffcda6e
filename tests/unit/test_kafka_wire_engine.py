"""The Kafka wire engine: primitives, table-driven codec and headers, with plain values."""

from __future__ import annotations

import uuid

import pytest

from spark_replica.errors import ProtocolError
from spark_replica.wire.kafka.headers import (
    RequestHeader,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    read_request_header,
)
from spark_replica.wire.primitives import LARGE_FIELD_BYTES, Reader, Writer
from spark_replica.wire.schema import Data, Field, Message, parse_versions, snake_case

SAMPLE = Message(
    "Sample",
    api_key=1000,
    versions=(0, 3),
    flexible=2,
    fields=[
        Field("TransactionalId", "string", "1+", nullable="1+", default=None),
        Field("Acks", "int16", "0+", default=-1),
        Field("Flag", "bool", "0+"),
        Field("Ids", "[]int32", "0+"),
        Field(
            "Topics",
            [
                Field("Name", "string", "0+"),
                Field(
                    "Partitions",
                    [
                        Field("Index", "int32", "0+"),
                        Field("Records", "records", "0+", nullable="0+"),
                    ],
                    "0+",
                ),
                Field("TopicId", "uuid", "3+"),
            ],
            "0+",
            nullable="1+",
        ),
        Field("Note", "string", "2+", nullable="2+", default=None, tag=0, tagged="2+"),
        Field("Epoch", "int64", "2+", default=-1, tag=5, tagged="2+"),
    ],
)


def _body(version: int, obj: object) -> bytes:
    writer = Writer()
    SAMPLE.encode(version, obj, writer)
    return writer.getvalue()


def test_snake_case_and_versions() -> None:
    assert snake_case("ThrottleTimeMs") == "throttle_time_ms"
    assert snake_case("ApiKeys") == "api_keys"
    assert snake_case("ZkMigrationReady") == "zk_migration_ready"
    assert parse_versions("0+") == (0, 1 << 15)
    assert parse_versions("3-5") == (3, 5)
    assert parse_versions("none") == (1, 0)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_round_trip_fills_absent_fields_with_defaults(version: int) -> None:
    value = Data(
        transactional_id="tx" if version >= 1 else None,
        acks=1,
        flag=True,
        ids=[1, -2, 3],
        topics=[
            Data(
                name="t",
                partitions=[Data(index=0, records=b"abc"), Data(index=1, records=None)],
                topic_id=uuid.UUID(int=7) if version >= 3 else uuid.UUID(int=0),
            )
        ],
        note="hello" if version >= 2 else None,
        epoch=9 if version >= 2 else -1,
    )
    decoded = SAMPLE.from_bytes(version, _body(version, value))
    assert decoded.topics[0].partitions[0].records == b"abc"
    decoded.topics[0].partitions[0].records = b"abc"
    assert decoded == value


def test_tagged_fields_written_only_when_not_default() -> None:
    plain = _body(2, Data(acks=0, topics=[]))
    assert plain.endswith(b"\x00")
    tagged = _body(2, Data(acks=0, topics=[], epoch=3))
    assert tagged.endswith(b"\x01\x05\x08" + (3).to_bytes(8, "big"))
    assert SAMPLE.from_bytes(2, tagged).epoch == 3


def test_unknown_tags_are_skipped() -> None:
    body = _body(2, Data(acks=0, topics=[]))[:-1] + b"\x01\x63\x02zz"
    assert SAMPLE.from_bytes(2, body).note is None


def test_flexible_uses_compact_encodings() -> None:
    body = _body(2, Data(transactional_id="ab", acks=1, flag=False, ids=[], topics=None))
    assert body == b"\x03ab" + b"\x00\x01" + b"\x00" + b"\x01" + b"\x00" + b"\x00"


def test_records_decode_as_frame_slices_and_encode_by_reference() -> None:
    big = bytes(LARGE_FIELD_BYTES)
    value = Data(acks=1, topics=[Data(name="t", partitions=[Data(index=0, records=[big, b"x"])])])
    writer = Writer()
    SAMPLE.encode(1, value, writer)
    assert any(buffer is big for buffer in writer.buffers())
    decoded = SAMPLE.decode(1, Reader(writer.getvalue()))
    records = decoded.topics[0].partitions[0].records
    assert isinstance(records, memoryview) and bytes(records) == big + b"x"


@pytest.mark.parametrize(
    "value",
    [
        Data(acks=1 << 20, topics=[]),
        Data(acks=1, topics=None),
        Data(acks=1, topics=[Data(name=None)]),
    ],
)
def test_unencodable_values_raise_protocol_error(value: Data) -> None:
    with pytest.raises(ProtocolError):
        _body(0, value)


def test_truncations_and_huge_counts_raise_protocol_error() -> None:
    body = _body(
        3, Data(transactional_id="x", acks=1, ids=[5], topics=[Data(name="t", partitions=[])])
    )
    for cut in range(len(body)):
        with pytest.raises(ProtocolError):
            SAMPLE.from_bytes(3, body[:cut])
    with pytest.raises(ProtocolError):
        SAMPLE.from_bytes(0, b"\xff\xff" + b"\x00\x01" + b"\x00" + b"\x7f\xff\xff\xff")


def test_varints() -> None:
    writer = Writer()
    for value in (0, -1, 1, 63, -64, 300, (1 << 31) - 1, -(1 << 31)):
        writer.varint(value)
    writer.varlong(-(1 << 63))
    writer.unsigned_varint(0xFFFFFFFF)
    reader = Reader(writer.getvalue())
    assert [reader.varint() for _ in range(8)] == [
        0,
        -1,
        1,
        63,
        -64,
        300,
        (1 << 31) - 1,
        -(1 << 31),
    ]
    assert reader.varlong() == -(1 << 63)
    assert reader.unsigned_varint() == 0xFFFFFFFF
    with pytest.raises(ProtocolError):
        Reader(b"\xff\xff\xff\xff\xff\x01").unsigned_varint()


def test_request_header_v2_and_round_trip() -> None:
    frame = b"".join(
        encode_request(18, 3, 7, "cli", Data(client_software_name="n", client_software_version="1"))
    )
    assert frame[:4] == (len(frame) - 4).to_bytes(4, "big")
    header, body = decode_request(frame[4:])
    assert header == RequestHeader(18, 3, 7, "cli")
    assert (body.client_software_name, body.client_software_version) == ("n", "1")
    # Header v2: the client id stays a classic string, then an empty tagged-field section.
    assert frame[12:18] == b"\x00\x03cli\x00"


def test_request_header_v1_has_no_tagged_fields() -> None:
    reader = Reader(b"\x00\x12\x00\x00\x00\x00\x00\x01\xff\xff")
    assert read_request_header(reader) == RequestHeader(18, 0, 1, None)
    assert reader.remaining() == 0


def test_api_versions_response_header_is_always_v0() -> None:
    body = Data(error_code=0, api_keys=[Data(api_key=18, min_version=0, max_version=3)])
    frame = b"".join(encode_response(18, 3, 42, body))
    assert frame[4:8] == (42).to_bytes(4, "big") and frame[8:10] == b"\x00\x00"
    correlation_id, decoded = decode_response(18, 3, frame[4:])
    assert correlation_id == 42
    assert decoded.api_keys == body.api_keys and decoded.finalized_features_epoch == -1
