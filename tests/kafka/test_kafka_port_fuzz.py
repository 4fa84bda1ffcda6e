"""Malformed and unsupported requests on the Kafka port never crash or hang a broker.

A seeded, bounded fuzz of one broker's Kafka listener with frames built by hand (so no
code under test tidies them up): random byte streams, bad size prefixes, unknown api
keys, unsupported versions, truncated and garbage bodies and mutated valid requests of
the APIs Kafka's clients use, and Produce requests whose record batches are broken
(CRC, magic, codec bits, transactional bit, counts, lengths, compressed garbage with a
correct CRC). Each case is sent on its own connection, which is then half-closed: the
broker must answer with well-formed frames for the request it read (or nothing) and
close, never hang. After every case the process must be alive and answer ApiVersions
on a fresh connection; at the end a confluent-kafka client lists the topics and the
records seeded before the run are all still there, unchanged.

Where the plan fixes an answer, it is checked exactly: an unknown api key or an
unsupported version gets the correlation id and UNSUPPORTED_VERSION (35); ApiVersions
of a version above the served range gets the v0 layout with 35 and the list (KIP-511);
a Produce of a broken batch gets a non-zero error for its partition and stores nothing;
a mutated or random body that still decodes (the wire tables are the oracle of that) is
answered, since a close then means a handler failed on what it was given.
"""

from __future__ import annotations

import random
import socket
import struct
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import crc32c
import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from spark_replica.errors import ProtocolError
from spark_replica.wire.kafka.versions import REQUESTS
from spark_replica.wire.primitives import Reader
from tests.kafka.clients import (
    API_VERSIONS_KEY,
    SOCKET_TIMEOUT_S,
    UNSUPPORTED_VERSION,
    Deliveries,
    KafkaRecord,
    consume,
    flush,
    kafka_consumer,
    kafka_producer,
    make_topic,
    parse_api_versions_v0,
    read_frame,
    served_versions,
)
from tests.support import BrokerFactory

pytestmark = pytest.mark.slow

SEED = 13
CASES = 3000
SEED_RECORDS = 200
MAX_FRAME_BYTES = 64 * 1024
SCRATCH = "fuzz-scratch"
PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, HEARTBEAT, SYNC_GROUP = 8, 9, 10, 12, 14
# Kafka's codec numbers in the batch attributes (bits 0-2), and the bits around them.
CODECS = (0, 1, 2, 3, 4)
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
# Offsets inside a v2 batch (Kafka's layout, which replog's stored header shares).
LENGTH_AT, MAGIC_AT, CRC_AT, ATTRIBUTES_AT, CRC_FROM = 8, 16, 17, 21, 21
LAST_DELTA_AT, COUNT_AT, RECORDS_AT = 23, 57, 61


# --------------------------------------------------------------------------- encoding


def string(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def array(items: list[bytes]) -> bytes:
    return struct.pack(">i", len(items)) + b"".join(items)


def frame(api_key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    payload = struct.pack(">hhi", api_key, version, correlation_id) + string("fuzz") + body
    return struct.pack(">i", len(payload)) + payload


def kafka_batch(
    count: int, codec: int = 0, producer_id: int = -1, base_sequence: int = -1
) -> bytes:
    """A valid v2 batch as a producer sends it, built by aiokafka (an oracle, tests only)."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=base_sequence,
        batch_size=1 << 20,
    )
    for n in range(count):
        builder.append(
            n,
            timestamp=1_700_000_000_000 + n,
            key=None if n % 3 == 0 else f"k{n}".encode(),
            value=f"fuzz-value-{n}".encode() * (n % 4),
            headers=[("h", b"v")] if n % 2 else [],
        )
    return bytes(builder.build())


def with_crc(batch: bytearray) -> bytes:
    """The batch with its CRC-32C recomputed, so a check gets past the CRC."""
    struct.pack_into(">I", batch, CRC_AT, crc32c.crc32c(bytes(batch[CRC_FROM:])))
    return bytes(batch)


def produce_v3(topic: str, partition: int, records: bytes, acks: int = -1) -> bytes:
    partitions = array([struct.pack(">i", partition) + struct.pack(">i", len(records)) + records])
    return string(None) + struct.pack(">hi", acks, 5000) + array([string(topic) + partitions])


def parse_produce_v3(payload: bytes) -> tuple[int, list[int]]:
    """(correlation id, the error code of each partition) of a Produce v3 answer."""
    pos = 0

    def take(fmt: str) -> tuple[int, ...]:
        nonlocal pos
        values = struct.unpack_from(fmt, payload, pos)
        pos += struct.calcsize(fmt)
        return values

    (correlation_id,) = take(">i")
    codes = []
    (topics,) = take(">i")
    for _ in range(topics):
        (length,) = take(">h")
        pos += length
        (partitions,) = take(">i")
        for _ in range(partitions):
            _, code, _, _ = take(">ihqq")
            codes.append(code)
    take(">i")  # throttle time
    assert pos == len(payload), "Produce v3 answer has trailing bytes"
    return correlation_id, codes


def samples() -> list[tuple[int, int, bytes]]:
    """Valid (api key, version, body) requests of the APIs Kafka's clients use, on the
    scratch topic: the material the mutations start from."""
    topic = string(SCRATCH)
    group = string("fuzz-group")
    return [
        (API_VERSIONS_KEY, 0, b""),
        (API_VERSIONS_KEY, 3, b"\x00\x05fuzz\x021\x00"),
        (METADATA, 1, array([topic])),
        (METADATA, 4, array([topic]) + b"\x00"),
        (PRODUCE, 3, produce_v3(SCRATCH, 0, kafka_batch(3))),
        (PRODUCE, 3, produce_v3(SCRATCH, 1, kafka_batch(5, codec=1))),
        (
            FETCH,
            4,
            struct.pack(">iiiib", -1, 0, 1, 1 << 20, 0)
            + array([topic + array([struct.pack(">iqi", 0, 0, 1 << 20)])]),
        ),
        (
            LIST_OFFSETS,
            1,
            struct.pack(">i", -1) + array([topic + array([struct.pack(">iq", 0, -1)])]),
        ),
        (FIND_COORDINATOR, 0, group),
        (FIND_COORDINATOR, 1, group + b"\x00"),
        (OFFSET_FETCH, 1, group + array([topic + array([struct.pack(">i", 0)])])),
        (HEARTBEAT, 0, group + struct.pack(">i", 1) + string("no-such-member")),
        (SYNC_GROUP, 0, group + struct.pack(">i", 1) + string("no-such-member") + array([])),
    ]


# --------------------------------------------------------------------------- mutations

BOUNDARY_INT32 = (0, -1, 1, 0x7FFFFFFF, -0x80000000, MAX_FRAME_BYTES + 1)


def mutate(body: bytes, rng: random.Random, keep: int = 0) -> bytes:
    """A few random edits after the first `keep` bytes: flips, cuts, insertions, and
    int32 fields set to boundary values (counts and lengths are int32s here)."""
    data = bytearray(body)
    for _ in range(rng.randint(1, 3)):
        kind = rng.choice(["flip", "cut", "insert", "int32", "int16"])
        at = rng.randint(keep, max(keep, len(data)))
        if kind == "flip" and at < len(data):
            data[at] ^= 1 << rng.randrange(8)
        elif kind == "cut":
            del data[at:]
        elif kind == "insert":
            data[at:at] = rng.randbytes(rng.randint(1, 16))
        elif kind == "int32" and at + 4 <= len(data):
            struct.pack_into(">i", data, at, rng.choice(BOUNDARY_INT32))
        elif kind == "int16" and at + 2 <= len(data):
            struct.pack_into(">h", data, at, rng.choice((0, -1, 0x7FFF, -0x8000)))
    return bytes(data)


def broken_batch(rng: random.Random) -> tuple[str, bytes]:
    """A record batch that must be refused, and what is wrong with it."""
    base = bytearray(kafka_batch(rng.randint(1, 6), codec=rng.choice(CODECS)))
    kind = rng.choice(
        [
            "crc",
            "magic",
            "codec",
            "transactional",
            "control",
            "count",
            "length",
            "cut",
            "garbage-compressed",
            "last-delta",
            "records",
        ]
    )
    if kind == "crc":
        base[rng.randrange(CRC_FROM, len(base))] ^= 0xFF
        return kind, bytes(base)
    if kind == "magic":
        base[MAGIC_AT] = rng.choice((0, 1, 3, 0xFF))
        return kind, with_crc(base)
    if kind == "codec":
        base[ATTRIBUTES_AT + 1] = (base[ATTRIBUTES_AT + 1] & ~0x07) | rng.choice((5, 6, 7))
        return kind, with_crc(base)
    if kind in ("transactional", "control"):
        base[ATTRIBUTES_AT + 1] |= TRANSACTIONAL_BIT if kind == "transactional" else CONTROL_BIT
        return kind, with_crc(base)
    if kind == "count":
        (count,) = struct.unpack_from(">i", base, COUNT_AT)
        struct.pack_into(">i", base, COUNT_AT, rng.choice((count + 1, count + 1000, -1, 0)))
        return kind, with_crc(base)
    if kind == "last-delta":
        (delta,) = struct.unpack_from(">i", base, LAST_DELTA_AT)
        struct.pack_into(">i", base, LAST_DELTA_AT, rng.choice((delta + 1, -1, 0x7FFFFFFF)))
        return kind, with_crc(base)
    if kind == "length":
        struct.pack_into(">i", base, LENGTH_AT, rng.choice((0, 1, len(base), 0x7FFFFFFF)))
        return kind, bytes(base)
    if kind == "cut":
        return kind, bytes(base[: rng.randrange(1, len(base))])
    if kind == "garbage-compressed":
        head = base[:RECORDS_AT]
        head[ATTRIBUTES_AT + 1] = (head[ATTRIBUTES_AT + 1] & ~0x07) | rng.choice((1, 2, 3, 4))
        garbage = head + rng.randbytes(rng.randint(1, 200))
        struct.pack_into(">i", garbage, LENGTH_AT, len(garbage) - 12)
        return kind, with_crc(garbage)
    # records: one uncompressed record whose bytes no longer match its length prefix
    # (a byte gone, or the prefix an overlong varint), the CRC made right again
    plain = bytearray(kafka_batch(1))
    if rng.random() < 0.5:
        del plain[rng.randrange(RECORDS_AT, len(plain))]
    else:
        plain[RECORDS_AT : RECORDS_AT + 1] = b"\xff" * 10
    struct.pack_into(">i", plain, LENGTH_AT, len(plain) - 12)
    return kind, with_crc(plain)


# --------------------------------------------------------------------------- the wire


@dataclass
class Case:
    """One fuzz case: the bytes to send, what they are, and an exact check if any."""

    what: str
    stream: bytes
    check: Callable[[list[bytes]], None] | None = None


def exchange(address: tuple[str, int], stream: bytes) -> list[bytes]:
    """Send `stream` on a new connection, half-close, collect the answer frames until the
    broker closes; a broker that neither answers nor closes fails the test."""
    received = bytearray()
    with socket.create_connection(address, timeout=SOCKET_TIMEOUT_S) as sock:
        sock.settimeout(SOCKET_TIMEOUT_S)
        try:
            sock.sendall(stream)
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the broker may close first; read what it sent
        while True:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            except TimeoutError:
                raise AssertionError("the broker neither answered nor closed") from None
            if not chunk:
                break
            received += chunk
    frames = []
    pos = 0
    while pos < len(received):
        assert len(received) - pos >= 4, "an answer cut in its size"
        (size,) = struct.unpack_from(">i", received, pos)
        assert 4 <= size <= len(received) - pos - 4, f"an answer of size {size} cut short"
        frames.append(bytes(received[pos + 4 : pos + 4 + size]))
        pos += 4 + size
    return frames


def expect_unsupported(correlation_id: int) -> Callable[[list[bytes]], None]:
    def check(frames: list[bytes]) -> None:
        assert len(frames) == 1, f"{len(frames)} answers"
        assert struct.unpack_from(">ih", frames[0]) == (correlation_id, UNSUPPORTED_VERSION)

    return check


def expect_api_versions_refusal(correlation_id: int) -> Callable[[list[bytes]], None]:
    def check(frames: list[bytes]) -> None:
        assert frames, "no answer"
        answered, code, served = parse_api_versions_v0(frames[0])
        assert (answered, code) == (correlation_id, UNSUPPORTED_VERSION)
        assert served.get(API_VERSIONS_KEY, (0, -1))[1] >= 3

    return check


def expect_produce_refused(correlation_id: int) -> Callable[[list[bytes]], None]:
    def check(frames: list[bytes]) -> None:
        assert len(frames) == 1, f"{len(frames)} answers"
        answered, codes = parse_produce_v3(frames[0])
        assert answered == correlation_id
        assert codes and all(code != 0 for code in codes), codes

    return check


def expect_answer_if_served(
    key: int, version: int, body: bytes, correlation_id: int
) -> Callable[[list[bytes]], None] | None:
    """A body that decodes (A's tables are the oracle of what decodes) must be answered:
    a closed connection then means a handler failed on what it was given. Produce with
    acks=0 has no answer."""
    try:
        request = REQUESTS[key].decode(version, Reader(body))
    except ProtocolError:
        return None
    if key == PRODUCE and request.acks == 0:
        return None

    def check(frames: list[bytes]) -> None:
        assert len(frames) == 1, f"a decodable request got {len(frames)} answers"
        assert struct.unpack_from(">i", frames[0]) == (correlation_id,)

    return check


def oracle_check(
    key: int, version: int, body: bytes, correlation_id: int
) -> Callable[[list[bytes]], None] | None:
    # ApiVersions v3's sample carries its header's tagged fields in front of the body.
    if key == API_VERSIONS_KEY:
        return None
    return expect_answer_if_served(key, version, body, correlation_id)


def answered_in_order(correlation_ids: list[int]) -> Callable[[list[bytes]], None]:
    """Every frame answered is the next request's, in order (the broker may stop early)."""

    def check(frames: list[bytes]) -> None:
        answered = [struct.unpack_from(">i", f)[0] for f in frames]
        assert answered == correlation_ids[: len(answered)], answered

    return check


# --------------------------------------------------------------------------- cases


def make_case(rng: random.Random, served: dict[int, tuple[int, int]]) -> Case:
    correlation_id = rng.randint(-(2**31), 2**31 - 1)
    kind = rng.choice(
        [
            "noise",
            "size",
            "unknown-key",
            "unsupported-version",
            "api-versions-above",
            "mutated",
            "mutated",
            "mutated",
            "truncated",
            "garbage-body",
            "bad-batch",
            "bad-batch",
            "pipelined",
        ]
    )
    if kind == "noise":
        return Case(kind, rng.randbytes(rng.randint(1, 300)))
    if kind == "size":
        size = rng.choice((-1, 0, 1, 7, MAX_FRAME_BYTES * 1000, 0x7FFFFFFF, -0x80000000))
        return Case(f"size {size}", struct.pack(">i", size) + rng.randbytes(rng.randint(0, 64)))
    if kind == "unknown-key":
        key = rng.choice([k for k in range(-5, 200) if k not in served] + [0x7FFF, -0x8000])
        return Case(
            f"api key {key}",
            frame(key, 0, correlation_id, rng.randbytes(rng.randint(0, 40))),
            expect_unsupported(correlation_id),
        )
    if kind == "unsupported-version":
        key = rng.choice([k for k in served if k != API_VERSIONS_KEY])
        low, high = served[key]
        version = rng.choice([v for v in (-1, -0x8000, 0x7FFF, high + 1, low - 1) if v != 0])
        if low <= version <= high:
            version = high + 1
        # A leading 0: no tagged fields, in case that version's header is flexible (the
        # header is read even when the version is not served; the body never is).
        body = b"\x00" + rng.randbytes(rng.randint(0, 40))
        return Case(
            f"api {key} v{version}",
            frame(key, version, correlation_id, body),
            expect_unsupported(correlation_id),
        )
    if kind == "api-versions-above":
        version = rng.randint(served[API_VERSIONS_KEY][1] + 1, 0x7FFF)
        # The header of a flexible version ends with its tagged fields (none, as clients
        # send it); the body of a version not served is never read.
        body = b"\x00" + rng.randbytes(rng.randint(0, 20))
        return Case(
            f"ApiVersions v{version}",
            frame(API_VERSIONS_KEY, version, correlation_id, body),
            expect_api_versions_refusal(correlation_id),
        )
    key, version, body = rng.choice(SAMPLES)
    if kind == "mutated":
        # Fetch keeps its first 8 bytes (replica id, max wait 0): a mutated wait would
        # park the request, which is a valid request, not bad input.
        body = mutate(body, rng, keep=8 if key == FETCH else 0)
        return Case(
            f"mutated api {key} v{version}",
            frame(key, version, correlation_id, body),
            oracle_check(key, version, body, correlation_id),
        )
    if kind == "truncated":
        whole = frame(key, version, correlation_id, body)
        cut = rng.randrange(4, len(whole))
        payload = whole[4:cut]
        if rng.random() < 0.5:  # a frame that says it is whole, holding a cut request
            return Case(
                f"cut api {key} v{version} at {cut}", struct.pack(">i", len(payload)) + payload
            )
        return Case(f"unfinished api {key} v{version} at {cut}", whole[:cut])
    if kind == "garbage-body":
        body = rng.randbytes(rng.randint(0, 200))
        return Case(
            f"garbage api {key} v{version}",
            frame(key, version, correlation_id, body),
            oracle_check(key, version, body, correlation_id),
        )
    if kind == "bad-batch":
        what, batch = broken_batch(rng)
        return Case(
            f"produce {what}",
            frame(PRODUCE, 3, correlation_id, produce_v3(SCRATCH, rng.randrange(2), batch)),
            expect_produce_refused(correlation_id),
        )
    ids = [rng.randint(0, 2**31 - 1) for _ in range(3)]
    # Not a Produce: a mutated one may say acks=0, which has no answer to wait for.
    middle_key, middle_version, middle_body = rng.choice([s for s in SAMPLES if s[0] != PRODUCE])
    stream = (
        frame(API_VERSIONS_KEY, 0, ids[0], b"")
        + frame(middle_key, middle_version, ids[1], mutate(middle_body, rng, keep=8))
        + frame(API_VERSIONS_KEY, 0, ids[2], b"")
    )
    return Case(f"pipelined around api {middle_key}", stream, answered_in_order(ids))


SAMPLES = samples()


# --------------------------------------------------------------------------- the test


def seed_records(bootstrap: str, topic: str) -> list[KafkaRecord]:
    deliveries = Deliveries()
    with kafka_producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5}
    ) as producer:
        for n in range(SEED_RECORDS):
            producer.produce(
                topic, key=f"seed-{n}".encode(), value=bytes([n % 256]) * n, on_delivery=deliveries
            )
        flush(producer)
    assert deliveries.failed == []
    return sorted(deliveries.acked, key=lambda r: r.offset)


def read_back(bootstrap: str, topic: str) -> list[KafkaRecord]:
    config = {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
    with kafka_consumer(config) as consumer:
        consumer.assign([TopicPartition(topic, 0, 0)])
        records = consume(consumer, lambda r: len(r) >= SEED_RECORDS)
        assert not consumer.consume(num_messages=1, timeout=1.0), "records appeared"
    return records


def test_fuzzed_requests_never_crash_or_hang_the_kafka_port(brokers: BrokerFactory) -> None:
    broker = brokers.start(1, **{"socket.request.max.bytes": str(MAX_FRAME_BYTES)})
    seeded_topic = f"fuzz-seeded-{uuid.uuid4().hex[:8]}"
    make_topic(brokers, seeded_topic, 1, rf=1)
    make_topic(brokers, SCRATCH, 2, rf=1)
    bootstrap = brokers.kafka_bootstrap()
    seeded = seed_records(bootstrap, seeded_topic)
    address = (broker.host, broker.kafka_port)
    served = served_versions(address)

    rng = random.Random(SEED)
    for number in range(CASES):
        case = make_case(rng, served)
        try:
            frames = exchange(address, case.stream)
            if case.check is not None:
                case.check(frames)
            assert broker.process is not None and broker.process.poll() is None, "broker died"
            served_versions(address)
        except AssertionError as exc:
            raise AssertionError(f"case {number} ({case.what}): {exc}") from exc

    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    assert {seeded_topic, SCRATCH} <= set(metadata.topics)
    assert read_back(bootstrap, seeded_topic) == seeded


def test_exact_refusals_keep_the_connection_where_kafka_does(brokers: BrokerFactory) -> None:
    """ApiVersions above the served range is answered in the v0 layout and the same
    connection goes on (KIP-511: the client retries with a version it can use)."""
    broker = brokers.start(1)
    address = (broker.host, broker.kafka_port)
    high = served_versions(address)[API_VERSIONS_KEY][1]
    with socket.create_connection(address, timeout=SOCKET_TIMEOUT_S) as sock:
        sock.settimeout(SOCKET_TIMEOUT_S)
        sock.sendall(frame(API_VERSIONS_KEY, high + 1, 7, b"\x00\x05fuzz\x021\x00"))
        expect_api_versions_refusal(7)([read_frame(sock)])
        sock.sendall(frame(API_VERSIONS_KEY, 0, 8, b""))
        answered, code, served = parse_api_versions_v0(read_frame(sock))
        assert (answered, code) == (8, 0)
        assert PRODUCE in served and FETCH in served


def raw_string(data: bytes) -> bytes:
    return struct.pack(">h", len(data)) + data


def test_group_ids_that_are_not_utf8_get_answers(brokers: BrokerFactory) -> None:
    """A group id is any bytes on Kafka's wire; one that is not UTF-8 (read with
    surrogateescape) is answered like any other, not a handler failure and a close.
    Found by the fuzz above: OffsetFetch of such a group failed in the offset store."""
    broker = brokers.start(1)
    make_topic(brokers, SCRATCH, 2, rf=1)
    address = (broker.host, broker.kafka_port)
    group = raw_string(b"fuzz-\xff\xfe-group")
    topic = string(SCRATCH)
    requests = [
        (FIND_COORDINATOR, 0, group),
        (OFFSET_FETCH, 1, group + array([topic + array([struct.pack(">i", 0)])])),
        (
            OFFSET_COMMIT,
            2,
            group
            + struct.pack(">i", -1)
            + string("")
            + struct.pack(">q", -1)
            + array([topic + array([struct.pack(">iq", 0, 5) + string("m")])]),
        ),
        (OFFSET_FETCH, 1, group + array([topic + array([struct.pack(">i", 0)])])),
        (HEARTBEAT, 0, group + struct.pack(">i", 1) + string("no-such-member")),
    ]
    for correlation_id, (key, version, body) in enumerate(requests):
        frames = exchange(address, frame(key, version, correlation_id, body))
        assert len(frames) == 1, f"api {key}: {len(frames)} answers"
        assert struct.unpack_from(">i", frames[0]) == (correlation_id,)
    # The first group request creates the offsets topic: the commit is stored once the
    # group's partition has a leader (until then it is answered "not available").
    deadline = time.monotonic() + 30
    while frames_offset(exchange(address, frame(OFFSET_FETCH, 1, 99, requests[1][2]))) != 5:
        assert time.monotonic() < deadline, "the commit of the non-UTF-8 group was not stored"
        exchange(address, frame(OFFSET_COMMIT, 2, 98, requests[2][2]))
        time.sleep(0.1)
    served_versions(address)


def frames_offset(frames: list[bytes]) -> int:
    """The committed offset in a one-partition OffsetFetch v1 answer."""
    (payload,) = frames
    (length,) = struct.unpack_from(">h", payload, 8)
    _, offset = struct.unpack_from(">iq", payload, 8 + 2 + length + 4)
    return offset
