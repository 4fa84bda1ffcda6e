"""The replog protocol's transaction messages (FindCoordinator, InitProducerId v1,
AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit, Produce v1, and replog's own
RegisterSinkParticipants) round-trip at
every version they have, refuse truncated input, and refuse hostile counts and lengths
before sizing anything from them."""

from __future__ import annotations

import dataclasses
import struct
import tracemalloc
from typing import Any

import pytest

from spark_replica.errors import ProtocolError, UnsupportedVersionError
from spark_replica.wire.native import REQUEST_TYPES, RESPONSE_TYPES, SUPPORTED_VERSIONS, ApiKey
from spark_replica.wire.native.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    TxnPartitionResult,
    TxnTopic,
    TxnTopicResult,
)
from spark_replica.wire.native.end_txn import AddOffsetsToTxnRequest, EndTxnRequest
from spark_replica.wire.native.find_coordinator import (
    GROUP_KEY_TYPE,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from spark_replica.wire.native.init_producer_id import (
    InitProducerIdRequest,
    InitProducerIdResponse,
)
from spark_replica.wire.native.negotiation import BrokerVersions, request_version
from spark_replica.wire.native.produce import ProducePartition, ProduceRequest, ProduceTopic
from spark_replica.wire.native.register_sink_participants import (
    RegisterSinkParticipantsRequest,
    RegisterSinkParticipantsResponse,
    SinkParticipant,
    SinkParticipantTopic,
)
from spark_replica.wire.native.txn_offset_commit import (
    TxnOffset,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    TxnOffsetTopic,
)
from spark_replica.wire.primitives import Reader, Writer

HUGE = 2**31 - 1
# Far below what sizing a list from HUGE would take.
ALLOCATION_CEILING = 1 << 20

MESSAGES: list[Any] = [
    FindCoordinatorRequest("txn-a"),
    FindCoordinatorRequest("group-a", GROUP_KEY_TYPE),
    FindCoordinatorResponse(2, "broker-2", 9092),
    InitProducerIdRequest("txn-a", 15_000, 7, 3),
    InitProducerIdResponse(7, 4),
    AddPartitionsToTxnRequest("txn-a", 7, 4, [TxnTopic("t", [0, 2]), TxnTopic("u", [1])]),
    AddPartitionsToTxnResponse(
        [TxnTopicResult("t", [TxnPartitionResult(0), TxnPartitionResult(2, 3, "unknown")])]
    ),
    AddOffsetsToTxnRequest("txn-a", 7, 4, "group-a"),
    EndTxnRequest("txn-a", 7, 4, True),
    EndTxnRequest("txn-a", 7, 4, False),
    TxnOffsetCommitRequest(
        "txn-a",
        "group-a",
        7,
        4,
        [TxnOffsetTopic("t", [TxnOffset(0, 42, 3, "meta"), TxnOffset(1, 9)])],
        generation_id=5,
        member_id="member-1",
        group_instance_id="instance-1",
    ),
    TxnOffsetCommitRequest("txn-a", "group-a", 7, 4, []),
    TxnOffsetCommitResponse([TxnTopicResult("t", [TxnPartitionResult(0, 47, "fenced")])]),
    ProduceRequest(-1, 1000, [ProduceTopic("t", [ProducePartition(0, b"abc")])], "txn-a"),
    RegisterSinkParticipantsRequest(
        "replog-sink-q",
        7,
        4,
        2**40,
        [
            SinkParticipantTopic(
                "t", [SinkParticipant(0, 2**62 + 5, 3), SinkParticipant(2, 2**63 - 1, 0)]
            ),
            SinkParticipantTopic("u", []),
        ],
    ),
    RegisterSinkParticipantsResponse(True),
    RegisterSinkParticipantsResponse(False),
]


def _normalised(message: object) -> object:
    if dataclasses.is_dataclass(message):
        return {f.name: _normalised(getattr(message, f.name)) for f in dataclasses.fields(message)}
    if isinstance(message, list):
        return [_normalised(m) for m in message]
    if isinstance(message, memoryview):
        return bytes(message)
    return message


def _encoded(message: Any, version: int) -> bytes:
    writer = Writer()
    message.write(writer, version)
    return writer.getvalue()


def _latest(message: Any) -> int:
    return int(message.TABLE.versions[1])


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_each_message_round_trips_at_its_latest_version(message: Any) -> None:
    version = _latest(message)
    reader = Reader(_encoded(message, version))
    decoded = type(message).read(reader, version)
    reader.expect_end()
    assert _normalised(decoded) == _normalised(message)


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_every_truncation_is_a_protocol_error(message: Any) -> None:
    version = _latest(message)
    data = _encoded(message, version)
    for cut in range(len(data)):
        reader = Reader(data[:cut])
        with pytest.raises(ProtocolError):
            type(message).read(reader, version)
            reader.expect_end()


def test_the_new_apis_have_kafkas_numbers_and_both_codecs() -> None:
    numbers = {
        ApiKey.FIND_COORDINATOR: 10,
        ApiKey.ADD_PARTITIONS_TO_TXN: 24,
        ApiKey.ADD_OFFSETS_TO_TXN: 25,
        ApiKey.END_TXN: 26,
        ApiKey.TXN_OFFSET_COMMIT: 28,
    }
    for key, number in numbers.items():
        assert int(key) == number
        assert key in REQUEST_TYPES and key in RESPONSE_TYPES
        assert SUPPORTED_VERSIONS[key] == (0, 0)
    assert SUPPORTED_VERSIONS[ApiKey.INIT_PRODUCER_ID] == (0, 1)
    assert SUPPORTED_VERSIONS[ApiKey.PRODUCE] == (0, 1)


def test_replogs_own_registration_has_a_key_kafka_will_not_take() -> None:
    key = ApiKey.REGISTER_SINK_PARTICIPANTS
    assert int(key) == 1000
    assert key in REQUEST_TYPES and key in RESPONSE_TYPES
    assert SUPPORTED_VERSIONS[key] == (0, 0)


def test_produce_v0_keeps_its_bytes_and_v1_leads_with_the_transactional_id() -> None:
    plain = ProduceRequest(-1, 1000, [ProduceTopic("t", [ProducePartition(0, b"abc")])])
    v0 = _encoded(plain, 0)
    assert _encoded(plain, 1) == b"\xff\xff" + v0  # a null transactional id, then v0's bytes
    decoded = ProduceRequest.read(Reader(v0), 0)
    assert decoded.transactional_id is None
    transactional = dataclasses.replace(plain, transactional_id="txn-a")
    assert _encoded(transactional, 1) == struct.pack(">h", 5) + b"txn-a" + v0


def test_a_transactional_request_is_never_sent_at_a_version_that_drops_its_id() -> None:
    old_broker = BrokerVersions.version_zero_only()
    transactional = ProduceRequest(-1, 1000, [], "txn-a")
    with pytest.raises(UnsupportedVersionError, match="upgrade"):
        request_version(old_broker, transactional)
    with pytest.raises(UnsupportedVersionError, match="upgrade"):
        request_version(old_broker, InitProducerIdRequest("txn-a"))
    assert request_version(old_broker, InitProducerIdRequest()) == 0
    new_broker = BrokerVersions(
        {ApiKey.PRODUCE: (0, 1), ApiKey.INIT_PRODUCER_ID: (0, 1), ApiKey.END_TXN: (0, 0)}
    )
    assert request_version(new_broker, transactional) == 1
    assert request_version(new_broker, EndTxnRequest("txn-a", 7, 4, True)) == 0


def _hostile(prefix: bytes) -> bytes:
    return prefix + struct.pack(">i", HUGE) + bytes(16)


def _producer(transactional_id: bytes = b"txn") -> bytes:
    return struct.pack(">h", len(transactional_id)) + transactional_id + struct.pack(">qh", 7, 4)


HOSTILE: list[tuple[str, Any, bytes]] = [
    ("AddPartitionsToTxn topics", AddPartitionsToTxnRequest, _hostile(_producer())),
    (
        "AddPartitionsToTxn partition ids",
        AddPartitionsToTxnRequest,
        _hostile(_producer() + struct.pack(">ih", 1, 1) + b"t"),
    ),
    (
        "TxnOffsetCommit topics",
        TxnOffsetCommitRequest,
        _hostile(
            _producer()[:5]
            + struct.pack(">h", 1)
            + b"g"
            + struct.pack(">qhi", 7, 4, -1)
            + struct.pack(">hh", 0, -1)
        ),
    ),
    (
        "RegisterSinkParticipants topics",
        RegisterSinkParticipantsRequest,
        _hostile(_producer() + struct.pack(">q", 3)),
    ),
    (
        "RegisterSinkParticipants participants",
        RegisterSinkParticipantsRequest,
        _hostile(_producer() + struct.pack(">qih", 3, 1, 1) + b"t"),
    ),
    ("AddPartitionsToTxn results", AddPartitionsToTxnResponse, _hostile(b"")),
    ("TxnOffsetCommit results", TxnOffsetCommitResponse, _hostile(b"")),
]


@pytest.mark.parametrize(("what", "message_type", "data"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_counts_are_refused_before_allocating(
    what: str, message_type: Any, data: bytes
) -> None:
    tracemalloc.start()
    try:
        with pytest.raises(ProtocolError, match="count"):
            message_type.read(Reader(data), 0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < ALLOCATION_CEILING


def test_a_hostile_string_length_is_refused() -> None:
    data = struct.pack(">h", 30_000) + b"txn"
    with pytest.raises(ProtocolError):
        EndTxnRequest.read(Reader(data), 0)
