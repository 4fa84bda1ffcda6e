"""The Spark source reads a cleaned compacted topic: the same rows as the native
consumer, and so "latest value per key" is the read itself, with no aggregation.

The topic (10,000 upserts over 100 keys, then tombstones for half of them) is cleaned
on a real broker first (tests/support_compaction.py); the batch read runs with
failOnDataLoss on and is split into small ranges, so tasks start and end inside the
gaps the cleaner left.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from spark_replica.tools.launcher.brokers import BrokerProcess
from spark_replica.tools.launcher.zookeeper import EmbeddedZooKeeper
from tests.support import run
from tests.support_compaction import (
    FILLER_KEY,
    CleanedLog,
    UpsertTopic,
    fill_upsert_topic,
    running_cleaner_broker,
    wait_until_cleaned,
)

pytestmark = [pytest.mark.spark, pytest.mark.slow]

TOPIC = "cdc-for-spark"
KEYS = 100
RECORDS = 10_000
DELETE_RETENTION_MS = 1_000
CLEANED_TIMEOUT_S = 60.0
MIN_PARTITIONS = 8


@pytest.fixture(scope="module")
def cleaned_topic(
    zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[BrokerProcess, UpsertTopic, CleanedLog]]:
    with running_cleaner_broker(
        zookeeper.connect_string, tmp_path_factory.mktemp("spark-compaction")
    ) as broker:
        bootstrap = [(broker.host, broker.port)]
        produced = run(fill_upsert_topic(bootstrap, TOPIC, RECORDS, KEYS, DELETE_RETENTION_MS))
        yield broker, produced, wait_until_cleaned(bootstrap, produced, CLEANED_TIMEOUT_S)


def test_a_batch_read_of_a_cleaned_topic_is_its_latest_value_per_key(
    spark: SparkSession, cleaned_topic: tuple[BrokerProcess, UpsertTopic, CleanedLog]
) -> None:
    broker, produced, cleaned = cleaned_topic
    frame = (
        spark.read.format("replog")
        .option("replog.bootstrap.servers", broker.address)
        .option("subscribe", TOPIC)
        .option("failOnDataLoss", "true")
        .option("minPartitions", str(MIN_PARTITIONS))
        .load()
    )
    rows = frame.select("offset", "key", "value").orderBy("offset").collect()
    got = [(row["offset"], bytes(row["key"]), bytes(row["value"])) for row in rows]
    assert got == cleaned.rows

    upserts = [(key.decode(), value) for _, key, value in got if key != FILLER_KEY.encode()]
    latest = dict(upserts)
    assert len(latest) == len(upserts), "one row per key"
    assert latest == {name: value for name, (_, _, value) in produced.last_live.items()}
