"""A broker holding known records, and a raw socket to speak to it, for the tests of bad input.

`SeededBroker` starts one broker, writes known batches to SEED_TOPIC and can then check,
on fresh connections, that the process is alive, answers ApiVersions and Metadata, and
still returns exactly those records. `RawConnection` sends hand-made frames over a
blocking socket, so that nothing in the client library tidies the bytes up. Shared by
test_bad_input.py and test_frame_fuzz.py.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from kazoo.client import KazooClient

from spark_replica.errors import BrokerResponseError, error_for_code
from spark_replica.records import build_batch, decode_payload, iter_batches, verify_batch
from spark_replica.tools.launcher.brokers import BrokerProcess
from spark_replica.wire.native import (
    RESPONSE_TYPES,
    SUPPORTED_VERSIONS,
    ApiKey,
    ApiVersionsRequest,
    FetchRequest,
    ListOffsetsRequest,
    MetadataRequest,
    ProduceRequest,
)
from spark_replica.wire.native.fetch import FetchPartition, FetchResponse, FetchTopic
from spark_replica.wire.native.frames import SIZE, ResponseHeader
from spark_replica.wire.native.list_offsets import (
    LATEST_TIMESTAMP,
    ListOffsetsPartition,
    ListOffsetsResponse,
    ListOffsetsTopic,
)
from spark_replica.wire.native.metadata import MetadataResponse
from spark_replica.wire.native.produce import ProducePartition, ProduceTopic
from spark_replica.wire.primitives import Reader, Writer
from spark_replica.zk import znodes
from spark_replica.zk.session import connect as zk_session
from tests.support import BrokerFactory, create_topic, run

SOCKET_TIMEOUT_S = 5.0
SEED_TOPIC = "seeded-intact"
SEED_PARTITIONS = 2
CLIENT_ID = b"bad-input"

# (offset, key, value, timestamp ms) of one record
Row = tuple[int, bytes | None, bytes | None, int]


# --------------------------------------------------------------------------- raw wire


def encode_frame(
    api_key: int,
    body: bytes | bytearray,
    *,
    version: int = 0,
    correlation_id: int = 1,
    client_id: bytes | None = CLIENT_ID,
) -> bytes:
    """A request frame built by hand, so that any field can be wrong on purpose."""
    header = struct.pack(">hhi", api_key, version, correlation_id)
    header += struct.pack(">h", -1) if client_id is None else raw_string(client_id)
    payload = header + bytes(body)
    return SIZE.pack(len(payload)) + payload


def raw_string(data: bytes) -> bytes:
    """A protocol string holding exactly these bytes (UTF-8 or not)."""
    return struct.pack(">h", len(data)) + data


def body_of(request: Any) -> bytes:
    writer = Writer()
    request.write(writer)
    return writer.getvalue()


@dataclass
class Answer:
    """One response frame: its header and a reader positioned at its body."""

    correlation_id: int
    error_code: int
    error_message: str | None
    body: Reader


class RawConnection:
    """A blocking socket speaking the wire protocol by hand, every operation with a timeout."""

    def __init__(self, address: tuple[str, int], timeout_s: float = SOCKET_TIMEOUT_S) -> None:
        self.sock = socket.create_connection(address, timeout=timeout_s)
        self.sock.settimeout(timeout_s)
        self._next_correlation_id = 1000

    def __enter__(self) -> RawConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def correlation_id(self) -> int:
        self._next_correlation_id += 1
        return self._next_correlation_id

    def send_bytes(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send_frame(self, api_key: int, body: bytes, *, version: int = 0) -> int:
        """Send one request frame; return its correlation id."""
        correlation_id = self.correlation_id()
        self.send_bytes(encode_frame(api_key, body, version=version, correlation_id=correlation_id))
        return correlation_id

    def _recv_exactly(self, count: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < count:
            chunk = self.sock.recv(count - len(chunks))
            if not chunk:
                raise AssertionError(f"broker closed the connection after {len(chunks)} bytes")
            chunks += chunk
        return bytes(chunks)

    def read_answer(self) -> Answer:
        (size,) = SIZE.unpack(self._recv_exactly(SIZE.size))
        assert size > 0, f"response frame size {size}"
        reader = Reader(self._recv_exactly(size))
        header = ResponseHeader.read(reader)
        return Answer(header.correlation_id, header.error_code, header.error_message, reader)

    def expect_error(self, correlation_id: int, error: type[BrokerResponseError]) -> str:
        """Read one answer: a top-level `error` for `correlation_id`, nothing after it."""
        answer = self.read_answer()
        assert answer.correlation_id == correlation_id
        assert error_for_code(answer.error_code).__class__ is error, answer.error_message
        assert answer.error_code == error.code
        assert answer.error_message, "a top-level error carries a message"
        assert answer.body.remaining() == 0, "an error answer has no body"
        return answer.error_message

    def call_raw(self, api_key: ApiKey, body: bytes) -> Any:
        """Send a hand-made body of a known API; decode its answer or raise its typed error."""
        correlation_id = self.send_frame(int(api_key), body)
        answer = self.read_answer()
        assert answer.correlation_id == correlation_id
        if answer.error_code:
            raise error_for_code(answer.error_code, answer.error_message or "")
        response = RESPONSE_TYPES[api_key].read(answer.body)
        answer.body.expect_end()
        return response

    def call(self, request: Any) -> Any:
        return self.call_raw(request.API_KEY, body_of(request))

    def assert_closed(self) -> None:
        """The broker closes this connection without sending a single byte."""
        try:
            data = self.sock.recv(65536)
        except ConnectionResetError:
            return
        except TimeoutError:
            raise AssertionError("the broker kept the connection open") from None
        assert data == b"", f"expected a closed connection, got {data[:64]!r}"

    def assert_usable(self) -> None:
        """A valid request on this same connection is still answered normally."""
        versions = self.call(ApiVersionsRequest())
        assert {v.api_key for v in versions.versions} == {int(k) for k in SUPPORTED_VERSIONS}


# --------------------------------------------------------------------------- seeded broker


def seed_batches() -> dict[int, list[bytes]]:
    """Known batches per partition of SEED_TOPIC: several sizes, null and empty fields."""
    base = 1_700_000_000_000
    return {
        0: [
            build_batch(["p0-v0"], keys=["k0"], timestamps=[base]),
            build_batch(
                [f"p0-v{i}" for i in range(1, 5)],
                keys=[f"k{i}" for i in range(1, 5)],
                timestamps=[base + i for i in range(1, 5)],
            ),
            build_batch(
                [b"p0-v5", None, b"", b"\x00\xff", b"p0-v9"],
                keys=[None, b"k6", b"", None, b"k9"],
                timestamps=[base + 9, base + 5, base + 7, base + 8, base + 6],
            ),
        ],
        1: [build_batch(["p1-v0", "p1-v1", "p1-v2"], timestamps=[base, base, base])],
    }


def rows_of(records: bytes | memoryview) -> list[Row]:
    """Every record of whole, CRC-checked batches as (offset, key, value, timestamp)."""
    rows: list[Row] = []
    for header, batch in iter_batches(records):
        verify_batch(batch, header)
        payload = decode_payload(batch)
        keys = payload.column("key").to_pylist()
        values = payload.column("value").to_pylist()
        stamps = payload.column("timestamp").cast(pa.int64()).to_pylist()
        for i, (key, value, stamp) in enumerate(zip(keys, values, stamps, strict=True)):
            rows.append((header.base_offset + i, key, value, stamp))
    return rows


def fetch_request(
    topic: str,
    partitions: list[int],
    offset: int = 0,
    *,
    max_bytes: int = 1 << 24,
    partition_max_bytes: int = 1 << 24,
) -> FetchRequest:
    return FetchRequest(
        0,
        1,
        max_bytes,
        [FetchTopic(topic, [FetchPartition(p, offset, partition_max_bytes) for p in partitions])],
    )


def produce_request(topic: str, partition: int, records: bytes, acks: int = 1) -> ProduceRequest:
    return ProduceRequest(
        acks, 10_000, [ProduceTopic(topic, [ProducePartition(partition, records)])]
    )


@dataclass
class SeededBroker:
    """A running broker holding known records in SEED_TOPIC, and how to check on both."""

    broker: BrokerProcess
    zk: KazooClient
    expected: dict[int, list[Row]] = field(default_factory=dict)

    @property
    def address(self) -> tuple[str, int]:
        return (self.broker.host, self.broker.port)

    def connect(self) -> RawConnection:
        return RawConnection(self.address)

    def seed(self) -> None:
        run(create_topic([self.address], SEED_TOPIC, SEED_PARTITIONS))
        with self.connect() as conn:
            for partition, batches in seed_batches().items():
                rows: list[Row] = []
                for batch in batches:
                    response = conn.call(produce_request(SEED_TOPIC, partition, batch, acks=-1))
                    result = response.topics[0].partitions[0]
                    assert (result.error_code, result.base_offset) == (0, len(rows))
                    rows += [(len(rows) + r[0], *r[1:]) for r in rows_of(batch)]
                self.expected[partition] = rows
        for partition, rows in self.expected.items():
            assert [r[0] for r in rows] == list(range(len(rows))), partition
        self.assert_intact()

    def assert_alive(self) -> None:
        """The process runs and answers ApiVersions and Metadata on a new connection."""
        process = self.broker.process
        assert process is not None and process.poll() is None, "the broker process exited"
        with self.connect() as conn:
            versions = conn.call(ApiVersionsRequest())
            assert {(v.api_key, v.min_version, v.max_version) for v in versions.versions} == {
                (int(key), low, high) for key, (low, high) in SUPPORTED_VERSIONS.items()
            }
            metadata: MetadataResponse = conn.call(MetadataRequest([SEED_TOPIC]))
            assert [(b.broker_id, b.host, b.port) for b in metadata.brokers] == [
                (self.broker.broker_id, self.broker.host, self.broker.port)
            ]
            (topic,) = metadata.topics
            assert (topic.topic, topic.error_code) == (SEED_TOPIC, 0)
            assert [(p.partition, p.leader, p.error_code) for p in topic.partitions] == [
                (p, self.broker.broker_id, 0) for p in range(SEED_PARTITIONS)
            ]

    def assert_intact(self) -> None:
        """Alive, and every seeded record is readable, unchanged, with HW = LEO unchanged."""
        self.assert_alive()
        with self.connect() as conn:
            response: FetchResponse = conn.call(
                fetch_request(SEED_TOPIC, list(range(SEED_PARTITIONS)))
            )
            (topic,) = response.topics
            assert [p.partition for p in topic.partitions] == list(range(SEED_PARTITIONS))
            for result in topic.partitions:
                expected = self.expected[result.partition]
                assert result.error_code == 0, result.error_message
                assert (result.log_start_offset, result.high_watermark, result.log_end_offset) == (
                    0,
                    len(expected),
                    len(expected),
                )
                assert rows_of(result.records) == expected
            latest: ListOffsetsResponse = conn.call(
                ListOffsetsRequest(
                    [
                        ListOffsetsTopic(
                            SEED_TOPIC,
                            [
                                ListOffsetsPartition(p, LATEST_TIMESTAMP)
                                for p in range(SEED_PARTITIONS)
                            ],
                        )
                    ]
                )
            )
            assert [(p.error_code, p.offset) for p in latest.topics[0].partitions] == [
                (0, len(self.expected[p])) for p in range(SEED_PARTITIONS)
            ]

    def topic_znodes(self) -> tuple[set[str], set[str]]:
        """Children of /brokers/topics and /config/topics in this broker's chroot."""
        return (
            set(self.zk.get_children(znodes.TOPICS_PATH)),
            set(self.zk.get_children(znodes.TOPIC_CONFIG_PATH)),
        )


def start_seeded_broker(
    factory: BrokerFactory, extra_topics: dict[str, int] | None = None, **overrides: str
) -> Iterator[SeededBroker]:
    """Start a broker, seed it (and make `extra_topics`: name -> partitions) and yield it;
    stop everything afterwards. The body of a fixture."""
    broker = factory.start(1, **overrides)
    zk = zk_session(factory.zk_connect)
    try:
        seeded = SeededBroker(broker, zk)
        seeded.seed()
        for topic, partitions in (extra_topics or {}).items():
            run(create_topic([seeded.address], topic, partitions))
        yield seeded
    finally:
        zk.stop()
        zk.close()
        factory.stop_all()
