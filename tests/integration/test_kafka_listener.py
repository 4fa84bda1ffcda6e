"""The Kafka listener with Kafka's own clients (confluent-kafka, aiokafka) against real
broker processes: produce, fetch, offsets, metadata and admin through each API, a
leader killed under an idempotent producer, and bad requests on the raw socket.

Partitions are assigned, not subscribed, so these tests do not depend on consumer
groups (tests/integration/test_kafka_groups*.py covers those)."""

from __future__ import annotations

import asyncio
import socket
import struct
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

from tests.support import (
    FAST_REPLICATION,
    BrokerFactory,
    controller_of,
    leadership,
    run,
    start_cluster,
)

pytestmark = pytest.mark.slow

DEADLINE_S = 60.0


def _admin(brokers: BrokerFactory) -> AdminClient:
    return AdminClient({"bootstrap.servers": brokers.kafka_bootstrap()})


def _create(brokers: BrokerFactory, topic: str, partitions: int = 1, rf: int = 3) -> None:
    admin = _admin(brokers)
    for future in admin.create_topics([NewTopic(topic, partitions, rf)]).values():
        future.result(DEADLINE_S)
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        described = admin.list_topics(topic, timeout=10).topics[topic]
        ready = [p for p in described.partitions.values() if p.leader >= 0 and not p.error]
        if described.error is None and len(ready) == partitions:
            return
        time.sleep(0.2)
    raise AssertionError(f"topic {topic} has no leaders after {DEADLINE_S} s")


def _consume(brokers: BrokerFactory, topic: str, partitions: int, count: int) -> list:
    consumer = Consumer(
        {
            "bootstrap.servers": brokers.kafka_bootstrap(),
            "group.id": "unused",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    records = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(records) < count and time.monotonic() < deadline:
            for message in consumer.consume(1000, timeout=1):
                assert message.error() is None, message.error()
                records.append(message)
    finally:
        consumer.close()
    return records


def test_idempotent_lz4_producer_survives_a_leader_kill_without_duplicates(
    brokers: BrokerFactory,
) -> None:
    start_cluster(brokers, 3)
    _create(brokers, "events", partitions=1)
    producer = Producer(
        {
            "bootstrap.servers": brokers.kafka_bootstrap(),
            "acks": "all",
            "enable.idempotence": True,
            "compression.type": "lz4",
            "linger.ms": 5,
        }
    )
    acknowledged: list[bytes] = []
    failures: list[object] = []

    def delivered(error: object, message: object) -> None:
        if error is None:
            acknowledged.append(message.value())  # type: ignore[attr-defined]
        else:
            failures.append(error)

    total = 20_000
    for i in range(total):
        producer.produce(
            "events",
            key=b"key-%d" % (i % 97),
            value=b"value-%06d" % i,
            headers=[("seq", str(i).encode())],
            on_delivery=delivered,
        )
        if i == total // 2:
            assert producer.flush(DEADLINE_S) == 0
            leader = run(leadership(brokers.bootstrap, "events"))[0]["leader"]
            brokers.brokers[int(leader)].kill()
        producer.poll(0)
    assert producer.flush(DEADLINE_S) == 0
    assert failures == []
    assert len(acknowledged) == total
    records = _consume(brokers, "events", 1, total)
    values = [m.value() for m in records]
    assert sorted(values) == sorted(acknowledged)  # every record exactly once
    assert [m.offset() for m in records] == list(range(total))
    first = records[0]
    assert first.key() == b"key-0" and first.headers() == [("seq", b"0")]
    assert first.timestamp()[1] > 0


def test_aiokafka_round_trip_with_keys_headers_and_gzip(brokers: BrokerFactory) -> None:
    start_cluster(brokers, 3)
    _create(brokers, "aio", partitions=3)

    async def round_trip() -> list:
        producer = AIOKafkaProducer(
            bootstrap_servers=brokers.kafka_bootstrap(),
            acks="all",
            enable_idempotence=True,
            compression_type="gzip",
        )
        await producer.start()
        try:
            for i in range(300):
                await producer.send(
                    "aio", value=b"v%d" % i, key=b"k%d" % i, headers=[("h", b"%d" % i)]
                )
            await producer.flush()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=brokers.kafka_bootstrap())
        await consumer.start()
        try:
            partitions = [AioTopicPartition("aio", p) for p in range(3)]
            consumer.assign(partitions)
            await consumer.seek_to_beginning(*partitions)
            got: list = []
            loop = asyncio.get_running_loop()
            deadline = loop.time() + DEADLINE_S
            while len(got) < 300 and loop.time() < deadline:
                batches = await consumer.getmany(timeout_ms=1000)
                for records in batches.values():
                    got.extend(records)
            return got
        finally:
            await consumer.stop()

    got = run(round_trip())
    assert sorted((r.key, r.value) for r in got) == sorted(
        (b"k%d" % i, b"v%d" % i) for i in range(300)
    )
    assert all(list(r.headers) == [("h", r.value[1:])] for r in got)


def test_offsets_metadata_and_admin(brokers: BrokerFactory) -> None:
    start_cluster(brokers, 3, **{"num.partitions": "2", "default.replication.factor": "3"})
    _create(brokers, "admin", partitions=2, rf=2)
    admin = _admin(brokers)
    # No partitions or factor given (-1): the brokers' num.partitions and
    # default.replication.factor, as in Kafka.
    admin.create_topics([NewTopic("defaults")])["defaults"].result(DEADLINE_S)
    deadline = time.monotonic() + DEADLINE_S
    while not (defaults := admin.list_topics("defaults", timeout=10).topics["defaults"]).partitions:
        assert time.monotonic() < deadline, "the topic has no partitions yet"
        time.sleep(0.2)
    assert sorted(defaults.partitions) == [0, 1]
    assert all(len(p.replicas) == 3 for p in defaults.partitions.values())
    metadata = admin.list_topics(timeout=10)
    kafka_ports = {b.kafka_port for b in brokers.brokers.values()}
    assert {b.port for b in metadata.brokers.values()} == kafka_ports
    assert not kafka_ports & {b.port for b in brokers.brokers.values()}

    producer = Producer({"bootstrap.servers": brokers.kafka_bootstrap(), "acks": "all"})
    stamps = [1_700_000_000_000 + i * 1000 for i in range(10)]
    for stamp in stamps:
        producer.produce("admin", value=b"x", partition=0, timestamp=stamp)
    assert producer.flush(DEADLINE_S) == 0
    consumer = Consumer({"bootstrap.servers": brokers.kafka_bootstrap(), "group.id": "unused"})
    try:
        assert consumer.get_watermark_offsets(TopicPartition("admin", 0), timeout=10) == (0, 10)
        found = consumer.offsets_for_times([TopicPartition("admin", 0, stamps[4])], timeout=10)
        assert found[0].offset == 4
        later = consumer.offsets_for_times([TopicPartition("admin", 0, stamps[-1] + 1)], 10)
        assert later[0].offset == -1  # nothing that recent: the end
    finally:
        consumer.close()

    configs = admin.describe_configs([ConfigResource("topic", "admin")])
    described = next(iter(configs.values())).result(DEADLINE_S)
    assert described["min.insync.replicas"].value == "1"
    assert described["retention.ms"].is_default

    for future in admin.create_partitions([NewPartitions("admin", 3)]).values():
        future.result(DEADLINE_S)
    with pytest.raises(KafkaException, match="TOPIC_ALREADY_EXISTS"):
        admin.create_topics([NewTopic("admin", 1, 1)])["admin"].result(DEADLINE_S)
    dry_run = admin.create_topics([NewTopic("dry", 1, 1)], validate_only=True)
    dry_run["dry"].result(DEADLINE_S)
    assert "dry" not in admin.list_topics(timeout=10).topics
    admin.delete_topics(["admin"])["admin"].result(DEADLINE_S)
    deadline = time.monotonic() + DEADLINE_S
    while "admin" in admin.list_topics(timeout=10).topics:
        assert time.monotonic() < deadline, "the topic was not deleted"
        time.sleep(0.2)


def test_a_broker_that_just_registered_names_the_controller_to_the_first_admin_client(
    brokers: BrokerFactory,
) -> None:
    """The first CreateTopics of a client whose first Metadata reaches a broker that has
    not yet heard from the controller: the controller is paused while that broker
    registers, so its first UpdateMetadata comes a second late. Answered at once from the
    empty cache ("no controller, no broker but me"), librdkafka's admin client waited for
    a controller until its request timed out; held until the controller's word, it is
    sent to the controller and answered."""
    # Long enough that the paused controller keeps its session and its role.
    start_cluster(brokers, 2, **{"zookeeper.session.timeout.ms": "30000"})
    controller = brokers.brokers[controller_of(brokers.zk_connect)]
    controller.pause()
    try:
        newcomer = brokers.start(3, **FAST_REPLICATION)
        admin = AdminClient({"bootstrap.servers": newcomer.kafka_address})
        futures = admin.create_topics([NewTopic("late", 1, 3)], request_timeout=20)
        time.sleep(1.0)  # its Metadata has reached the newcomer, which has no metadata yet
    finally:
        controller.resume()
    for future in futures.values():
        future.result(DEADLINE_S)
    described = admin.list_topics("late", timeout=10)
    assert described.controller_id == controller.broker_id
    assert sorted(described.brokers) == [1, 2, 3]


# --------------------------------------------------------------------------- raw socket


def _request(
    api_key: int, version: int, correlation_id: int, body: bytes = b"", flexible: bool = False
) -> bytes:
    client_id = b"raw"
    header = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id
    if flexible:
        header += b"\x00"  # request header v2: no tagged fields
    return struct.pack(">i", len(header) + len(body)) + header + body


def _answer(sock: socket.socket) -> bytes | None:
    """One response frame, or None when the broker closed the connection."""
    head = sock.recv(4, socket.MSG_WAITALL)
    if len(head) < 4:
        return None
    (size,) = struct.unpack(">i", head)
    return sock.recv(size, socket.MSG_WAITALL)


def _closed(sock: socket.socket) -> bool:
    sock.settimeout(10)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_unsupported_and_malformed_requests_never_crash_the_broker(
    brokers: BrokerFactory,
) -> None:
    broker = brokers.start(1)
    assert broker.kafka_address is not None
    host, port = broker.kafka_address.rsplit(":", 1)

    def connect() -> socket.socket:
        return socket.create_connection((host, int(port)), timeout=10)

    with connect() as sock:  # an ApiVersions version above ours: v0 layout, error 35
        sock.sendall(_request(18, 9, 7, flexible=True))
        answer = _answer(sock)
        assert answer is not None
        correlation_id, error = struct.unpack_from(">ih", answer)
        assert (correlation_id, error) == (7, 35)
        (count,) = struct.unpack_from(">i", answer, 6)
        assert count > 5
    with connect() as sock:  # an API nobody serves: correlation id + 35, then closed
        sock.sendall(_request(999, 0, 8))
        assert _answer(sock) == struct.pack(">ih", 8, 35)
        assert _closed(sock)
    with connect() as sock:  # a served API at an unserved version
        sock.sendall(_request(0, 2, 9))
        assert _answer(sock) == struct.pack(">ih", 9, 35)
        assert _closed(sock)
    with connect() as sock:  # a Metadata body cut short: closed without an answer
        sock.sendall(_request(3, 1, 10, b"\x00\x00\x00\x05\x00"))
        assert _closed(sock)
    with connect() as sock:  # a Produce whose records are garbage: a typed error
        topic = b"nope"
        body = (
            struct.pack(">hhii", -1, 1, 1000, 1)
            + struct.pack(">h", len(topic))
            + topic
            + struct.pack(">iii", 1, 0, 5)
            + b"junk!"
        )
        sock.sendall(_request(0, 3, 11, body))
        answer = _answer(sock)
        assert answer is not None and struct.unpack_from(">i", answer)[0] == 11
    admin = _admin(brokers)  # still serving
    assert 1 in admin.list_topics(timeout=10).brokers
    assert broker.process is not None and broker.process.poll() is None
