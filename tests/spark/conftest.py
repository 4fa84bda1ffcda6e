"""Fixtures for the Spark tests: one SparkSession (local[2]) and one 3-broker cluster.

A SparkSession costs about ten seconds to start, so the whole test run shares one, as
it shares one cluster; tests keep apart by using topics of their own (`topic_name`).
Tests that kill brokers start their own cluster with the `brokers` fixture instead.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

import pytest
from pyspark.sql import SparkSession

from spark_replica.client import (
    Admin,
    Cluster,
    Consumer,
    PartitionDescription,
    Producer,
    ProducerConfig,
    RecordMetadata,
    parse_acks,
)
from spark_replica.tools.launcher.zookeeper import EmbeddedZooKeeper
from spark_replica.topics import TopicPartition
from spark_replica.wire.native.list_offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from tests.support import BrokerFactory, run

T = TypeVar("T")

pytestmark = pytest.mark.spark


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    session = (
        SparkSession.builder.master("local[2]")
        .appName("replog-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def spark_cluster(
    zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerFactory]:
    """Three brokers shared by the Spark tests that do not stop brokers."""
    factory = BrokerFactory(
        f"{zookeeper.connect_string}/spark-{uuid.uuid4().hex[:12]}",
        tmp_path_factory.mktemp("spark-cluster"),
    )
    try:
        for broker_id in (1, 2, 3):
            factory.start(broker_id)
        yield factory
    finally:
        factory.stop_all()


@pytest.fixture
def bootstrap_servers(spark_cluster: BrokerFactory) -> str:
    return ",".join(f"{host}:{port}" for host, port in spark_cluster.bootstrap)


@pytest.fixture
def topic_name() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


class TopicTools:
    """Creates, fills, grows and deletes topics through the client, as a user's app would."""

    def __init__(self, bootstrap: list[tuple[str, int]]) -> None:
        self.bootstrap = bootstrap

    def _with_cluster(self, work: Callable[[Cluster], Awaitable[T]]) -> T:
        async def scoped() -> T:
            cluster = Cluster(self.bootstrap)
            try:
                return await work(cluster)
            finally:
                await cluster.close()

        return run(scoped())

    def create(
        self, topic: str, partitions: int, replication_factor: int = 1, **configs: str
    ) -> None:
        self._with_cluster(
            lambda c: Admin(c).create_topic(topic, partitions, replication_factor, configs)
        )

    def produce(
        self,
        topic: str,
        values: Sequence[bytes | str | None],
        *,
        partition: int | None = None,
        keys: Sequence[bytes | str | None] | None = None,
        timestamps: Sequence[int | None] | None = None,
        headers: Sequence[list[tuple[str, bytes | None]] | None] | None = None,
        acks: str = "all",
    ) -> list[RecordMetadata]:
        config = ProducerConfig(acks=parse_acks(acks))
        return self._with_cluster(
            lambda c: Producer(c, config).send_records(
                topic,
                values,
                keys=keys,
                timestamps=timestamps,
                headers=headers,
                partition=partition,
            )
        )

    def grow(self, topic: str, partitions: int) -> None:
        self._with_cluster(lambda c: Admin(c).create_partitions(topic, partitions))

    def delete(self, topic: str) -> None:
        self._with_cluster(lambda c: Admin(c).delete_topic(topic))

    def log_start(self, topic: str, partition: int = 0) -> int:
        tp = TopicPartition(topic, partition)

        async def earliest(cluster: Cluster) -> int:
            found = await Consumer(cluster).list_offsets([tp], EARLIEST_TIMESTAMP)
            return found[tp][0]

        return self._with_cluster(earliest)

    def describe(self, topic: str) -> list[PartitionDescription]:
        return self._with_cluster(lambda c: Admin(c).describe([topic]))[topic]


@pytest.fixture
def topics(spark_cluster: BrokerFactory) -> TopicTools:
    """Topic tools for the shared cluster."""
    return TopicTools(spark_cluster.bootstrap)


@pytest.fixture
def topic_tools() -> type[TopicTools]:
    """The TopicTools class, for tests that start brokers of their own."""
    return TopicTools


@dataclass(frozen=True)
class StoredRecord:
    """One record as a topic holds it, read back with the client consumer."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] | None


def read_stored_records(
    bootstrap: list[tuple[str, int]], topic: str, timeout_s: float = 60.0
) -> list[StoredRecord]:
    """Every record below the high watermark of every partition, by partition and offset."""

    async def read(cluster: Cluster) -> list[StoredRecord]:
        consumer = Consumer(cluster)
        partitions = await consumer.assign_topic(topic)
        ends = {
            tp: offset
            for tp, (offset, _) in (
                await consumer.list_offsets(partitions, LATEST_TIMESTAMP)
            ).items()
        }
        await consumer.seek_to_beginning(partitions)
        stored: list[StoredRecord] = []
        while any(consumer.position(tp) < ends[tp] for tp in partitions):
            for fetched in await consumer.poll(max_wait_ms=100):
                for index, row in enumerate(fetched.records.to_pylist()):
                    offset = fetched.first_offset + index
                    if offset >= ends[fetched.tp]:
                        break
                    headers = row.get("headers")
                    stored.append(
                        StoredRecord(
                            fetched.tp.partition,
                            offset,
                            row["key"],
                            row["value"],
                            None if headers is None else [(h["key"], h["value"]) for h in headers],
                        )
                    )
        return sorted(stored, key=lambda r: (r.partition, r.offset))

    async def scoped() -> list[StoredRecord]:
        cluster = Cluster(bootstrap)
        try:
            return await read(cluster)
        finally:
            await cluster.close()

    return run(scoped(), timeout_s)


@pytest.fixture
def stored_records() -> Callable[..., list[StoredRecord]]:
    """`stored_records(bootstrap, topic)`: what a topic holds, for checking what sinks wrote."""
    return read_stored_records
