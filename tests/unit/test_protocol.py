"""Protocol codecs round-trip every message, and refuse truncated or hostile input."""

from __future__ import annotations

import pytest

from spark_replica.errors import ProtocolError
from spark_replica.wire.native import REQUEST_TYPES, RESPONSE_TYPES, ApiKey, is_supported
from spark_replica.wire.native.api_versions import ApiVersionRange, ApiVersionsResponse
from spark_replica.wire.native.controlled_shutdown import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    RemainingPartitions,
)
from spark_replica.wire.native.controller_requests import (
    ControllerHeader,
    EmptyResponse,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    PartitionError,
    PartitionLeaderState,
    StopReplicaRequest,
    StopReplicaTopic,
    TopicErrors,
    TopicLeaderStates,
    UpdateMetadataRequest,
)
from spark_replica.wire.native.fetch import (
    FetchPartition,
    FetchPartitionResult,
    FetchRequest,
    FetchResponse,
    FetchTopic,
    FetchTopicResult,
)
from spark_replica.wire.native.frames import (
    RequestHeader,
    ResponseHeader,
    encode_request,
    encode_response,
)
from spark_replica.wire.native.init_producer_id import (
    InitProducerIdRequest,
    InitProducerIdResponse,
)
from spark_replica.wire.native.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsPartitionResult,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
    ListOffsetsTopicResult,
)
from spark_replica.wire.native.metadata import (
    BrokerInfo,
    MetadataRequest,
    MetadataResponse,
    PartitionMetadata,
    TopicMetadata,
)
from spark_replica.wire.native.offsets_for_leader_epoch import (
    EpochEndOffset,
    EpochEndOffsetTopic,
    EpochQuery,
    EpochQueryTopic,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
)
from spark_replica.wire.native.produce import (
    ProducePartition,
    ProducePartitionResult,
    ProduceRequest,
    ProduceResponse,
    ProduceTopic,
    ProduceTopicResult,
)
from spark_replica.wire.native.topic_admin import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    NewTopic,
    PartitionCount,
    TopicResult,
    TopicResultsResponse,
)
from spark_replica.wire.primitives import Reader, Writer

HEADER = ControllerHeader(1, 7, 4242)
STATE = PartitionLeaderState(0, 2, 3, [2, 3], 5, [1, 2, 3])

MESSAGES = [
    ControlledShutdownRequest(3, 4242),
    ControlledShutdownResponse([RemainingPartitions("t", [1, 2])]),
    StopReplicaRequest(HEADER, True, [StopReplicaTopic("t", [0, 3])]),
    CreatePartitionsRequest([PartitionCount("t", 6)], 500),
    LeaderAndIsrRequest(HEADER, True, [TopicLeaderStates("t", [STATE])], [BrokerInfo(2, "h", 9)]),
    LeaderAndIsrResponse([TopicErrors("t", [PartitionError(0, 11, "stale")])]),
    UpdateMetadataRequest(HEADER, [BrokerInfo(1, "h", 9)], [TopicLeaderStates("t", [STATE])]),
    EmptyResponse(),
    OffsetsForLeaderEpochRequest([EpochQueryTopic("t", [EpochQuery(0, 3, 4)])], 2),
    OffsetsForLeaderEpochResponse([EpochEndOffsetTopic("t", [EpochEndOffset(0, 0, None, 3, 77)])]),
    ProduceRequest(-1, 1000, [ProduceTopic("t", [ProducePartition(0, b"abc")])]),
    ProduceResponse([ProduceTopicResult("t", [ProducePartitionResult(0, 0, None, 5, 0)])]),
    FetchRequest(500, 1, 1 << 20, [FetchTopic("t", [FetchPartition(2, 9, 1024, 3)])], 4),
    FetchResponse([FetchTopicResult("t", [FetchPartitionResult(2, 1, "far", 1, 0, 1, b"")])]),
    ListOffsetsRequest([ListOffsetsTopic("t", [ListOffsetsPartition(0, -2)])]),
    ListOffsetsResponse([ListOffsetsTopicResult("t", [ListOffsetsPartitionResult(0)])]),
    MetadataRequest(None),
    MetadataRequest(["a", "b"]),
    MetadataResponse(
        [BrokerInfo(1, "h", 9)], -1, [TopicMetadata("t", [PartitionMetadata(0, 1, 2, [1], [1])])]
    ),
    ApiVersionsResponse([ApiVersionRange(0, 0, 0)]),
    CreateTopicsRequest([NewTopic("t", 3, 1, {"retention.ms": "5"})], 100),
    DeleteTopicsRequest(["t"], 100),
    TopicResultsResponse([TopicResult("t", 36, "exists")]),
    InitProducerIdRequest(),
    InitProducerIdRequest("txn", 30_000, 1234, 5),
    InitProducerIdResponse(2**40, 32767),
]


def _normalise(message: object) -> object:
    """Compare bytes fields by value: readers hand out memoryviews."""
    import dataclasses

    if dataclasses.is_dataclass(message):
        return {f.name: _normalise(getattr(message, f.name)) for f in dataclasses.fields(message)}
    if isinstance(message, list):
        return [_normalise(m) for m in message]
    if isinstance(message, memoryview):
        return bytes(message)
    return message


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_every_message_round_trips(message: object) -> None:
    writer = Writer()
    message.write(writer)  # type: ignore[attr-defined]
    reader = Reader(writer.getvalue())
    decoded = type(message).read(reader)  # type: ignore[attr-defined]
    reader.expect_end()
    assert _normalise(decoded) == _normalise(message)


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_every_truncation_is_a_protocol_error(message: object) -> None:
    writer = Writer()
    message.write(writer)  # type: ignore[attr-defined]
    data = writer.getvalue()
    for cut in range(len(data)):
        reader = Reader(data[:cut])
        try:
            type(message).read(reader)  # type: ignore[attr-defined]
            reader.expect_end()
        except ProtocolError:
            continue
        pytest.fail(f"{type(message).__name__} cut at {cut} decoded without error")


def test_every_api_has_both_codecs_and_a_supported_version() -> None:
    for key in ApiKey:
        assert key in REQUEST_TYPES and key in RESPONSE_TYPES
        assert is_supported(key, 0)
    assert not is_supported(999, 0)
    assert not is_supported(ApiKey.PRODUCE, 7)


def test_huge_array_counts_are_refused_before_allocating() -> None:
    writer = Writer()
    writer.int32(2**31 - 1)
    with pytest.raises(ProtocolError, match="array count"):
        Reader(writer.getvalue()).array(lambda: 0)


def test_non_utf8_strings_survive_decoding_for_validation() -> None:
    raw = b"\x00\x02\xff\xfe"
    text = Reader(raw).string()
    assert text is not None
    writer = Writer()
    writer.string(text)
    assert writer.getvalue() == raw


def test_frames_carry_header_and_top_level_error() -> None:
    body = Writer()
    MetadataRequest(None).write(body)
    frame = encode_request(RequestHeader(3, 0, 77, "me"), body)
    reader = Reader(b"".join(frame)[4:])
    assert RequestHeader.read(reader) == RequestHeader(3, 0, 77, "me")
    answer = encode_response(ResponseHeader(77, 35, "no such api"), None)
    decoded = ResponseHeader.read(Reader(b"".join(answer)[4:]))
    assert decoded == ResponseHeader(77, 35, "no such api")


def test_overlong_strings_are_refused_when_encoding() -> None:
    with pytest.raises(ProtocolError, match="over the 32767 limit"):
        Writer().string("x" * 40_000)
