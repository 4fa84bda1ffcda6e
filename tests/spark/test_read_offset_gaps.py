"""A Spark query reads a log whose offsets have gaps, as a compacted log has, with
failOnDataLoss on: every record that is there, at its own offset, and no data loss.

The gaps are made on a real broker's disk (tests/support_gaps.py); the batch read is
split into small ranges (minPartitions), so some tasks' ranges lie inside a gap or end
in one.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from spark_replica.tools.launcher.zookeeper import EmbeddedZooKeeper
from tests.support import BrokerFactory
from tests.support_gaps import (
    LOG_END,
    TOPIC,
    GappyBroker,
    kept_offsets,
    start_gappy_broker,
    value_at,
)

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture(scope="module")
def gappy(
    zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GappyBroker]:
    factory = BrokerFactory(
        f"{zookeeper.connect_string}/test-{uuid.uuid4().hex[:12]}",
        tmp_path_factory.mktemp("spark-offset-gaps"),
    )
    try:
        yield start_gappy_broker(factory)
    finally:
        factory.stop_all()


def test_a_batch_read_returns_every_kept_record_and_no_data_loss(
    spark: SparkSession, gappy: GappyBroker
) -> None:
    frame = (
        spark.read.format("replog")
        .option("replog.bootstrap.servers", gappy.address)
        .option("subscribe", TOPIC)
        .option("failOnDataLoss", "true")
        .option("minPartitions", str(LOG_END // 5))
        .load()
    )
    rows = frame.select("offset", "value").orderBy("offset").collect()
    got = [(row["offset"], bytes(row["value"])) for row in rows]
    assert got == [(o, value_at(o).encode()) for o in kept_offsets()]
