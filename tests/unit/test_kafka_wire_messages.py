"""Every Kafka message table at every served version: round trips of generated values,
golden bytes of what real clients send and expect, and malformed input refused with
ProtocolError only."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_replica.errors import ProtocolError
from spark_replica.wire.kafka.headers import decode_request, encode_response
from spark_replica.wire.kafka.versions import REQUESTS, RESPONSES, SERVED, is_flexible
from spark_replica.wire.schema import Data, Field, Message

MESSAGES = [*REQUESTS.values(), *RESPONSES.values()]
CASES = [
    pytest.param(message, version, id=f"{message.name}-v{version}")
    for message in MESSAGES
    for version in range(message.versions[0], message.versions[1] + 1)
]

_INTS = {"int8": 7, "int16": 15, "int32": 31, "int64": 63}
_SCALARS: dict[str, st.SearchStrategy[Any]] = {
    **{name: st.integers(-(1 << bits), (1 << bits) - 1) for name, bits in _INTS.items()},
    "uint16": st.integers(0, 0xFFFF),
    "uint32": st.integers(0, 0xFFFFFFFF),
    "float64": st.floats(allow_nan=False),
    "bool": st.booleans(),
    "string": st.text(max_size=12),
    "bytes": st.binary(max_size=12),
    "records": st.binary(max_size=40),
    "uuid": st.uuids(),
}


def _within(bounds: tuple[int, int], version: int) -> bool:
    return bounds[0] <= version <= bounds[1]


def _present(field: Field, version: int, flexible: bool) -> bool:
    if not _within(field.versions, version):
        return False
    return field.tag is None or (flexible and _within(field.tagged, version))


def _value(field: Field, version: int, flexible: bool) -> st.SearchStrategy[Any]:
    if field.fields is not None:
        values = st.lists(_struct(field.fields, version, flexible), max_size=3)
    elif field.type.startswith("[]"):
        values = st.lists(_SCALARS[field.type[2:]], max_size=4)
    else:
        values = _SCALARS[field.type]
    return st.none() | values if _within(field.nullable, version) else values


def _struct(fields: list[Field], version: int, flexible: bool) -> st.SearchStrategy[Data]:
    entries = {
        field.attr: _value(field, version, flexible)
        if _present(field, version, flexible)
        else st.just(field.default)
        for field in fields
    }
    return st.fixed_dictionaries(entries).map(lambda values: Data(**values))


def _plain(value: Any) -> Any:
    """Decoded values with records (frame slices) as bytes, for comparison."""
    if isinstance(value, memoryview):
        return bytes(value)
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, Data):
        return Data(**{key: _plain(item) for key, item in vars(value).items()})
    return value


def test_tables_cover_exactly_the_served_versions() -> None:
    for key, message in REQUESTS.items():
        assert RESPONSES[key].versions == message.versions == SERVED[key]
        assert RESPONSES[key].flexible == message.flexible
    expected = {18: (0, 3), 3: (0, 9), 0: (3, 8), 1: (4, 11), 2: (1, 6), 23: (0, 4), 22: (0, 4)}
    expected |= {19: (0, 5), 20: (0, 4), 21: (0, 2), 37: (0, 2), 32: (0, 4), 17: (0, 1), 36: (0, 2)}
    expected |= {10: (0, 4), 11: (0, 7), 14: (0, 5), 12: (0, 4), 13: (0, 4), 8: (2, 8)}
    expected |= {9: (1, 7), 15: (0, 5), 16: (0, 4), 42: (0, 2)}
    expected |= {29: (0, 3), 30: (0, 3), 31: (0, 3)}
    expected |= {24: (0, 3), 25: (0, 3), 26: (0, 3), 27: (0, 1), 28: (0, 3), 65: (0, 0)}
    expected |= {66: (0, 1), 61: (0, 0)}
    assert expected == SERVED


@pytest.mark.parametrize(("message", "version"), CASES)
def test_round_trip(message: Message, version: int) -> None:
    @settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_struct(message.fields, version, message.is_flexible(version)))
    def check(value: Data) -> None:
        body = message.to_bytes(version, value)
        decoded = message.from_bytes(version, body)
        assert _plain(decoded) == value
        assert message.to_bytes(version, decoded) == body

    check()


@pytest.mark.slow
@pytest.mark.parametrize(("message", "version"), CASES)
def test_garbage_raises_protocol_error_only(message: Message, version: int) -> None:
    @settings(max_examples=40, deadline=None)
    @given(st.binary(max_size=64))
    def check(data: bytes) -> None:
        with contextlib.suppress(ProtocolError):
            message.from_bytes(version, data)

    check()


@pytest.mark.slow
@pytest.mark.parametrize(("message", "version"), CASES)
def test_truncated_and_flipped_encodings_raise_protocol_error_only(
    message: Message, version: int
) -> None:
    @settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_struct(message.fields, version, message.is_flexible(version)), st.data())
    def check(value: Data, data: st.DataObject) -> None:
        body = message.to_bytes(version, value)
        for cut in range(len(body)):
            with pytest.raises(ProtocolError):
                message.from_bytes(version, body[:cut])
        if body:
            index = data.draw(st.integers(0, len(body) - 1))
            flipped = bytearray(body)
            flipped[index] ^= data.draw(st.integers(1, 255))
            with contextlib.suppress(ProtocolError):
                message.from_bytes(version, flipped)

    check()


# ApiVersions v3 as confluent-kafka 2.16.1 (librdkafka 2.16.0) sends it, client.id "golden".
LIBRDKAFKA_API_VERSIONS = bytes.fromhex(
    "00120003000000010006676f6c64656e0017636f6e666c75656e742d6b61666b612d707974686f6e"
    "16322e31362e312d72646b61666b612d322e31362e3000"
)


def test_golden_api_versions_request_from_librdkafka() -> None:
    header, body = decode_request(LIBRDKAFKA_API_VERSIONS)
    assert (header.api_key, header.api_version, header.correlation_id) == (18, 3, 1)
    assert header.client_id == "golden"
    assert body.client_software_name == "confluent-kafka-python"
    assert body.client_software_version == "2.16.1-rdkafka-2.16.0"
    assert REQUESTS[18].to_bytes(3, body) == LIBRDKAFKA_API_VERSIONS[17:]


def test_golden_metadata_v9_response() -> None:
    body = Data(
        throttle_time_ms=0,
        brokers=[Data(node_id=1, host="h", port=9092, rack=None)],
        cluster_id="c",
        controller_id=1,
        topics=[
            Data(
                error_code=0,
                name="t",
                is_internal=False,
                partitions=[
                    Data(
                        error_code=0,
                        partition_index=0,
                        leader_id=1,
                        leader_epoch=5,
                        replica_nodes=[1],
                        isr_nodes=[1],
                        offline_replicas=[],
                    )
                ],
                topic_authorized_operations=-(1 << 31),
            )
        ],
        cluster_authorized_operations=-(1 << 31),
    )
    expected = bytes.fromhex(
        "00000007"  # size
        "0000002a"
        "00"  # correlation id, header tags (response header v1)
        "00000000"  # throttle
        "02"
        "00000001"
        "0268"
        "00002384"
        "00"
        "00"  # brokers: id, host, port, rack null, tags
        "0263"  # cluster id
        "00000001"  # controller
        "02"
        "0000"
        "0274"
        "00"  # topics: error, name, internal
        "02"
        "0000"
        "00000000"
        "00000001"
        "00000005"
        "020000000102000000010100"  # partition
        "80000000"
        "00"  # topic authorized operations, topic tags
        "80000000"
        "00"  # cluster authorized operations, body tags
    )
    frame = b"".join(encode_response(3, 9, 42, body))
    assert frame[4:] == expected[4:]
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4


def test_is_flexible_knows_unserved_versions_of_tabled_apis() -> None:
    assert is_flexible(18, 3) and is_flexible(18, 4) and not is_flexible(18, 2)
    assert is_flexible(3, 12) and not is_flexible(3, 8)
    assert not is_flexible(1, 11) and is_flexible(1, 12)
    assert not is_flexible(9999, 5)
