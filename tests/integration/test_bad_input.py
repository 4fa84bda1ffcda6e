"""Bad input against a real broker process: a typed answer, a live broker, data intact.

A broker faces every client on the network, buggy or hostile. Whatever arrives, it must
(a) answer with the exact typed error the protocol promises, or close the connection
when a frame cannot even be read, (b) keep running and serving new connections, and
(c) never lose, change or add to records it already holds. Each test asserts all three:
it sends its bad input over a raw socket (so nothing in the client library can tidy the
bytes up), checks the answer byte for byte, then checks that the broker process is alive,
answers ApiVersions and Metadata on a fresh connection, and still returns exactly the
records produced before the test (same offsets, keys, values, timestamps, HW and LEO).

The tests of this module share one broker (started with a 1 MiB request limit) and its
seeded records: a broker that survives every case in a row is a stronger claim than one
restarted for each, and it keeps the module fast.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from spark_replica.client import BrokerConnection
from spark_replica.errors import (
    BrokerResponseError,
    CorruptMessageError,
    InvalidConfigError,
    InvalidFetchSizeError,
    InvalidPartitionsError,
    InvalidRecordError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidRequiredAcksError,
    InvalidTopicError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
)
from spark_replica.records import (
    CRC_FIELD_OFFSET,
    DERIVED_PRODUCER_ID_BASE,
    HEADER_SIZE,
    build_batch,
)
from spark_replica.tools.launcher.zookeeper import EmbeddedZooKeeper
from spark_replica.wire.native import (
    REQUEST_TYPES,
    RESPONSE_TYPES,
    SUPPORTED_VERSIONS,
    ApiKey,
    ApiVersionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
    MetadataRequest,
    ProduceRequest,
)
from spark_replica.wire.native.acls import (
    AclFilter,
    CreateAclsRequest,
    DeleteAclsRequest,
    DescribeAclsRequest,
    WireAclBinding,
)
from spark_replica.wire.native.add_partitions_to_txn import AddPartitionsToTxnRequest, TxnTopic
from spark_replica.wire.native.controlled_shutdown import ControlledShutdownRequest
from spark_replica.wire.native.controller_requests import (
    ControllerHeader,
    LeaderAndIsrRequest,
    PartitionLeaderState,
    StopReplicaRequest,
    StopReplicaTopic,
    TopicLeaderStates,
    UpdateMetadataRequest,
)
from spark_replica.wire.native.delete_records import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from spark_replica.wire.native.end_txn import AddOffsetsToTxnRequest, EndTxnRequest
from spark_replica.wire.native.fetch import FetchResponse
from spark_replica.wire.native.find_coordinator import FindCoordinatorRequest
from spark_replica.wire.native.frames import SIZE
from spark_replica.wire.native.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsResponse,
    ListOffsetsTopic,
)
from spark_replica.wire.native.metadata import MetadataResponse
from spark_replica.wire.native.offsets_for_leader_epoch import (
    EpochQuery,
    EpochQueryTopic,
    OffsetsForLeaderEpochRequest,
)
from spark_replica.wire.native.produce import ProducePartition, ProduceResponse, ProduceTopic
from spark_replica.wire.native.register_sink_participants import (
    RegisterSinkParticipantsRequest,
    SinkParticipant,
    SinkParticipantTopic,
)
from spark_replica.wire.native.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
from spark_replica.wire.native.scram_credentials import (
    AlterUserScramCredentialsRequest,
    DescribeUserScramCredentialsRequest,
    ScramDeletion,
)
from spark_replica.wire.native.topic_admin import (
    CreatePartitionsRequest,
    NewTopic,
    PartitionCount,
    TopicResultsResponse,
)
from spark_replica.wire.native.txn_offset_commit import (
    TxnOffset,
    TxnOffsetCommitRequest,
    TxnOffsetTopic,
)
from spark_replica.wire.native.write_txn_markers import (
    MarkerTopic,
    TxnMarkerRequestEntry,
    WriteTxnMarkersRequest,
)
from spark_replica.wire.primitives import Writer
from spark_replica.zk import znodes
from tests.support import BrokerFactory, create_topic, run
from tests.support_wire import (
    CLIENT_ID,
    SEED_PARTITIONS,
    SEED_TOPIC,
    SOCKET_TIMEOUT_S,
    SeededBroker,
    body_of,
    encode_frame,
    fetch_request,
    produce_request,
    raw_string,
    rows_of,
    start_seeded_broker,
)

MAX_FRAME_BYTES = 1024 * 1024
NON_UTF8 = b"\xff\xfe"
NON_UTF8_STR = NON_UTF8.decode("utf-8", "surrogateescape")


# --------------------------------------------------------------------------- seeded broker


@pytest.fixture(scope="module")
def seeded(
    zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SeededBroker]:
    factory = BrokerFactory(
        f"{zookeeper.connect_string}/test-{uuid.uuid4().hex[:12]}",
        tmp_path_factory.mktemp("bad-input"),
    )
    yield from start_seeded_broker(factory, **{"socket.request.max.bytes": str(MAX_FRAME_BYTES)})


SINK_PRODUCER_ID = DERIVED_PRODUCER_ID_BASE + 1


def valid_bodies() -> dict[ApiKey, bytes]:
    """One well-formed request body per API, aimed at the seeded topic."""
    batch = build_batch(["never-appended"], timestamps=[1])
    return {
        ApiKey.PRODUCE: body_of(produce_request(SEED_TOPIC, 0, batch)),
        ApiKey.FETCH: body_of(fetch_request(SEED_TOPIC, [0, 1])),
        ApiKey.LIST_OFFSETS: body_of(
            ListOffsetsRequest([ListOffsetsTopic(SEED_TOPIC, [ListOffsetsPartition(0, -2)])])
        ),
        ApiKey.METADATA: body_of(MetadataRequest([SEED_TOPIC, "other"])),
        ApiKey.API_VERSIONS: body_of(ApiVersionsRequest()),
        ApiKey.CREATE_TOPICS: body_of(
            CreateTopicsRequest([NewTopic("never-created", 1, 1, {"retention.ms": "1"})], 1000)
        ),
        ApiKey.DELETE_TOPICS: body_of(DeleteTopicsRequest([SEED_TOPIC], 1000)),
        # Past any high watermark: refused with OFFSET_OUT_OF_RANGE, nothing deleted.
        ApiKey.DELETE_RECORDS: body_of(
            DeleteRecordsRequest(
                [DeleteRecordsTopic(SEED_TOPIC, [DeleteRecordsPartition(0, 1 << 40)])], 1000
            )
        ),
        # From a controller epoch no broker has seen yet and for no broker incarnation:
        # refused whole (stale broker epoch), so the seeded partitions keep their roles.
        ApiKey.LEADER_AND_ISR: body_of(
            LeaderAndIsrRequest(
                ControllerHeader(99, 0, -5),
                False,
                [TopicLeaderStates(SEED_TOPIC, [PartitionLeaderState(0, 99, 9, [99], 0, [99])])],
            )
        ),
        ApiKey.UPDATE_METADATA: body_of(UpdateMetadataRequest(ControllerHeader(99, 0, -5), [], [])),
        ApiKey.OFFSETS_FOR_LEADER_EPOCH: body_of(
            OffsetsForLeaderEpochRequest([EpochQueryTopic(SEED_TOPIC, [EpochQuery(0, 0)])])
        ),
        ApiKey.INIT_PRODUCER_ID: body_of(InitProducerIdRequest()),
        ApiKey.STOP_REPLICA: body_of(
            StopReplicaRequest(
                ControllerHeader(99, 0, -5), True, [StopReplicaTopic(SEED_TOPIC, [0])]
            )
        ),
        ApiKey.CREATE_PARTITIONS: body_of(
            CreatePartitionsRequest([PartitionCount("never-created", 2)], 1000)
        ),
        # For a broker id that is not registered: refused, nothing moves.
        ApiKey.CONTROLLED_SHUTDOWN: body_of(ControlledShutdownRequest(99, -5)),
        # A plaintext listener has no SASL: both are refused with ILLEGAL_SASL_STATE.
        ApiKey.SASL_HANDSHAKE: body_of(SaslHandshakeRequest("SCRAM-SHA-256")),
        ApiKey.SASL_AUTHENTICATE: body_of(SaslAuthenticateRequest(b"n,,n=a,r=b")),
        # Security admin requests that read, match nothing, or are refused per item.
        ApiKey.DESCRIBE_ACLS: body_of(DescribeAclsRequest(AclFilter(resource_name=SEED_TOPIC))),
        ApiKey.CREATE_ACLS: body_of(
            CreateAclsRequest([WireAclBinding(2, SEED_TOPIC, 3, "User:a", "*", 0, 3)])
        ),
        ApiKey.DELETE_ACLS: body_of(DeleteAclsRequest([AclFilter(principal="User:nobody")])),
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: body_of(
            DescribeUserScramCredentialsRequest(["nobody"])
        ),
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS: body_of(
            AlterUserScramCredentialsRequest([ScramDeletion("nobody", 1)])
        ),
        # For a topic that does not exist: UNKNOWN_TOPIC_OR_PARTITION, nothing written.
        ApiKey.WRITE_TXN_MARKERS: body_of(
            WriteTxnMarkersRequest(
                [TxnMarkerRequestEntry(99, 0, False, 0, [MarkerTopic("never-created", [0])])],
                1000,
            )
        ),
        # A key type no coordinator has: INVALID_REQUEST, no internal topic created.
        ApiKey.FIND_COORDINATOR: body_of(FindCoordinatorRequest("never-begun", key_type=7)),
        # A transactional id no coordinator holds (its topic does not exist yet): refused,
        # nothing stored.
        ApiKey.ADD_PARTITIONS_TO_TXN: body_of(
            AddPartitionsToTxnRequest("never-begun", 99, 0, [TxnTopic(SEED_TOPIC, [0])])
        ),
        ApiKey.ADD_OFFSETS_TO_TXN: body_of(AddOffsetsToTxnRequest("never-begun", 99, 0, "g")),
        ApiKey.END_TXN: body_of(EndTxnRequest("never-begun", 99, 0, True)),
        ApiKey.TXN_OFFSET_COMMIT: body_of(
            TxnOffsetCommitRequest(
                "never-begun", "g", 99, 0, [TxnOffsetTopic(SEED_TOPIC, [TxnOffset(0, 1)])]
            )
        ),
        ApiKey.REGISTER_SINK_PARTICIPANTS: body_of(
            RegisterSinkParticipantsRequest(
                "never-begun",
                99,
                0,
                1,
                [SinkParticipantTopic(SEED_TOPIC, [SinkParticipant(0, SINK_PRODUCER_ID, 1)])],
            )
        ),
    }


# --------------------------------------------------------------------------- unreadable frames
# A frame whose size or header cannot be read leaves no correlation id to answer to, and
# the byte stream cannot be resynchronised: the only safe move is to close that one
# connection, and only that one.


@pytest.mark.parametrize("size", [0, -1, -(2**31), 1, 7])
def test_frame_too_small_for_a_header_closes_the_connection(
    seeded: SeededBroker, size: int
) -> None:
    with seeded.connect() as conn:
        conn.send_bytes(SIZE.pack(size) + b"\x00" * max(size, 0))
        conn.assert_closed()
    seeded.assert_intact()


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(struct.pack(">hhi", 18, 0, 7), id="no-client-id-length"),
        pytest.param(struct.pack(">hhih", 18, 0, 7, 100) + b"abc", id="client-id-past-end"),
        pytest.param(struct.pack(">hhih", 18, 0, 7, 32767), id="client-id-max-length"),
        pytest.param(struct.pack(">hhih", 3, 0, 7, -2) + b"\x00" * 8, id="negative-length"),
        pytest.param(struct.pack(">hhi", 3, 0, 7) + b"\x00", id="half-a-length"),
    ],
)
def test_header_running_past_the_frame_closes_the_connection(
    seeded: SeededBroker, payload: bytes
) -> None:
    with seeded.connect() as conn:
        conn.send_bytes(SIZE.pack(len(payload)) + payload)
        conn.assert_closed()
    seeded.assert_intact()


def test_an_unreadable_frame_closes_only_its_own_connection(seeded: SeededBroker) -> None:
    with seeded.connect() as bystander, seeded.connect() as offender:
        bystander.assert_usable()
        offender.send_bytes(SIZE.pack(-5))
        offender.assert_closed()
        bystander.assert_usable()
    seeded.assert_intact()


# --------------------------------------------------------------------------- top-level errors
# A frame with a readable header is always answered, with its own correlation id, so a
# client can match the error to its request; the top-level code tells any client what
# went wrong without it having to know the API's response layout.


@pytest.mark.parametrize("api_key", [999, -1, 9, 12, 16, 32767, -32768])
def test_unknown_api_key_is_answered_with_unsupported_version(
    seeded: SeededBroker, api_key: int
) -> None:
    with seeded.connect() as conn:
        correlation_id = conn.send_frame(api_key, b"\x00\x00\x00\x01 any body at all")
        conn.expect_error(correlation_id, UnsupportedVersionError)
        conn.assert_usable()
    seeded.assert_intact()


@pytest.mark.parametrize("api_key", list(ApiKey), ids=lambda key: key.name)
def test_unknown_version_of_a_known_api_is_answered_with_unsupported_version(
    seeded: SeededBroker, api_key: ApiKey
) -> None:
    body = valid_bodies()[api_key]
    low, high = SUPPORTED_VERSIONS[api_key]
    before = seeded.topic_znodes()
    with seeded.connect() as conn:
        for version in (high + 1, low - 1, 32767, -32768):
            correlation_id = conn.send_frame(int(api_key), body, version=version)
            conn.expect_error(correlation_id, UnsupportedVersionError)
        conn.assert_usable()
    assert seeded.topic_znodes() == before
    seeded.assert_intact()


def test_client_raises_the_typed_error_for_an_unknown_api(seeded: SeededBroker) -> None:
    class UnknownRequest:
        API_KEY = 999

        def write(self, writer: Writer) -> None:
            writer.int32(0)

    async def scenario() -> None:
        conn = BrokerConnection(*seeded.address)
        await conn.connect()
        try:
            with pytest.raises(UnsupportedVersionError):
                await conn.send(UnknownRequest(), timeout_s=SOCKET_TIMEOUT_S)
            versions = await conn.send(ApiVersionsRequest(), timeout_s=SOCKET_TIMEOUT_S)
            assert versions.versions
        finally:
            await conn.close()

    run(scenario(), timeout_s=30)
    seeded.assert_intact()


def malformed_bodies() -> list[tuple[str, ApiKey, bytes]]:
    """Bodies of known APIs that cannot be decoded, each with a name for the failure."""
    cases: list[tuple[str, ApiKey, bytes]] = []
    for api_key, body in valid_bodies().items():
        # Every strict prefix: a body cut anywhere, down to nothing at all.
        cases += [(f"{api_key.name}[:{n}]", api_key, body[:n]) for n in range(len(body))]
        cases.append((f"{api_key.name}+junk", api_key, body + b"\x00"))
        cases.append((f"{api_key.name}+more-junk", api_key, body + b"junk" * 100))
    garbage = [
        ("metadata-count-negative", ApiKey.METADATA, struct.pack(">i", -2)),
        ("metadata-count-huge", ApiKey.METADATA, struct.pack(">i", 2**31 - 1)),
        ("metadata-null-name", ApiKey.METADATA, struct.pack(">ih", 1, -1)),
        ("metadata-negative-name", ApiKey.METADATA, struct.pack(">ih", 1, -7) + b"abcdefg"),
        ("produce-null-topics", ApiKey.PRODUCE, struct.pack(">hii", 1, 1000, -1)),
        (
            "produce-negative-bytes",
            ApiKey.PRODUCE,
            struct.pack(">hii", 1, 1000, 1)
            + raw_string(SEED_TOPIC.encode())
            + struct.pack(">iii", 1, 0, -5),
        ),
        (
            "produce-bytes-past-end",
            ApiKey.PRODUCE,
            struct.pack(">hii", 1, 1000, 1)
            + raw_string(SEED_TOPIC.encode())
            + struct.pack(">iii", 1, 0, 1 << 30)
            + b"\x00" * 64,
        ),
        ("fetch-all-ff", ApiKey.FETCH, b"\xff" * 64),
        (
            "create-null-configs",
            ApiKey.CREATE_TOPICS,
            struct.pack(">i", 1) + raw_string(b"x") + struct.pack(">ihii", 1, 1, -1, 1000),
        ),
        ("delete-huge-count", ApiKey.DELETE_TOPICS, struct.pack(">ii", 1 << 20, 1000)),
    ]
    return cases + garbage


def test_malformed_body_is_answered_with_invalid_request(seeded: SeededBroker) -> None:
    cases = malformed_bodies()
    before = seeded.topic_znodes()
    with seeded.connect() as conn:
        for name, api_key, body in cases:
            correlation_id = conn.send_frame(int(api_key), body)
            message = conn.expect_error(correlation_id, InvalidRequestError)
            assert api_key.name in message, name
        # Hundreds of bad requests later, the same connection is still in step.
        conn.assert_usable()
    assert seeded.topic_znodes() == before
    seeded.assert_intact()


def test_malformed_body_does_not_stop_pipelined_requests(seeded: SeededBroker) -> None:
    """Requests sent back to back around a bad one are each answered, in order."""
    bodies = valid_bodies()
    frames = [
        encode_frame(ApiKey.API_VERSIONS, b"", correlation_id=1),
        encode_frame(ApiKey.METADATA, b"\x00\x00", correlation_id=2),
        encode_frame(999, b"", correlation_id=3),
        encode_frame(ApiKey.METADATA, bodies[ApiKey.METADATA], correlation_id=4),
    ]
    with seeded.connect() as conn:
        conn.send_bytes(b"".join(frames))
        answers = [conn.read_answer() for _ in frames]
        assert [(a.correlation_id, a.error_code) for a in answers] == [
            (1, 0),
            (2, InvalidRequestError.code),
            (3, UnsupportedVersionError.code),
            (4, 0),
        ]
    seeded.assert_intact()


@pytest.mark.parametrize(
    "size",
    [MAX_FRAME_BYTES + 1, 2 * MAX_FRAME_BYTES, 2**31 - 1],
    ids=["limit+1", "2MiB", "int32-max"],
)
def test_frame_over_the_limit_is_refused_then_closed(seeded: SeededBroker, size: int) -> None:
    header = struct.pack(">hhi", int(ApiKey.PRODUCE), 0, 4242) + raw_string(CLIENT_ID)
    with seeded.connect() as conn:
        # Only the start of the body: the broker must answer without reading the rest.
        conn.send_bytes(SIZE.pack(size) + header + b"\x00" * 4096)
        message = conn.expect_error(4242, MessageTooLargeError)
        assert str(size) in message and str(MAX_FRAME_BYTES) in message
        conn.assert_closed()
    seeded.assert_intact()


def test_frame_exactly_at_the_limit_is_read(seeded: SeededBroker) -> None:
    """The limit is inclusive: such a frame is read whole and judged on its contents."""
    body = body_of(MetadataRequest([SEED_TOPIC]))
    overhead = len(encode_frame(ApiKey.METADATA, body)) - SIZE.size
    padded = body + b"\x00" * (MAX_FRAME_BYTES - overhead)
    with seeded.connect() as conn:
        frame = encode_frame(ApiKey.METADATA, padded, correlation_id=77)
        assert len(frame) - SIZE.size == MAX_FRAME_BYTES
        conn.send_bytes(frame)
        conn.expect_error(77, InvalidRequestError)  # the trailing padding, not the size
        conn.assert_usable()
    seeded.assert_intact()


# --------------------------------------------------------------------------- record batches
# A batch is checked whole before a byte of it is written: a flipped bit or a cut batch
# must be refused with CORRUPT_MESSAGE and leave the log exactly as it was, even when it
# arrives next to good batches in the same record set.


def corrupt_record_sets() -> dict[str, bytes]:
    good = build_batch(["good-1", "good-2"], keys=["a", "b"], timestamps=[5, 6])
    other = build_batch(["good-3"], timestamps=[7])

    def flipped(batch: bytes, index: int) -> bytes:
        data = bytearray(batch)
        data[index] ^= 0x01
        return bytes(data)

    return {
        "payload-byte-flipped": flipped(good, HEADER_SIZE + 10),
        "last-byte-flipped": flipped(good, len(good) - 1),
        "crc-field-flipped": flipped(good, CRC_FIELD_OFFSET),
        "timestamp-flipped": flipped(good, 40),
        "bad-magic": flipped(good, 16),
        "good-then-flipped": other + flipped(good, HEADER_SIZE + 3),
        "flipped-then-good": flipped(good, HEADER_SIZE + 3) + other,
        "truncated-by-one": good[:-1],
        "truncated-to-header": good[:HEADER_SIZE],
        "shorter-than-header": good[:30],
        "single-byte": b"\x00",
        "good-then-truncated": good + other[:-7],
        "good-then-junk": good + b"\x00" * 20,
        "length-too-long": good[:8] + struct.pack(">i", len(good)) + good[12:],
        "length-too-short": good[:8] + struct.pack(">i", HEADER_SIZE - 12 - 1) + good[12:],
    }


@pytest.mark.parametrize("acks", [1, -1])
def test_corrupt_batches_are_refused_and_nothing_is_appended(
    seeded: SeededBroker, acks: int
) -> None:
    with seeded.connect() as conn:
        for name, records in corrupt_record_sets().items():
            response: ProduceResponse = conn.call(produce_request(SEED_TOPIC, 0, records, acks))
            (topic,) = response.topics
            (result,) = topic.partitions
            assert (topic.topic, result.partition) == (SEED_TOPIC, 0)
            assert result.error_code == CorruptMessageError.code, (name, result.error_message)
            assert result.error_message, name
            assert result.base_offset == -1, name
    seeded.assert_intact()


def test_corrupt_batch_with_acks_zero_closes_the_connection(seeded: SeededBroker) -> None:
    """acks=0 gets no answer, not even an error: a refused one closes the connection, the
    only way to tell a client that reads no answers (Kafka's behaviour); nothing is stored."""
    bad = corrupt_record_sets()["payload-byte-flipped"]
    with seeded.connect() as conn:
        conn.send_bytes(
            encode_frame(ApiKey.PRODUCE, body_of(produce_request(SEED_TOPIC, 0, bad, 0)))
        )
        conn.assert_closed()
    seeded.assert_intact()


@pytest.mark.parametrize(
    "records_field",
    [struct.pack(">i", 0), struct.pack(">i", -1)],
    ids=["empty", "null"],
)
def test_empty_record_set_is_an_invalid_record(seeded: SeededBroker, records_field: bytes) -> None:
    body = (
        struct.pack(">hii", 1, 1000, 1)
        + raw_string(SEED_TOPIC.encode())
        + struct.pack(">ii", 1, 0)
        + records_field
    )
    with seeded.connect() as conn:
        response: ProduceResponse = conn.call_raw(ApiKey.PRODUCE, body)
        (result,) = response.topics[0].partitions
        assert result.error_code == InvalidRecordError.code, result.error_message
        assert result.base_offset == -1
    seeded.assert_intact()


def test_only_the_partition_with_the_bad_batch_is_refused(seeded: SeededBroker) -> None:
    topic = "mixed-" + uuid.uuid4().hex[:8]
    run(create_topic([seeded.address], topic, 1))
    good = build_batch(["kept"], keys=["k"], timestamps=[11])
    bad = corrupt_record_sets()["truncated-by-one"]
    request = ProduceRequest(
        1,
        10_000,
        [
            ProduceTopic(SEED_TOPIC, [ProducePartition(0, bad)]),
            ProduceTopic(topic, [ProducePartition(0, good)]),
        ],
    )
    with seeded.connect() as conn:
        response: ProduceResponse = conn.call(request)
        results = {t.topic: t.partitions[0] for t in response.topics}
        assert results[SEED_TOPIC].error_code == CorruptMessageError.code
        assert (results[topic].error_code, results[topic].base_offset) == (0, 0)
        fetched: FetchResponse = conn.call(fetch_request(topic, [0]))
        assert rows_of(fetched.topics[0].partitions[0].records) == [(0, b"k", b"kept", 11)]
    seeded.assert_intact()


# --------------------------------------------------------------------------- unknown targets
# A topic or partition the broker does not host is UNKNOWN_TOPIC_OR_PARTITION for that
# entry alone: retriable, so a client refreshes its metadata, and never a crash.


@pytest.mark.parametrize(
    ("topic", "partition"),
    [
        ("no-such-topic", 0),
        (SEED_TOPIC, SEED_PARTITIONS),
        (SEED_TOPIC, -1),
        (SEED_TOPIC, 2**31 - 1),
    ],
    ids=["unknown-topic", "partition-past-end", "negative-partition", "huge-partition"],
)
def test_unknown_topic_or_partition(seeded: SeededBroker, topic: str, partition: int) -> None:
    batch = build_batch(["lost"], timestamps=[1])
    code = UnknownTopicOrPartitionError.code
    with seeded.connect() as conn:
        produced: ProduceResponse = conn.call(produce_request(topic, partition, batch))
        assert [(p.partition, p.error_code) for p in produced.topics[0].partitions] == [
            (partition, code)
        ]
        fetched: FetchResponse = conn.call(fetch_request(topic, [partition]))
        assert [(p.partition, p.error_code) for p in fetched.topics[0].partitions] == [
            (partition, code)
        ]
        assert fetched.topics[0].partitions[0].records == b""
        listed: ListOffsetsResponse = conn.call(
            ListOffsetsRequest([ListOffsetsTopic(topic, [ListOffsetsPartition(partition, -1)])])
        )
        assert [(p.partition, p.error_code) for p in listed.topics[0].partitions] == [
            (partition, code)
        ]
    seeded.assert_intact()


def test_unknown_topic_in_metadata_and_delete(seeded: SeededBroker) -> None:
    with seeded.connect() as conn:
        metadata: MetadataResponse = conn.call(MetadataRequest(["no-such-topic", SEED_TOPIC]))
        assert [(t.topic, t.error_code) for t in metadata.topics] == [
            ("no-such-topic", UnknownTopicOrPartitionError.code),
            (SEED_TOPIC, 0),
        ]
        deleted: TopicResultsResponse = conn.call(DeleteTopicsRequest(["no-such-topic"], 1000))
        assert [(t.topic, t.error_code) for t in deleted.topics] == [
            ("no-such-topic", UnknownTopicOrPartitionError.code)
        ]
    seeded.assert_intact()


# --------------------------------------------------------------------------- offsets and sizes
# Offsets outside [log start, LEO] are OFFSET_OUT_OF_RANGE so a consumer can reset;
# the HW itself is a valid position that simply has nothing to read yet.


@pytest.mark.parametrize("offset", [-1, -(2**63), "leo+1", 2**63 - 1])
def test_fetch_outside_the_log_is_offset_out_of_range(
    seeded: SeededBroker, offset: int | str
) -> None:
    leo = len(seeded.expected[0])
    fetch_offset = leo + 1 if offset == "leo+1" else int(offset)
    with seeded.connect() as conn:
        response: FetchResponse = conn.call(fetch_request(SEED_TOPIC, [0], fetch_offset))
        (result,) = response.topics[0].partitions
        assert result.error_code == OffsetOutOfRangeError.code, result.error_message
        assert result.records == b""
    seeded.assert_intact()


def test_fetch_at_the_high_watermark_is_empty_without_error(seeded: SeededBroker) -> None:
    hw = len(seeded.expected[0])
    with seeded.connect() as conn:
        response: FetchResponse = conn.call(fetch_request(SEED_TOPIC, [0], hw))
        (result,) = response.topics[0].partitions
        assert (result.error_code, result.records) == (0, b"")
        assert (result.high_watermark, result.log_end_offset, result.log_start_offset) == (
            hw,
            hw,
            0,
        )
    seeded.assert_intact()


@pytest.mark.parametrize(
    ("max_bytes", "partition_max_bytes"),
    [(0, 1024), (-1, 1024), (1024, 0), (1024, -(2**31))],
    ids=["request-0", "request-negative", "partition-0", "partition-negative"],
)
def test_fetch_with_no_room_is_invalid_fetch_size(
    seeded: SeededBroker, max_bytes: int, partition_max_bytes: int
) -> None:
    request = fetch_request(
        SEED_TOPIC, [0, 1], max_bytes=max_bytes, partition_max_bytes=partition_max_bytes
    )
    with seeded.connect() as conn:
        response: FetchResponse = conn.call(request)
        assert [(p.partition, p.error_code) for p in response.topics[0].partitions] == [
            (0, InvalidFetchSizeError.code),
            (1, InvalidFetchSizeError.code),
        ]
    seeded.assert_intact()


@pytest.mark.parametrize("timestamp", [-3, -(2**63)])
def test_list_offsets_with_a_meaningless_negative_timestamp(
    seeded: SeededBroker, timestamp: int
) -> None:
    request = ListOffsetsRequest(
        [ListOffsetsTopic(SEED_TOPIC, [ListOffsetsPartition(0, timestamp)])]
    )
    with seeded.connect() as conn:
        response: ListOffsetsResponse = conn.call(request)
        (result,) = response.topics[0].partitions
        assert (result.error_code, result.offset) == (InvalidRequestError.code, -1)
    seeded.assert_intact()


# --------------------------------------------------------------------------- topic names
# Names are checked at every edge with Kafka's rules. A name that is not even UTF-8 is a
# bad value in a well-formed frame, so it gets INVALID_TOPIC for that topic, echoed back
# byte for byte, and the connection carries on.


def non_utf8_bodies() -> dict[ApiKey, bytes]:
    """Request bodies naming the topic b"\\xff\\xfe", encoded by hand."""
    name = raw_string(NON_UTF8)
    batch = build_batch(["never"], timestamps=[1])
    return {
        ApiKey.PRODUCE: struct.pack(">hii", 1, 1000, 1)
        + name
        + struct.pack(">iii", 1, 0, len(batch))
        + batch,
        ApiKey.FETCH: struct.pack(">iiiii", -1, 0, 1, 1 << 20, 1)
        + name
        + struct.pack(">iiiqi", 1, 0, -1, 0, 1 << 20),
        ApiKey.LIST_OFFSETS: struct.pack(">ii", -1, 1) + name + struct.pack(">iiiq", 1, 0, -1, -1),
        ApiKey.METADATA: struct.pack(">i", 1) + name,
        ApiKey.CREATE_TOPICS: struct.pack(">i", 1) + name + struct.pack(">ihii", 1, 1, 0, 1000),
        ApiKey.DELETE_TOPICS: struct.pack(">i", 1) + name + struct.pack(">i", 1000),
    }


def topic_errors(api_key: ApiKey, response: Any) -> list[tuple[str, int]]:
    """(topic, error code) of each topic, or of each partition for partitioned APIs."""
    if api_key in (ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.METADATA):
        return [(t.topic, t.error_code) for t in response.topics]
    return [(t.topic, p.error_code) for t in response.topics for p in t.partitions]


@pytest.mark.parametrize("api_key", list(non_utf8_bodies()), ids=lambda key: key.name)
def test_non_utf8_topic_name_is_an_invalid_topic(seeded: SeededBroker, api_key: ApiKey) -> None:
    before = seeded.topic_znodes()
    with seeded.connect() as conn:
        correlation_id = conn.send_frame(int(api_key), non_utf8_bodies()[api_key])
        answer = conn.read_answer()
        assert (answer.correlation_id, answer.error_code) == (correlation_id, 0)
        # The name comes back as the very bytes that were sent.
        assert raw_string(NON_UTF8) in bytes(answer.body.view[answer.body.pos :])
        response = RESPONSE_TYPES[api_key].read(answer.body)
        answer.body.expect_end()
        assert topic_errors(api_key, response) == [(NON_UTF8_STR, InvalidTopicError.code)]
        conn.assert_usable()
    assert seeded.topic_znodes() == before
    seeded.assert_intact()


def test_non_utf8_client_id_is_served_normally(seeded: SeededBroker) -> None:
    with seeded.connect() as conn:
        conn.send_bytes(
            encode_frame(ApiKey.API_VERSIONS, b"", correlation_id=9, client_id=NON_UTF8)
        )
        answer = conn.read_answer()
        assert (answer.correlation_id, answer.error_code) == (9, 0)
    seeded.assert_intact()


ILLEGAL_NAMES = {
    "space": "bad name",
    "slash": "a/b",
    "empty": "",
    "dot": ".",
    "dot-dot": "..",
    "250-chars": "x" * 250,
    "non-ascii": "caf\u00e9",
    "nul": "a\x00b",
    "colon": "a:b",
    "max-string": "y" * 32767,
}


@pytest.mark.parametrize("name", list(ILLEGAL_NAMES.values()), ids=list(ILLEGAL_NAMES))
def test_illegal_topic_name_is_refused_everywhere(seeded: SeededBroker, name: str) -> None:
    before = seeded.topic_znodes()
    with seeded.connect() as conn:
        created: TopicResultsResponse = conn.call(CreateTopicsRequest([NewTopic(name, 1, 1)]))
        assert [(t.topic, t.error_code) for t in created.topics] == [(name, InvalidTopicError.code)]
        metadata: MetadataResponse = conn.call(MetadataRequest([name]))
        assert [(t.topic, t.error_code) for t in metadata.topics] == [
            (name, InvalidTopicError.code)
        ]
        produced: ProduceResponse = conn.call(
            produce_request(name, 0, build_batch(["x"], timestamps=[1]))
        )
        assert topic_errors(ApiKey.PRODUCE, produced) == [(name, InvalidTopicError.code)]
        fetched: FetchResponse = conn.call(fetch_request(name, [0]))
        assert topic_errors(ApiKey.FETCH, fetched) == [(name, InvalidTopicError.code)]
    assert seeded.topic_znodes() == before
    seeded.assert_intact()


def test_topic_name_of_249_legal_characters_is_accepted(seeded: SeededBroker) -> None:
    name = ("Az09._-" * 36)[:249]
    assert len(name) == 249
    with seeded.connect() as conn:
        created: TopicResultsResponse = conn.call(CreateTopicsRequest([NewTopic(name, 1, 1)]))
        assert [(t.topic, t.error_code) for t in created.topics] == [(name, 0)]
    assert name in seeded.topic_znodes()[0]
    seeded.assert_intact()


# --------------------------------------------------------------------------- acks


@pytest.mark.parametrize("acks", [5, 2, -2, 32767, -32768])
def test_invalid_acks_is_refused_and_nothing_is_appended(seeded: SeededBroker, acks: int) -> None:
    batch = build_batch(["never-appended"], timestamps=[1])
    with seeded.connect() as conn:
        response: ProduceResponse = conn.call(produce_request(SEED_TOPIC, 0, batch, acks))
        (result,) = response.topics[0].partitions
        assert result.error_code == InvalidRequiredAcksError.code, result.error_message
        assert result.base_offset == -1
    seeded.assert_intact()


# --------------------------------------------------------------------------- topic creation
# A refused CreateTopics writes nothing: a half-made topic in ZooKeeper would be picked
# up by every broker. Each case checks both the code and that no znode appeared.


CREATE_CASES: dict[str, tuple[NewTopic, type[BrokerResponseError]]] = {
    "partitions-0": (NewTopic("t-p0", 0, 1), InvalidPartitionsError),
    # -1 asks for the broker's default (as in Kafka's CreateTopics); below it is invalid
    "partitions-negative": (NewTopic("t-pneg", -2, 1), InvalidPartitionsError),
    "partitions-too-many": (NewTopic("t-pmax", 2**31 - 1, 1), InvalidPartitionsError),
    "replication-above-brokers": (NewTopic("t-rf2", 1, 2), InvalidReplicationFactorError),
    "replication-0": (NewTopic("t-rf0", 1, 0), InvalidReplicationFactorError),
    "replication-negative": (NewTopic("t-rfneg", 1, -2), InvalidReplicationFactorError),
    "unknown-config": (NewTopic("t-cfg", 1, 1, {"no.such.config": "1"}), InvalidConfigError),
    "bad-config-value": (NewTopic("t-cfgv", 1, 1, {"retention.ms": "soon"}), InvalidConfigError),
    "config-below-minimum": (NewTopic("t-cfgm", 1, 1, {"segment.bytes": "1"}), InvalidConfigError),
    "long-unprintable-config-key": (
        NewTopic("t-cfgk", 1, 1, {"\x01" * 10_000: "1"}),
        InvalidConfigError,
    ),
    "long-unprintable-config-value": (
        NewTopic("t-cfgl", 1, 1, {"retention.ms": "\x01" * 10_000}),
        InvalidConfigError,
    ),
    "existing-name": (NewTopic(SEED_TOPIC, 1, 1), TopicAlreadyExistsError),
}


@pytest.mark.parametrize("case", list(CREATE_CASES))
def test_refused_create_topics_leaves_no_znode(seeded: SeededBroker, case: str) -> None:
    new, error = CREATE_CASES[case]
    before = seeded.topic_znodes()
    assignment_before = seeded.zk.get(znodes.topic_path(SEED_TOPIC))[0]
    with seeded.connect() as conn:
        response: TopicResultsResponse = conn.call(CreateTopicsRequest([new], 1000))
        (result,) = response.topics
        assert result.topic == new.topic
        assert result.error_code == error.code, result.error_message
        assert result.error_message
        conn.assert_usable()
    assert seeded.topic_znodes() == before
    assert seeded.zk.get(znodes.topic_path(SEED_TOPIC))[0] == assignment_before
    seeded.assert_intact()


def test_each_topic_of_a_create_request_is_judged_alone(seeded: SeededBroker) -> None:
    good = "created-" + uuid.uuid4().hex[:8]
    request = CreateTopicsRequest(
        [NewTopic("bad/one", 1, 1), NewTopic(good, 2, 1), NewTopic("t-zero", 0, 1)], 1000
    )
    before = seeded.topic_znodes()
    with seeded.connect() as conn:
        response: TopicResultsResponse = conn.call(request)
    assert [(t.topic, t.error_code) for t in response.topics] == [
        ("bad/one", InvalidTopicError.code),
        (good, 0),
        ("t-zero", InvalidPartitionsError.code),
    ]
    assert seeded.topic_znodes() == (before[0] | {good}, before[1] | {good})
    seeded.assert_intact()


def test_request_bodies_cover_every_api() -> None:
    """The cases above reach every API this build serves (guards against new APIs)."""
    assert set(valid_bodies()) == set(REQUEST_TYPES) == set(SUPPORTED_VERSIONS)
