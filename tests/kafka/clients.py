"""Helpers for the tests that speak to replog's Kafka listener with Kafka's own clients.

The acceptance tests of the Kafka listener use confluent-kafka (librdkafka), aiokafka and
kcat exactly as a user's service would; these helpers keep every wait in them bounded
(each poll, flush and metadata request has a timeout, and every loop a deadline) and turn
what the clients hand back into plain values the tests compare. Raw frames (ApiVersions
by hand) are here too: the fuzz test asks them after each round whether the port still
answers, without trusting any of the code under test to build the question.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer
from aiokafka import TopicPartition as AioTopicPartition
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ClusterMetadata, TopicMetadata

from spark_replica.wire.kafka.headers import decode_response, encode_request
from spark_replica.wire.schema import Data
from tests.support import BrokerFactory, create, run

CLIENT_TIMEOUT_S = 60.0
POLL_S = 0.5
SOCKET_TIMEOUT_S = 10.0
API_VERSIONS_KEY = 18
UNSUPPORTED_VERSION = 35
FIND_COORDINATOR, TRANSACTION_KEY_TYPE = 10, 1
COORDINATOR_NOT_AVAILABLE = 15

Headers = list[tuple[str, bytes | None]]


@dataclass(frozen=True)
class KafkaRecord:
    """One record as a Kafka client saw it, with where it was stored."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp_ms: int


def record_of(message: Message) -> KafkaRecord:
    _, timestamp_ms = message.timestamp()
    return KafkaRecord(
        partition=message.partition(),
        offset=message.offset(),
        key=message.key(),
        value=message.value(),
        headers=[(k, v) for k, v in message.headers() or []],
        timestamp_ms=timestamp_ms,
    )


def wait_for_topic(
    bootstrap: str, topic: str, partitions: int, timeout_s: float = CLIENT_TIMEOUT_S
) -> ClusterMetadata:
    """Metadata from the Kafka listener once a broker of `bootstrap` names a leader for
    every partition of `topic`: a topic made through the replog listener reaches every
    broker's metadata a moment later."""
    return _wait_for_topic_on(bootstrap, topic, partitions, time.monotonic() + timeout_s)


def _wait_for_topic_on(
    address: str, topic: str, partitions: int, deadline: float
) -> ClusterMetadata:
    return _metadata_once(
        address,
        topic,
        lambda found: (
            found.error is None
            and len(found.partitions) == partitions
            and all(p.leader >= 0 for p in found.partitions.values())
        ),
        deadline,
    )


def leader_of(
    bootstrap: str, topic: str, partition: int, timeout_s: float = CLIENT_TIMEOUT_S
) -> int:
    """The leader a broker names for `partition`, asked again until it names one."""
    metadata = _metadata_once(
        bootstrap,
        topic,
        lambda found: partition in found.partitions and found.partitions[partition].leader >= 0,
        time.monotonic() + timeout_s,
    )
    return metadata.topics[topic].partitions[partition].leader


def _metadata_once(
    bootstrap: str, topic: str, ready: Callable[[TopicMetadata], bool], deadline: float
) -> ClusterMetadata:
    """Ask for `topic`'s metadata until what a broker answers is `ready`."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    last: object = None
    while time.monotonic() < deadline:
        try:
            metadata = admin.list_topics(topic=topic, timeout=5)
        except KafkaException as exc:
            last = exc
        else:
            last = found = metadata.topics.get(topic)
            if found is not None and ready(found):
                return metadata
        time.sleep(0.2)
    raise AssertionError(f"metadata of {topic} from {bootstrap} not as awaited (last: {last!r})")


def produce_all(
    producer: Producer, send: Callable[[], None], timeout_s: float = CLIENT_TIMEOUT_S
) -> None:
    """Call `send` (one produce()), waiting out a full local queue within a deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            send()
            return
        except BufferError:
            if time.monotonic() > deadline:
                raise
            producer.poll(0.05)


def flush(producer: Producer, timeout_s: float = CLIENT_TIMEOUT_S) -> None:
    remaining = producer.flush(timeout_s)
    assert remaining == 0, f"{remaining} records still unacknowledged after {timeout_s} s"


class Deliveries:
    """The producer's delivery reports: acknowledged records and failures."""

    def __init__(self) -> None:
        self.acked: list[KafkaRecord] = []
        self.failed: list[KafkaError] = []

    def __call__(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            self.failed.append(error)
        else:
            self.acked.append(record_of(message))


def consume(
    consumer: Consumer,
    until: Callable[[list[KafkaRecord]], bool],
    timeout_s: float = CLIENT_TIMEOUT_S,
    batch: int = 10_000,
) -> list[KafkaRecord]:
    """Records from consume() until `until(records)` holds; fail at the deadline or on a
    consumer error (end-of-partition events are not errors)."""
    records: list[KafkaRecord] = []
    deadline = time.monotonic() + timeout_s
    while not until(records):
        if time.monotonic() > deadline:
            raise AssertionError(
                f"consumer stopped short after {timeout_s} s: {len(records)} records"
            )
        for message in consumer.consume(num_messages=batch, timeout=POLL_S):
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    continue
                raise AssertionError(f"consumer error: {error}")
            records.append(record_of(message))
    return records


def at_least(count: int) -> Callable[[list[KafkaRecord]], bool]:
    return lambda records: len(records) >= count


@contextmanager
def kafka_producer(config: dict[str, Any]) -> Iterator[Producer]:
    """A confluent-kafka Producer closed whatever happens. Whatever is still queued when
    the block fails is purged first: close() would otherwise wait for it forever."""
    producer = Producer(config)
    try:
        yield producer
    finally:
        producer.purge()
        producer.flush(5)
        producer.close()


@contextmanager
def kafka_consumer(config: dict[str, Any]) -> Iterator[Consumer]:
    """A confluent-kafka Consumer closed whatever happens (close leaves its group)."""
    consumer = Consumer(config)
    try:
        yield consumer
    finally:
        consumer.close()


def by_key(records: Sequence[KafkaRecord]) -> dict[bytes | None, KafkaRecord]:
    found: dict[bytes | None, KafkaRecord] = {}
    for record in records:
        assert record.key not in found, f"record {record.key!r} read twice"
        found[record.key] = record
    return found


# --------------------------------------------------------------------------- raw frames


def api_versions_frame(correlation_id: int, version: int = 0) -> bytes:
    """An ApiVersions request built by hand: v0-v2 have no body; v3 is flexible (request
    header v2 with its tagged fields, then the client software name and version)."""
    header = struct.pack(">hhih", API_VERSIONS_KEY, version, correlation_id, 4) + b"fuzz"
    if version >= 3:
        header += b"\x00"  # no tagged fields
    # v3: compact strings (length + 1 as a varint) "fuzz" and "1", no tagged fields
    body = b"\x05fuzz\x021\x00" if version >= 3 else b""
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


def read_frame(sock: socket.socket) -> bytes:
    """One response frame's payload (after its size), or AssertionError on a close."""
    (size,) = struct.unpack(">i", recv_exactly(sock, 4))
    assert 0 < size < 1 << 24, f"response frame size {size}"
    return recv_exactly(sock, size)


def recv_exactly(sock: socket.socket, count: int) -> bytes:
    data = bytearray()
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise AssertionError(f"connection closed after {len(data)} of {count} bytes")
        data += chunk
    return bytes(data)


def parse_api_versions_v0(payload: bytes) -> tuple[int, int, dict[int, tuple[int, int]]]:
    """(correlation id, error code, {api key: (min, max)}) of a v0-layout answer."""
    correlation_id, error_code, count = struct.unpack_from(">ihi", payload, 0)
    assert 0 <= count < 1000, f"api count {count}"
    served = {}
    for n in range(count):
        key, low, high = struct.unpack_from(">hhh", payload, 10 + 6 * n)
        served[key] = (low, high)
    assert len(payload) == 10 + 6 * count, "ApiVersions v0 answer has trailing bytes"
    return correlation_id, error_code, served


def served_versions(address: tuple[str, int]) -> dict[int, tuple[int, int]]:
    """Ask the Kafka port for its ApiVersions (v0) on a fresh connection: the check that
    a broker process still answers, and which versions it advertises."""
    with socket.create_connection(address, timeout=SOCKET_TIMEOUT_S) as sock:
        sock.settimeout(SOCKET_TIMEOUT_S)
        sock.sendall(api_versions_frame(4242))
        correlation_id, error_code, served = parse_api_versions_v0(read_frame(sock))
    assert correlation_id == 4242
    assert error_code == 0, f"ApiVersions answered error {error_code}"
    assert API_VERSIONS_KEY in served
    return served


def make_topic(
    brokers: BrokerFactory, topic: str, partitions: int, rf: int = 3, **configs: str
) -> None:
    """Create `topic` through the replog listener and wait until every broker's Kafka
    listener serves it: the topics both worlds share are the same topics."""
    run(create(brokers.bootstrap, topic, partitions, rf, **configs))
    # Each broker's metadata cache fills on its own, and a client asks whichever it likes.
    deadline = time.monotonic() + CLIENT_TIMEOUT_S
    for address in brokers.kafka_bootstrap().split(","):
        _wait_for_topic_on(address, topic, partitions, deadline)


def read_to_end(bootstrap: str, topic: str, isolation: str, partition: int = 0) -> list[bytes]:
    """Every value confluent-kafka's consumer reads from `partition` of `topic` until it
    reports the partition's end (for read_committed: the last stable offset)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
        }
    )
    values: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, partition, 0)])
        deadline = time.monotonic() + CLIENT_TIMEOUT_S
        while time.monotonic() < deadline:
            for message in consumer.consume(num_messages=1000, timeout=POLL_S):
                error = message.error()
                if error is not None and error.code() == KafkaError._PARTITION_EOF:
                    return values
                assert error is None, f"consumer error: {error}"
                values.append(message.value())
        raise AssertionError(f"no end of {topic} within {CLIENT_TIMEOUT_S} s: {len(values)}")
    finally:
        consumer.close()


async def aiokafka_read(bootstrap: str, topic: str, isolation: str) -> tuple[list[bytes], int]:
    """aiokafka's values of partition 0 up to its end offset under `isolation`, and that
    end offset (ListOffsets LATEST: the LSO under read_committed)."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        isolation_level=isolation,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    await consumer.start()
    try:
        tp = AioTopicPartition(topic, 0)
        consumer.assign([tp])
        end = (await consumer.end_offsets([tp]))[tp]
        values: list[bytes] = []
        async with asyncio.timeout(CLIENT_TIMEOUT_S):
            while await consumer.position(tp) < end:
                fetched = await consumer.getmany(tp, timeout_ms=500)
                values += [record.value for record in fetched.get(tp, [])]
        return values, end
    finally:
        await consumer.stop()


def ask(cluster: BrokerFactory, broker_id: int, api_key: int, version: int, body: Data) -> Data:
    """One raw request to a broker's Kafka listener, and its decoded answer."""
    broker = cluster.brokers[broker_id]
    request = encode_request(api_key, version, 1, "transactions-probe", body)
    with socket.create_connection((broker.host, broker.kafka_port), SOCKET_TIMEOUT_S) as sock:
        sock.settimeout(SOCKET_TIMEOUT_S)
        sock.sendall(b"".join(bytes(part) for part in request))
        _, answer = decode_response(api_key, version, read_frame(sock))
    return answer


def coordinator_of(cluster: BrokerFactory, transactional_id: str) -> int:
    """The broker FindCoordinator (v3) names for the id, once one names it (a broker
    that is down is skipped)."""
    deadline = time.monotonic() + CLIENT_TIMEOUT_S
    body = Data(key=transactional_id, key_type=TRANSACTION_KEY_TYPE)
    while True:
        for broker_id in cluster.brokers:
            try:
                answer = ask(cluster, broker_id, FIND_COORDINATOR, 3, body)
            except OSError:
                continue
            if answer.error_code == 0:
                return int(answer.node_id)
            assert answer.error_code == COORDINATOR_NOT_AVAILABLE, answer
        assert time.monotonic() < deadline, f"no coordinator for {transactional_id}"
        time.sleep(POLL_S)
