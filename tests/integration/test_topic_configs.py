"""Altering topic configs on a running broker: `replog configs alter` writes ZooKeeper, the
broker follows `/config/changes` and applies the new settings to its live partitions."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from spark_replica.client import Cluster, Consumer, Producer, ProducerConfig
from spark_replica.errors import InvalidConfigError, OffsetOutOfRangeError
from spark_replica.tools.launcher.brokers import BrokerProcess
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.list_offsets import EARLIEST_TIMESTAMP
from spark_replica.zk import topic_store, znodes
from spark_replica.zk.session import connect
from tests.support import BrokerFactory, create_topic, replog, replog_in_process, run

pytestmark = pytest.mark.slow

APPLY_TIMEOUT_S = 20
RECORD = "x" * 300


def alter(broker: BrokerProcess, topic: str, *flags: str) -> None:
    """Alter through the CLI (its main() in this process: the broker's side is the point
    here), then wait until the broker logs that it applied it."""
    before = applied_count(broker, topic)
    done = replog_in_process(
        "configs", "alter", "--topic", topic, *flags, "--zookeeper", broker.zookeeper
    )
    assert done.returncode == 0, done.stderr
    deadline = time.monotonic() + APPLY_TIMEOUT_S
    while applied_count(broker, topic) == before:
        assert time.monotonic() < deadline, f"broker did not apply {flags} to {topic}"
        time.sleep(0.1)


def applied_count(broker: BrokerProcess, topic: str) -> int:
    log_file = broker.log_dir / "broker.log"
    text = log_file.read_text() if log_file.exists() else ""
    return text.count(f"partition(s) of {topic}\n")


def log_files(broker: BrokerProcess, topic: str) -> list[Path]:
    return sorted((broker.log_dir / f"{topic}-0").glob("*.log"))


def produce(broker: BrokerProcess, topic: str, count: int, acks: int = 1) -> None:
    async def send() -> None:
        cluster = Cluster([(broker.host, broker.port)])
        try:
            producer = Producer(cluster, ProducerConfig(acks=acks))
            for _ in range(count):
                await producer.send_records(topic, [RECORD], partition=0)
        finally:
            await cluster.close()

    run(send())


def require_two_in_sync(broker: BrokerProcess, topic: str) -> None:
    """min.insync.replicas=2 on a topic of one replica, written behind the CLI's back (it
    refuses a min.insync.replicas above the replication factor): the broker refuses every
    acks=all write to it at once."""
    zk = connect(broker.zookeeper)
    try:
        topic_store.alter_topic_config(zk, topic, {"min.insync.replicas": "2"}, [])
    finally:
        zk.stop()
        zk.close()


def test_min_insync_replicas_applies_live_and_deleting_it_restores_acks_all(
    broker: BrokerProcess,
) -> None:
    run(create_topic([(broker.host, broker.port)], "strict"))
    require_two_in_sync(broker, "strict")

    async def scenario() -> None:
        cluster = Cluster([(broker.host, broker.port)])
        strict = Producer(cluster, ProducerConfig(acks=-1, delivery_timeout_ms=1000))
        relaxed = Producer(cluster, ProducerConfig(acks=1))
        try:
            with pytest.raises(InvalidConfigError, match=r"min\.insync\.replicas=2 is above"):
                await strict.send_records("strict", ["refused"], partition=0)
            # A first strict attempt racing the config change may have been written before
            # its acks=all answer failed (NOT_ENOUGH_REPLICAS_AFTER_APPEND, as in Kafka),
            # so the acks=1 record is the first or the second.
            acked = await relaxed.send_records("strict", ["acks=1 works"], partition=0)
            assert acked[0].offset in (0, 1)
        finally:
            await cluster.close()

    run(scenario())
    described = replog(
        "configs", "describe", "--topic", "strict", "--json", "--zookeeper", broker.zookeeper
    )
    assert json.loads(described.stdout) == {
        "topic": "strict",
        "config": {"min.insync.replicas": "2"},
    }

    alter(broker, "strict", "--delete-config", "min.insync.replicas")
    produce(broker, "strict", 1, acks=-1)
    described = replog("configs", "describe", "--topic", "strict", "--zookeeper", broker.zookeeper)
    assert described.returncode == 0
    assert (
        described.stdout == b"Topic strict has no config overrides: the brokers' defaults apply.\n"
    )


def test_segment_bytes_applies_to_the_next_roll(broker: BrokerProcess) -> None:
    run(create_topic([(broker.host, broker.port)], "rolling"))
    produce(broker, "rolling", 5)
    assert len(log_files(broker, "rolling")) == 1
    alter(broker, "rolling", "--add-config", "segment.bytes=1024")
    produce(broker, "rolling", 10)
    files = log_files(broker, "rolling")
    # The big segment rolls at the first append; then about 2 records of ~370 bytes fit
    # in each 1024-byte segment.
    assert len(files) >= 5, [f.name for f in files]
    assert all(f.stat().st_size <= 1024 for f in files[1:])


def test_retention_ms_deletes_old_segments_once_lowered(brokers: BrokerFactory) -> None:
    broker = brokers.start(1, **{"log.retention.check.interval.ms": "500"})
    run(create_topic([(broker.host, broker.port)], "aging", **{"segment.bytes": "1024"}))
    produce(broker, "aging", 6)
    first = broker.log_dir / "aging-0" / f"{0:020d}.log"
    time.sleep(1.5)
    assert first.exists(), "the default retention keeps it"
    alter(broker, "aging", "--add-config", "retention.ms=1000")
    deadline = time.monotonic() + APPLY_TIMEOUT_S
    while first.exists():
        assert time.monotonic() < deadline, "retention.ms=1000 did not delete old segments"
        time.sleep(0.1)


def earliest_offset(broker: BrokerProcess, topic: str) -> int:
    async def ask() -> int:
        cluster = Cluster([(broker.host, broker.port)])
        try:
            consumer = Consumer(cluster)
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            return (await consumer.list_offsets([tp], EARLIEST_TIMESTAMP))[tp][0]
        finally:
            await cluster.close()

    return run(ask())


def fetch_from(broker: BrokerProcess, topic: str, offset: int) -> None:
    async def fetch() -> None:
        cluster = Cluster([(broker.host, broker.port)])
        try:
            consumer = Consumer(cluster)
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            consumer.seek(tp, offset)
            await consumer.poll(max_wait_ms=100)
        finally:
            await cluster.close()

    run(fetch())


@pytest.mark.parametrize(
    "retention", [{"retention.ms": "1000"}, {"retention.bytes": "2048"}], ids=["time", "size"]
)
def test_retention_moves_the_log_start_and_older_offsets_are_out_of_range(
    brokers: BrokerFactory, retention: dict[str, str]
) -> None:
    broker = brokers.start(1, **{"log.retention.check.interval.ms": "300"})
    run(create_topic([(broker.host, broker.port)], "kept", **{"segment.bytes": "1024"}))
    produce(broker, "kept", 12)
    segments_before = log_files(broker, "kept")
    assert earliest_offset(broker, "kept") == 0
    time.sleep(1.2)
    key, value = next(iter(retention.items()))
    alter(broker, "kept", "--add-config", f"{key}={value}")
    deadline = time.monotonic() + APPLY_TIMEOUT_S
    while (start := earliest_offset(broker, "kept")) == 0:
        assert time.monotonic() < deadline, f"{key} did not move the log start"
        time.sleep(0.1)
    remaining = log_files(broker, "kept")
    assert len(remaining) < len(segments_before)
    # Whole segments go: the new start is the base offset of the oldest one left.
    assert start == int(remaining[0].stem)
    with pytest.raises(OffsetOutOfRangeError):
        fetch_from(broker, "kept", start - 1)
    fetch_from(broker, "kept", start)


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--add-config", "retention.msx=5"], b"retention.msx"),
        (["--add-config", "segment.bytes=12"], b"segment.bytes"),
        (["--add-config", "retention.ms=1000,min.insync.replicas=many"], b"min.insync.replicas"),
        (["--delete-config", "no.such.key"], b"no.such.key"),
        (["--add-config", "retention.ms"], b"retention.ms"),
    ],
)
def test_bad_input_is_refused_and_leaves_the_config_unchanged(
    broker: BrokerProcess, flags: list[str], named: bytes
) -> None:
    run(create_topic([(broker.host, broker.port)], "kept", **{"retention.ms": "60000"}))
    zk = connect(broker.zookeeper)
    try:
        before = zk.get(znodes.topic_config_path("kept"))
        changes = zk.get_children(znodes.CONFIG_CHANGES_PATH)
        refused = replog(
            "configs", "alter", "--topic", "kept", *flags, "--zookeeper", broker.zookeeper
        )
        assert refused.returncode == 2, refused.stderr
        assert named in refused.stderr
        after = zk.get(znodes.topic_config_path("kept"))
        assert (after[0], after[1].version) == (before[0], before[1].version)
        assert zk.get_children(znodes.CONFIG_CHANGES_PATH) == changes, "no notification"
    finally:
        zk.stop()
        zk.close()


def test_missing_topic_and_bootstrap_only_are_refused(broker: BrokerProcess) -> None:
    missing = replog(
        "configs", "alter", "--topic", "ghost", "--add-config", "retention.ms=1",
        "--zookeeper", broker.zookeeper,
    )  # fmt: skip
    assert missing.returncode == 1 and b"does not exist" in missing.stderr
    described = replog("configs", "describe", "--topic", "ghost", "--zookeeper", broker.zookeeper)
    assert described.returncode == 1 and b"does not exist" in described.stderr
    bootstrap = replog("configs", "describe", "--topic", "ghost", "--bootstrap", broker.address)
    assert bootstrap.returncode == 2 and b"--zookeeper" in bootstrap.stderr


def test_altered_config_survives_a_broker_restart(brokers: BrokerFactory) -> None:
    broker = brokers.start(1)
    run(create_topic([(broker.host, broker.port)], "durable"))
    require_two_in_sync(broker, "durable")
    broker.stop()
    broker = brokers.start(1)

    async def refused() -> None:
        cluster = Cluster([(broker.host, broker.port)])
        try:
            producer = Producer(cluster, ProducerConfig(acks=-1, delivery_timeout_ms=1000))
            with pytest.raises(InvalidConfigError, match=r"min\.insync\.replicas=2 is above"):
                await producer.send_records("durable", ["refused"], partition=0)
        finally:
            await cluster.close()

    run(refused())


def test_old_notifications_are_purged_and_brokers_keep_following(broker: BrokerProcess) -> None:
    from brokerd.controller.zk_store import purge_config_changes

    run(create_topic([(broker.host, broker.port)], "purged"))
    alter(broker, "purged", "--add-config", "retention.ms=100000")
    alter(broker, "purged", "--add-config", "retention.ms=200000")
    zk = connect(broker.zookeeper)
    try:
        assert purge_config_changes(zk, older_than_ms=60_000) == 0, "young ones stay"
        assert purge_config_changes(zk, older_than_ms=0) == 2
        assert zk.get_children(znodes.CONFIG_CHANGES_PATH) == []
    finally:
        zk.stop()
        zk.close()
    alter(broker, "purged", "--add-config", "retention.ms=300000")
