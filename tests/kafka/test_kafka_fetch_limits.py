"""Kafka fetches that clients can always read: compressed as produced (or as the topic
says), bounded by the bytes actually sent, and an out-of-range offset answered so that
auto.offset.reset runs. One broker each, real clients (confluent-kafka, aiokafka's batch
reader), raw frames where a client would hide the answer."""

from __future__ import annotations

import hashlib
import socket
import struct
import threading
import time
from typing import Any

import pytest
from aiokafka.record.default_records import DefaultRecordBatch
from confluent_kafka import TopicPartition

from spark_replica.records import build_batch
from spark_replica.tools.launcher.brokers import BrokerProcess
from spark_replica.wire.kafka.headers import encode_request
from spark_replica.wire.kafka.versions import RESPONSES
from spark_replica.wire.primitives import Reader
from spark_replica.wire.schema import Data
from tests.kafka.clients import (
    SOCKET_TIMEOUT_S,
    Deliveries,
    at_least,
    consume,
    flush,
    kafka_consumer,
    kafka_producer,
    make_topic,
    recv_exactly,
)
from tests.support import BrokerFactory
from tests.support_wire import RawConnection, produce_request

pytestmark = pytest.mark.slow

FETCH = 1
FETCH_VERSIONS = range(4, 12)
OFFSET_OUT_OF_RANGE = 1
CODECS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
MIB = 1024 * 1024


def raw_fetch(broker: BrokerProcess, topic: str, offset: int, version: int = 11) -> Any:
    """One partition's answer to a hand-made Fetch of partition 0 at `offset`."""
    partition = Data(partition=0, fetch_offset=offset, partition_max_bytes=MIB)
    body = Data(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=16 * MIB,
        topics=[Data(topic=topic, partitions=[partition])],
    )
    with socket.create_connection((broker.host, broker.kafka_port), SOCKET_TIMEOUT_S) as sock:
        sock.settimeout(SOCKET_TIMEOUT_S)
        sock.sendall(b"".join(bytes(b) for b in encode_request(FETCH, version, 7, "t", body)))
        (size,) = struct.unpack(">i", recv_exactly(sock, 4))
        reader = Reader(recv_exactly(sock, size))
    assert reader.int32() == 7
    (answer,) = RESPONSES[FETCH].decode(version, reader).responses
    return answer.partitions[0]


def batch_codecs(records: bytes) -> list[int]:
    """The codec bits of each Kafka batch in a fetched record set."""
    codecs, pos = [], 0
    while pos < len(records):
        (length,) = struct.unpack_from(">i", records, pos + 8)
        (attributes,) = struct.unpack_from(">h", records, pos + 21)
        codecs.append(attributes & 0x07)
        pos += 12 + length
    return codecs


def first_batch(records: bytes) -> bytes:
    """The first Kafka batch of a record set. aiokafka's batch reader takes everything
    after the header as the batch's records, and gzip reads on past the first member: the
    next batch's base offset, after its zero bytes, was read as a second member."""
    (length,) = struct.unpack_from(">i", records, 8)
    return records[: 12 + length]


def test_an_out_of_range_fetch_is_an_empty_record_set_and_consumers_reset(
    brokers: BrokerFactory,
) -> None:
    broker = brokers.start(1)
    bootstrap = brokers.kafka_bootstrap()
    make_topic(brokers, "ranged", 1, rf=1)
    with kafka_producer({"bootstrap.servers": bootstrap}) as producer:
        for i in range(5):
            producer.produce("ranged", value=b"r%d" % i, partition=0)
        flush(producer)
    for version in FETCH_VERSIONS:
        answer = raw_fetch(broker, "ranged", 1000, version)
        assert answer.error_code == OFFSET_OUT_OF_RANGE, version
        # librdkafka refuses a null record set ("invalid MessageSetSize -1")
        assert answer.records is not None and len(answer.records) == 0, version
        assert answer.high_watermark == 5, version
        if version >= 5:
            assert answer.log_start_offset == 0, version
    config = {"bootstrap.servers": bootstrap, "group.id": "ranged", "auto.offset.reset": "earliest"}
    with kafka_consumer(config) as consumer:
        consumer.assign([TopicPartition("ranged", 0, 1000)])
        records = consume(consumer, at_least(5), timeout_s=30)
    assert [r.value for r in records] == [b"r%d" % i for i in range(5)]


def test_fetched_batches_keep_the_producers_codec_or_take_the_topics(
    brokers: BrokerFactory,
) -> None:
    broker = brokers.start(1)
    bootstrap = brokers.kafka_bootstrap()
    topics = {"as-produced": "producer", **{f"as-{name}": name for name in CODECS}}
    for topic, compression_type in topics.items():
        make_topic(brokers, topic, 1, rf=1, **{"compression.type": compression_type})
    values = [b"value %d " % i * 40 for i in range(50)]
    config = {"bootstrap.servers": bootstrap, "compression.type": "zstd", "linger.ms": 100}
    with kafka_producer(config) as producer:
        for topic in topics:
            for value in values:
                producer.produce(topic, value=value, partition=0)
        flush(producer)
    expected = {"as-produced": CODECS["zstd"], **{f"as-{n}": bits for n, bits in CODECS.items()}}
    for topic, codec in expected.items():
        records = bytes(raw_fetch(broker, topic, 0).records)
        assert set(batch_codecs(records)) == {codec}, topic
        assert [r.value for r in DefaultRecordBatch(first_batch(records))][:1] == values[:1]
    # A client before Fetch v10 does not read zstd (Kafka refuses it such batches).
    assert set(batch_codecs(bytes(raw_fetch(broker, "as-zstd", 0, 9).records))) == {0}
    # librdkafka reads every codec as the broker writes it.
    consumer_config = {"bootstrap.servers": bootstrap, "group.id": "codecs"}
    with kafka_consumer(consumer_config) as consumer:
        consumer.assign([TopicPartition(topic, 0, 0) for topic in topics])
        records = consume(consumer, at_least(len(values) * len(topics)), timeout_s=30)
    assert sorted(r.value for r in records) == sorted(values * len(topics))


def digest(value: bytes | None) -> str:
    assert value is not None
    return hashlib.sha256(value).hexdigest()


class SmallProducer(threading.Thread):
    """Another client producing small records while the large ones are read; each
    delivery's latency is kept."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.topic = topic
        self.stop = threading.Event()
        self.ready = threading.Event()  # connected, metadata known: latencies from now on
        self.latencies: list[float] = []

    def run(self) -> None:
        with kafka_producer({"bootstrap.servers": self.bootstrap, "linger.ms": 0}) as producer:
            producer.produce(self.topic, value=b"warm-up")
            flush(producer)
            self.ready.set()
            while not self.stop.is_set():
                sent = time.monotonic()
                producer.produce(self.topic, value=b"small")
                flush(producer, timeout_s=10)
                self.latencies.append(time.monotonic() - sent)
                time.sleep(0.05)


def test_a_64_mib_record_is_read_and_the_record_after_it_while_others_produce(
    brokers: BrokerFactory,
) -> None:
    brokers.start(1, **{"message.max.bytes": str(80 * MIB)})
    bootstrap = brokers.kafka_bootstrap()
    make_topic(brokers, "huge", 1, rf=1, **{"max.message.bytes": str(70 * MIB)})
    make_topic(brokers, "busy", 1, rf=1)
    large = b"0123456789abcdef" * (4 * MIB)  # 64 MiB, compresses to kilobytes
    config = {
        "bootstrap.servers": bootstrap,
        "compression.type": "zstd",
        "message.max.bytes": 100_000_000,
    }
    deliveries = Deliveries()
    with kafka_producer(config) as producer:
        producer.produce("huge", value=large, partition=0, on_delivery=deliveries)
        producer.produce("huge", value=b"after", partition=0, on_delivery=deliveries)
        flush(producer)
    assert not deliveries.failed and len(deliveries.acked) == 2, deliveries.failed
    other = SmallProducer(bootstrap, "busy")
    other.start()
    try:
        assert other.ready.wait(30), "the other producer never delivered"
        consumer_config = {"bootstrap.servers": bootstrap, "group.id": "huge"}
        with kafka_consumer(consumer_config) as consumer:
            consumer.assign([TopicPartition("huge", 0, 0)])
            records = consume(consumer, at_least(2), timeout_s=60, batch=2)
    finally:
        other.stop.set()
        other.join(15)
    assert [r.offset for r in records] == [0, 1]
    assert digest(records[0].value) == digest(large) and records[1].value == b"after"
    assert other.latencies, "the other producer delivered nothing"
    assert max(other.latencies) < 1.0, other.latencies


def test_two_48_mib_records_stored_compressed_are_both_read(brokers: BrokerFactory) -> None:
    broker = brokers.start(1)
    bootstrap = brokers.kafka_bootstrap()
    # Sent uncompressed the two would make one 96 MiB answer, over librdkafka's
    # receive.message.max.bytes (100,000,000): the limit must count converted bytes.
    topics = {"sent-plain": "uncompressed", "sent-as-stored": "producer"}
    for topic, compression_type in topics.items():
        configs = {"compression.type": compression_type, "max.message.bytes": str(60 * MIB)}
        make_topic(brokers, topic, 1, rf=1, **configs)
    values = [bytes([65 + n]) * (48 * MIB) for n in range(2)]
    with RawConnection((broker.host, broker.port)) as connection:
        for topic in topics:
            for value in values:  # one zstd-compressed Arrow batch of a few KiB each
                answer = connection.call(
                    produce_request(topic, 0, build_batch([value], compression="zstd"))
                )
                assert answer.topics[0].partitions[0].error_code == 0
    for topic in topics:
        with kafka_consumer({"bootstrap.servers": bootstrap, "group.id": topic}) as consumer:
            consumer.assign([TopicPartition(topic, 0, 0)])
            records = consume(consumer, at_least(2), timeout_s=60, batch=2)
        assert [digest(r.value) for r in records] == [digest(v) for v in values], topic
