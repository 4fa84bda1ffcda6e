"""A clean restart keeps every record and the high watermark."""

from __future__ import annotations

import pytest

from brokerd.log import HW_CHECKPOINT_FILE, read_offsets_checkpoint
from spark_replica.client import Cluster, Consumer, Producer, ProducerConfig
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.list_offsets import LATEST_TIMESTAMP
from spark_replica.zk import znodes
from spark_replica.zk.session import connect
from tests.support import BrokerFactory, consume_all, create_topic, rows_of, run

pytestmark = pytest.mark.slow


def test_clean_restart_keeps_records_and_high_watermark(brokers: BrokerFactory) -> None:
    broker = brokers.start(1, **{"log.segment.bytes": "65536"})
    bootstrap = [(broker.host, broker.port)]
    tp = TopicPartition("durable", 0)
    values = [f"record-{i}" for i in range(5000)]

    async def produce() -> None:
        await create_topic(bootstrap, "durable")
        cluster = Cluster(bootstrap)
        try:
            producer = Producer(cluster, ProducerConfig(acks=-1, batch_records=250))
            await producer.send_records("durable", values, partition=0)
        finally:
            await cluster.close()

    run(produce())
    assert broker.stop() == 0, "SIGTERM ends the broker with exit code 0"
    checkpoint = read_offsets_checkpoint(broker.log_dir / HW_CHECKPOINT_FILE)
    assert checkpoint[tp] == 5000
    assert len(list((broker.log_dir / "durable-0").glob("*.log"))) > 1, "several segments"

    broker = brokers.start(1)
    bootstrap = [(broker.host, broker.port)]

    async def latest() -> int:
        cluster = Cluster(bootstrap)
        try:
            consumer = Consumer(cluster)
            consumer.assign([tp])
            return (await consumer.list_offsets([tp], LATEST_TIMESTAMP))[tp][0]
        finally:
            await cluster.close()

    assert run(latest()) == 5000
    rows = rows_of(run(consume_all(bootstrap, "durable", 5000)))
    assert [r["value"].decode() for r in rows] == values


def test_flushed_records_survive_sigkill(brokers: BrokerFactory) -> None:
    broker = brokers.start(1, **{"log.flush.interval.messages": "1"})
    bootstrap = [(broker.host, broker.port)]
    values = [f"v{i}" for i in range(300)]

    async def produce() -> None:
        await create_topic(bootstrap, "flushed")
        cluster = Cluster(bootstrap)
        try:
            await Producer(cluster, ProducerConfig(batch_records=7)).send_records(
                "flushed", values, partition=0
            )
        finally:
            await cluster.close()

    run(produce())
    broker.kill()
    broker = brokers.start(1)
    rows = rows_of(run(consume_all([(broker.host, broker.port)], "flushed", 300)))
    assert [r["value"].decode() for r in rows] == values


def test_a_starting_broker_deletes_partitions_no_longer_assigned_to_it(
    brokers: BrokerFactory,
) -> None:
    broker = brokers.start(1)
    bootstrap = [(broker.host, broker.port)]
    run(create_topic(bootstrap, "kept"))
    run(create_topic(bootstrap, "moved-away"))
    broker.stop()
    zk = connect(brokers.zk_connect)
    try:
        # While the broker is down, the partition is assigned elsewhere.
        moved = znodes.TopicAssignment("moved-away", {0: [7]})
        zk.set(znodes.topic_path("moved-away"), moved.encode())
    finally:
        zk.stop()
        zk.close()
    assert (broker.log_dir / "moved-away-0").exists()
    brokers.start(1)
    assert not (broker.log_dir / "moved-away-0").exists()
    assert (broker.log_dir / "kept-0").exists()
