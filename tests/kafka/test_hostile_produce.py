"""Produce requests built to cost the broker memory or time are refused cheaply.

One broker, spoken to over raw sockets on its Kafka listener (and, for Arrow payload
bombs, its replog listener): no client builds a batch that lies about its record count,
a compression bomb or a request naming one partition twice. Each answer is checked
exactly, and a well-behaved confluent-kafka producer shows that nobody else waits while
the bad requests are refused.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import cramjam
import crc32c
import numpy as np
import pyarrow as pa
import pytest
from confluent_kafka import Consumer, TopicPartition

from spark_replica.records import PAYLOAD_SCHEMA_NO_HEADERS, encode_batch
from spark_replica.tools.launcher.brokers import BrokerProcess
from spark_replica.tools.launcher.zookeeper import EmbeddedZooKeeper
from spark_replica.wire.native.produce import ProducePartition, ProduceRequest, ProduceTopic
from tests.kafka.clients import (
    SOCKET_TIMEOUT_S,
    flush,
    kafka_producer,
    make_topic,
    read_frame,
)
from tests.support import BrokerFactory
from tests.support_wire import RawConnection

pytestmark = pytest.mark.slow

PRODUCE_KEY, PRODUCE_VERSION = 0, 3
CORRUPT_MESSAGE, RECORD_TOO_LARGE, INVALID_RECORD = 2, 10, 87
ZSTD = 4
MAX_MESSAGE_BYTES = 1 << 20
BOMBS, BOMB_PARTITIONS = "bombs", 48
# Far past max.message.bytes, and past the 64 MiB the broker used to stop at whatever
# the topic said; zstd makes it about 8 KB.
BOMB_BYTES = 256 << 20
# Bombs laid end to end in each partition's records: they count against one bound.
BOMBS_PER_ENTRY = 4
PLAIN = "plain"
ANSWER_S = 1.0
# An Arrow payload bomb: its value decompresses to this much (the test builds it once).
ARROW_BOMB_BYTES = 128 << 20
TIMESTAMP = pa.timestamp("ms", tz="UTC")
RSS_GROWTH_MB = 50


@pytest.fixture(scope="module")
def kafka_broker(
    zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerFactory]:
    """One broker serving BOMBS (48 partitions, max.message.bytes 1 MiB) and PLAIN."""
    brokers = BrokerFactory(
        f"{zookeeper.connect_string}/test-{uuid.uuid4().hex[:12]}",
        tmp_path_factory.mktemp("hostile-produce"),
    )
    try:
        brokers.start(1)
        make_topic(
            brokers, BOMBS, BOMB_PARTITIONS, rf=1, **{"max.message.bytes": str(MAX_MESSAGE_BYTES)}
        )
        make_topic(brokers, PLAIN, 2, rf=1)
        yield brokers
    finally:
        brokers.stop_all()


# --------------------------------------------------------------------------- raw wire


def string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def zigzag(value: int) -> bytes:
    return uvarint((value << 1) ^ (value >> 63))


def v2_batch(records: bytes, *, count: int = 1, codec: int = 0) -> bytes:
    """A v2 batch around `records` (as a producer lays them out, maybe compressed),
    claiming `count` records, with a correct CRC-32C: only the claim may be a lie."""
    now = int(time.time() * 1000)
    after_crc = struct.pack(">hiqqqhii", codec, count - 1, now, now, -1, -1, -1, count) + records
    crc = crc32c.crc32c(after_crc)
    length = 4 + 1 + 4 + len(after_crc)  # leader epoch, magic, crc, the rest
    return struct.pack(">qiibI", 0, length, -1, 2, crc) + after_crc


def record(value_prefix: bytes, value_size: int) -> tuple[bytes, bytes]:
    """One record with a null key and a value of `value_size` bytes starting with
    `value_prefix`: (the bytes before the value's rest, the bytes after it)."""
    body_size = 4 + len(zigzag(value_size)) + value_size + 1
    head = zigzag(body_size) + b"\x00\x00\x00\x01" + zigzag(value_size) + value_prefix
    return head, b"\x00"


def zstd_bomb(value_size: int) -> bytes:
    """A batch of one record whose value is `value_size` zero bytes, zstd-compressed a
    mebibyte at a time (never held whole)."""
    head, tail = record(b"", value_size)
    compressor = cramjam.zstd.Compressor()
    compressor.compress(head)
    chunk = bytes(1 << 20)
    for _ in range(value_size // len(chunk)):
        compressor.compress(chunk)
    compressor.compress(bytes(value_size % len(chunk)) + tail)
    return v2_batch(bytes(compressor.finish()), codec=ZSTD)


def produce_frame(entries: list[tuple[str, int, bytes]], correlation_id: int = 7) -> bytes:
    """Produce v3, acks=1, one entry per (topic, partition, records), in the order given
    (a partition may appear twice, as no client would send it)."""
    by_topic: dict[str, list[bytes]] = {}
    for topic, partition, records in entries:
        by_topic.setdefault(topic, []).append(struct.pack(">ii", partition, len(records)) + records)
    body = struct.pack(">hhi", -1, 1, 30_000) + struct.pack(">i", len(by_topic))
    for topic, partitions in by_topic.items():
        body += string(topic) + struct.pack(">i", len(partitions)) + b"".join(partitions)
    header = struct.pack(">hhi", PRODUCE_KEY, PRODUCE_VERSION, correlation_id) + string("hostile")
    return struct.pack(">i", len(header) + len(body)) + header + body


def parse_produce_v3(payload: bytes) -> list[tuple[str, int, int]]:
    """(topic, partition, error code) of each partition answer, in order."""
    pos = 4  # correlation id
    answers = []
    (topics,) = struct.unpack_from(">i", payload, pos)
    pos += 4
    for _ in range(topics):
        (size,) = struct.unpack_from(">h", payload, pos)
        name = payload[pos + 2 : pos + 2 + size].decode()
        pos += 2 + size
        (partitions,) = struct.unpack_from(">i", payload, pos)
        pos += 4
        for _ in range(partitions):
            index, error = struct.unpack_from(">ih", payload, pos)
            answers.append((name, index, error))
            pos += 4 + 2 + 8 + 8  # index, error, base offset, log append time
    return answers


def send_produce(address: tuple[str, int], frame: bytes) -> list[tuple[str, int, int]]:
    with socket.create_connection(address, timeout=SOCKET_TIMEOUT_S) as sock:
        sock.settimeout(SOCKET_TIMEOUT_S)
        sock.sendall(frame)
        return parse_produce_v3(read_frame(sock))


def kafka_address(broker: BrokerProcess) -> tuple[str, int]:
    return (broker.host, broker.kafka_port)


def rss_mb(broker: BrokerProcess) -> float:
    status = Path(f"/proc/{broker.pid}/status").read_text()
    (line,) = [line for line in status.splitlines() if line.startswith("VmRSS:")]
    return int(line.split()[1]) / 1024


def end_offsets(bootstrap: str, topic: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        return [
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)
        ]
    finally:
        consumer.close()


# --------------------------------------------------------------------------- tests


def test_a_batch_claiming_two_billion_records_is_refused_at_once(
    kafka_broker: BrokerFactory,
) -> None:
    broker = kafka_broker.brokers[1]
    head, tail = record(b"v", 1)
    lying = v2_batch(head + tail, count=2**31 - 1)
    assert len(lying) == 69
    before = rss_mb(broker)
    started = time.monotonic()
    answers = send_produce(kafka_address(broker), produce_frame([(PLAIN, 0, lying)]))
    elapsed = time.monotonic() - started
    assert answers == [(PLAIN, 0, CORRUPT_MESSAGE)]
    assert elapsed < ANSWER_S, f"answered after {elapsed:.2f} s"
    growth = rss_mb(broker) - before
    assert growth < RSS_GROWTH_MB, f"broker RSS grew {growth:.0f} MB"


def test_zstd_bombs_are_refused_past_max_message_bytes_without_stalling_others(
    kafka_broker: BrokerFactory,
) -> None:
    """Requests naming 48 partitions, each with four bombs, sent back to back on
    their own thread, are each refused per partition (their records decompress only up
    to the topic's 1 MiB in all, off the loop), while a confluent-kafka producer's every
    record is acknowledged within a second."""
    broker = kafka_broker.brokers[1]
    bombs = zstd_bomb(BOMB_BYTES) * BOMBS_PER_ENTRY
    assert len(bombs) < 64 * 1024
    frame = produce_frame([(BOMBS, p, bombs) for p in range(BOMB_PARTITIONS)])
    answers: list[list[tuple[str, int, int]]] = []
    failures: list[BaseException] = []
    stop = threading.Event()

    def bombard() -> None:
        try:
            while not stop.is_set():
                answers.append(send_produce(kafka_address(broker), frame))
        except BaseException as exc:  # reported by the main thread
            failures.append(exc)

    bootstrap = kafka_broker.kafka_bootstrap()
    latencies = []
    with kafka_producer({"bootstrap.servers": bootstrap, "linger.ms": 0}) as producer:
        producer.produce(PLAIN, b"warm-up", partition=1)
        flush(producer)
        bomber = threading.Thread(target=bombard, daemon=True)
        bomber.start()
        try:
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                started = time.monotonic()
                producer.produce(PLAIN, b"well-behaved", partition=1)
                flush(producer)
                latencies.append(time.monotonic() - started)
                time.sleep(0.05)
        finally:
            stop.set()
            bomber.join(SOCKET_TIMEOUT_S * 2)
    assert not failures, failures
    assert answers, "no bomb request was answered"
    for answer in answers:
        assert [(t, p) for t, p, _ in answer] == [(BOMBS, p) for p in range(BOMB_PARTITIONS)]
        assert {error for _, _, error in answer} <= {RECORD_TOO_LARGE, CORRUPT_MESSAGE}
    assert max(latencies) < ANSWER_S, f"slowest produce {max(latencies):.2f} s"
    assert end_offsets(bootstrap, BOMBS, BOMB_PARTITIONS) == [0] * BOMB_PARTITIONS


def test_a_partition_named_twice_is_refused_and_nothing_appended(
    kafka_broker: BrokerFactory,
) -> None:
    broker = kafka_broker.brokers[1]
    head, tail = record(b"twice", 5)
    batch = v2_batch(head + tail)
    bootstrap = kafka_broker.kafka_bootstrap()
    before = end_offsets(bootstrap, PLAIN, 2)
    answers = send_produce(
        kafka_address(broker),
        produce_frame([(PLAIN, 0, batch), (PLAIN, 1, batch), (PLAIN, 0, batch)]),
    )
    assert sorted(answers) == [
        (PLAIN, 0, INVALID_RECORD),
        (PLAIN, 0, INVALID_RECORD),
        (PLAIN, 1, 0),
    ]
    after = end_offsets(bootstrap, PLAIN, 2)
    assert after == [before[0], before[1] + 1]


def arrow_bomb(value_size: int) -> bytes:
    """A replog batch of one record whose value is `value_size` zero bytes, its Arrow
    buffers zstd-compressed: a few kilobytes declaring the whole value."""
    offsets = pa.py_buffer(np.array([0, value_size], np.int32))
    value = pa.Array.from_buffers(pa.binary(), 1, [None, offsets, pa.py_buffer(bytes(value_size))])
    records = pa.RecordBatch.from_arrays(
        [pa.array([None], pa.binary()), value, pa.array([int(time.time() * 1000)], TIMESTAMP)],
        schema=PAYLOAD_SCHEMA_NO_HEADERS,
    )
    return bytes(encode_batch(records, compression="zstd"))


def test_replog_listener_refuses_arrow_bombs_and_repeated_partitions(
    kafka_broker: BrokerFactory,
) -> None:
    """A compressed payload declaring more than max.message.bytes is refused from its
    metadata, before Arrow allocates and decompresses it; a partition named twice is
    refused on this listener too."""
    broker = kafka_broker.brokers[1]
    bomb = arrow_bomb(ARROW_BOMB_BYTES)
    assert len(bomb) < 64 * 1024
    before = rss_mb(broker)
    with RawConnection((broker.host, broker.port)) as connection:
        answer = connection.call(
            ProduceRequest(
                acks=1,
                timeout_ms=30_000,
                topics=[
                    ProduceTopic(BOMBS, [ProducePartition(0, bomb)]),
                    ProduceTopic(PLAIN, [ProducePartition(0, bomb), ProducePartition(0, bomb)]),
                ],
            )
        )
    growth = rss_mb(broker) - before
    errors = [(t.topic, p.partition, p.error_code) for t in answer.topics for p in t.partitions]
    assert errors == [
        (BOMBS, 0, RECORD_TOO_LARGE),
        (PLAIN, 0, INVALID_RECORD),
        (PLAIN, 0, INVALID_RECORD),
    ]
    assert growth < RSS_GROWTH_MB, f"broker RSS grew {growth:.0f} MB"
