"""DeleteRecords through real brokers: Kafka's AdminClient.delete_records on the Kafka
listener moves the log start of a replicated partition on its leader, every follower
follows it from its fetch answers, and a new leader and a restarted replica keep it.
The answer comes once every replica in the ISR has moved its start (the low watermark),
on both listeners, or REQUEST_TIMED_OUT while one of them does not fetch.

One three-broker cluster serves the module; each test has its own topic.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from spark_replica.client import Admin, Cluster
from spark_replica.client.kafka_connection import KafkaConnection
from spark_replica.client.list_offsets import EARLIEST, list_offsets_at
from spark_replica.errors import LeaderNotAvailableError
from spark_replica.security.settings import SecurityConfig
from spark_replica.tools.launcher.zookeeper import EmbeddedZooKeeper
from spark_replica.topics import TopicPartition as ReplogPartition
from spark_replica.wire.schema import Data
from tests.support import BrokerFactory, create, leadership, produce, run, start_cluster

pytestmark = pytest.mark.slow

DEADLINE_S = 30.0
RECORDS = 100
DELETE_RECORDS = 21
NOT_LEADER_OR_FOLLOWER = 6
UNKNOWN_TOPIC_OR_PARTITION = 3
OFFSET_OUT_OF_RANGE = 1
REQUEST_TIMED_OUT = 7
# A follower paused by a test stays in the ISR this long (the cluster's tests' default,
# 2 s, could drop it while the request waits).
REPLICA_LAG_TIME_MAX_MS = "15000"
PAUSED_REQUEST_TIMEOUT_MS = 1_000
SEGMENT_BYTES = 1024  # the least a topic may set


@pytest.fixture(scope="module")
def cluster(
    zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerFactory]:
    factory = BrokerFactory(
        f"{zookeeper.connect_string}/test-{uuid.uuid4().hex[:12]}",
        tmp_path_factory.mktemp("delete-records"),
    )
    try:
        start_cluster(factory, 3, **{"replica.lag.time.max.ms": REPLICA_LAG_TIME_MAX_MS})
        yield factory
    finally:
        factory.stop_all()


def filled_topic(brokers: BrokerFactory, name: str) -> str:
    """A topic of one partition on all three brokers, holding RECORDS committed records in
    batches of ten, in segments small enough that deleting removes whole ones."""
    run(create(brokers.bootstrap, name, 1, 3, **{"segment.bytes": str(SEGMENT_BYTES)}))
    for start in range(0, RECORDS, 10):
        run(produce(brokers.bootstrap, name, [f"v{i}" for i in range(start, start + 10)]))
    return name


def delete_records(brokers: BrokerFactory, topic: str, offset: int) -> int:
    """The low watermark Kafka's AdminClient reports after deleting below `offset`."""
    admin = AdminClient({"bootstrap.servers": brokers.kafka_bootstrap()})
    futures = admin.delete_records([TopicPartition(topic, 0, offset)])
    (future,) = futures.values()
    return future.result(DEADLINE_S).low_watermark


def refused_with(brokers: BrokerFactory, topic: str, offset: int) -> str:
    with pytest.raises(KafkaException) as caught:
        delete_records(brokers, topic, offset)
    return caught.value.args[0].name()


def replica_starts(brokers: BrokerFactory, topic: str) -> dict[int, int | None]:
    """Each broker's own log start of partition 0, asked of that replica itself (None for a
    broker the metadata does not name yet, e.g. one restarted a moment ago)."""

    async def ask() -> dict[int, int]:
        cluster = Cluster(brokers.bootstrap)
        try:
            await cluster.refresh([topic])
            tp = ReplogPartition(topic, 0)
            starts: dict[int, int | None] = {}
            for broker_id in brokers.brokers:
                try:
                    found = await list_offsets_at(cluster, broker_id, [tp], EARLIEST, log_end=True)
                except LeaderNotAvailableError:
                    starts[broker_id] = None
                    continue
                starts[broker_id] = found[tp][0]
            return starts
        finally:
            await cluster.close()

    return run(ask())


def wait_for_replica_starts(brokers: BrokerFactory, topic: str, start: int) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while (starts := replica_starts(brokers, topic)) != dict.fromkeys(brokers.brokers, start):
        assert time.monotonic() < deadline, f"replica log starts {starts}, not all {start}"
        time.sleep(0.2)


def kafka_watermarks(brokers: BrokerFactory, topic: str) -> tuple[int, int]:
    """(EARLIEST, LATEST) through the Kafka listener, as a Kafka consumer sees them."""
    consumer = Consumer({"bootstrap.servers": brokers.kafka_bootstrap(), "group.id": "unused"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        consumer.close()


def first_offset_read_from_zero(brokers: BrokerFactory, topic: str) -> int:
    """Where a Kafka consumer asked to start at offset 0 (auto.offset.reset=earliest) lands."""
    consumer = Consumer(
        {
            "bootstrap.servers": brokers.kafka_bootstrap(),
            "group.id": "unused",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    deadline = time.monotonic() + DEADLINE_S
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is not None and message.error() is None:
                return message.offset()
    finally:
        consumer.close()
    raise AssertionError("the consumer read nothing")


def leader_of(brokers: BrokerFactory, topic: str) -> int:
    (partition,) = run(leadership(brokers.bootstrap, topic))
    leader = partition["leader"]
    assert isinstance(leader, int)
    return leader


def test_every_replica_and_a_new_leader_keep_the_new_start(cluster: BrokerFactory) -> None:
    topic = filled_topic(cluster, "moved")
    assert delete_records(cluster, topic, 40) == 40
    wait_for_replica_starts(cluster, topic, 40)
    assert kafka_watermarks(cluster, topic) == (40, RECORDS)
    assert first_offset_read_from_zero(cluster, topic) == 40
    assert delete_records(cluster, topic, 10) == 40, "the start never moves back"

    old_leader = leader_of(cluster, topic)
    cluster.brokers[old_leader].stop()
    deadline = time.monotonic() + DEADLINE_S
    while leader_of(cluster, topic) in (old_leader, -1):
        assert time.monotonic() < deadline, "no new leader"
        time.sleep(0.2)
    try:
        assert kafka_watermarks(cluster, topic)[0] == 40
        assert delete_records(cluster, topic, 55) == 55
    finally:
        cluster.start(old_leader)
    wait_for_replica_starts(cluster, topic, 55)


def test_minus_one_deletes_up_to_the_high_watermark(cluster: BrokerFactory) -> None:
    topic = filled_topic(cluster, "to-end")
    assert delete_records(cluster, topic, -1) == RECORDS
    wait_for_replica_starts(cluster, topic, RECORDS)
    assert kafka_watermarks(cluster, topic) == (RECORDS, RECORDS)


def raw_delete_records(
    brokers: BrokerFactory,
    broker_id: int,
    version: int,
    targets: dict[str, dict[int, int]],
    timeout_ms: int = 10_000,
) -> dict[tuple[str, int], tuple[int, int]]:
    """One DeleteRecords at `version` to one broker: (low watermark, error code) per partition."""
    broker = brokers.brokers[broker_id]
    body = Data(
        topics=[
            Data(
                name=topic,
                partitions=[
                    Data(partition_index=p, offset=offset) for p, offset in partitions.items()
                ],
            )
            for topic, partitions in targets.items()
        ],
        timeout_ms=timeout_ms,
    )

    async def call() -> Data:
        connection = KafkaConnection(
            (broker.host, broker.kafka_port), SecurityConfig(), "delete-records", DEADLINE_S
        )
        await connection.connect()
        try:
            return await connection.call((DELETE_RECORDS, version), body)
        finally:
            await connection.close()

    response = run(call())
    return {
        (topic.name, p.partition_index): (p.low_watermark, p.error_code)
        for topic in response.topics
        for p in topic.partitions
    }


def test_each_partition_is_refused_with_its_own_error(cluster: BrokerFactory) -> None:
    topic = filled_topic(cluster, "refused")
    assert refused_with(cluster, topic, RECORDS + 1) == "OFFSET_OUT_OF_RANGE"
    leader = leader_of(cluster, topic)
    follower = next(b for b in cluster.brokers if b != leader)
    for version in (0, 1, 2):
        answers = raw_delete_records(
            cluster, leader, version, {topic: {0: 5 + version, 7: 0}, "no-such-topic": {0: 0}}
        )
        assert answers == {
            (topic, 0): (5 + version, 0),
            (topic, 7): (-1, UNKNOWN_TOPIC_OR_PARTITION),
            ("no-such-topic", 0): (-1, UNKNOWN_TOPIC_OR_PARTITION),
        }
        answers = raw_delete_records(cluster, follower, version, {topic: {0: RECORDS}})
        assert answers == {(topic, 0): (-1, NOT_LEADER_OR_FOLLOWER)}
    answers = raw_delete_records(cluster, leader, 2, {topic: {0: -2}})
    assert answers == {(topic, 0): (-1, OFFSET_OUT_OF_RANGE)}
    assert kafka_watermarks(cluster, topic) == (7, RECORDS)


def native_delete_records(brokers: BrokerFactory, topic: str, offset: int) -> int:
    """The low watermark the replog listener answers (the native client's delete_records)."""

    async def call() -> int:
        cluster = Cluster(brokers.bootstrap)
        try:
            tp = ReplogPartition(topic, 0)
            outcome = (await Admin(cluster).delete_records({tp: offset}, DEADLINE_S))[tp]
            assert isinstance(outcome, int), outcome
            return outcome
        finally:
            await cluster.close()

    return run(call())


def test_the_answer_comes_once_every_replica_in_the_isr_has_moved_its_start(
    cluster: BrokerFactory,
) -> None:
    topic = filled_topic(cluster, "purgatory")
    for offset, delete in (
        (20, delete_records),
        (35, native_delete_records),
        (60, delete_records),
        (80, native_delete_records),
    ):
        assert delete(cluster, topic, offset) == offset
        starts = replica_starts(cluster, topic)
        assert starts == dict.fromkeys(cluster.brokers, offset), f"{delete.__name__}({offset})"


def test_a_paused_follower_in_the_isr_times_the_request_out(cluster: BrokerFactory) -> None:
    topic = filled_topic(cluster, "paused")
    leader = leader_of(cluster, topic)
    paused = next(b for b in cluster.brokers if b != leader)
    cluster.brokers[paused].pause()
    try:
        answers = raw_delete_records(
            cluster, leader, 2, {topic: {0: 30}}, timeout_ms=PAUSED_REQUEST_TIMEOUT_MS
        )
        assert answers == {(topic, 0): (-1, REQUEST_TIMED_OUT)}
        awake = [(b.host, b.port) for n, b in cluster.brokers.items() if n != paused]
        (described,) = run(leadership(awake, topic))
        assert paused in described["isr"], "the paused follower was still in the ISR"
    finally:
        cluster.brokers[paused].resume()
    wait_for_replica_starts(cluster, topic, 30)
    assert delete_records(cluster, topic, 30) == 30
